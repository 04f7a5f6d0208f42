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

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/a2a/a2atest"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// These tests run agent trees on an embedded mesh, with models scripted per
// step: a step's model is told apart by its prompt.

// treeYAML is an agent.yaml with the tree given under agent:.
func treeYAML(tree string) string {
	return "name: tester\nllm:\n  model: offline\nmesh:\n  ack_wait: 2s\nagent:\n" + tree
}

// newTreeFixture is an agent running the tree of yaml (see treeYAML).
func newTreeFixture(t *testing.T, p llm.Provider, yaml string, tweakAgent func(*Config)) *fixture {
	t.Helper()
	parsed, err := config.Parse("tree.yaml", []byte(yaml), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureWith(t, p, func(c *config.Config) { *c = *parsed }, tweakAgent)
}

// byPrompt routes each model call to the script of the step whose prompt
// (placeholders resolved) starts the request's system prompt.
type byPrompt map[string]script

func (b byPrompt) Model() string { return "by-prompt" }
func (b byPrompt) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	for prefix, s := range b {
		if strings.HasPrefix(req.System, prefix) {
			return s(ctx, req)
		}
	}
	return nil, fmt.Errorf("no script for system prompt %q", req.System)
}

// text answers with s.
func text(s string) script {
	return func(context.Context, llm.Request) (*llm.Response, error) { return &llm.Response{Text: s}, nil }
}

// calling calls tool with args, then answers with prefix and the result.
func calling(tool, args, prefix string) script {
	return func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if r := toolResults(req); len(r) > 0 {
			return &llm.Response{Text: prefix + r[len(r)-1].Content}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call(tool, args)}}, nil
	}
}

func toolNames(tools []llm.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// types lists the types of events, keeping those of want only.
func types(evs []mesh.Event, want ...mesh.EventType) []string {
	var out []string
	for _, e := range evs {
		if slices.Contains(want, e.Type) {
			s := string(e.Type)
			if e.StepName != "" {
				s += " " + e.StepName
			}
			out = append(out, s)
		}
	}
	return out
}

func TestTreeSequentialPassesStateThroughPrompts(t *testing.T) {
	var analyzerTools atomic.Value
	p := byPrompt{
		"Classify the request": func(_ context.Context, req llm.Request) (*llm.Response, error) {
			analyzerTools.Store(toolNames(req.Tools))
			return &llm.Response{Text: "kind=read"}, nil
		},
		"Execute: kind=read": calling("safe", `{}`, "executed: "),
	}
	f := newTreeFixture(t, p, treeYAML(`  name: pipeline
  type: sequential
  agents:
    - {name: analyzer, type: llm, output_key: analysis, prompt: "Classify the request", tools: []}
    - {name: executor, type: llm, output_key: result, prompt: "Execute: {analysis}"}
`), nil)
	conv := f.conversation()
	turn, c := f.turn(conv, "list everything")

	if c.Status != mesh.StatusActive || c.Tree != nil || c.Turn != nil {
		t.Fatalf("status %s, tree %+v, turn %+v; want active with no tree", c.Status, c.Tree, c.Turn)
	}
	if got := analyzerTools.Load().([]string); len(got) != 0 {
		t.Errorf("analyzer (tools: []) was offered %v", got)
	}
	if c.State["analysis"] != "kind=read" || !strings.HasPrefix(fmt.Sprint(c.State["result"]), "executed: ran safe") {
		t.Errorf("state = %v", c.State)
	}
	if c.LastRun == nil || c.LastRun.Outcome != mesh.OutcomeSuccess || !strings.HasPrefix(c.LastRun.Response, "executed: ran safe") {
		t.Errorf("last run = %+v", c.LastRun)
	}
	var authors []string
	for _, m := range c.Messages {
		authors = append(authors, string(m.Role)+":"+m.Name)
		for _, tc := range m.ToolCalls {
			// Toolhosts take call ids as tokens (they key the calls bucket).
			if err := mesh.CheckToken(tc.ID); err != nil {
				t.Errorf("call id %q: %v", tc.ID, err)
			}
		}
	}
	if want := "user:,assistant:analyzer,assistant:executor,tool:executor,assistant:executor"; strings.Join(authors, ",") != want {
		t.Errorf("messages by %v, want %s", authors, want)
	}
	evs := f.events(conv)
	got := types(evs, mesh.EventRunStarted, mesh.EventStepStarted, mesh.EventStepFinished, mesh.EventStateDelta, mesh.EventRunFinished)
	want := []string{
		"RUN_STARTED", "STEP_STARTED pipeline",
		"STEP_STARTED analyzer", "STATE_DELTA", "STEP_FINISHED analyzer",
		"STEP_STARTED executor", "STATE_DELTA", "STEP_FINISHED executor", "STEP_FINISHED pipeline",
		"RUN_FINISHED",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %v\nwant %v", got, want)
	}
	for _, e := range evs {
		if e.Type == mesh.EventStateDelta {
			var ops []mesh.PatchOp
			b, _ := json.Marshal(e.Delta)
			if err := json.Unmarshal(b, &ops); err != nil || len(ops) != 1 || ops[0].Op != "add" {
				t.Errorf("delta %s, want one add", b)
			}
		}
		if e.Type == mesh.EventRunFinished && e.RunID != turn {
			t.Errorf("RUN_FINISHED of run %s, want %s", e.RunID, turn)
		}
	}
}

func TestTreeParallelApprovalsDecidedInReverseOrder(t *testing.T) {
	p := byPrompt{
		"left":  calling("danger", `{"side":"left"}`, "left did: "),
		"right": calling("danger", `{"side":"right"}`, "right did: "),
	}
	f := newTreeFixture(t, p, treeYAML(`  name: fan
  type: parallel
  agents:
    - {name: left, type: llm, prompt: left}
    - {name: right, type: llm, prompt: right}
`), nil)
	conv := f.conversation()
	turn, c := f.turn(conv, "do both")
	if c.Status != mesh.StatusWaitingApproval || len(c.PendingApprovals) != 2 {
		t.Fatalf("status %s with %d pending approvals, want waiting_approval with 2", c.Status, len(c.PendingApprovals))
	}
	if c.LastRun.Outcome != mesh.OutcomeInterrupt || !c.LastRun.Covers(turn) {
		t.Errorf("last run = %+v, want the turn interrupted", c.LastRun)
	}
	side := map[string]string{}
	for _, pa := range c.PendingApprovals {
		ap, err := f.aps.Get(t.Context(), pa.UUID)
		if err != nil {
			t.Fatal(err)
		}
		side[fmt.Sprint(ap.ToolArgs["side"])] = pa.UUID
		if len(ap.StepPath) != 1 {
			t.Errorf("approval %s has step path %v, want the branch's", pa.UUID, ap.StepPath)
		}
	}
	if len(side) != 2 {
		t.Fatalf("approvals by side = %v", side)
	}

	// Right first: the run waits on for left.
	c = f.decide(conv, side["right"], true)
	if c.Status != mesh.StatusWaitingApproval || len(c.PendingApprovals) != 1 || c.PendingApprovals[0].UUID != side["left"] {
		t.Fatalf("after right: status %s, pending %+v; want left still pending", c.Status, c.PendingApprovals)
	}
	if c.PendingApproval == nil || c.PendingApproval.UUID != side["left"] {
		t.Errorf("pending_approval = %+v, want left's", c.PendingApproval)
	}
	c = f.decide(conv, side["left"], true)
	if c.Status != mesh.StatusActive || c.Tree != nil || len(c.PendingApprovals) != 0 {
		t.Fatalf("after left: status %s, tree %+v", c.Status, c.Tree)
	}
	r := c.LastRun.Response
	if c.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Errorf("last run outcome = %s, want %s", c.LastRun.Outcome, mesh.OutcomeSuccess)
	}
	if !c.LastRun.Covers(side["left"]) {
		t.Errorf("last run %+v does not cover left's approval %s", c.LastRun, side["left"])
	}
	// Both branches joined.
	for _, want := range []string{"left: left did: ran danger", "right: right did: ran danger"} {
		if !strings.Contains(r, want) {
			t.Errorf("last run response = %q, want it to hold %q", r, want)
		}
	}
	if n := c.LastRun.Steps; len(n) != 2 {
		t.Errorf("got %d step summaries, want 2: %+v", len(n), n)
	} else {
		if n[0].Name != "left" {
			t.Errorf("step 0 name = %q, want left", n[0].Name)
		}
		if n[0].Status != mesh.StepDone {
			t.Errorf("step 0 status = %s, want %s", n[0].Status, mesh.StepDone)
		}
		if n[1].Worker != "test-node" {
			t.Errorf("step 1 worker = %q, want test-node", n[1].Worker)
		}
	}
	for s, id := range side {
		if n := f.callCount(id); n != 1 {
			t.Errorf("%s's approved call ran %d times", s, n)
		}
	}
}

func TestTreeLoopStopsAtMaxIterations(t *testing.T) {
	var calls atomic.Int32
	var offered atomic.Value
	p := byPrompt{"work": func(_ context.Context, req llm.Request) (*llm.Response, error) {
		calls.Add(1)
		offered.Store(toolNames(req.Tools))
		return &llm.Response{Text: "not yet"}, nil
	}}
	f := newTreeFixture(t, p, treeYAML(`  name: retry
  type: loop
  max_iterations: 3
  agents:
    - {name: worker, type: llm, prompt: work, can_exit_loop: true}
`), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	if n := calls.Load(); n != 3 {
		t.Errorf("worker ran %d times, want 3", n)
	}
	if !slices.Contains(offered.Load().([]string), exitLoopTool) {
		t.Errorf("worker (can_exit_loop) was offered %v, without exit_loop", offered.Load())
	}
	last := c.Messages[len(c.Messages)-1]
	if !last.Notice || !strings.Contains(last.Content, "retry stopped after 3 iterations") || !strings.Contains(last.Content, "exit_loop") {
		t.Errorf("last message = %+v, want the loop's stop notice", last)
	}
	if c.Status != mesh.StatusActive || c.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Errorf("status %s, last run %+v", c.Status, c.LastRun)
	}
}

// A loop that sets no max_iterations stops after ten.
func TestTreeLoopStopsAtTenIterationsByDefault(t *testing.T) {
	var calls atomic.Int32
	p := byPrompt{"work": func(_ context.Context, req llm.Request) (*llm.Response, error) {
		calls.Add(1)
		return &llm.Response{Text: "not yet"}, nil
	}}
	f := newTreeFixture(t, p, treeYAML(`  name: retry
  type: loop
  agents:
    - {name: worker, type: llm, prompt: work, can_exit_loop: true}
`), nil)
	_, c := f.turn(f.conversation(), "go")
	if n := calls.Load(); n != 10 {
		t.Errorf("worker ran %d times, want 10", n)
	}
	last := c.Messages[len(c.Messages)-1]
	if !last.Notice || !strings.Contains(last.Content, "retry stopped after 10 iterations") {
		t.Errorf("last message = %+v, want the loop's stop notice after 10 iterations", last)
	}
}

func TestTreeLoopEndsOnExitLoop(t *testing.T) {
	var workerRuns, checkerRuns atomic.Int32
	var checkerTools atomic.Value
	p := byPrompt{
		"work": func(_ context.Context, req llm.Request) (*llm.Response, error) {
			if r := toolResults(req); len(r) > 0 {
				return &llm.Response{Text: "finished"}, nil
			}
			if workerRuns.Add(1) == 2 {
				return &llm.Response{ToolCalls: []llm.ToolCall{call(exitLoopTool, `{}`)}}, nil
			}
			return &llm.Response{Text: "one more"}, nil
		},
		"check": func(_ context.Context, req llm.Request) (*llm.Response, error) {
			checkerRuns.Add(1)
			checkerTools.Store(toolNames(req.Tools))
			return &llm.Response{Text: "checked"}, nil
		},
	}
	f := newTreeFixture(t, p, treeYAML(`  name: until
  type: loop
  agents:
    - {name: worker, type: llm, prompt: work, can_exit_loop: true}
    - {name: checker, type: llm, prompt: check}
`), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	if w, k := workerRuns.Load(), checkerRuns.Load(); w != 2 || k != 1 {
		t.Errorf("worker ran %d times, checker %d; want 2 and 1 (the loop ends at the worker's exit_loop)", w, k)
	}
	if slices.Contains(checkerTools.Load().([]string), exitLoopTool) {
		t.Error("checker (no can_exit_loop) was offered exit_loop")
	}
	if c.LastRun.Response != "finished" {
		t.Errorf("response %q, want the worker's last answer", c.LastRun.Response)
	}
}

func TestTreeStepModelOverridesTheAgents(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	f := newTreeFixture(t, text("from the agent's model"), treeYAML(`  name: pipeline
  type: sequential
  agents:
    - {name: first, type: llm, prompt: one}
    - {name: second, type: llm, prompt: two, model: "openai:gpt-4o-mini", output_key: out}
`), func(c *Config) {
		c.Providers = func(model string) (llm.Provider, error) {
			mu.Lock()
			asked = append(asked, model)
			mu.Unlock()
			return text("from " + model), nil
		}
	})
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	if !slices.Equal(asked, []string{"openai:gpt-4o-mini"}) {
		t.Errorf("providers asked for %v", asked)
	}
	if c.State["out"] != "from openai:gpt-4o-mini" || c.Messages[1].Content != "from the agent's model" {
		t.Errorf("state %v, messages %+v", c.State, c.Messages)
	}
}

// TestTreeStepTimeoutBoundsItsCalls: an llm step's timeout bounds its own
// model calls, far under llm.timeout, and a step that overruns it fails
// the run with LLM_TIMEOUT; a step without one keeps llm.timeout.
func TestTreeStepTimeoutBoundsItsCalls(t *testing.T) {
	const stepTimeout = 200 * time.Millisecond
	var mu sync.Mutex
	deadlines := map[string]time.Duration{}
	note := func(step string, ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		if dl, ok := ctx.Deadline(); ok {
			deadlines[step] = time.Until(dl)
		} else {
			deadlines[step] = -1
		}
	}
	f := newTreeFixture(t, byPrompt{
		"route": func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
			note("route", ctx)
			return &llm.Response{Text: "search"}, nil
		},
		"search": func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
			note("search", ctx)
			<-ctx.Done() // a search that never answers
			return nil, ctx.Err()
		},
	}, treeYAML(`  name: pipeline
  type: sequential
  agents:
    - {name: router, type: llm, prompt: route}
    - {name: searcher, type: llm, prompt: search, timeout: 200ms}
`), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "find it")
	if c.LastRun == nil || c.LastRun.Outcome != mesh.OutcomeError || c.LastRun.ErrorCode != mesh.CodeLLMTimeout {
		t.Fatalf("last run %+v, want an error LLM_TIMEOUT", c.LastRun)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := deadlines["search"]; d <= 0 || d > stepTimeout {
		t.Errorf("the search step's call had %v left, want at most its timeout %v", d, stepTimeout)
	}
	if d := deadlines["route"]; d >= 0 && d <= stepTimeout {
		t.Errorf("the router step's call had %v left: the other step's timeout reached it", d)
	}
}

func TestTreeStepNegativeTimeoutIsRefused(t *testing.T) {
	_, err := config.Parse("tree.yaml", []byte(treeYAML(`  name: pipeline
  type: sequential
  agents:
    - {name: searcher, type: llm, prompt: search, timeout: -1s}
`)), func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("config with a negative step timeout: %v, want an error naming timeout", err)
	}
}

// TestTreeStepSamplingReachesItsCalls: an llm step's max_tokens,
// temperature and top_p go with its own model calls only; a step without
// sends none (its provider holds the llm section's).
func TestTreeStepSamplingReachesItsCalls(t *testing.T) {
	var mu sync.Mutex
	got := map[string]modelspec.Sampling{}
	record := func(name string) script {
		return func(_ context.Context, req llm.Request) (*llm.Response, error) {
			mu.Lock()
			got[name] = req.Sampling
			mu.Unlock()
			return &llm.Response{Text: name}, nil
		}
	}
	f := newTreeFixture(t, byPrompt{"one": record("first"), "two": record("second")}, treeYAML(`  name: pipeline
  type: sequential
  agents:
    - {name: first, type: llm, prompt: one, temperature: 0, top_p: 0.8, max_tokens: 64}
    - {name: second, type: llm, prompt: two}
`), nil)
	f.turn(f.conversation(), "go")
	mu.Lock()
	defer mu.Unlock()
	first, second := got["first"], got["second"]
	if first.Temperature == nil {
		t.Error("first step's call carried no temperature, want 0")
	} else if *first.Temperature != 0 {
		t.Errorf("first step's call carried temperature %v, want 0", *first.Temperature)
	}
	if first.TopP == nil {
		t.Error("first step's call carried no top_p, want 0.8")
	} else if *first.TopP != 0.8 {
		t.Errorf("first step's call carried top_p %v, want 0.8", *first.TopP)
	}
	if first.MaxTokens != 64 {
		t.Errorf("first step's call carried max_tokens %d, want 64", first.MaxTokens)
	}
	if second != (modelspec.Sampling{}) {
		t.Errorf("second step's call carried %+v, want no settings of its own", second)
	}
}

func TestTreeStepModelWithoutFactoryIsRefused(t *testing.T) {
	parsed, err := config.Parse("tree.yaml", []byte(treeYAML(`  name: p
  type: sequential
  agents:
    - {name: other, type: llm, model: "openai:gpt-4o"}
`)), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	m := meshtest.New(t)
	_, err = New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: parsed, Provider: text("x")})
	if err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("New = %v, want an error naming step other", err)
	}
}

func TestTreeCancelStopsEveryBranch(t *testing.T) {
	var started sync.WaitGroup
	started.Add(2)
	wait := func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		started.Done()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f := newTreeFixture(t, byPrompt{"a": wait, "b": wait}, treeYAML(`  name: fan
  type: parallel
  agents:
    - {name: a, type: llm, prompt: a}
    - {name: b, type: llm, prompt: b}
`), nil)
	conv := f.conversation()
	turn := mesh.NewID()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: turn, Message: "go"})
	done := make(chan struct{})
	go func() { started.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the branches did not both start")
	}
	subj, _ := f.m.NS.SessionCancel(conv)
	if err := f.m.NC.Publish(subj, []byte(`{"runId":"`+turn+`"}`)); err != nil {
		t.Fatal(err)
	}
	c := f.waitApplied(conv, turn)
	if c.LastRun.Outcome != mesh.OutcomeCancelled || c.Status != mesh.StatusActive || c.Tree != nil {
		t.Errorf("status %s, last run %+v", c.Status, c.LastRun)
	}
}

func TestTreeA2AStepSendsItsResolvedPrompt(t *testing.T) {
	sub := a2atest.Start(t, a2atest.Options{Name: "executor"})
	f := newTreeFixture(t, byPrompt{"Plan": text("list all")}, treeYAML(`  name: chain
  type: sequential
  agents:
    - {name: planner, type: llm, prompt: Plan, output_key: plan, tools: []}
    - {name: remote, type: a2a, url: "`+sub.URL+`", prompt: "Do: {plan}", output_key: done}
`), func(c *Config) { c.Remote = fastRemote })
	conv := f.conversation()
	_, c := f.turn(conv, "please list")
	sends := sub.Sends()
	if len(sends) != 1 || sends[0].Text != "Do: list all" {
		t.Fatalf("sub-agent got %+v, want one message/send of the resolved prompt", sends)
	}
	if c.State["done"] != "done: Do: list all" || c.LastRun.Response != "done: Do: list all" {
		t.Errorf("state %v, response %q", c.State, c.LastRun.Response)
	}
	last := c.Messages[len(c.Messages)-1]
	if last.Name != "remote" || last.Role != mesh.RoleAssistant {
		t.Errorf("last message %+v, want the remote step's answer", last)
	}
}

func TestTreeA2AStepDownFailsTheRun(t *testing.T) {
	f := newTreeFixture(t, text("unused"), treeYAML(`  name: chain
  type: sequential
  agents:
    - {name: remote, type: a2a, url: "http://127.0.0.1:1"}
    - {name: after, type: llm}
`), func(c *Config) { c.Remote = fastRemote })
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	if c.LastRun.Outcome != mesh.OutcomeError || c.LastRun.ErrorCode != mesh.CodeSubAgentError || c.Status != mesh.StatusActive {
		t.Errorf("last run %+v, status %s", c.LastRun, c.Status)
	}
	for _, m := range c.Messages {
		if m.Name == "after" {
			t.Errorf("the step after the failed one ran: %+v", m)
		}
	}
}

func TestTreeStepWorkForASettledStepDoesNothing(t *testing.T) {
	var runs atomic.Int32
	p := byPrompt{"one": func(context.Context, llm.Request) (*llm.Response, error) {
		runs.Add(1)
		return &llm.Response{Text: "1"}, nil
	}, "two": text("2")}
	f := newTreeFixture(t, p, treeYAML(`  name: p
  type: sequential
  agents:
    - {name: a, type: llm, prompt: one}
    - {name: b, type: llm, prompt: two}
`), nil)
	conv := f.conversation()
	turn, _ := f.turn(conv, "go")
	// The first step's work item again, as a redelivery after a crash
	// would bring it (published without its dedupe id, so that the stream
	// keeps it): it is acknowledged, and nothing runs again.
	cons, err := f.m.JS.Consumer(t.Context(), f.m.NS.Stream(mesh.StreamWork), ConsumerName("tester"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := f.m.NS.Work(mesh.RoleAgent, "tester", conv)
	data, _ := json.Marshal(mesh.WorkItem{Kind: mesh.WorkStep, Session: conv, TurnID: turn, Step: "r.0", Gen: 1, RunID: turn})
	if _, err := f.m.JS.Publish(t.Context(), subj, data); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.AckFloor.Consumer > before.AckFloor.Consumer && info.NumAckPending == 0
	}, "the repeated work item was not acknowledged")
	if n := runs.Load(); n != 1 {
		t.Errorf("step one ran %d times", n)
	}
	c, err := f.store.Get(t.Context(), conv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tree != nil || c.Status != mesh.StatusActive || len(c.Messages) != 3 {
		t.Errorf("conversation changed: status %s, tree %+v, %d messages", c.Status, c.Tree, len(c.Messages))
	}
}

// TestTreeLoopPausesEachIteration: a destructive call inside a loop pauses
// its iteration; each decision carries the loop on, and every iteration's
// call has ids (and an approval) of its own.
// A call rejected inside a pipeline cancels it: the step that asked stops
// at once, the steps after it never run, and the conversation is free for
// the next message with a notice saying what stopped.
func TestTreeRejectionCancelsThePipeline(t *testing.T) {
	var planner, reporter atomic.Int32
	p := byPrompt{
		"plan": func(_ context.Context, req llm.Request) (*llm.Response, error) {
			planner.Add(1)
			return &llm.Response{ToolCalls: []llm.ToolCall{call("danger", `{"n":1}`)}}, nil
		},
		"report": func(context.Context, llm.Request) (*llm.Response, error) {
			reporter.Add(1)
			return &llm.Response{Text: "reported"}, nil
		},
	}
	f := newTreeFixture(t, p, treeYAML(`  name: pipeline
  type: sequential
  agents:
    - {name: planner, type: llm, prompt: plan, output_key: plan}
    - {name: reporter, type: llm, prompt: "report {plan}"}
`), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	if c.Status != mesh.StatusWaitingApproval || len(c.PendingApprovals) != 1 {
		t.Fatalf("status %s, pending %+v, want one approval", c.Status, c.PendingApprovals)
	}
	id := c.PendingApprovals[0].UUID
	c = f.decide(conv, id, false)
	if c.Status != mesh.StatusActive || c.Tree != nil || c.PipelineState != nil || len(c.PendingApprovals) != 0 {
		t.Fatalf("after the rejection: status %s, tree %+v, pipeline state %+v", c.Status, c.Tree, c.PipelineState)
	}
	if c.LastRun.Outcome != mesh.OutcomeCancelled || !strings.Contains(c.LastRun.Response, "danger was rejected") {
		t.Errorf("last run = %+v, want cancelled with the rejection's notice", c.LastRun)
	}
	if n := planner.Load(); n != 1 {
		t.Errorf("the planner's model was called %d times, want once (not again after the rejection)", n)
	}
	if n := reporter.Load(); n != 0 {
		t.Errorf("the reporter ran %d times after the rejection, want 0", n)
	}
	if n := f.callCount(id); n != 0 {
		t.Errorf("the rejected call ran %d times", n)
	}
	last := c.Messages[len(c.Messages)-1]
	if !last.Notice || !strings.Contains(last.Content, "pipeline stopped at step planner") {
		t.Errorf("last message = %+v, want the notice of the cancelled pipeline", last)
	}
	if _, ok := c.State["plan"]; ok {
		t.Errorf("state = %v, want no output of the cancelled planner", c.State)
	}
}

func TestTreeLoopPausesEachIteration(t *testing.T) {
	var iteration atomic.Int32
	p := byPrompt{"step": func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if r := toolResults(req); len(r) > 0 {
			return &llm.Response{Text: "did " + r[0].Content}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("danger", fmt.Sprintf(`{"n":%d}`, iteration.Add(1)))}}, nil
	}}
	f := newTreeFixture(t, p, treeYAML(`  name: twice
  type: loop
  max_iterations: 2
  agents:
    - {name: stepper, type: llm, prompt: step}
`), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	var approvals []string
	for i := range 2 {
		if c.Status != mesh.StatusWaitingApproval || len(c.PendingApprovals) != 1 {
			t.Fatalf("iteration %d: status %s, pending %+v", i+1, c.Status, c.PendingApprovals)
		}
		id := c.PendingApprovals[0].UUID
		if slices.Contains(approvals, id) {
			t.Fatalf("iteration %d reuses approval %s", i+1, id)
		}
		approvals = append(approvals, id)
		c = f.decide(conv, id, true)
	}
	if c.Status != mesh.StatusActive || c.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Fatalf("status %s, last run %+v", c.Status, c.LastRun)
	}
	for _, id := range approvals {
		if n := f.callCount(id); n != 1 {
			t.Errorf("approved call %s ran %d times", id, n)
		}
	}
	last := c.Messages[len(c.Messages)-1]
	if !strings.Contains(last.Content, "twice stopped after 2 iterations") {
		t.Errorf("last message %q, want the loop's stop notice", last.Content)
	}
}

// TestInfoListsTheToolsAndSubAgentsOfItsSteps: what the agent says of
// itself in its beats (the agent directory) is the union of what its llm
// steps are offered, tools lists applied, and its a2a steps.
func TestInfoListsTheToolsAndSubAgentsOfItsSteps(t *testing.T) {
	f := newTreeFixture(t, text("ok"), treeYAML(`  name: pipeline
  type: sequential
  agents:
    - {name: reader, type: llm, prompt: one, tools: [safe]}
    - {name: remote, type: a2a, url: "http://127.0.0.1:9/a2a"}
    - {name: quiet, type: llm, prompt: two, tools: []}
`), nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		info := f.agent.Info()
		if slices.Equal(info.Tools, []string{"safe"}) {
			if info.Name != "tester" {
				t.Errorf("info name = %q, want tester", info.Name)
			}
			if !slices.Equal(info.SubAgents, []string{"remote"}) {
				t.Errorf("info sub-agents = %q, want [remote]", info.SubAgents)
			}
			if info.Workers < 1 {
				t.Errorf("info workers = %d, want at least 1", info.Workers)
			}
			if info.Busy != 0 {
				t.Errorf("info busy = %d, want 0 (idle)", info.Busy)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("info tools = %v, want [safe] (the catalog cut to reader's list; quiet has none)", info.Tools)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
