package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// chain starts two meshes, each its own `mesh up` with its own data dir and
// ports: B manages resources (the default configuration), A has no tool of
// its own and delegates to B over A2A.
func chain(t *testing.T) (a, b *meshProc) {
	t.Helper()
	b = startMesh(t, meshOpts{})
	a = startMesh(t, meshOpts{config: `name: orchestrator
description: Delegates resource management to the resource agent.
llm:
  model: offline
a2a:
  - name: resource-agent
    url: http://` + b.httpAddr + `
    description: Manages named integer resources (list, add, remove).
`})
	return a, b
}

// chainPipeline is chain with Agent A a sequential pipeline: an analyzer
// with no tools writes its analysis to state, then a delegator, offered
// Agent B as a tool, carries the request out through it.
func chainPipeline(t *testing.T) (a, b *meshProc) {
	t.Helper()
	b = startMesh(t, meshOpts{})
	sub := `
        - name: resource-agent
          url: http://` + b.httpAddr + `
          description: Manages named integer resources (list, add, remove).
`
	a = startMesh(t, meshOpts{config: `name: orchestrator
description: Analyses resource requests, then delegates them to the resource agent.
llm:
  model: offline
a2a:` + strings.ReplaceAll(sub, "\n      ", "\n") + `
agent:
  name: pipeline
  type: sequential
  agents:
    - name: analyzer
      type: llm
      output_key: analysis
      tools: []
      prompt: Classify the user's request about resources in one short paragraph.
    - name: delegator
      type: llm
      output_key: result
      prompt: |
        You delegate resource requests to resource-agent, as this analysis says.

        Analysis: {analysis}
      a2a:` + sub})
	return a, b
}

// sidLogged reports whether a mesh's logs carry the trace id.
func sidLogged(m *meshProc, sid string) bool {
	return strings.Contains(m.logs(), `"sid":"`+sid+`"`)
}

// waitSIDLogged waits for both meshes' logs to carry the trace id: lines
// reach the log file through mesh up's pipes, a moment after the answer.
func waitSIDLogged(t *testing.T, a, b *meshProc, sid string) {
	t.Helper()
	meshtest.Eventually(t, 5*time.Second, func() bool { return sidLogged(a, sid) && sidLogged(b, sid) },
		"sid %s is not in both meshes' logs", sid)
}

func TestChainListsResourcesThroughA2A(t *testing.T) {
	t.Parallel()
	a, b := chain(t)
	subs := list(a.do(http.StatusOK, "GET", "/tools", nil), "sub_agents")
	if len(subs) != 1 || str(subs[0], "name") != "resource-agent" || str(subs[0], "url") != "http://"+b.httpAddr {
		t.Errorf("A's /tools sub_agents = %v, want resource-agent at http://%s", subs, b.httpAddr)
	}
	created := b.send(b.newConversation(), "add resource seen-by-a with value 3")
	b.do(http.StatusOK, "POST", "/approvals/"+str(created, "result", "approval", "uuid"), map[string]any{"approved": true})

	_, out := a.firstTurn("list all resources")
	c := obj(out, "conversation")
	calls := toolCalls(c)
	if len(calls) != 1 || str(calls[0], "name") != "a2a_resource-agent" {
		t.Fatalf("A's tool calls = %v, want one delegation to resource-agent", calls)
	}
	results := messagesOf(c, "tool")
	if len(results) != 1 || !strings.Contains(str(results[0], "content"), "seen-by-a") {
		t.Errorf("A's tool result = %v, want B's resources", results)
	}
	sid := str(c, "session_id")
	waitSIDLogged(t, a, b, sid)
}

func TestProxyApprovalThroughTheChain(t *testing.T) {
	t.Parallel()
	a, b := chain(t)
	conv := a.newConversation()
	out := a.send(conv, "add resource chain-test with value 77")
	if str(out, "conversation", "status") != "waiting_approval" {
		t.Fatalf("A: status %s, want waiting_approval (%v)", str(out, "conversation", "status"), obj(out, "result"))
	}
	ap := obj(out, "result", "approval")
	if str(ap, "remote_agent_name") != "resource-agent" || str(ap, "remote_task_id") == "" {
		t.Fatalf("A's approval = %v, want a proxy approval for resource-agent with the remote task id", ap)
	}
	// B waits too, in the task A holds.
	task := b.do(http.StatusOK, "GET", "/conversations/"+str(ap, "remote_task_id"), nil)
	if str(task, "conversation", "status") != "waiting_approval" {
		t.Fatalf("B's task %s: status %s, want waiting_approval", str(ap, "remote_task_id"), str(task, "conversation", "status"))
	}
	if n := b.resourceRows("chain-test"); n != 0 {
		t.Fatalf("rows on B before the approval = %d", n)
	}

	done := a.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
	if str(done, "conversation", "status") != "active" {
		t.Errorf("A after the approval: %s, want active", str(done, "conversation", "status"))
	}
	if resp := str(done, "result", "response"); !strings.Contains(resp, "chain-test") {
		t.Errorf("A's answer %q does not show the created resource", resp)
	}
	if n := b.resourceRows("chain-test"); n != 1 {
		t.Errorf("rows on B = %d, want exactly 1", n)
	}
	task = b.do(http.StatusOK, "GET", "/conversations/"+str(ap, "remote_task_id"), nil)
	if str(task, "conversation", "status") != "active" {
		t.Errorf("B's task after the approval: %s, want active", str(task, "conversation", "status"))
	}
	sid := str(out, "conversation", "session_id")
	waitSIDLogged(t, a, b, sid)
}

// TestChainThroughAPipeline: Agent A is a sequential pipeline (analyzer,
// then a delegator with Agent B as its sub-agent). A list runs through both
// steps to B; an add waits for B's approval as a proxy approval at A's
// delegator, with the pipeline paused there, and approving it at A runs
// the add on B once and finishes A's pipeline.
func TestChainThroughAPipeline(t *testing.T) {
	t.Parallel()
	a, b := chainPipeline(t)
	created := b.send(b.newConversation(), "add resource seen-by-pipeline with value 3")
	b.do(http.StatusOK, "POST", "/approvals/"+str(created, "result", "approval", "uuid"), map[string]any{"approved": true})

	_, out := a.firstTurn("list all resources")
	c := obj(out, "conversation")
	if finalText(c, "analyzer") == "" || str(c, "state", "analysis") == "" {
		t.Errorf("A's analyzer wrote no analysis: state %v", obj(c, "state"))
	}
	if calls := callsOf(c, "delegator"); !slices.Equal(calls, []string{"a2a_resource-agent"}) {
		t.Fatalf("A's delegator called %v, want one delegation to resource-agent", calls)
	}
	if resp := str(out, "result", "response"); !strings.Contains(resp, "seen-by-pipeline") {
		t.Errorf("A's answer %q does not show B's resources", resp)
	}

	conv := a.newConversation()
	out = a.send(conv, "add resource pipeline-chain with value 78")
	if str(out, "conversation", "status") != "waiting_approval" {
		t.Fatalf("A: status %s, want waiting_approval (%v)", str(out, "conversation", "status"), obj(out, "result"))
	}
	ap := obj(out, "result", "approval")
	if str(ap, "remote_agent_name") != "resource-agent" || str(ap, "remote_task_id") == "" {
		t.Fatalf("A's approval = %v, want a proxy approval for resource-agent with the remote task id", ap)
	}
	ps := obj(out, "conversation", "pipeline_state")
	if path := list(ps, "paused_node_path"); len(path) != 1 || path[0] != 1.0 || str(ps, "session_state", "analysis") == "" {
		t.Errorf("A's pipeline_state = %v, want paused at the delegator ([1]) with the analysis", ps)
	}
	if n := b.resourceRows("pipeline-chain"); n != 0 {
		t.Fatalf("rows on B before the approval = %d", n)
	}
	done := a.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
	c = obj(done, "conversation")
	if str(c, "status") != "active" || c["pipeline_state"] != nil {
		t.Errorf("A after the approval: status %s, pipeline_state %v, want active and none", str(c, "status"), c["pipeline_state"])
	}
	if resp := str(done, "result", "response"); !strings.Contains(resp, "pipeline-chain") {
		t.Errorf("A's answer %q does not show the created resource", resp)
	}
	if n := len(byNode(c, "analyzer")); n != 1 {
		t.Errorf("A's analyzer wrote %d messages, want 1 (the resume carries on at the delegator)", n)
	}
	if n := b.resourceRows("pipeline-chain"); n != 1 {
		t.Errorf("rows on B = %d, want exactly 1", n)
	}
	task := b.do(http.StatusOK, "GET", "/conversations/"+str(ap, "remote_task_id"), nil)
	if str(task, "conversation", "status") != "active" {
		t.Errorf("B's task after the approval: %s, want active", str(task, "conversation", "status"))
	}
	waitSIDLogged(t, a, b, str(c, "session_id"))

	// Rejected at A, the decision reaches B's task and A's pipeline is
	// cancelled: nothing is created on B.
	out = a.send(conv, "add resource pipeline-rejected with value 79")
	ap = obj(out, "result", "approval")
	if str(ap, "remote_task_id") == "" {
		t.Fatalf("A's second approval = %v, want a proxy approval", ap)
	}
	done = a.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": false})
	if str(done, "conversation", "status") != "active" || str(done, "result", "outcome") != "cancelled" {
		t.Errorf("A after the rejection: status %s, result %v, want active and cancelled", str(done, "conversation", "status"), obj(done, "result"))
	}
	if n := b.resourceRows("pipeline-rejected"); n != 0 {
		t.Errorf("rows on B after the rejection = %d, want 0", n)
	}
	task = b.do(http.StatusOK, "GET", "/conversations/"+str(ap, "remote_task_id"), nil)
	if str(task, "conversation", "status") != "active" {
		t.Errorf("B's task after the rejection: %s, want active", str(task, "conversation", "status"))
	}
}
