package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/sony/gobreaker/v2"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/a2a/a2atest"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// These tests delegate to a sub-agent built with the official Go SDK's
// server (a2a-go 0.3, see mesh/a2a/a2atest) over real HTTP.

// fastRemote keeps retries, breaker and polling short for tests.
var fastRemote = RemoteConfig{Retries: 1, Backoff: 5 * time.Millisecond, BreakerFailures: 2, BreakerCooldown: 300 * time.Millisecond, CallTimeout: 10 * time.Second, PollInterval: 10 * time.Millisecond}

// newA2AFixture is an agent offering the sub-agents subs.
func newA2AFixture(t *testing.T, p llm.Provider, subs ...config.A2AAgent) *fixture {
	t.Helper()
	return newFixtureWith(t, p, func(c *config.Config) { c.A2A = subs }, func(c *Config) { c.Remote = fastRemote })
}

func jsonArgs(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// delegating is a model that asks fn to do message, then answers with the
// results it read.
func delegating(fn, message string) script {
	return func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if results := toolResults(req); len(results) > 0 {
			var texts []string
			for _, r := range results {
				texts = append(texts, r.Content)
			}
			return &llm.Response{Text: "result: " + strings.Join(texts, " | ")}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call(fn, jsonArgs(map[string]any{"message": message}))}}, nil
	}
}

// turnWith publishes a turn with headers and waits until it is applied.
func (f *fixture) turnWith(conv, text string, hdr nats.Header) (string, *mesh.Conversation) {
	f.t.Helper()
	id := mesh.NewID()
	f.enqueueWith(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: text}, hdr)
	return id, f.waitApplied(conv, id)
}

// toolMessages are the tool results of a conversation.
func toolMessages(c *mesh.Conversation) []mesh.Message {
	var out []mesh.Message
	for _, m := range c.Messages {
		if m.Role == mesh.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// events reads the events stored for a conversation.
func (f *fixture) events(conv string) []mesh.Event {
	f.t.Helper()
	return f.m.Events(f.t, conv)
}

// TestA2ADelegation: the model sees the sub-agent as a tool described by
// its card, the call carries the caller's token and the conversation's
// session id, the result is in the conversation and the events, and without
// a token none is sent.
func TestA2ADelegation(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Name: "resource-agent", Description: "Manages resources on the resource server", Skills: []string{"list resources"}})
	var mu sync.Mutex
	var offered []llm.Tool
	model := delegating("a2a_resource-agent", "list all resources")
	f := newA2AFixture(t, script(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		mu.Lock()
		offered = req.Tools
		mu.Unlock()
		return model(ctx, req)
	}), config.A2AAgent{Name: "resource-agent", URL: sub.URL})
	conv := f.conversation()
	c0, _ := f.store.Get(t.Context(), conv)

	// The work item carries the token but no X-Session-ID: the session id
	// comes from the conversation.
	_, c := f.turnWith(conv, "ask resource-agent to list all resources", nats.Header{mesh.HeaderAuthorization: {"Bearer test-token-123"}})
	sends := sub.Sends()
	if len(sends) != 1 {
		t.Fatalf("sub-agent received %d message/send, want 1: %+v", len(sends), sends)
	}
	if sends[0].Authorization != "Bearer test-token-123" {
		t.Errorf("sub-agent Authorization = %q, want Bearer test-token-123", sends[0].Authorization)
	}
	if sends[0].SessionID != c0.SessionID || len(c0.SessionID) != 8 {
		t.Errorf("sub-agent X-Session-ID = %q, want the conversation's %q", sends[0].SessionID, c0.SessionID)
	}
	if sends[0].Text != "list all resources" || sends[0].TaskID != "" {
		t.Errorf("sub-agent got %+v, want the model's message in a new task", sends[0])
	}
	results := toolMessages(c)
	if len(results) != 1 {
		t.Fatalf("got %d tool results, want the sub-agent's artifact alone: %+v", len(results), results)
	}
	if results[0].Content != "done: list all resources" {
		t.Fatalf("tool result = %q, want the sub-agent's artifact %q", results[0].Content, "done: list all resources")
	}
	if results[0].IsError {
		t.Fatalf("tool result is an error: %+v", results[0])
	}
	if results[0].ToolName != "a2a_resource-agent" {
		t.Fatalf("tool result's tool = %q, want a2a_resource-agent", results[0].ToolName)
	}
	if c.Status != mesh.StatusActive || c.LastRun.Response != "result: done: list all resources" {
		t.Errorf("status %s, last run %+v", c.Status, c.LastRun)
	}
	var calls []mesh.ToolCall
	for _, m := range c.Messages {
		calls = append(calls, m.ToolCalls...)
	}
	if len(calls) != 1 {
		t.Fatalf("got %d tool calls, want 1: %+v", len(calls), calls)
	}
	if calls[0].Server != "a2a:resource-agent" {
		t.Errorf("tool call server = %q, want a2a:resource-agent", calls[0].Server)
	}
	if calls[0].Tool != "resource-agent" {
		t.Errorf("tool call tool = %q, want resource-agent", calls[0].Tool)
	}
	if calls[0].Destructive {
		t.Errorf("tool call is destructive, want not: %+v", calls[0])
	}

	// The model saw the sub-agent beside the MCP tools, described by its card.
	mu.Lock()
	var tool *llm.Tool
	for i := range offered {
		if offered[i].Name == "a2a_resource-agent" {
			tool = &offered[i]
		}
	}
	n := len(offered)
	mu.Unlock()
	if tool == nil || n != 3 {
		t.Fatalf("offered %d tools, a2a tool %+v; want safe, danger and a2a_resource-agent", n, tool)
	}
	for _, want := range []string{"Delegate a task to the agent resource-agent", "Manages resources on the resource server", "Skills: list resources"} {
		if !strings.Contains(tool.Description, want) {
			t.Errorf("description %q lacks %q", tool.Description, want)
		}
	}
	if !strings.Contains(string(tool.Parameters), `"required":["message"]`) {
		t.Errorf("parameters = %s", tool.Parameters)
	}

	// The call is streamed like an MCP call.
	var types []string
	for _, ev := range f.events(conv) {
		if ev.ToolCallID == calls[0].ID {
			types = append(types, string(ev.Type))
			if ev.Type == mesh.EventToolCallStart && ev.ToolCallName != "a2a_resource-agent" {
				t.Errorf("TOOL_CALL_START name = %s", ev.ToolCallName)
			}
			if ev.Type == mesh.EventToolCallResult && ev.Content != "done: list all resources" {
				t.Errorf("TOOL_CALL_RESULT content = %q", ev.Content)
			}
		}
	}
	if got := strings.Join(types, ","); got != "TOOL_CALL_START,TOOL_CALL_ARGS,TOOL_CALL_END,TOOL_CALL_RESULT" {
		t.Errorf("events of the call = %s", got)
	}

	// Without a token, the call goes without one.
	f.turnWith(conv, "again", nats.Header{mesh.HeaderSessionID: {c0.SessionID}})
	sends = sub.Sends()
	if len(sends) != 2 || sends[1].HasAuth || sends[1].SessionID != c0.SessionID {
		t.Errorf("second send = %+v; want no Authorization header and the session id", sends[len(sends)-1])
	}
}

// TestA2AMixedWithMCPCalls: one model answer calling an MCP tool and a
// sub-agent gets both results.
func TestA2AMixedWithMCPCalls(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{})
	f := newA2AFixture(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if results := toolResults(req); len(results) > 0 {
			var texts []string
			for _, r := range results {
				texts = append(texts, r.Content)
			}
			return &llm.Response{Text: strings.Join(texts, " | ")}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("safe", `{"a":1}`), call("a2a_sub", `{"message":"hello"}`)}}, nil
	}), config.A2AAgent{Name: "sub", URL: sub.URL})
	_, c := f.turn(f.conversation(), "both")
	if got := c.LastRun.Response; got != `ran safe {"a":1} | done: hello` {
		t.Errorf("answer = %q, want both results in order", got)
	}
}

// TestA2ADestructiveSubAgent: a sub-agent marked destructive is called only
// once approved, with the approved message and the token of who decided; a
// rejected call never reaches it.
func TestA2ADestructiveSubAgent(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{})
	f := newA2AFixture(t, delegating("a2a_sub", "delete everything"), config.A2AAgent{Name: "sub", URL: sub.URL, DestructiveHint: true})
	conv := f.conversation()
	_, c := f.turnWith(conv, "wipe it", nats.Header{mesh.HeaderAuthorization: {"Bearer asker"}})
	if c.Status != mesh.StatusWaitingApproval || c.PendingApproval == nil {
		t.Fatalf("status %s pending %+v; want waiting for approval", c.Status, c.PendingApproval)
	}
	ap := c.PendingApproval
	if ap.ToolName != "a2a_sub" {
		t.Errorf("approval tool = %q, want a2a_sub", ap.ToolName)
	}
	if ap.Server != "a2a:sub" {
		t.Errorf("approval server = %q, want a2a:sub", ap.Server)
	}
	if got := ap.ToolArgs["message"]; got != "delete everything" {
		t.Errorf("approval message argument = %v, want %q", got, "delete everything")
	}
	if ap.RemoteTaskID != "" {
		t.Errorf("approval remote task id = %q, want none before the sub-agent is asked", ap.RemoteTaskID)
	}
	if !strings.Contains(ap.Description, `sub-agent sub`) || !strings.Contains(ap.Description, `"delete everything"`) {
		t.Errorf("description = %q", ap.Description)
	}
	if n := len(sub.Requests()); n != 0 {
		t.Fatalf("sub-agent called %d times before the approval", n)
	}

	c = f.decideWith(conv, ap.UUID, true, nats.Header{mesh.HeaderAuthorization: {"Bearer decider"}})
	sends := sub.Sends()
	if len(sends) != 1 {
		t.Fatalf("got %d sends, want one with the approved message: %+v", len(sends), sends)
	}
	if sends[0].Text != "delete everything" {
		t.Fatalf("send text = %q, want the approved message %q", sends[0].Text, "delete everything")
	}
	if sends[0].Authorization != "Bearer decider" {
		t.Fatalf("send Authorization = %q, want the decider's token", sends[0].Authorization)
	}
	if sends[0].MessageID != ap.UUID {
		t.Fatalf("send message id = %q, want the approval's uuid %q", sends[0].MessageID, ap.UUID)
	}
	if c.Status != mesh.StatusActive || c.LastRun.Response != "result: done: delete everything" {
		t.Errorf("status %s, last run %+v", c.Status, c.LastRun)
	}

	// Rejected: never sent.
	conv2 := f.conversation()
	_, c = f.turn(conv2, "wipe it")
	c = f.decide(conv2, c.PendingApproval.UUID, false)
	if n := len(sub.Sends()); n != 1 {
		t.Errorf("sub-agent called %d times, want still 1 after a rejection", n)
	}
	if res := toolMessages(c); len(res) != 1 || !strings.HasPrefix(res[0].Content, "rejected") || !res[0].IsError {
		t.Errorf("results = %+v, want the rejection", res)
	}
}

// TestA2AProxyApproval: a sub-agent's input-required becomes a proxy
// approval; its decision is forwarded with the task id and the token of who
// decided, and the result flows back.
func TestA2AProxyApproval(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Approvals: 1, ApprovalData: true})
	f := newA2AFixture(t, delegating("a2a_sub", "add resource chain-test with value 77"), config.A2AAgent{Name: "sub", URL: sub.URL})
	conv := f.conversation()
	_, c := f.turnWith(conv, "add it", nats.Header{mesh.HeaderAuthorization: {"Bearer asker"}})
	if c.Status != mesh.StatusWaitingApproval || c.PendingApproval == nil {
		t.Fatalf("status %s; want waiting for the proxy approval", c.Status)
	}
	ap := c.PendingApproval
	sends := sub.Sends()
	if len(sends) != 1 {
		t.Fatalf("sends = %+v", sends)
	}
	stored, err := f.aps.Get(t.Context(), ap.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if ap.RemoteAgentName != "sub" {
		t.Errorf("proxy approval remote_agent_name = %q, want sub", ap.RemoteAgentName)
	}
	if ap.RemoteTaskID == "" {
		t.Error("proxy approval has no remote_task_id")
	}
	if stored.RemoteTaskID != ap.RemoteTaskID {
		t.Errorf("stored approval remote_task_id = %q, want %q", stored.RemoteTaskID, ap.RemoteTaskID)
	}
	if stored.RemoteAgentName != "sub" {
		t.Errorf("stored approval remote_agent_name = %q, want sub", stored.RemoteAgentName)
	}
	// The description comes from the approval's data part.
	if ap.Description != "sub-agent sub asks for approval: Approve: add resource chain-test with value 77?" {
		t.Errorf("description = %q", ap.Description)
	}
	if last := c.Messages[len(c.Messages)-1]; !last.Notice || !strings.Contains(last.Content, ap.Description) {
		t.Errorf("last message = %+v, want the approval notice", last)
	}
	if res := toolMessages(c); len(res) != 0 {
		t.Errorf("results before the decision: %+v", res)
	}

	c = f.decideWith(conv, ap.UUID, true, nats.Header{mesh.HeaderAuthorization: {"Bearer decider"}})
	sends = sub.Sends()
	if len(sends) != 2 {
		t.Fatalf("sends = %+v; want the forwarded decision", sends)
	}
	fwd := sends[1]
	if fwd.TaskID != ap.RemoteTaskID {
		t.Errorf("forward task id = %q, want the remote task %q", fwd.TaskID, ap.RemoteTaskID)
	}
	if fwd.Text != "approved" {
		t.Errorf("forward text = %q, want approved", fwd.Text)
	}
	if fwd.Authorization != "Bearer decider" {
		t.Errorf("forward Authorization = %q, want the decider's token", fwd.Authorization)
	}
	if fwd.SessionID != c.SessionID {
		t.Errorf("forward session id = %q, want %q", fwd.SessionID, c.SessionID)
	}
	if sub.Completed(ap.RemoteTaskID) != 1 {
		t.Errorf("remote task completed %d times", sub.Completed(ap.RemoteTaskID))
	}
	if res := toolMessages(c); len(res) != 1 || res[0].Content != "done: add resource chain-test with value 77" || res[0].IsError {
		t.Errorf("results = %+v; want the sub-agent's final answer", res)
	}
	if c.Status != mesh.StatusActive || c.PendingApproval != nil || !strings.HasPrefix(c.LastRun.Response, "result: done: add resource") {
		t.Errorf("status %s, pending %+v, last run %+v", c.Status, c.PendingApproval, c.LastRun)
	}
}

// TestA2AProxyApprovalTwice: a sub-agent asking again after the first
// decision gets a second proxy approval for the same task.
func TestA2AProxyApprovalTwice(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Approvals: 2})
	f := newA2AFixture(t, delegating("a2a_sub", "two steps"), config.A2AAgent{Name: "sub", URL: sub.URL})
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	first := c.PendingApproval
	if first == nil || !strings.Contains(first.Description, "step 1 of 2") {
		t.Fatalf("first approval = %+v", first)
	}
	c = f.decide(conv, first.UUID, true)
	second := c.PendingApproval
	if c.Status != mesh.StatusWaitingApproval {
		t.Fatalf("after the first decision: status %s, want %s", c.Status, mesh.StatusWaitingApproval)
	}
	if second == nil {
		t.Fatal("after the first decision: no pending approval, want the second step's")
	}
	if second.UUID == first.UUID {
		t.Fatalf("after the first decision: the pending approval is still the first, %s", first.UUID)
	}
	if second.RemoteTaskID != first.RemoteTaskID {
		t.Fatalf("after the first decision: remote task %q, want the first's %q", second.RemoteTaskID, first.RemoteTaskID)
	}
	if !strings.Contains(second.Description, "step 2 of 2") {
		t.Fatalf("after the first decision: description %q, want it to say step 2 of 2", second.Description)
	}
	// The message log appends and never edits: the call keeps the approval
	// it first waited for, and the second names the same call.
	var marked, call string
	for _, m := range c.Messages {
		for _, tc := range m.ToolCalls {
			marked, call = tc.ApprovalID, tc.ID
		}
	}
	if marked != first.UUID || second.ToolCallID != call {
		t.Errorf("the call %s has approval id %s, want the first %s; the second approval names call %s", call, marked, first.UUID, second.ToolCallID)
	}
	c = f.decide(conv, second.UUID, true)
	if res := toolMessages(c); len(res) != 1 || res[0].Content != "done: two steps" {
		t.Errorf("results = %+v", res)
	}
	if got := len(sub.Sends()); got != 3 {
		t.Errorf("sends = %d, want the call and two decisions", got)
	}
}

// TestA2AProxyRejection: a rejection is forwarded too, and the model reads
// it as a rejection.
func TestA2AProxyRejection(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Approvals: 1})
	f := newA2AFixture(t, delegating("a2a_sub", "add resource x"), config.A2AAgent{Name: "sub", URL: sub.URL})
	conv := f.conversation()
	_, c := f.turn(conv, "add it")
	ap := c.PendingApproval
	c = f.decide(conv, ap.UUID, false)
	sends := sub.Sends()
	if len(sends) != 2 || sends[1].Text != "rejected" || sends[1].TaskID != ap.RemoteTaskID {
		t.Fatalf("sends = %+v; want the rejection forwarded with the task id", sends)
	}
	res := toolMessages(c)
	if len(res) != 1 {
		t.Fatalf("got %d tool results, want the rejection alone: %+v", len(res), res)
	}
	if !res[0].IsError {
		t.Errorf("tool result is not an error: %q", res[0].Content)
	}
	if !strings.HasPrefix(res[0].Content, "rejected: ") {
		t.Errorf("tool result = %q, want it to start with %q", res[0].Content, "rejected: ")
	}
	if !strings.Contains(res[0].Content, "cancelled: add resource x was not done") {
		t.Errorf("tool result = %q, want the sub-agent's answer in it", res[0].Content)
	}
	if sub.Completed(ap.RemoteTaskID) != 0 || c.Status != mesh.StatusActive {
		t.Errorf("completed %d, status %s", sub.Completed(ap.RemoteTaskID), c.Status)
	}
}

// TestA2ASubAgentDown: failures become a clear "unavailable" result and the
// turn goes on; after BreakerFailures failed attempts the breaker answers
// without calling, and lets a probe through after its cooldown.
func TestA2ASubAgentDown(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{})
	f := newA2AFixture(t, delegating("a2a_sub", "hi"), config.A2AAgent{Name: "sub", URL: sub.URL})
	conv := f.conversation()
	sub.Fail(100, http.StatusServiceUnavailable)

	_, c := f.turn(conv, "first")
	res := toolMessages(c)
	if len(res) != 1 {
		t.Fatalf("got %d tool results, want one: %+v", len(res), res)
	}
	if !res[0].IsError {
		t.Fatalf("tool result is not an error: %q", res[0].Content)
	}
	if !strings.HasPrefix(res[0].Content, "sub-agent sub unavailable: ") {
		t.Fatalf("tool result = %q, want it to start with %q", res[0].Content, "sub-agent sub unavailable: ")
	}
	if !strings.Contains(res[0].Content, "503") {
		t.Fatalf("tool result = %q, want the 503 in it", res[0].Content)
	}
	if c.Status != mesh.StatusActive || !strings.HasPrefix(c.LastRun.Response, "result: sub-agent sub unavailable") {
		t.Errorf("the turn should go on: status %s, last run %+v", c.Status, c.LastRun)
	}
	if n := len(sub.Sends()); n != 2 {
		t.Errorf("attempts = %d, want 2 (one retry)", n)
	}

	// Two failed attempts opened the breaker: no request now.
	_, c = f.turn(conv, "second")
	res = toolMessages(c)
	if last := res[len(res)-1]; !strings.Contains(last.Content, "sub-agent sub unavailable: circuit breaker open") {
		t.Errorf("second result = %q; want the open breaker", last.Content)
	}
	if n := len(sub.Sends()); n != 2 {
		t.Errorf("attempts = %d, want still 2 while the breaker is open", n)
	}

	// Healthy again: after the cooldown a probe goes through.
	sub.Fail(0, 0)
	gate := f.agent.remotes.byName["sub"].gate
	meshtest.Eventually(t, 5*time.Second, func() bool { return gate.State() == gobreaker.StateHalfOpen }, "breaker still %s", gate.State())
	_, c = f.turn(conv, "third")
	res = toolMessages(c)
	if last := res[len(res)-1]; last.IsError || last.Content != "done: hi" {
		t.Errorf("third result = %+v; want the sub-agent's answer", last)
	}
}

// TestA2ACardUnavailable: a sub-agent whose card cannot be fetched stays
// offered with its configured description; calls report it unavailable
// until the card can be read.
func TestA2ACardUnavailable(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Description: "card description"})
	sub.HideCard(true)
	var mu sync.Mutex
	var desc string
	model := delegating("a2a_sub", "hi")
	f := newA2AFixture(t, script(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		for _, tool := range req.Tools {
			if tool.Name == "a2a_sub" {
				mu.Lock()
				desc = tool.Description
				mu.Unlock()
			}
		}
		return model(ctx, req)
	}), config.A2AAgent{Name: "sub", URL: sub.URL, Description: "configured description"})
	conv := f.conversation()
	_, c := f.turn(conv, "first")
	mu.Lock()
	if desc != "Delegate a task to the agent sub: configured description" {
		t.Errorf("description = %q", desc)
	}
	mu.Unlock()
	res := toolMessages(c)
	if len(res) != 1 {
		t.Fatalf("got %d tool results, want one: %+v", len(res), res)
	}
	if !res[0].IsError {
		t.Fatalf("tool result is not an error: %q", res[0].Content)
	}
	if !strings.HasPrefix(res[0].Content, "sub-agent sub unavailable: agent card: ") {
		t.Fatalf("tool result = %q, want it to start with %q", res[0].Content, "sub-agent sub unavailable: agent card: ")
	}
	if !strings.Contains(res[0].Content, "404") {
		t.Fatalf("tool result = %q, want the 404 in it", res[0].Content)
	}
	if n := len(sub.Requests()); n != 0 {
		t.Errorf("JSON-RPC requests = %d without a card", n)
	}
	sub.HideCard(false)
	_, c = f.turn(conv, "second")
	res = toolMessages(c)
	if last := res[len(res)-1]; last.IsError || last.Content != "done: hi" {
		t.Errorf("once the card is back: %+v", last)
	}
}

// TestA2ASubAgentNotListening: nothing listens at the sub-agent's address.
func TestA2ASubAgentNotListening(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{})
	url := sub.URL
	sub.Server.Close()
	f := newA2AFixture(t, delegating("a2a_sub", "hi"), config.A2AAgent{Name: "sub", URL: url})
	_, c := f.turn(f.conversation(), "hi")
	res := toolMessages(c)
	if len(res) != 1 || !strings.HasPrefix(res[0].Content, "sub-agent sub unavailable: ") || !strings.Contains(res[0].Content, "refused") {
		t.Errorf("results = %+v; want sub-agent sub unavailable: … connection refused", res)
	}
}

// TestA2ARedeliveredResumeForwardsOnce: a resume cut off after it forwarded
// the decision (its replica stopped) is run again by another replica, which
// reuses the recorded outcome instead of forwarding again.
func TestA2ARedeliveredResumeForwardsOnce(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Approvals: 1})
	blocked := make(chan struct{}, 1)
	first := newFixtureWith(t, script(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		if len(toolResults(req)) > 0 {
			// The forward is done: this replica dies before the run ends.
			blocked <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("a2a_sub", `{"message":"add resource once"}`)}}, nil
	}), func(c *config.Config) { c.A2A = []config.A2AAgent{{Name: "sub", URL: sub.URL}} }, func(c *Config) {
		c.Remote = fastRemote
		c.DrainTimeout = 50 * time.Millisecond
	})
	conv := first.conversation()
	_, c := first.turn(conv, "add it")
	ap := c.PendingApproval
	if ap == nil || ap.RemoteTaskID == "" {
		t.Fatalf("no proxy approval: %+v", c)
	}
	decide(t, first.aps, ap.UUID, true)
	first.enqueue(mesh.WorkItem{Kind: mesh.WorkResume, Session: conv, TurnID: ap.UUID, ApprovalID: ap.UUID})
	<-blocked
	first.stop() // hands the resume back for redelivery

	second, err := New(Config{Node: role.Node{NC: first.m.NC, JS: first.m.JS, NodeID: "second", Logger: zerolog.Nop()}, Resources: first.m.Resources, Agent: first.cfg, Remote: fastRemote,
		Provider: delegating("a2a_sub", "unused")})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, second)
	c = first.waitApplied(conv, ap.UUID)
	if got := len(sub.Sends()); got != 2 {
		t.Errorf("sends = %d (%+v); want the call and one forward", got, sub.Sends())
	}
	if sub.Completed(ap.RemoteTaskID) != 1 {
		t.Errorf("remote task completed %d times, want 1", sub.Completed(ap.RemoteTaskID))
	}
	if res := toolMessages(c); len(res) != 1 || res[0].Content != "done: add resource once" {
		t.Errorf("results = %+v", res)
	}
	if c.Status != mesh.StatusActive || c.LastRun.Response != "result: done: add resource once" {
		t.Errorf("status %s, last run %+v", c.Status, c.LastRun)
	}
	// The record says so.
	entry, err := first.m.Calls.Get(t.Context(), mesh.SubAgentCallKey(ap.UUID))
	if err != nil {
		t.Fatal(err)
	}
	var rec remoteRecord
	if err := json.Unmarshal(entry.Value(), &rec); err != nil {
		t.Fatalf("record %s: %v", entry.Value(), err)
	}
	if rec.State != mesh.CallDone {
		t.Errorf("record state = %q, want %q", rec.State, mesh.CallDone)
	}
	if rec.A2A == nil {
		t.Errorf("record has no a2a part: %s", entry.Value())
	} else if rec.A2A.State != a2a.StateCompleted {
		t.Errorf("record a2a state = %q, want %q", rec.A2A.State, a2a.StateCompleted)
	}
}

// TestA2ACutOffForwardAsksWhereTheTaskStands: a forward found started but
// not finished (its replica died mid-call) is not sent again; tasks/get
// tells the outcome.
func TestA2ACutOffForwardAsksWhereTheTaskStands(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Approvals: 1})
	f := newA2AFixture(t, delegating("a2a_sub", "add resource y"), config.A2AAgent{Name: "sub", URL: sub.URL})
	conv := f.conversation()
	_, c := f.turn(conv, "add it")
	ap := c.PendingApproval
	// Another replica forwarded the decision and died before recording the
	// outcome: the task is completed remotely, the record says started.
	res, err := (&a2a.Client{}).SendMessage(t.Context(), sub.URL+"/invoke", a2a.SendParams{Message: a2a.Message{MessageID: "x", TaskID: ap.RemoteTaskID, Parts: []a2a.Part{a2a.TextPart("approved")}}}, nil)
	if err != nil || res.Task.Status.State != a2a.StateCompleted {
		t.Fatalf("forward by hand: %+v %v", res, err)
	}
	rec, _ := json.Marshal(remoteRecord{CallRecord: mesh.CallRecord{CallID: ap.UUID, State: mesh.CallStarted, Host: "dead"}})
	if _, err := f.m.Calls.Create(t.Context(), mesh.SubAgentCallKey(ap.UUID), rec); err != nil {
		t.Fatal(err)
	}
	c = f.decide(conv, ap.UUID, true)
	var forwards int
	for _, r := range sub.Requests() {
		if r.Method == "message/send" && r.TaskID != "" {
			forwards++
		}
	}
	if forwards != 1 || sub.Completed(ap.RemoteTaskID) != 1 {
		t.Errorf("forwards = %d, completed %d; want no second forward", forwards, sub.Completed(ap.RemoteTaskID))
	}
	if r := toolMessages(c); len(r) != 1 || r[0].Content != "done: add resource y" {
		t.Errorf("results = %+v; want the task's outcome from tasks/get", r)
	}
}

func TestRemoteFunctionNames(t *testing.T) {
	tests := []struct{ name, want string }{
		{"resource-agent", "a2a_resource-agent"},
		{"B_2", "a2a_B_2"},
		{strings.Repeat("x", 70), "a2a_" + strings.Repeat("x", 51) + "_"},
	}
	for _, tc := range tests {
		got := remoteFunctionName(tc.name)
		if !strings.HasPrefix(got, tc.want) || len(got) > maxFunctionName {
			t.Errorf("remoteFunctionName(%q) = %q, want prefix %q within %d", tc.name, got, tc.want, maxFunctionName)
		}
	}
	if remoteFunctionName(strings.Repeat("x", 70)) == remoteFunctionName(strings.Repeat("x", 71)) {
		t.Error("long names collide")
	}
}

// TestOfferNameCollision: an MCP tool named like a sub-agent's tool is
// offered as <server>__<name>, and calls resolve to the right one.
func TestOfferNameCollision(t *testing.T) {
	a := &Role{}
	a.tools.Store(newToolSet([]mesh.ToolEntry{{Server: "srv", Name: "a2a_sub", InputSchema: json.RawMessage(`{"type":"object"}`)}}))
	pool := newRemotePool(RemoteConfig{}, zerolog.Nop())
	o := a.offer(pool.set([]config.A2AAgent{{Name: "sub", URL: "http://127.0.0.1:1"}}))
	var names []string
	for _, tool := range o.tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "srv__a2a_sub,a2a_sub" {
		t.Errorf("offered %s", got)
	}
	if o.mcp["srv__a2a_sub"].Name != "a2a_sub" || o.remote["a2a_sub"] == nil {
		t.Errorf("offer = %+v", o)
	}
}

// TestOfflinePlannerDelegates: the offline planner picks a sub-agent's tool,
// described by configuration or by its card, with the whole request as
// message. With a card, the verbs of its skills are what the planner
// delegates (a card listing and adding resources is not asked to remove).
func TestOfflinePlannerDelegates(t *testing.T) {
	pool := newRemotePool(RemoteConfig{}, zerolog.Nop())
	set := pool.set([]config.A2AAgent{{Name: "resource-agent", URL: "http://127.0.0.1:1", Description: "Agent B: manages resources on the resource server"}})
	r := set.list[0]
	card := &a2a.AgentCard{Name: "B", Description: "Manages named integer resources", Skills: []a2a.Skill{
		{ID: "resources_list", Name: "resources_list", Description: "List resources"},
		{ID: "resources_add", Name: "resources_add", Description: "Add a resource"},
	}}
	tests := []struct {
		name  string
		card  *a2a.AgentCard
		input string
	}{
		{"list", nil, "list all resources"},
		{"add", nil, "add resource chain-test with value 77"},
		{"ask", nil, "ask resource-agent to list all resources"},
		{"remove", nil, "remove resource chain-test"},
		{"card list", card, "list all resources"},
		{"card add", card, "add resource chain-test with value 77"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r.mu.Lock()
			r.card = tc.card
			r.mu.Unlock()
			resp, err := offline.New().Generate(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: tc.input}}, Tools: []llm.Tool{r.tool()}})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "a2a_resource-agent" {
				t.Fatalf("%q: answer %+v; want a call of a2a_resource-agent", tc.input, resp)
			}
			var args map[string]any
			_ = json.Unmarshal(resp.ToolCalls[0].Arguments, &args)
			if args["message"] != tc.input {
				t.Errorf("%q: message = %v, want the whole request", tc.input, args["message"])
			}
		})
	}
}

func TestApprovalText(t *testing.T) {
	tests := []struct {
		name string
		msg  *a2a.Message
		want string
	}{
		{"nil", nil, ""},
		{"text", &a2a.Message{Parts: []a2a.Part{a2a.TextPart("Approve x?")}}, "Approve x?"},
		{"data description", &a2a.Message{Parts: []a2a.Part{a2a.TextPart("long notice"), a2a.DataPart(map[string]any{"description": "resources_add name=x"})}}, "resources_add name=x"},
		{"nested approval", &a2a.Message{Parts: []a2a.Part{a2a.DataPart(map[string]any{"approval": map[string]any{"uuid": "u", "description": "d"}})}}, "d"},
		{"data only", &a2a.Message{Parts: []a2a.Part{a2a.DataPart(map[string]any{"uuid": "u"})}}, `{"uuid":"u"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := approvalText(tc.msg); got != tc.want {
				t.Errorf("approvalText = %q, want %q", got, tc.want)
			}
		})
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogLinesCarryConversationSID: every log line of a turn carries the
// conversation's session id as sid, also when the work item came without
// X-Session-ID (a resume decided by a caller without one), and the
// conversation's id wins over a different header.
func TestLogLinesCarryConversationSID(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{})
	var logs syncBuffer
	f := newFixtureWith(t, delegating("a2a_sub", "hi"), func(c *config.Config) { c.A2A = []config.A2AAgent{{Name: "sub", URL: sub.URL}} }, func(c *Config) {
		c.Remote = fastRemote
		c.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel)
	})
	conv := f.conversation()
	c, _ := f.store.Get(t.Context(), conv)
	f.turnWith(conv, "no header", nil)
	f.turnWith(conv, "other header", nats.Header{mesh.HeaderSessionID: {"ffffffff"}})
	// "turn done" is logged after the session is saved, which is what the
	// turns above wait for: give the last line a moment to arrive.
	var lines []map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		lines = lines[:0]
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var l map[string]any
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if l["session"] == conv {
				lines = append(lines, l)
			}
		}
		if len(lines) >= 4 && strings.Count(logs.String(), `"turn done"`) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	for _, l := range lines {
		if l["sid"] != c.SessionID {
			t.Errorf("line %v: sid %v, want %s", l, l["sid"], c.SessionID)
		}
	}
	if len(lines) < 4 {
		t.Errorf("%d log lines about the conversation, want the calls and the ends of both turns", len(lines))
	}
	if sends := sub.Sends(); len(sends) != 2 || sends[0].SessionID != c.SessionID || sends[1].SessionID != c.SessionID {
		t.Errorf("sends = %+v, want the conversation's session id on both", sends)
	}
}
