package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// script is a provider whose answers a test writes.
type script func(ctx context.Context, req llm.Request) (*llm.Response, error)

func (s script) Model() string { return "script" }
func (s script) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return s(ctx, req)
}

// toolResults counts the tool results after the last user message.
func toolResults(req llm.Request) []llm.Message {
	var out []llm.Message
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == llm.RoleUser {
			break
		}
		if m.Role == llm.RoleTool {
			out = append([]llm.Message{m}, out...)
		}
	}
	return out
}

func call(name, args string) llm.ToolCall {
	return llm.ToolCall{ID: "x", Name: name, Arguments: json.RawMessage(args)}
}

// fixture is an agent on an embedded mesh, with a fake toolhost serving
// srv.safe (read-only) and srv.danger (destructive), and a fake approver
// (the agent's tests may not import the approver role).
type fixture struct {
	t     *testing.T
	m     *meshtest.Mesh
	agent *Role
	store *store.SessionStore
	aps   *store.ApprovalStore

	mu        sync.Mutex
	calls     map[string]int // by call id
	args      map[string]string
	approvals map[string]*mesh.ApprovalStatement // sent with each call, by call id
	asked     []mesh.Approval                    // what the agent asked the approver for
	auth      map[string]string                  // the Authorization header of each call

	// stop stops the agent and waits for Run to return; it is idempotent.
	stop func()
	cfg  *config.Config
}

func newFixture(t *testing.T, p llm.Provider, tweak func(*config.Config)) *fixture {
	t.Helper()
	return newFixtureWith(t, p, tweak, nil)
}

// newFixtureWith is newFixture with the agent's Config changed by tweakAgent.
func newFixtureWith(t *testing.T, p llm.Provider, tweak func(*config.Config), tweakAgent func(*Config)) *fixture {
	t.Helper()
	m := meshtest.New(t)
	f := &fixture{t: t, m: m, store: store.NewSessionStore(m.Sessions, m.Messages), aps: store.NewApprovalStore(m.Approvals), calls: map[string]int{}, args: map[string]string{},
		approvals: map[string]*mesh.ApprovalStatement{}, auth: map[string]string{}}
	for _, e := range []mesh.ToolEntry{
		{Server: "srv", Name: "safe", Description: "a safe tool", InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnlyHint: true},
		{Server: "srv", Name: "danger", Description: "a destructive tool", InputSchema: json.RawMessage(`{"type":"object"}`), DestructiveHint: true},
	} {
		data, _ := json.Marshal(e)
		key, _ := mesh.ToolKey(e.Server, e.Name)
		if _, err := m.Tools.Put(t.Context(), key, data); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := m.NC.Subscribe("mesh.tool.srv.*", func(msg *nats.Msg) {
		var req mesh.ToolRequest
		_ = json.Unmarshal(msg.Data, &req)
		args, _ := json.Marshal(req.Arguments)
		f.mu.Lock()
		f.calls[req.CallID]++
		f.args[req.CallID] = string(args)
		f.approvals[req.CallID] = req.Approval
		f.auth[req.CallID] = msg.Header.Get(mesh.HeaderAuthorization)
		f.mu.Unlock()
		tool := msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:]
		res, _ := json.Marshal(mesh.ToolResult{Text: "ran " + tool + " " + string(args)})
		_ = msg.Respond(res)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	f.fakeApprover()

	cfg, err := config.Parse("test.yaml", []byte("name: tester\nllm:\n  model: offline\nmesh:\n  ack_wait: 2s\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(cfg)
	}
	acfg := Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-node", Logger: zerolog.Nop()}, Resources: m.Resources, Agent: cfg, Provider: p}
	if tweakAgent != nil {
		tweakAgent(&acfg)
	}
	a, err := New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	f.agent, f.cfg = a, cfg
	f.stop = runAgent(t, a)
	// The catalog watch has delivered the tools.
	meshtest.Eventually(t, 5*time.Second, func() bool { return len(a.tools.Load().llm) == 2 }, "tools not loaded")
	return f
}

// runAgent runs a until the test ends, or until the returned stop is
// called.
func runAgent(t *testing.T, a *Role) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (f *fixture) conversation() string {
	c := &mesh.Conversation{ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Agent: "tester", Status: mesh.StatusActive}
	if err := f.store.Create(f.t.Context(), c); err != nil {
		f.t.Fatal(err)
	}
	return c.ID
}

// turn publishes a turn and waits until the conversation has applied it.
func (f *fixture) turn(conv, text string) (string, *mesh.Conversation) {
	f.t.Helper()
	id := mesh.NewID()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: text})
	return id, f.waitApplied(conv, id)
}

func (f *fixture) enqueue(item mesh.WorkItem) { f.t.Helper(); f.enqueueWith(item, nil) }

// enqueueWith publishes a work item with headers (Authorization,
// X-Session-ID), as the bridge and the approver do.
func (f *fixture) enqueueWith(item mesh.WorkItem, hdr nats.Header) {
	f.t.Helper()
	if err := workloop.Publish(f.t.Context(), f.m.JS, f.m.NS, mesh.RoleAgent, "tester", item, hdr); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) waitApplied(conv, turn string) *mesh.Conversation {
	f.t.Helper()
	var c *mesh.Conversation
	meshtest.Eventually(f.t, 10*time.Second, func() bool {
		var err error
		c, err = f.store.Get(f.t.Context(), conv)
		return err == nil && c.HasTurn(turn)
	}, "turn %s not applied", turn)
	return c
}

// fakeApprover answers the agent's approval requests as the approver does:
// it creates the approval (pending, or approved at once for a policy) and
// replies with it. Its statements are not really signed: the fake toolhost
// only records them.
func (f *fixture) fakeApprover() {
	sub, err := f.m.NC.Subscribe("mesh.approval.*.request", func(msg *nats.Msg) {
		var ap mesh.Approval
		_ = json.Unmarshal(msg.Data, &ap)
		f.mu.Lock()
		f.asked = append(f.asked, ap)
		f.mu.Unlock()
		ap.UUID = strings.Split(msg.Subject, ".")[2]
		if cur, err := f.aps.Get(context.Background(), ap.UUID); err == nil {
			// As the approver: one that exists is answered as it stands.
			data, _ := json.Marshal(cur)
			_ = msg.Respond(data)
			return
		}
		ap.Status, ap.Decision = mesh.ApprovalPending, nil
		ap.ArgsHash, _ = mesh.ArgsHash(ap.ToolArgs)
		if ap.Policy == "" {
			ap.CallID = ap.UUID
		} else {
			ap.Status = mesh.ApprovalApproved
			ap.Decision = &mesh.Decision{Approved: true, By: mesh.PolicyBy(ap.Policy), Statement: fakeStatement(&ap, mesh.ApprovalApproved, mesh.PolicyBy(ap.Policy))}
		}
		if err := f.aps.Create(context.Background(), &ap); err != nil {
			_ = msg.RespondMsg(&nats.Msg{Header: mesh.ErrorHeaders(err)})
			return
		}
		data, _ := json.Marshal(ap)
		_ = msg.Respond(data)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = sub.Unsubscribe() })
}

// fakeStatement is a statement of decision on ap, signed by no one.
func fakeStatement(ap *mesh.Approval, decision mesh.ApprovalStatus, by string) *mesh.ApprovalStatement {
	return &mesh.ApprovalStatement{Type: mesh.StatementType, ApprovalID: ap.UUID, CallID: ap.CallID, Server: ap.Server, Tool: ap.Tool,
		ArgsHash: ap.ArgsHash, Decision: decision, By: by, At: time.Now().UTC().Format(time.RFC3339Nano), Key: "fake", Sig: "fake"}
}

// approvalOf is the approval the call with id was sent with.
func (f *fixture) approvalOf(id string) *mesh.ApprovalStatement {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.approvals[id]
}

// askedFor lists what the agent asked the approver for.
func (f *fixture) askedFor() []mesh.Approval {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]mesh.Approval(nil), f.asked...)
}

// decide decides an approval and enqueues its resume, as the approver does.
func (f *fixture) decide(conv, approval string, ok bool) *mesh.Conversation {
	f.t.Helper()
	return f.decideWith(conv, approval, ok, nil)
}

// decideWith is decide with the decider's headers on the resume.
func (f *fixture) decideWith(conv, approval string, ok bool, hdr nats.Header) *mesh.Conversation {
	f.t.Helper()
	decide(f.t, f.aps, approval, ok)
	f.enqueueWith(mesh.WorkItem{Kind: mesh.WorkResume, Session: conv, TurnID: approval, ApprovalID: approval}, hdr)
	return f.waitApplied(conv, approval)
}

// decide records a decision with its (fake) statement, as the approver does.
func decide(t *testing.T, aps *store.ApprovalStore, approval string, ok bool) {
	t.Helper()
	if _, err := aps.Update(t.Context(), approval, func(a *mesh.Approval) error {
		if a.Status != mesh.ApprovalPending {
			return mesh.ErrApprovalDecided
		}
		a.Status = mesh.ApprovalRejected
		if ok {
			a.Status = mesh.ApprovalApproved
		}
		a.Decision = &mesh.Decision{Approved: ok, By: "tester", Statement: fakeStatement(a, a.Status, "tester")}
		a.DecidedAt = time.Now().UTC()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) callCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

func roles(c *mesh.Conversation) string {
	var r []string
	for _, m := range c.Messages {
		s := string(m.Role)
		if m.Notice {
			s += "(notice)"
		}
		r = append(r, s)
	}
	return strings.Join(r, ",")
}

func TestTextTurn(t *testing.T) {
	f := newFixture(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if req.System == "" || len(req.Tools) != 2 {
			return nil, fmt.Errorf("request without system prompt or tools: %+v", req)
		}
		req.OnText("hello ")
		req.OnText("there")
		return &llm.Response{Text: "hello there", Usage: llm.Usage{InputTokens: 3, OutputTokens: 2}}, nil
	}), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "hi")
	if got := roles(c); got != "user,assistant" {
		t.Fatalf("roles = %s", got)
	}
	if c.Status != mesh.StatusActive {
		t.Errorf("status = %s, want %s", c.Status, mesh.StatusActive)
	}
	if c.Turn != nil {
		t.Errorf("a turn is left open: %+v", c.Turn)
	}
	if c.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Errorf("last run outcome = %s, want %s", c.LastRun.Outcome, mesh.OutcomeSuccess)
	}
	if c.LastRun.Response != "hello there" {
		t.Errorf("last run response = %q, want %q", c.LastRun.Response, "hello there")
	}
	if c.LastRun.Usage == nil || c.LastRun.Usage.InputTokens != 3 {
		t.Errorf("usage = %+v", c.LastRun.Usage)
	}
	if c.LastRun.Model != "script" || len(c.LastRun.ToolsCalled) != 0 {
		t.Errorf("last run model %q, tools called %q; want script and none", c.LastRun.Model, c.LastRun.ToolsCalled)
	}
}

func TestSafeAndDestructiveCallsInOneAnswer(t *testing.T) {
	f := newFixture(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if results := toolResults(req); len(results) > 0 {
			var texts []string
			for _, r := range results {
				texts = append(texts, r.Content)
			}
			return &llm.Response{Text: "done: " + strings.Join(texts, " | ")}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("safe", `{"a":1}`), call("danger", `{"b":2}`), call("danger", `{"c":3}`)}}, nil
	}), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "do it all")
	if c.Status != mesh.StatusWaitingApproval || c.PendingApproval == nil {
		t.Fatalf("status %s, pending %+v; want waiting for the first destructive call", c.Status, c.PendingApproval)
	}
	first := c.PendingApproval
	if first.ToolName != "danger" || first.ToolArgs["b"] != 2.0 {
		t.Errorf("first approval = %+v", first)
	}
	var calls []mesh.ToolCall
	for _, m := range c.Messages {
		calls = append(calls, m.ToolCalls...)
	}
	if f.callCount(calls[0].ID) != 1 || f.callCount(calls[1].ID) != 0 {
		t.Errorf("safe call ran %d times, destructive %d; want 1 and 0", f.callCount(calls[0].ID), f.callCount(calls[1].ID))
	}
	if got := c.LastRun.ToolsCalled; !slices.Equal(got, []string{"safe"}) {
		t.Errorf("tools called before the pause = %q, want [safe]", got)
	}
	// The call that ran says how long it took; the results of calls the
	// mesh did not make (none yet) would not.
	var timedResults int
	for _, ev := range f.events(conv) {
		if ev.Type != mesh.EventToolCallResult {
			continue
		}
		if ms, ok := ev.Metadata["durationMs"].(float64); !ok || ms < 0 {
			t.Errorf("TOOL_CALL_RESULT of %s: metadata %v, want durationMs", ev.ToolCallID, ev.Metadata)
		}
		timedResults++
	}
	if timedResults != 1 {
		t.Errorf("%d TOOL_CALL_RESULTs, want the safe call's", timedResults)
	}

	// Approving the first runs it with call id = approval id, then pauses on the second.
	c = f.decide(conv, first.UUID, true)
	f.mu.Lock()
	args := f.args[first.UUID]
	f.mu.Unlock()
	if f.callCount(first.UUID) != 1 || args != `{"b":2}` {
		t.Errorf("approved call: ran %d times with %s", f.callCount(first.UUID), args)
	}
	// Waiting again, for the second destructive call.
	if c.Status != mesh.StatusWaitingApproval {
		t.Fatalf("after the first approval: status %s, want %s", c.Status, mesh.StatusWaitingApproval)
	}
	if c.PendingApproval == nil {
		t.Fatal("after the first approval: nothing pending, want the second destructive call")
	}
	if c.PendingApproval.UUID == first.UUID {
		t.Fatalf("after the first approval: the first, %s, is still pending", first.UUID)
	}
	if got := c.PendingApproval.ToolArgs["c"]; got != 3.0 {
		t.Fatalf("after the first approval: pending call's argument c = %v, want the second call's 3", got)
	}
	second := c.PendingApproval

	// Rejecting the second: it never runs, the model reads the rejection.
	c = f.decide(conv, second.UUID, false)
	if f.callCount(second.UUID) != 0 {
		t.Errorf("rejected call ran")
	}
	if c.Status != mesh.StatusActive || c.PendingApproval != nil {
		t.Fatalf("status %s pending %+v; want active", c.Status, c.PendingApproval)
	}
	final := c.LastAssistantText()
	if !strings.Contains(final, "ran safe") || !strings.Contains(final, "ran danger") || !strings.Contains(final, "rejected") {
		t.Errorf("final answer %q should hold the three results", final)
	}
	if got := c.LastRun.ToolsCalled; !slices.Equal(got, []string{"danger"}) {
		t.Errorf("tools called by the last resume = %q, want [danger] (the rejected call)", got)
	}
	var rejections int
	for _, ev := range f.events(conv) {
		if ev.Type == mesh.EventToolCallResult && strings.HasPrefix(ev.Content, "rejected") {
			rejections++
			if _, ok := ev.Metadata["durationMs"]; ok || ev.Metadata["isError"] != true {
				t.Errorf("the rejected call's result: metadata %v, want isError and no duration", ev.Metadata)
			}
		}
	}
	if rejections != 1 {
		t.Errorf("%d rejected results in the events, want 1", rejections)
	}
	// A redelivered resume changes nothing.
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkResume, Session: conv, TurnID: first.UUID + "-again", ApprovalID: first.UUID})
	meshtest.Eventually(t, 5*time.Second, func() bool {
		info, err := f.m.Work.Info(t.Context())
		return err == nil && info.State.Msgs == 0
	}, "work queue not drained")
	if f.callCount(first.UUID) != 1 {
		t.Errorf("approved call ran %d times after a stale resume", f.callCount(first.UUID))
	}
}

func TestIterationCap(t *testing.T) {
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{ToolCalls: []llm.ToolCall{call("safe", `{}`)}}, nil
	}), func(c *config.Config) { c.Mesh.MaxToolIterations = 3 })
	conv := f.conversation()
	_, c := f.turn(conv, "loop forever")
	if got := strings.Count(roles(c), "tool"); got != 3 {
		t.Errorf("tool results = %d, want 3 (the cap); roles %s", got, roles(c))
	}
	if last := c.Messages[len(c.Messages)-1]; !last.Notice || !strings.Contains(last.Content, "3 tool iterations") {
		t.Errorf("last message = %+v, want the cap notice", last)
	}
}

type codedErr struct{ code string }

func (e codedErr) Error() string        { return "provider says no" }
func (e codedErr) RunErrorCode() string { return e.code }

func TestLLMErrorIsReportedAndConversationStaysUsable(t *testing.T) {
	fail := true
	var mu sync.Mutex
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return nil, codedErr{mesh.CodeRateLimit}
		}
		return &llm.Response{Text: "better now"}, nil
	}), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "hi")
	if c.LastRun.Outcome != mesh.OutcomeError || c.LastRun.ErrorCode != mesh.CodeRateLimit || c.Status != mesh.StatusActive {
		t.Fatalf("last run %+v status %s", c.LastRun, c.Status)
	}
	if last := c.Messages[len(c.Messages)-1]; !last.Notice || !strings.Contains(last.Content, "provider says no") {
		t.Errorf("notice = %+v", last)
	}
	_, c = f.turn(conv, "again")
	if c.LastRun.Response != "better now" {
		t.Errorf("second turn = %+v", c.LastRun)
	}
}

// A provider's rate limit that says when to try again ends the run with
// RUN_ERROR RATE_LIMIT whose metadata carries it: retryAfter in seconds
// and resetAt.
func TestRateLimitRunErrorSaysWhenToRetry(t *testing.T) {
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		return nil, &llm.Error{Code: llm.CodeRateLimit, Message: "openai: rate limited", RetryAfter: 30 * time.Second}
	}), nil)
	conv := f.conversation()
	before := time.Now()
	_, c := f.turn(conv, "hi")
	if c.LastRun.Outcome != mesh.OutcomeError || c.LastRun.ErrorCode != mesh.CodeRateLimit {
		t.Fatalf("last run %+v", c.LastRun)
	}
	var end *mesh.Event
	for _, ev := range f.events(conv) {
		if ev.Type == mesh.EventRunError {
			end = &ev
		}
	}
	if end == nil {
		t.Fatal("no RUN_ERROR")
	}
	wait, _ := end.Metadata["retryAfter"].(float64)
	reset, err := time.Parse(time.RFC3339, fmt.Sprint(end.Metadata["resetAt"]))
	if wait < 1 || wait > 30 || err != nil || reset.Before(before.Add(29*time.Second).Truncate(time.Second)) || reset.After(time.Now().Add(31*time.Second)) {
		t.Errorf("RUN_ERROR metadata %v, want retryAfter up to 30 and resetAt 30s on", end.Metadata)
	}
}

func TestCancelStopsTheModelCall(t *testing.T) {
	started := make(chan struct{})
	f := newFixture(t, script(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}), nil)
	conv := f.conversation()
	id := mesh.NewID()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "take your time"})
	<-started
	subj, _ := f.m.NS.SessionCancel(conv)
	if err := f.m.NC.Publish(subj, nil); err != nil {
		t.Fatal(err)
	}
	c := f.waitApplied(conv, id)
	if c.LastRun.Outcome != mesh.OutcomeCancelled || c.Status != mesh.StatusActive {
		t.Errorf("last run %+v status %s", c.LastRun, c.Status)
	}
}

func TestTurnsOfOneConversationRunOneAtATime(t *testing.T) {
	var mu sync.Mutex
	running, maxRunning := 0, 0
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		mu.Lock()
		running++
		maxRunning = max(maxRunning, running)
		mu.Unlock()
		time.Sleep(30 * time.Millisecond) // a model that takes a while
		mu.Lock()
		running--
		mu.Unlock()
		return &llm.Response{Text: "ok"}, nil
	}), nil)
	conv := f.conversation()
	var ids []string
	for i := range 4 {
		id := mesh.NewID()
		ids = append(ids, id)
		f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: fmt.Sprint("message ", i)})
	}
	var c *mesh.Conversation
	for _, id := range ids {
		c = f.waitApplied(conv, id)
	}
	if maxRunning != 1 {
		t.Errorf("%d turns of one conversation ran at once", maxRunning)
	}
	if got := roles(c); got != "user,assistant,user,assistant,user,assistant,user,assistant" {
		t.Errorf("roles = %s: each turn's messages must stay together", got)
	}
}

func TestRedeliveredTurnIsAppliedOnce(t *testing.T) {
	f := newFixture(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if len(toolResults(req)) > 0 {
			return &llm.Response{Text: "listed"}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("safe", `{}`)}}, nil
	}), nil)
	conv := f.conversation()
	id := mesh.NewID()
	// A replica claimed the turn and died: the conversation holds its claim
	// and its user message.
	if _, err := f.store.Update(t.Context(), conv, func(c *mesh.Conversation) error {
		c.Turn = &mesh.Turn{ID: id, Kind: mesh.WorkTurn, Node: "dead", Attempt: 1, StartedAt: time.Now()}
		c.Status = mesh.StatusRunning
		c.Messages = append(c.Messages, mesh.Message{ID: id, Role: mesh.RoleUser, Content: "list", TurnID: id})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "list"})
	c := f.waitApplied(conv, id)
	if got := roles(c); got != "user,assistant,tool,assistant" {
		t.Errorf("roles = %s: the user message must not be added twice", got)
	}
	// The same turn delivered again (another publish of it) is dropped.
	if err := workloop.Publish(t.Context(), f.m.JS, f.m.NS, mesh.RoleAgent, "tester", mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "list", EnqueuedAt: time.Now().Add(time.Hour)}, nats.Header{"Nats-Msg-Id": []string{"other"}}); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		info, err := f.m.Work.Info(t.Context())
		return err == nil && info.State.Msgs == 0
	}, "work queue not drained")
	c, _ = f.store.Get(t.Context(), conv)
	if got := roles(c); got != "user,assistant,tool,assistant" {
		t.Errorf("after a second delivery roles = %s", got)
	}
}

// A turn whose holder vanished is taken over once it is StaleTurn old; a
// tree whose steps still start and finish is alive however old its turn.
func TestStaleTurnIsTakenOverButAMovingTreeIsNot(t *testing.T) {
	const stale = 2 * time.Second
	f := newFixtureWith(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "ok"}, nil
	}), nil, func(c *Config) { c.StaleTurn = stale })
	hold := func(conv string, tree *mesh.TreeRun) {
		t.Helper()
		if _, err := f.store.Update(t.Context(), conv, func(c *mesh.Conversation) error {
			c.Turn = &mesh.Turn{ID: "old-turn", Kind: mesh.WorkTurn, Node: "gone", Attempt: 1, StartedAt: time.Now().Add(-time.Hour)}
			c.Status, c.Tree = mesh.StatusRunning, tree
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	abandoned := f.conversation()
	hold(abandoned, nil)
	id, _ := f.turn(abandoned, "hello")
	if c := f.waitApplied(abandoned, id); c.Turn != nil || c.Status != mesh.StatusActive {
		t.Errorf("abandoned turn not taken over: turn %+v status %s", c.Turn, c.Status)
	}

	moving := f.conversation()
	hold(moving, &mesh.TreeRun{ID: "old-turn", Steps: map[string]*mesh.StepRun{
		"r":   {Key: "r", Status: mesh.StepRunning, StartedAt: time.Now().Add(-time.Hour)},
		"r.3": {Key: "r.3", Status: mesh.StepRunning, StartedAt: time.Now()},
	}})
	next := mesh.NewID()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: moving, TurnID: next, Message: "hello"})
	time.Sleep(stale / 4)
	if c, _ := f.store.Get(t.Context(), moving); c.HasTurn(next) || c.Turn.ID != "old-turn" {
		t.Fatalf("a tree that started a step just now was taken over (turn %+v)", c.Turn)
	}
	// Once its steps stop moving for StaleTurn, the waiting turn runs.
	f.waitApplied(moving, next)
}

// A run that outlasts StaleTurn keeps its claim fresh: the message queued
// behind it waits for it instead of taking the conversation over.
func TestLongTurnKeepsItsClaim(t *testing.T) {
	const stale = 400 * time.Millisecond
	f := newFixtureWith(t, script(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleUser && last.Content == "slow" {
			select {
			case <-time.After(4 * stale):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &llm.Response{Text: "done"}, nil
	}), nil, func(c *Config) { c.StaleTurn = stale })
	conv := f.conversation()
	first, second := mesh.NewID(), mesh.NewID()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: first, Message: "slow"})
	meshtest.Eventually(t, 5*time.Second, func() bool {
		c, err := f.store.Get(t.Context(), conv)
		return err == nil && c.Turn != nil && c.Turn.ID == first
	}, "the first turn was not claimed")
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: second, Message: "quick"})
	f.waitApplied(conv, first)
	c := f.waitApplied(conv, second)
	if got := roles(c); got != "user,assistant,user,assistant" || c.Messages[0].Content != "slow" || c.Messages[1].Content != "done" {
		t.Errorf("messages %s (%q first): the slow turn must finish before the next one runs", got, c.Messages[0].Content)
	}
}

func TestNewRequiresItsParts(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New with nothing succeeded")
	}
}

// TestStopWhileStartingIsNotAFailure: a role asked to stop before it got
// going returns nil, as it does once running.
func TestStopWhileStartingIsNotAFailure(t *testing.T) {
	m := meshtest.New(t)
	cfg, err := config.Parse("test.yaml", []byte("name: tester\nllm:\n  model: offline\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-agent", Logger: zerolog.Nop()}, Resources: m.Resources, Agent: cfg, Provider: offline.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context: %v, want nil", err)
	}
}

// A replica that dies on a turn's last delivery leaves no conversation
// running: the delivery after it (the consumer keeps no limit of its own)
// finds the turn out of tries and gives it up.
func TestTurnCutOffOnItsLastDeliveryIsGivenUp(t *testing.T) {
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "never used"}, nil
	}), func(c *config.Config) { c.Mesh.MaxDeliver = 1 })
	f.stop() // the fixture's own replica stays out of it
	// The replica that takes the only delivery, on a connection of its own,
	// and dies in the model call: its connection goes, nothing acks.
	nc := meshtest.Conn(t, f.m.Server.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	called := make(chan struct{}, 1)
	dying, err := New(Config{Node: role.Node{NC: nc, JS: js, NodeID: "dying", Logger: zerolog.Nop()}, Resources: f.m.Resources, Agent: f.cfg, DrainTimeout: 50 * time.Millisecond,
		Provider: script(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
			called <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})})
	if err != nil {
		t.Fatal(err)
	}
	stopDying := runAgent(t, dying)
	conv := f.conversation()
	id := mesh.NewID()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "list"})
	<-called
	nc.Close()
	stopDying()

	second, err := New(Config{Node: role.Node{NC: f.m.NC, JS: f.m.JS, NodeID: "second", Logger: zerolog.Nop()}, Resources: f.m.Resources, Agent: f.cfg, Provider: script(func(context.Context, llm.Request) (*llm.Response, error) {
		t.Error("the turn ran again after its last delivery")
		return &llm.Response{Text: "ran"}, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, second)
	c := f.waitApplied(conv, id)
	// Given up.
	if c.Turn != nil {
		t.Errorf("a turn is left open: %+v", c.Turn)
	}
	if c.Status != mesh.StatusActive {
		t.Errorf("status = %s, want %s", c.Status, mesh.StatusActive)
	}
	if c.LastRun == nil {
		t.Errorf("no last run, want one given up (%s)", mesh.CodeMaxDeliveries)
	} else if c.LastRun.ErrorCode != mesh.CodeMaxDeliveries {
		t.Errorf("last run error code = %q, want %q: %+v", c.LastRun.ErrorCode, mesh.CodeMaxDeliveries, c.LastRun)
	}
	if got := roles(c); got != "user,assistant(notice)" {
		t.Errorf("messages %s; want the user's message and the notice", got)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		info, err := f.m.Work.Info(t.Context())
		return err == nil && info.State.Msgs == 0
	}, "the work item stays in the queue")
}

// A turn's work item delivered again long after its turn was applied (its
// first delivery's process stopped after the save, before the ack, and the
// conversation went on meanwhile past its recent turns and the newest
// messages a read holds) is dropped: the turn does not run, or store its
// messages, a second time. (Found by TestChaos: a "list" turn's four
// messages again at the end of the conversation; an approved "add" turn
// asking again for its decided approval, and the conversation waiting for
// ever.)
func TestTurnDeliveredAgainLongAfterItWasAppliedIsDropped(t *testing.T) {
	var calls atomic.Int32
	model := script(func(context.Context, llm.Request) (*llm.Response, error) {
		calls.Add(1)
		return &llm.Response{Text: "done"}, nil
	})
	f := newFixture(t, model, nil)
	f.stop()
	conv := f.conversation()
	first := mesh.NewID()
	// The copy whose delivery is held: taken from the agent's consumer and
	// neither acked nor given back until the conversation has moved on.
	data, err := json.Marshal(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: first, Message: "first"})
	if err != nil {
		t.Fatal(err)
	}
	subject, err := f.m.NS.Work(mesh.RoleAgent, "tester", conv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.JS.Publish(t.Context(), subject, data); err != nil {
		t.Fatal(err)
	}
	cons, err := f.m.Work.Consumer(t.Context(), ConsumerName("tester"))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var held jetstream.Msg
	for m := range batch.Messages() {
		held = m
	}
	if held == nil {
		t.Fatal("the copy was not delivered")
	}

	second, err := New(Config{Node: role.Node{NC: f.m.NC, JS: f.m.JS, NodeID: "second", Logger: zerolog.Nop()}, Resources: f.m.Resources, Agent: f.cfg, Provider: model})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, second)
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: first, Message: "first"})
	f.waitApplied(conv, first)
	// More turns than the recent turns kept, and more messages than a read
	// of the conversation loads.
	for i := range 40 {
		_ = held.InProgress()
		f.turn(conv, fmt.Sprintf("turn %d", i))
	}
	before := calls.Load()
	if err := held.Nak(); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, func() bool {
		info, err := f.m.Work.Info(t.Context())
		return err == nil && info.State.Msgs == 0
	}, "the copy stays in the queue")
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the model was called %d times for the copy; want none", n)
	}
	doc, err := f.store.GetPage(t.Context(), conv, 500, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, raw := range doc.Messages {
		var m mesh.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.ID == first || m.TurnID == first {
			n++
		}
	}
	if n != 2 { // the user's message and the answer
		t.Errorf("%d messages of the first turn; want 2 (stored once)", n)
	}
}

// A conversation of direct calls runs the call its message names, through
// the catalog and the approvals, and answers with the result: the model is
// never called. A call of no tool the agent offers fails the turn, saying
// so.
func TestDirectConversationRunsTheCallAsked(t *testing.T) {
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		t.Error("the model was called in a conversation of direct calls")
		return &llm.Response{Text: "no"}, nil
	}), nil)
	c := &mesh.Conversation{ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Agent: "tester", Direct: true, Status: mesh.StatusActive}
	if err := f.store.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	direct := func(tool string, args map[string]any) string {
		data, _ := json.Marshal(mesh.DirectCall{Server: "srv", Tool: tool, Arguments: args})
		return string(data)
	}
	turn, got := f.turn(c.ID, direct("safe", map[string]any{"a": 1}))
	if got.Status != mesh.StatusActive || got.LastRun == nil || !strings.HasPrefix(got.LastRun.Response, "ran safe") {
		t.Fatalf("safe call: status %s, last run %+v; want its result as the answer", got.Status, got.LastRun)
	}
	var calls []mesh.ToolCall
	for _, m := range got.Messages {
		if m.TurnID == turn {
			calls = append(calls, m.ToolCalls...)
		}
	}
	if len(calls) != 1 || f.callCount(calls[0].ID) != 1 {
		t.Fatalf("calls of the turn %+v: want safe, run once", calls)
	}

	_, got = f.turn(c.ID, direct("danger", map[string]any{"b": 2}))
	if got.Status != mesh.StatusWaitingApproval || got.PendingApproval == nil || got.PendingApproval.ToolArgs["b"] != 2.0 {
		t.Fatalf("destructive call: status %s pending %+v; want it waiting with its arguments", got.Status, got.PendingApproval)
	}
	ap := got.PendingApproval.UUID
	got = f.decide(c.ID, ap, true)
	if f.callCount(ap) != 1 || got.Status != mesh.StatusActive || got.LastRun == nil || !strings.HasPrefix(got.LastRun.Response, "ran danger") {
		t.Errorf("approved: ran %d times, status %s, last run %+v", f.callCount(ap), got.Status, got.LastRun)
	}

	_, got = f.turn(c.ID, direct("nothing", nil))
	if got.LastRun == nil || got.LastRun.ErrorCode != mesh.CodeToolError || !strings.Contains(got.LastRun.Error, "offers no tool nothing") {
		t.Errorf("unknown tool: last run %+v; want a tool error naming it", got.LastRun)
	}
}
