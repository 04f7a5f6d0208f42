package agent

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// calls is a model that calls each of calls once, then answers "done".
func calls(list ...llm.ToolCall) script {
	return func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if len(toolResults(req)) > 0 {
			return &llm.Response{Text: "done"}, nil
		}
		return &llm.Response{ToolCalls: list}, nil
	}
}

// putTool adds a catalog entry and waits until the agent offers n tools.
func (f *fixture) putTool(e mesh.ToolEntry, n int) {
	f.t.Helper()
	data, _ := json.Marshal(e)
	key, _ := mesh.ToolKey(e.Server, e.Name)
	if _, err := f.m.Tools.Put(f.t.Context(), key, data); err != nil {
		f.t.Fatal(err)
	}
	meshtest.Eventually(f.t, 5*time.Second, func() bool { return len(f.agent.tools.Load().llm) == n }, "tool %s not loaded", e.Name)
}

// toolCallIDs lists the ids of the conversation's tool calls.
func toolCallIDs(c *mesh.Conversation) []string {
	var ids []string
	for _, m := range c.Messages {
		for _, tc := range m.ToolCalls {
			ids = append(ids, tc.ID)
		}
	}
	return ids
}

// TestAgentAsksTheApproverAndSendsItsDecision: the agent writes no
// approval; it asks the approver, and sends the decision's statement with
// the approved call; a read-only call goes without one.
func TestAgentAsksTheApproverAndSendsItsDecision(t *testing.T) {
	f := newFixture(t, calls(call("safe", `{"a":1}`), call("danger", `{"b":2}`)), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	if c.PendingApproval == nil {
		t.Fatalf("status %s: want waiting for approval", c.Status)
	}
	asked := f.askedFor()
	if len(asked) != 1 {
		t.Fatalf("asked the approver %d times, want once: %+v", len(asked), asked)
	}
	if asked[0].Policy != "" {
		t.Fatalf("asked the approver for policy %q, want a person (no policy)", asked[0].Policy)
	}
	if asked[0].Server != "srv" {
		t.Fatalf("asked the approver about server %q, want srv", asked[0].Server)
	}
	if asked[0].Tool != "danger" {
		t.Fatalf("asked the approver about tool %q, want danger", asked[0].Tool)
	}
	if got := asked[0].ToolArgs["b"]; got != 2.0 {
		t.Fatalf("asked the approver with argument b = %v, want 2", got)
	}
	ap := c.PendingApproval
	if ap.ArgsHash == "" {
		t.Error("the conversation's pending approval has no args_hash")
	}
	ids := toolCallIDs(c)
	if st := f.approvalOf(ids[0]); st != nil {
		t.Errorf("the read-only call was sent with an approval: %+v", st)
	}
	f.decide(conv, ap.UUID, true)
	st := f.approvalOf(ap.UUID)
	if n := f.callCount(ap.UUID); n != 1 {
		t.Errorf("approved call ran %d times, want once", n)
	}
	if st == nil {
		t.Fatal("approved call was sent without the decision's statement")
	}
	if st.CallID != ap.UUID {
		t.Errorf("statement call id = %q, want %q", st.CallID, ap.UUID)
	}
	if st.Decision != mesh.ApprovalApproved {
		t.Errorf("statement decision = %q, want %q", st.Decision, mesh.ApprovalApproved)
	}
	if st.Sig == "" {
		t.Error("statement is not signed")
	}
}

func TestAllowDestructiveStepAsksForAPolicyDecision(t *testing.T) {
	f := newTreeFixture(t, calls(call("danger", `{"b":2}`)), treeYAML(`  name: pipeline
  type: sequential
  agents:
    - {name: bold, type: llm, allow_destructive: true}
`), nil)
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	if c.Status == mesh.StatusWaitingApproval {
		t.Fatal("a step with allow_destructive paused on a person")
	}
	asked := f.askedFor()
	if len(asked) != 1 {
		t.Fatalf("asked the approver %d times, want once: %+v", len(asked), asked)
	}
	if asked[0].Policy != mesh.PolicyAllowDestructive {
		t.Fatalf("asked the approver for policy %q, want %q", asked[0].Policy, mesh.PolicyAllowDestructive)
	}
	if !slices.Equal(asked[0].StepPath, []int{0}) {
		t.Fatalf("asked the approver for step %v, want [0]", asked[0].StepPath)
	}
	if asked[0].CallID == "" {
		t.Fatalf("asked the approver without a call id: %+v", asked[0])
	}
	id := asked[0].CallID
	st := f.approvalOf(id)
	if n := f.callCount(id); n != 1 {
		t.Errorf("call %s ran %d times, want once", id, n)
	}
	if st == nil {
		t.Fatalf("call %s was sent without the policy's statement", id)
	}
	if want := mesh.PolicyBy(mesh.PolicyAllowDestructive); st.By != want {
		t.Errorf("statement by = %q, want %q", st.By, want)
	}
	if st.CallID != id {
		t.Errorf("statement call id = %q, want %q", st.CallID, id)
	}
}

func TestNonDestructiveToolAsksForAPolicyDecision(t *testing.T) {
	f := newFixture(t, calls(call("create", `{"n":1}`)), nil)
	f.putTool(mesh.ToolEntry{Server: "srv", Name: "create", InputSchema: json.RawMessage(`{"type":"object"}`)}, 3)
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	if c.Status == mesh.StatusWaitingApproval {
		t.Fatal("a tool that is not destructive paused on a person")
	}
	asked := f.askedFor()
	if len(asked) != 1 || asked[0].Policy != mesh.PolicyNonDestructive || asked[0].Tool != "create" {
		t.Fatalf("asked the approver for %+v", asked)
	}
	if st := f.approvalOf(asked[0].CallID); st == nil || st.By != mesh.PolicyBy(mesh.PolicyNonDestructive) {
		t.Errorf("the call was sent with %+v", st)
	}
}

// TestToolHostReadingPrevails: the catalog says read-only, the tool host
// does not (it refuses the call without an approval): the agent asks for a
// policy decision and calls again.
func TestToolHostReadingPrevails(t *testing.T) {
	f := newFixture(t, calls(call("sneaky", `{}`)), nil)
	sub, err := f.m.NC.Subscribe("mesh.tool.other.sneaky", func(msg *nats.Msg) {
		var req mesh.ToolRequest
		_ = json.Unmarshal(msg.Data, &req)
		if req.Approval == nil {
			_ = msg.RespondMsg(&nats.Msg{Header: mesh.ErrorHeaders(mesh.ErrApprovalRequired)})
			return
		}
		res, _ := json.Marshal(mesh.ToolResult{Text: "ran with " + req.Approval.By})
		_ = msg.Respond(res)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	f.putTool(mesh.ToolEntry{Server: "other", Name: "sneaky", InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnlyHint: true}, 3)
	conv := f.conversation()
	_, c := f.turn(conv, "go")
	var result string
	for _, m := range c.Messages {
		if m.Role == mesh.RoleTool {
			result = m.Content
		}
	}
	if result != "ran with policy:non_destructive" {
		t.Errorf("tool result %q, want the call made again with a policy decision", result)
	}
}

// A run that asks for an approval decided already carries the decision
// out rather than waiting: a run of the same id before it asked, was cut
// off before it saved its pause, and the decision's resume found nothing
// waiting. (Seen in TestChaos, by another way in: an approved add asking
// again for its approval, and its conversation waiting for ever.)
func TestApprovalDecidedBeforeTheRunAskedIsCarriedOut(t *testing.T) {
	f := newFixture(t, calls(call("danger", `{"b":2}`)), nil)
	conv := f.conversation()
	id := mesh.NewID()
	// The approval the cut-off run asked for, decided since: its id is the
	// one a run of this turn derives for its first call.
	callID := id + "-c1-0"
	ap := &mesh.Approval{UUID: uuid.NewSHA1(approvalNamespace, []byte(id+"/"+callID)).String(), ConversationID: conv, Agent: "tester", RunID: id,
		ToolCallID: callID, ToolName: "danger", Server: "srv", Tool: "danger", ToolArgs: map[string]any{"b": 2.0}, Status: mesh.ApprovalPending}
	ap.CallID = ap.UUID
	ap.ArgsHash, _ = mesh.ArgsHash(ap.ToolArgs)
	if err := f.aps.Create(t.Context(), ap); err != nil {
		t.Fatal(err)
	}
	decide(t, f.aps, ap.UUID, true)

	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "go"})
	c := f.waitApplied(conv, id)
	if c.Status != mesh.StatusActive || c.PendingApproval != nil {
		t.Fatalf("status %s, pending %+v; want the turn done, not waiting", c.Status, c.PendingApproval)
	}
	f.mu.Lock()
	n, signed := f.calls[ap.UUID], f.approvals[ap.UUID]
	f.mu.Unlock()
	if n != 1 || signed == nil || signed.Decision != mesh.ApprovalApproved {
		t.Errorf("the approved call ran %d times with statement %+v; want once, with the decision", n, signed)
	}
	if c.LastAssistantText() != "done" {
		t.Errorf("last answer %q; want the model's answer after the call", c.LastAssistantText())
	}
}
