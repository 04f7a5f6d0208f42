package a2a

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/core/coretest"
	"github.com/agentmesh/agentmesh/bridge/rest"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/nodes/agent"
	"github.com/agentmesh/agentmesh/nodes/approver"
	"github.com/agentmesh/agentmesh/nodes/group"
)

// traceID is the X-Session-ID every request of the tests sends.
const traceID = "trace-a2a"

// gated is the offline planner, except that a request containing "slow"
// waits until the gate opens (or its turn is cancelled) before it answers
// (entered says that such a request reached the model), and one containing
// "explode" fails.
type gated struct {
	llm.Provider
	gate    chan struct{}
	entered chan struct{}
}

func newGated() *gated {
	return &gated{Provider: offline.New(), gate: make(chan struct{}), entered: make(chan struct{}, 16)}
}

func (g *gated) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	last := ""
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			last = m.Content
		}
	}
	if strings.Contains(last, "explode") {
		return nil, errors.New("the model exploded")
	}
	if strings.Contains(last, "slow") && len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == llm.RoleUser {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Provider.Generate(ctx, req)
}

// fixture is a whole mesh in one process: an embedded JetStream server, an
// agent with the gated offline planner, an approver, a fake toolhost
// serving the resources tools, and a bridge core with the REST routes and
// this package's routes on an httptest server.
type fixture struct {
	t *testing.T
	// endpoint is the JSON-RPC path the requests go to; empty means Path.
	endpoint string
	m        *meshtest.Mesh
	core     *core.Core
	srv      *httptest.Server
	model    *gated
	tools    *meshtest.Resources
}

func newFixture(t *testing.T, tweak func(*Config)) *fixture {
	t.Helper()
	return newFixtureWith(t, "", tweak)
}

// teamGroup is a group chat of three members the configuration defines,
// who answer each message in turn.
const teamGroup = `groups:
  - name: team
    description: Three resource clerks
    strategy: round_robin
    max_turns: 3
    participants:
      - {agent: alice, description: lists resources, prompt: "You are Alice, a resource clerk.", keywords: [list]}
      - {agent: bob, prompt: "You are Bob, a resource clerk."}
      - {agent: carol, description: reports resources, prompt: "You are Carol, a resource clerk.", capabilities: [reports]}
      - {agent: dave, prompt: "You are Dave.", enabled: false}
  - name: pair
    participants:
      - {agent: tester}
      - {agent: alice}
`

// newGroupFixture is a fixture whose configuration has the groups of
// teamGroup, served by a group role, their members by agents of their own.
func newGroupFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, teamGroup, nil)
}

// newFixtureWith is newFixture with more configuration (YAML after the
// agent's); groups in it get the group role and an agent per member.
// agentTweaks change the agents' configuration.
func newFixtureWith(t *testing.T, extra string, tweak func(*Config), agentTweaks ...func(*agent.Config)) *fixture {
	t.Helper()
	m := meshtest.New(t)
	f := &fixture{t: t, m: m, model: newGated()}
	f.tools = meshtest.StartResources(t, m)

	cfg, err := config.Parse("test.yaml", []byte("name: tester\ndescription: Manages resources.\nllm:\n  model: offline\nmesh:\n  ack_wait: 2s\n"+extra), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var serves []string
	for _, acfg := range cfg.Agents() {
		acfg := agent.Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-agent", Logger: zerolog.Nop()}, Resources: m.Resources, Agent: acfg, Provider: f.model}
		for _, tweak := range agentTweaks {
			tweak(&acfg)
		}
		a, err := agent.New(acfg)
		if err != nil {
			t.Fatal(err)
		}
		meshtest.Run(t, "agent "+acfg.Agent.Name, a.Run)
		serves = append(serves, acfg.Agent.Name)
	}
	if len(cfg.Groups) > 0 {
		// The group role hands turns only to members a live process serves.
		info, _ := json.Marshal(mesh.NodeInfo{Node: "test-agent", Role: mesh.RoleAgent, State: mesh.NodeReady, Serves: serves, StartedAt: time.Now(), BeatAt: time.Now()})
		if _, err := m.Nodes.Put(t.Context(), mesh.RoleAgent+".test-agent", info); err != nil {
			t.Fatal(err)
		}
		g, err := group.New(group.Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-group", Logger: zerolog.Nop()}, Resources: m.Resources, Groups: cfg.Groups, AckWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		meshtest.Run(t, "group", g.Run)
	}
	ap, err := approver.New(approver.Config{Node: role.Node{NC: m.NC, JS: m.JS, NS: m.NS, NodeID: "test-approver", Logger: zerolog.Nop()}, Approvals: m.Approvals, Signer: meshtest.SigningKey(t), Tools: m.Tools})
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, "approver", ap.Run)

	c, err := core.New(core.Config{Node: role.Node{NC: m.NC, JS: m.JS, Logger: zerolog.Nop()}, Resources: m.Resources, Agent: cfg.Name, Prompt: cfg.Prompt, Groups: cfg.Groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	f.core = c

	mux := http.NewServeMux()
	rest.Register(mux, rest.Config{Core: c})
	acfg := Config{Core: c, Name: cfg.Name, Description: cfg.Description, Version: "1.2.3", MaxBodyBytes: 64 << 10, KeepAlive: time.Minute}
	if tweak != nil {
		tweak(&acfg)
	}
	Register(mux, acfg)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	coretest.WaitForTools(f.t, f.core)
	return f
}

// rpcAnswer is a JSON-RPC answer as the tests read it.
type rpcAnswer struct {
	Status  int
	Header  http.Header
	Raw     string
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// at is the fixture with its requests going to endpoint (a group's).
func (f *fixture) at(endpoint string) *fixture {
	g := *f
	g.endpoint = endpoint
	return &g
}

// do posts body to the endpoint (/a2a unless set) with the version header (empty: none) and extra
// headers, and returns the raw response.
func (f *fixture) do(ctx context.Context, version, body string, headers ...string) *http.Response {
	f.t.Helper()
	endpoint := f.endpoint
	if endpoint == "" {
		endpoint = Path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+endpoint, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(mesh.HeaderSessionID, traceID)
	if version != "" {
		req.Header.Set(wire.HeaderVersion, version)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

// call makes one JSON-RPC call and decodes the answer.
func (f *fixture) call(version, body string, headers ...string) *rpcAnswer {
	f.t.Helper()
	resp := f.do(f.t.Context(), version, body, headers...)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	a := &rpcAnswer{Status: resp.StatusCode, Header: resp.Header, Raw: string(data)}
	if err := json.Unmarshal(data, a); err != nil {
		f.t.Fatalf("answer to %s: %v: %s", clipBody(body), err, data)
	}
	if a.JSONRPC != "2.0" {
		f.t.Fatalf("answer to %s has no jsonrpc 2.0: %s", clipBody(body), data)
	}
	return a
}

// result makes a call that must succeed and decodes its result into v.
func (f *fixture) result(version, body string, v any) *rpcAnswer {
	f.t.Helper()
	a := f.call(version, body)
	if a.Status != http.StatusOK || a.Error != nil {
		f.t.Fatalf("%s: status %d: %s", clipBody(body), a.Status, a.Raw)
	}
	if err := json.Unmarshal(a.Result, v); err != nil {
		f.t.Fatalf("result of %s: %v: %s", clipBody(body), err, a.Result)
	}
	return a
}

// stream posts a streaming call and reads every "data:" line until the
// stream ends.
func (f *fixture) stream(version, body string) (*http.Response, []string) {
	f.t.Helper()
	resp := f.do(f.t.Context(), version, body)
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	return resp, events
}

// sendText is the params of a 0.3 message/send with one text part.
func send03(id int, method, text, taskID string, extra ...string) string {
	msg := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", id), "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}
	if taskID != "" {
		msg["taskId"] = taskID
	}
	params := map[string]any{"message": msg}
	for i := 0; i+1 < len(extra); i += 2 {
		var v any
		_ = json.Unmarshal([]byte(extra[i+1]), &v)
		params[extra[i]] = v
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// send10 is the params of a 1.0 SendMessage with one text part.
func send10(id int, method, text, taskID string, extra ...string) string {
	msg := map[string]any{"messageId": fmt.Sprintf("m-%d", id), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	if taskID != "" {
		msg["taskId"] = taskID
	}
	params := map[string]any{"message": msg}
	for i := 0; i+1 < len(extra); i += 2 {
		var v any
		_ = json.Unmarshal([]byte(extra[i+1]), &v)
		params[extra[i]] = v
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// rpc is a JSON-RPC request with params given as JSON.
func rpc(id any, method, params string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": json.RawMessage(params)})
	return string(b)
}

func clipBody(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// decide decides an approval through REST.
func (f *fixture) decide(uuid string, approved bool) {
	f.t.Helper()
	req, _ := http.NewRequestWithContext(f.t.Context(), http.MethodPost, f.srv.URL+"/approvals/"+uuid, strings.NewReader(fmt.Sprintf(`{"approved": %t}`, approved)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("POST /approvals/%s: status %d: %s", uuid, resp.StatusCode, data)
	}
}

// checkCard checks the fields every card of the mesh has: its name,
// description and url, version 1.2.3 (the fixture's), A2A 0.3.0 over
// JSON-RPC, streaming without push notifications.
func checkCard(t *testing.T, what string, card wire.AgentCard, name, description, url string) {
	t.Helper()
	for _, c := range []struct{ field, got, want string }{
		{"name", card.Name, name},
		{"description", card.Description, description},
		{"url", card.URL, url},
		{"version", card.Version, "1.2.3"},
		{"protocolVersion", card.ProtocolVersion, "0.3.0"},
		{"preferredTransport", card.PreferredTransport, "JSONRPC"},
	} {
		if c.got != c.want {
			t.Errorf("%s: card %s = %q, want %q", what, c.field, c.got, c.want)
		}
	}
	if !card.Capabilities.Streaming {
		t.Errorf("%s: card capabilities.streaming = false, want true", what)
	}
	if card.Capabilities.PushNotifications {
		t.Errorf("%s: card capabilities.pushNotifications = true, want false", what)
	}
}
