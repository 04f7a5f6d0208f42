package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// These tests run agent trees on `mesh up` (an agent without a tree, a
// sequential pipeline that passes state on and pauses for approvals,
// parallel branches joined into a summary, a loop with an exit, a pipeline
// reached over A2A), with the sample configurations of config/examples and
// the offline planner.

// exampleConfig is config/examples/<name>.yaml.
func exampleConfig(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../../config/examples", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// byNode lists the messages of a conversation written by the tree node
// name, in order.
func byNode(conv map[string]any, name string) []map[string]any {
	var out []map[string]any
	for _, msg := range list(conv, "messages") {
		if str(msg, "name") == name {
			out = append(out, obj(msg))
		}
	}
	return out
}

// finalText is the last assistant message of a node that is not a notice
// and asks for no tool.
func finalText(conv map[string]any, name string) string {
	text := ""
	for _, msg := range byNode(conv, name) {
		if str(msg, "role") == "assistant" && msg["notice"] != true && len(list(msg, "tool_calls")) == 0 {
			text = str(msg, "content")
		}
	}
	return text
}

// callsOf lists the names of the tools a node called.
func callsOf(conv map[string]any, name string) []string {
	var out []string
	for _, msg := range byNode(conv, name) {
		for _, c := range list(msg, "tool_calls") {
			out = append(out, str(c, "name"))
		}
	}
	return out
}

// steps lists the STEP_STARTED and STEP_FINISHED events of evs.
func steps(evs []map[string]any) []string {
	var out []string
	for _, ev := range evs {
		if t := str(ev, "type"); strings.HasPrefix(t, "STEP_") {
			out = append(out, t+" "+str(ev, "stepName"))
		}
	}
	return out
}

func TestAgentWithoutTreeIsOneLLMNode(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv, out := m.firstTurn("list all resources")
	c := obj(out, "conversation")
	if !strings.Contains(str(out, "result", "response"), "resources") {
		t.Fatalf("answer = %v", out)
	}
	if calls := toolCalls(c); len(calls) != 1 || str(calls[0], "name") != "resources_list" {
		t.Errorf("tool calls = %v, want one resources_list", calls)
	}
	for _, msg := range list(c, "messages") {
		if str(msg, "name") != "" || str(msg, "node") != "" {
			t.Errorf("message %v names a tree node; an agent without a tree has none", msg)
		}
	}
	if c["tree"] != nil || c["pipeline_state"] != nil {
		t.Errorf("conversation keeps a tree position: %v", c)
	}
	if s := steps(turnEvents(t, m, conv, "RUN_FINISHED")); len(s) != 0 {
		t.Errorf("steps %v; the single llm node publishes none", s)
	}
}

func TestSequentialPipelinePassesTheAnalysisOn(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: exampleConfig(t, "sequential")})
	conv, out := m.firstTurn("list all resources")
	c := obj(out, "conversation")
	analysis := finalText(c, "analyzer")
	if analysis == "" || str(c, "state", "analysis") != analysis {
		t.Errorf("state.analysis = %q, analyzer said %q: want them equal", str(c, "state", "analysis"), analysis)
	}
	if calls := callsOf(c, "analyzer"); len(calls) != 0 {
		t.Errorf("analyzer (tools: []) called %v", calls)
	}
	if calls := callsOf(c, "executor"); !slices.Equal(calls, []string{"resources_list"}) {
		t.Errorf("executor called %v, want resources_list", calls)
	}
	resp := str(out, "result", "response")
	if resp != finalText(c, "executor") || !strings.Contains(resp, "resources") {
		t.Errorf("response %q, want the executor's report of the tool result", resp)
	}
	want := []string{"STEP_STARTED pipeline", "STEP_STARTED analyzer", "STEP_FINISHED analyzer", "STEP_STARTED executor", "STEP_FINISHED executor", "STEP_FINISHED pipeline"}
	evs := turnEvents(t, m, conv, "RUN_FINISHED")
	if got := steps(evs); !slices.Equal(got, want) {
		t.Errorf("steps:\n got %v\nwant %v", got, want)
	}
	var deltas []string
	for _, ev := range evs {
		if str(ev, "type") == "STATE_DELTA" {
			for _, op := range list(ev, "delta") {
				deltas = append(deltas, str(op, "path"))
			}
		}
	}
	if !slices.Equal(deltas, []string{"/analysis", "/result"}) {
		t.Errorf("STATE_DELTA paths %v, want /analysis then /result", deltas)
	}
}

func TestSequentialPipelinePausesAndResumes(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: exampleConfig(t, "sequential")})
	conv := m.newConversation()
	ap := m.addPending(conv, "add resource test-seq with value 55")
	if str(ap, "tool_name") != "resources_add" || obj(ap, "tool_args")["name"] != "test-seq" {
		t.Fatalf("approval = %v", ap)
	}
	c := m.do(http.StatusOK, "GET", "/conversations/"+conv, nil)
	ps := obj(c, "conversation", "pipeline_state")
	if path := list(ps, "paused_node_path"); len(path) != 1 || path[0] != 1.0 {
		t.Errorf("paused_node_path = %v, want [1] (the executor)", path)
	}
	if str(ps, "paused_node_output_key") != "result" || str(ps, "user_message") != "add resource test-seq with value 55" || str(ps, "session_state", "analysis") == "" {
		t.Errorf("pipeline_state = %v, want the executor's output key, the request and the analysis", ps)
	}
	if n := m.resourceRows("test-seq"); n != 0 {
		t.Fatalf("rows before the approval = %d", n)
	}
	out := m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"answer": "yes"})
	conv2 := obj(out, "conversation")
	if str(conv2, "status") != "active" || conv2["pipeline_state"] != nil || conv2["tree"] != nil {
		t.Fatalf("after the approval: %v", conv2)
	}
	if resp := str(out, "result", "response"); !strings.Contains(resp, "test-seq") {
		t.Errorf("response %q does not report the created resource", resp)
	}
	if n := m.resourceRows("test-seq"); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
	// The analyzer ran before the pause only: the resume carried on at the
	// executor.
	if n := len(byNode(conv2, "analyzer")); n != 1 {
		t.Errorf("analyzer wrote %d messages, want 1", n)
	}
}

// TestSequentialPipelineRejectionCancels: rejecting the executor's call
// cancels the pipeline. Nothing is created, the reporter after the
// executor never runs, the answer says what stopped, and the conversation
// takes the next message.
func TestSequentialPipelineRejectionCancels(t *testing.T) {
	t.Parallel()
	cfg := strings.TrimRight(exampleConfig(t, "sequential"), "\n") + `
    - name: reporter
      type: llm
      tools: []
      prompt: "Tell the user what was done: {result}"
`
	m := startMesh(t, meshOpts{config: cfg})
	conv := m.newConversation()
	ap := m.addPending(conv, "add resource seq-rejected with value 9")
	out := m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": false})
	c := obj(out, "conversation")
	if str(c, "status") != "active" || c["pipeline_state"] != nil || c["tree"] != nil {
		t.Fatalf("after the rejection: %v", c)
	}
	if got := str(out, "result", "outcome"); got != "cancelled" {
		t.Errorf("result outcome %q, want cancelled (%v)", got, obj(out, "result"))
	}
	if resp := str(out, "result", "response"); !strings.Contains(resp, "resources_add was rejected") || !strings.Contains(resp, "stopped at step executor") {
		t.Errorf("response %q, want the pipeline's cancel notice", resp)
	}
	if n := len(byNode(c, "reporter")); n != 0 {
		t.Errorf("the reporter wrote %d messages after the rejection, want 0", n)
	}
	if n := m.resourceRows("seq-rejected"); n != 0 {
		t.Errorf("rows = %d, want 0", n)
	}
	m.send(conv, "list all resources")
}

func TestParallelBranchesJoinIntoTheSummary(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: exampleConfig(t, "parallel")})
	conv := m.newConversation()
	out := m.send(conv, "give me an overview of all resources")
	c := obj(out, "conversation")
	if obj(out, "result")["waiting_approval"] != false || str(c, "status") != "active" {
		t.Fatalf("answer = %v", out)
	}
	for _, branch := range []string{"list-all", "count-analysis"} {
		if calls := callsOf(c, branch); !slices.Equal(calls, []string{"resources_list"}) {
			t.Errorf("%s called %v, want resources_list", branch, calls)
		}
		if finalText(c, branch) == "" {
			t.Errorf("%s produced no output", branch)
		}
	}
	if str(c, "state", "listing") == "" || str(c, "state", "counts") == "" {
		t.Errorf("state = %v, want both branches' output keys", obj(c, "state"))
	}
	summary := finalText(c, "summarizer")
	if !strings.Contains(summary, "list-all: ") || !strings.Contains(summary, "count-analysis: ") {
		t.Errorf("summary %q does not hold both branches' results", summary)
	}
	if str(out, "result", "response") != summary {
		t.Errorf("response %q, want the summary", str(out, "result", "response"))
	}
}

func TestLoopAddsUntilTheGoalThenExits(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: exampleConfig(t, "loop")})
	conv := m.newConversation()
	out := m.send(conv, "ensure we have at least 2 resources")
	c := obj(out, "conversation")
	if obj(out, "result")["waiting_approval"] != false || str(c, "status") != "active" {
		t.Fatalf("answer = %v, want the loop done without approval", out)
	}
	for name, want := range map[string]int{"resource-1": 1, "resource-2": 1, "resource-3": 0} {
		if n := m.resourceRows(name); n != want {
			t.Errorf("rows of %s = %d, want %d", name, n, want)
		}
	}
	if t.Failed() {
		for _, msg := range list(c, "messages") {
			t.Logf("%s %s %s %v", str(msg, "role"), str(msg, "name"), str(msg, "content"), list(msg, "tool_calls"))
		}
	}
	calls := callsOf(c, "keeper")
	if calls[len(calls)-1] != "exit_loop" || slices.Index(calls, "exit_loop") != len(calls)-1 {
		t.Errorf("keeper called %v, want exit_loop once, last", calls)
	}
	if adds := strings.Count(strings.Join(calls, ","), "resources_add"); adds != 2 {
		t.Errorf("keeper added %d resources, want 2", adds)
	}
	for _, msg := range list(c, "messages") {
		if strings.Contains(str(msg, "content"), "stopped after") {
			t.Errorf("the loop hit max_iterations: %v", msg)
		}
	}
}

func TestLoopStopsAtMaxIterationsWithAClearMessage(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(exampleConfig(t, "loop"), "max_iterations: 5", "max_iterations: 2", 1)
	m := startMesh(t, meshOpts{config: cfg})
	conv := m.newConversation()
	out := m.send(conv, "ensure we have at least 5 resources")
	c := obj(out, "conversation")
	if str(c, "status") != "active" || str(out, "result", "outcome") != "success" {
		t.Fatalf("answer = %v", out)
	}
	if m.resourceRows("resource-2") != 1 || m.resourceRows("resource-3") != 0 {
		t.Errorf("rows: resource-2 %d, resource-3 %d; want two iterations' worth", m.resourceRows("resource-2"), m.resourceRows("resource-3"))
	}
	msgs := list(c, "messages")
	last := obj(msgs[len(msgs)-1])
	if !strings.Contains(str(last, "content"), "fill-up stopped after 2 iterations") || last["notice"] != true {
		t.Errorf("last message %v, want the loop's stop notice", last)
	}
}

func TestSequentialPipelineOverA2A(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: exampleConfig(t, "sequential")})
	task := a2aSrvResult(m, "message/send", a2aSrvMessage("list all resources", ""))
	if str(task, "status", "state") != "completed" {
		t.Fatalf("task = %v, want completed", task)
	}
	if text := a2aSrvArtifactText(task); !strings.Contains(text, "resources") {
		t.Errorf("artifact text %q", text)
	}
	c := obj(m.do(http.StatusOK, "GET", "/conversations/"+str(task, "contextId"), nil), "conversation")
	if finalText(c, "analyzer") == "" || !slices.Equal(callsOf(c, "executor"), []string{"resources_list"}) {
		t.Errorf("conversation %v, want both nodes run", c)
	}
}

// taskBackend is the offline planner taking the request from a line
// "Task: …" of the node's prompt, so that the branches of a parallel node
// each do their own thing; it answers through a real wire format.
type taskBackend struct{ llm.Provider }

func (b taskBackend) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	for _, line := range strings.Split(req.System, "\n") {
		if task, ok := strings.CutPrefix(line, "Task: "); ok {
			msgs := slices.Clone(req.Messages)
			for i := len(msgs) - 1; i >= 0; i-- {
				if msgs[i].Role == llm.RoleUser {
					msgs[i].Content = task
					break
				}
			}
			req.Messages = msgs
		}
	}
	return b.Provider.Generate(ctx, req)
}

func TestParallelApprovalsDecidedInReverseOrder(t *testing.T) {
	t.Parallel()
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, Backend: taskBackend{offline.New()}})
	cfg := strings.Replace(defaultConfig(t), "\n  model: offline\n", "\n  model: gpt-4o-mini\n", 1) + `
agent:
  name: both
  type: parallel
  agents:
    - {name: add-left, type: llm, prompt: "Task: add resource left-1 with value 1"}
    - {name: add-right, type: llm, prompt: "Task: add resource right-1 with value 2"}
`
	m := startMesh(t, meshOpts{config: cfg, env: []string{"OPENAI_API_KEY=k", "OPENAI_BASE_URL=" + srv.BaseURL()}})
	conv := m.newConversation()
	out := m.send(conv, "add both resources")
	aps := list(out, "result", "approvals")
	if str(out, "conversation", "status") != "waiting_approval" || len(aps) != 2 {
		t.Fatalf("answer = %v, want two approvals", out)
	}
	byName := map[string]string{}
	for _, ap := range aps {
		byName[str(obj(ap, "tool_args"), "name")] = str(ap, "uuid")
	}
	if byName["left-1"] == "" || byName["right-1"] == "" {
		t.Fatalf("approvals = %v", aps)
	}

	// The second branch's approval first: it runs, the first still waits.
	out = m.do(http.StatusOK, "POST", "/approvals/"+byName["right-1"], map[string]any{"answer": "yes"})
	if str(out, "conversation", "status") != "waiting_approval" || str(out, "result", "approval", "uuid") != byName["left-1"] {
		t.Fatalf("after right-1: %v, want left-1 still pending", obj(out, "result"))
	}
	if m.resourceRows("right-1") != 1 || m.resourceRows("left-1") != 0 {
		t.Fatalf("rows after right-1: right-1 %d, left-1 %d", m.resourceRows("right-1"), m.resourceRows("left-1"))
	}
	out = m.do(http.StatusOK, "POST", "/approvals/"+byName["left-1"], map[string]any{"answer": "yes"})
	if str(out, "conversation", "status") != "active" {
		t.Fatalf("after left-1: %v", out)
	}
	resp := str(out, "result", "response")
	for _, want := range []string{"add-left: ", "left-1", "add-right: ", "right-1"} {
		if !strings.Contains(resp, want) {
			t.Errorf("response %q does not hold %q: both results joined", resp, want)
		}
	}
	if m.resourceRows("left-1") != 1 || m.resourceRows("right-1") != 1 {
		t.Errorf("rows: left-1 %d, right-1 %d; want 1 each", m.resourceRows("left-1"), m.resourceRows("right-1"))
	}
}

// pipelineKillConfig is a three-node pipeline over the test MCP server:
// counter (items_count, answers at once), lister (items_touch, which blocks
// until the gate opens) and reporter (no tools).
func pipelineKillConfig(dir string) string {
	return `name: three-steps
llm:
  model: offline
mesh:
  ack_wait: 2s
  restart_backoff: 100ms
mcp_servers:
  - name: items
    command: mesh-test-mcp
    env:
      ` + testMCPEnv + `: "1"
      ` + testGateEnv + `: "` + filepath.Join(dir, "gate") + `"
      ` + testCallsEnv + `: "` + filepath.Join(dir, "touch-calls") + `"
      ` + testCountCallsEnv + `: "` + filepath.Join(dir, "count-calls") + `"
agent:
  name: steps
  type: sequential
  agents:
    - {name: counter, type: llm, output_key: count, tools: [items_count], prompt: "Count the items."}
    - {name: lister, type: llm, output_key: listing, tools: [items_touch], prompt: "List the items."}
    - {name: reporter, type: llm, tools: [], prompt: "Report {count} and {listing}."}
`
}

func lines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

func TestKillAgentMidPipelineRerunsNoFinishedNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: pipelineKillConfig(dir)})
	conv := m.newConversation()
	wait := m.sendLater(conv, "list items")
	// The second node is in its tool call.
	meshtest.Eventually(t, 30*time.Second, func() bool { return lines(t, filepath.Join(dir, "touch-calls")) > 0 }, "the second node never called its tool")
	agentPID := m.childPID("agent")
	if err := killPID(agentPID); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 30*time.Second, func() bool { return m.childPID("agent") != agentPID }, "agent not restarted")
	openGate(t, dir)
	body := wait(90*time.Second, "the pipeline did not finish after the agent was killed")
	c := obj(body, "conversation")
	if str(c, "status") != "active" {
		// The synchronous wait may have ended with the killed agent's
		// connection; read where the conversation stands.
		meshtest.Eventually(t, 60*time.Second, func() bool {
			c = obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
			return str(c, "status") == "active"
		}, "the pipeline did not finish: %v", c)
	}
	if n := lines(t, filepath.Join(dir, "count-calls")); n != 1 {
		t.Errorf("node one's tool ran %d times, want 1", n)
	}
	if n := lines(t, filepath.Join(dir, "touch-calls")); n != 1 {
		t.Errorf("node two's tool ran %d times, want 1 (its call id is the same when the node runs again)", n)
	}
	for _, node := range []string{"counter", "lister", "reporter"} {
		var finals, results int
		for _, msg := range byNode(c, node) {
			switch {
			case str(msg, "role") == "tool":
				results++
			case msg["notice"] != true && len(list(msg, "tool_calls")) == 0:
				finals++
			}
		}
		if finals != 1 {
			t.Errorf("%s answered %d times, want once", node, finals)
		}
		if node != "reporter" && results != 1 {
			t.Errorf("%s has %d tool results, want 1", node, results)
		}
	}
	if !strings.Contains(finalText(c, "reporter"), "lister: ") {
		t.Errorf("reporter said %q, want what lister reported", finalText(c, "reporter"))
	}
}
