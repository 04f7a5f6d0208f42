package a2a

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// A message no agent has taken up yet is a submitted task: a non-blocking
// send answers so after waiting for an agent, tasks/get says so, another
// message is refused, a resubscription follows it, and tasks/cancel
// cancels it before it runs.
func TestQueuedTaskIsSubmitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	// A conversation of an agent no process serves: its turns stay queued.
	conv := &mesh.Conversation{ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Agent: "nobody", Status: mesh.StatusActive}
	if err := f.core.Sessions.Create(t.Context(), conv); err != nil {
		t.Fatal(err)
	}
	var task wire.Task
	f.result("", send03(1, wire.MethodSend, "list all resources", conv.ID, "configuration", `{"blocking":false}`), &task)
	if task.Status.State != wire.StateSubmitted {
		t.Fatalf("non-blocking send of a queued message = %s, want submitted", task.Status.State)
	}
	var got wire.Task
	f.result("", rpc(2, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, conv.ID)), &got)
	if got.Status.State != wire.StateSubmitted {
		t.Errorf("tasks/get of a queued message = %s, want submitted", got.Status.State)
	}
	var t10 wire.TaskV1
	f.result("1.0", rpc(3, wire.MethodGetTask, fmt.Sprintf(`{"id":%q}`, conv.ID)), &t10)
	if t10.Status.State != "TASK_STATE_SUBMITTED" {
		t.Errorf("1.0 GetTask of a queued message = %s", t10.Status.State)
	}
	a := f.call("", send03(4, wire.MethodSend, "another", conv.ID))
	if a.Error == nil || a.Error.Code != wire.CodeUnsupportedOperation || !strings.Contains(a.Error.Message, "queued") {
		t.Errorf("a second message while queued = %s, want -32004 naming the queued message", a.Raw)
	}

	resp := f.do(t.Context(), "", rpc(5, wire.MethodResubscribe, fmt.Sprintf(`{"id":%q}`, conv.ID)))
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	next := func() json.RawMessage {
		t.Helper()
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return responses(t, []string{d}, "5")[0]
			}
		}
		t.Fatal("the resubscription ended early")
		return nil
	}
	var first wire.Task
	if raw := next(); json.Unmarshal(raw, &first) != nil || first.Status.State != wire.StateSubmitted {
		t.Fatalf("resubscription's first event = %s, want the submitted task", raw)
	}
	var canceled wire.Task
	f.result("", rpc(6, wire.MethodCancel, fmt.Sprintf(`{"id":%q}`, conv.ID)), &canceled)
	if canceled.Status.State != wire.StateCanceled {
		t.Errorf("tasks/cancel of a queued message = %s, want canceled", canceled.Status.State)
	}
	var end wire.StatusUpdate
	if raw := next(); json.Unmarshal(raw, &end) != nil || end.Status.State != wire.StateCanceled || !end.Final {
		t.Errorf("resubscription ended with %s, want a final canceled status", raw)
	}
	c, err := f.core.Sessions.Get(t.Context(), conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Active, the turn done and cancelled.
	if c.Queued != nil {
		t.Errorf("after the cancel: still queued: %+v", c.Queued)
	}
	if c.Status != mesh.StatusActive {
		t.Errorf("after the cancel: status %s, want %s", c.Status, mesh.StatusActive)
	}
	if c.LastRun == nil {
		t.Error("after the cancel: no last run, want the cancelled turn's")
	} else if c.LastRun.Outcome != mesh.OutcomeCancelled {
		t.Errorf("after the cancel: last run outcome %s, want %s", c.LastRun.Outcome, mesh.OutcomeCancelled)
	}
	if len(c.RecentTurns) != 1 {
		t.Errorf("after the cancel: recent turns %v, want the cancelled turn alone", c.RecentTurns)
	}
}
