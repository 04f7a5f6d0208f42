package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/a2a/a2atest"
)

// These tests run the real `mesh up` with an a2a: entry pointing at a
// sub-agent built with the official Go SDK's server (a2a-go 0.3), started by
// the test: the mesh is the A2A client.

// a2aClientConfig is an agent whose only tool is the sub-agent at url; the
// offline planner delegates every request to it.
func a2aClientConfig(url string) string {
	return fmt.Sprintf(`name: delegator
description: Delegates resource work to Agent B.
prompt: You delegate resource management to resource-agent.
llm:
  model: offline
a2a:
  - name: resource-agent
    url: %s
    description: "Agent B: manages resources on the resource server"
`, url)
}

// agentLogLines returns the agent role's JSON log lines about a conversation.
func (m *meshProc) agentLogLines(conv string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(m.logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line["role"] == "agent" && line["session"] == conv {
			out = append(out, line)
		}
	}
	return out
}

// TestA2ADelegationForwardsTokenAndSession: the mesh delegates to the
// sub-agent, forwards the caller's bearer token and none without one, sends
// the conversation's session id as X-Session-ID and logs it as sid on every
// agent line of the turn.
func TestA2ADelegationForwardsTokenAndSession(t *testing.T) {
	t.Parallel()
	sub := a2atest.Start(t, a2atest.Options{Name: "resource-agent", Description: "Manages resources"})
	m := startMesh(t, meshOpts{config: a2aClientConfig(sub.URL)})

	created := m.do(http.StatusCreated, "POST", "/conversations", nil, "X-Session-ID", "c0ffee01")
	conv, sid := str(created, "conversation", "id"), str(created, "conversation", "session_id")
	if sid != "c0ffee01" {
		t.Fatalf("session_id = %q, want the caller's X-Session-ID", sid)
	}
	out := m.send(conv, "list all resources", "Authorization", "Bearer test-token-123")
	sends := sub.Sends()
	if len(sends) != 1 {
		t.Fatalf("sub-agent received %d message/send, want 1: %+v", len(sends), sends)
	}
	if sends[0].Authorization != "Bearer test-token-123" || sends[0].SessionID != sid || sends[0].Text != "list all resources" {
		t.Errorf("sub-agent received %+v; want the token, session id %s and the request", sends[0], sid)
	}
	c := obj(out, "conversation")
	calls := toolCalls(c)
	if len(calls) != 1 || str(calls[0], "name") != "a2a_resource-agent" {
		t.Fatalf("tool calls = %v, want one a2a_resource-agent", calls)
	}
	results := messagesOf(c, "tool")
	if len(results) != 1 || str(results[0], "content") != "done: list all resources" {
		t.Errorf("tool results = %v, want the sub-agent's answer in the conversation", results)
	}
	if resp := str(out, "result", "response"); !strings.Contains(resp, "done: list all resources") || str(c, "status") != "active" {
		t.Errorf("response %q, status %s", resp, str(c, "status"))
	}

	// Without a token: it still works, and no Authorization is sent.
	conv2, _ := m.firstTurn("list all resources")
	sends = sub.Sends()
	if len(sends) != 2 || sends[1].HasAuth {
		t.Errorf("second send = %+v; want no Authorization header", sends[len(sends)-1])
	}
	got := m.do(http.StatusOK, "GET", "/conversations/"+conv2, nil)
	if sid2 := str(got, "conversation", "session_id"); sends[1].SessionID != sid2 || len(sid2) != 8 {
		t.Errorf("second X-Session-ID = %q, want the conversation's %q", sends[1].SessionID, sid2)
	}

	// Every agent log line of the turn carries the session id.
	lines := m.agentLogLines(conv)
	if len(lines) == 0 {
		t.Fatal("no agent log line about the conversation")
	}
	sawCall := false
	for _, l := range lines {
		if l["sid"] != sid {
			t.Errorf("agent log line without sid %s: %v", sid, l)
		}
		if l["sub_agent"] == "resource-agent" {
			sawCall = true
		}
		if strings.Contains(fmt.Sprint(l), "test-token-123") {
			t.Errorf("log line holds the token: %v", l)
		}
	}
	if !sawCall {
		t.Errorf("no log line of the sub-agent call among %d lines", len(lines))
	}
	if strings.Contains(m.logs(), "test-token-123") {
		t.Error("the token appears in the mesh's logs")
	}
}

// TestA2AProxyApprovalThroughREST: a sub-agent's input-required becomes a
// proxy approval on the mesh; approving it over REST forwards "approved"
// with the task id and the decider's token, and the answer comes back (the
// chain of two meshes, with a Go SDK sub-agent in the second's place).
func TestA2AProxyApprovalThroughREST(t *testing.T) {
	t.Parallel()
	sub := a2atest.Start(t, a2atest.Options{Name: "resource-agent", Approvals: 1, ApprovalData: true})
	m := startMesh(t, meshOpts{config: a2aClientConfig(sub.URL)})
	conv := m.newConversation()
	ap := m.addPending(conv, "add resource chain-test with value 77")
	if str(ap, "remote_agent_name") != "resource-agent" || str(ap, "remote_task_id") == "" {
		t.Fatalf("approval = %v; want a proxy approval with remote_task_id and remote_agent_name", ap)
	}
	taskID := str(ap, "remote_task_id")
	out := m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true}, "Authorization", "Bearer decider-token")
	sends := sub.Sends()
	// The decision forwarded with the task id and the decider's token.
	if len(sends) != 2 {
		t.Fatalf("%d sends, want the request and the forwarded decision: %+v", len(sends), sends)
	}
	if got := sends[1]; got.TaskID != taskID {
		t.Fatalf("decision sent to task %q, want %q", got.TaskID, taskID)
	}
	if got := sends[1]; got.Text != "approved" {
		t.Fatalf("decision sent as %q, want approved", got.Text)
	}
	if got := sends[1]; got.Authorization != "Bearer decider-token" {
		t.Fatalf("decision sent with Authorization %q, want the decider's token", got.Authorization)
	}
	if sub.Completed(taskID) != 1 {
		t.Errorf("remote task completed %d times, want 1", sub.Completed(taskID))
	}
	if status := str(out, "conversation", "status"); status != "active" {
		t.Errorf("status = %s, want active", status)
	}
	if resp := str(out, "result", "response"); !strings.Contains(resp, "done: add resource chain-test with value 77") {
		t.Errorf("response %q does not carry the sub-agent's answer", resp)
	}
}
