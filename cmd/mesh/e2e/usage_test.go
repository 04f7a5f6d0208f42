package e2e

import (
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// Usage, cost and budgets with a cloud model: the OpenAI-format fake
// reports part of every prompt as read from its cache; the mesh counts
// input, output and cached tokens in its metrics and in the
// conversation, prices them, and once a budget is spent refuses the next
// turn with 429 budget_exceeded without calling the model.

// usageConfig is config/agent.yaml with llm.model c.model, prices for it
// and budgets of one token: any turn spends them.
func usageConfig(t *testing.T, c llmCase) string {
	cfg := defaultConfig(t)
	const offline = "\n  model: offline\n"
	if !strings.Contains(cfg, offline) {
		t.Fatalf("config/agent.yaml has no %q to replace", offline)
	}
	cfg = strings.Replace(cfg, offline, "\n  model: "+c.model+"\n  max_retries: -1\n  timeout: 20s\n", 1)
	return cfg + "\nprices:\n  " + c.model + ": {input: 1.5, output: 6, cached: 0.75}\n" +
		"budgets:\n  conversation_tokens: 1\n  principal_daily_tokens: 1\n"
}

// usageIn reads a usage object of the API: its token counts and cost.
func usageIn(t *testing.T, v map[string]any) (in, out, cached int, cost float64) {
	t.Helper()
	if v == nil {
		t.Fatal("no usage")
	}
	n := func(k string) int { f, _ := v[k].(float64); return int(f) }
	cost, _ = v["cost"].(float64)
	return n("input_tokens"), n("output_tokens"), n("cached_tokens"), cost
}

func TestUsageCostAndBudgetsEndToEnd(t *testing.T) {
	t.Parallel()
	c := llmCases()[0] // OpenAI's format
	const cachedPerCall = 20
	srv := llmtest.Start(t, llmtest.Config{API: c.api, APIKey: c.key(), Model: c.wireModel, CachedTokens: cachedPerCall})
	m := startMesh(t, meshOpts{config: usageConfig(t, c), env: []string{
		c.keyEnv + "=" + c.key(), c.baseEnv + "=" + srv.BaseURL(), "MESH_METRICS_ADDR=127.0.0.1:0",
	}})
	eps := m.metricsEndpoints(t, 5) // no group: agent, toolhost, approver, bridge, monitor
	before := scrapeAll(t, eps)

	// A turn: two model calls, each with cachedPerCall of its prompt
	// served from the cache.
	first := m.newConversation()
	out := m.send(first, "list all resources")
	if str(out, "result", "outcome") != "success" {
		t.Fatalf("first turn: %v, want success", obj(out, "result"))
	}
	recs, used := answeredSince(srv, 0)
	if len(recs) != 2 || used.CachedTokens != 2*cachedPerCall || used.InputTokens <= used.CachedTokens {
		t.Fatalf("%d calls, usage %+v: want 2 calls reporting %d cached tokens each", len(recs), used, cachedPerCall)
	}
	wantCost := (float64(used.InputTokens-used.CachedTokens)*1.5 + float64(used.CachedTokens)*0.75 + float64(used.OutputTokens)*6) / 1e6
	check := func(where string, v map[string]any) {
		t.Helper()
		in, o, cached, cost := usageIn(t, v)
		if in != used.InputTokens || o != used.OutputTokens || cached != used.CachedTokens || math.Abs(cost-wantCost) > 1e-12 {
			t.Errorf("%s: usage %v, want %+v costing %v", where, v, used, wantCost)
		}
	}
	doc := m.do(http.StatusOK, "GET", "/conversations/"+first, nil)
	check("the conversation's usage", obj(doc, "conversation", "usage"))
	check("the conversation's usage of "+c.model, obj(doc, "conversation", "usage", "models", "openai:"+c.model))
	check("last_run", obj(doc, "conversation", "last_run", "usage"))
	var finished map[string]any
	for _, ev := range turnEvents(t, m, first, "RUN_FINISHED") {
		if str(ev, "type") == "RUN_FINISHED" {
			finished = ev
		}
	}
	check("RUN_FINISHED's conversationUsage", obj(finished, "result", "conversationUsage"))

	// The agent's metrics: every kind of token, and the cost.
	d := delta{t: t, step: "a turn", before: before, after: scrapeAll(t, eps)}
	model := []string{"provider=openai", "model=" + c.wireModel}
	d.want("agent", "mesh_model_tokens_total", float64(used.InputTokens), append(model, "kind=input")...)
	d.want("agent", "mesh_model_tokens_total", float64(used.OutputTokens), append(model, "kind=output")...)
	d.want("agent", "mesh_model_tokens_total", float64(used.CachedTokens), append(model, "kind=cached")...)
	if got := d.after["agent"].value("mesh_model_cost_total", model...); math.Abs(got-wantCost) > 1e-12 {
		t.Errorf("mesh_model_cost_total %v, want %v", got, wantCost)
	}

	// The conversation spent its budget of one token: its next turn is
	// refused before the model is called.
	calls := srv.Count()
	status, refused := m.try("POST", "/conversations/"+first+"/messages", map[string]any{"message": "list all resources"})
	if status != http.StatusTooManyRequests || str(refused, "code") != "budget_exceeded" || !strings.Contains(str(refused, "error"), "budgets.conversation_tokens") {
		t.Fatalf("second turn: %d %v; want 429 budget_exceeded naming budgets.conversation_tokens", status, refused)
	}
	// A new conversation of the same principal: the day's budget is
	// spent, until the next UTC midnight.
	second := m.newConversation()
	req, _ := http.NewRequest("POST", m.url("/conversations/"+second+"/messages"), strings.NewReader(`{"message":"list all resources"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	untilMidnight := time.Until(mesh.NextDay(time.Now()))
	if resp.StatusCode != http.StatusTooManyRequests || retry < 1 || time.Duration(retry)*time.Second > untilMidnight+2*time.Second {
		t.Errorf("another conversation: %d, Retry-After %q; want 429 until the next UTC midnight (in %s)", resp.StatusCode, resp.Header.Get("Retry-After"), untilMidnight)
	}
	status, refused = m.try("POST", "/conversations/"+second+"/messages", map[string]any{"message": "list all resources"})
	if status != http.StatusTooManyRequests || str(refused, "code") != "budget_exceeded" || !strings.Contains(str(refused, "error"), "budgets.principal_daily_tokens") ||
		str(refused, "resetAt") != mesh.NextDay(time.Now()).Format(time.RFC3339) {
		t.Errorf("another conversation: %d %v; want 429 budget_exceeded naming budgets.principal_daily_tokens, reset at the next UTC midnight", status, refused)
	}
	if n := srv.Count(); n != calls {
		t.Errorf("the model was called %d times after the budgets were spent, want 0", n-calls)
	}
	if s := str(m.do(http.StatusOK, "GET", "/conversations/"+second, nil), "conversation", "status"); s != "active" {
		t.Errorf("the refused conversation is %s, want active (nothing queued)", s)
	}

	// The day's spend is in mesh_usage, which the agent writes and the
	// bridge only reads: a stolen bridge identity cannot reset it.
	day, key := mesh.Day(time.Now()), limits.SpendKey(mesh.Day(time.Now()), "")
	js, err := jetstream.New(m.adminNATS(t))
	if err != nil {
		t.Fatal(err)
	}
	if rev, val := kvRevision(t, js, "mesh_usage", key); rev == 0 || !strings.Contains(string(val), `"tokens":`+strconv.Itoa(used.InputTokens+used.OutputTokens)) {
		t.Errorf("mesh_usage %s = %s (revision %d), want the turn's %d tokens", key, val, rev, used.InputTokens+used.OutputTokens)
	}
	subject := "$KV.mesh_usage." + key
	creds := filepath.Join(m.dataDir, "creds")
	for _, who := range []string{mesh.RoleBridge, mesh.RoleToolhost, mesh.RoleApprover, mesh.RoleGroup, mesh.RoleMonitor, "agent-responder", "bridge-responder"} {
		pc, err := dialIdentity(t, "nats://"+m.natsAddr, creds, who)
		if err != nil {
			t.Fatalf("connect as %s: %v", who, err)
		}
		if err := pc.nc.Publish(subject, []byte(`{"tokens":0}`)); err != nil {
			t.Fatal(err)
		}
		pc.settle(t, "publish", []string{subject})
	}
	if rev, val := kvRevision(t, js, "mesh_usage", key); !strings.Contains(string(val), `"tokens":`+strconv.Itoa(used.InputTokens+used.OutputTokens)) {
		t.Errorf("after the writes of other roles, mesh_usage %s = %s (revision %d): changed", key, val, rev)
	}
	// The agent may: the one writer.
	pc, err := dialIdentity(t, "nats://"+m.natsAddr, creds, mesh.RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	ajs, err := jetstream.New(pc.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := ajs.KeyValue(t.Context(), "mesh_usage")
	if err != nil {
		t.Fatal(err)
	}
	if err := limits.NewSpend(ajs, kv).Add(t.Context(), day, "", limits.Tally{Tokens: 1}); err != nil {
		t.Errorf("the agent's identity could not add to mesh_usage: %v", err)
	}
}
