package core

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// clock is a test's clock: it moves only when told.
type clock struct{ offset atomic.Int64 }

func (k *clock) now() time.Time          { return time.Now().Add(time.Duration(k.offset.Load())) }
func (k *clock) advance(d time.Duration) { k.offset.Add(int64(d)) }
func (k *clock) set(c *Core) *clock      { c.now = k.now; return k }

// queueCore is a core whose queued turns are checked after checkAfter, on
// the clock returned; no agent runs, so every turn stays queued.
func queueCore(t *testing.T, m *meshtest.Mesh, checkAfter time.Duration) (*Core, *clock) {
	t.Helper()
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "a", QueueCheckAfter: checkAfter, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	k := new(clock).set(c)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c, k
}

// workItems lists the work items stored for conversation conv of agent "a".
func workItems(t *testing.T, m *meshtest.Mesh, conv string) []mesh.WorkItem {
	t.Helper()
	subj, err := m.NS.Work(mesh.RoleAgent, "a", conv)
	if err != nil {
		t.Fatal(err)
	}
	var out []mesh.WorkItem
	var seq uint64
	for {
		msg, err := m.Work.GetMsg(t.Context(), seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var item mesh.WorkItem
		if err := json.Unmarshal(msg.Data, &item); err != nil {
			t.Fatal(err)
		}
		out = append(out, item)
		seq = msg.Sequence + 1
	}
}

func eventsNamed(evs []mesh.Event, typ mesh.EventType, name string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ && (name == "" || ev.Name == name) {
			n++
		}
	}
	return n
}

// A message is recorded as queued before its work item is published, on
// the conversation's own work subject; the conversation takes no other
// message while it waits.
func TestSendQueuesTheTurnVisibly(t *testing.T) {
	m := meshtest.New(t)
	c, _ := queueCore(t, m, time.Hour)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Send(t.Context(), conv.ID, "hello", Caller{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	got, err := c.Sessions.Get(t.Context(), conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != mesh.StatusQueued {
		t.Fatalf("after Send: status %s, want %s", got.Status, mesh.StatusQueued)
	}
	if got.Queued == nil {
		t.Fatalf("after Send: nothing queued, want turn %s", run.ID)
	}
	if got.Queued.ID != run.ID {
		t.Fatalf("after Send: queued turn %s, want %s", got.Queued.ID, run.ID)
	}
	if got.Queued.Message != "hello" {
		t.Fatalf("after Send: queued message %q, want hello", got.Queued.Message)
	}
	if got.Queued.At.IsZero() {
		t.Fatal("after Send: the queued turn has no time")
	}
	if s := got.Summary(); s.Status != mesh.StatusQueued || s.QueuedTurn == nil || s.QueuedTurn.ID != run.ID {
		t.Errorf("summary = %+v, want status queued and the queued turn", s)
	}
	items := workItems(t, m, conv.ID)
	if len(items) != 1 || items[0].TurnID != run.ID || items[0].Kind != mesh.WorkTurn {
		t.Fatalf("work items on the conversation's subject = %+v, want the turn", items)
	}
	if n := eventsNamed(m.Events(t, conv.ID), mesh.EventCustom, mesh.CustomRunQueued); n != 1 {
		t.Errorf("%d run_queued events, want 1", n)
	}
	if u := run.EventsURL(); !strings.HasPrefix(u, "/conversations/"+conv.ID+"/events?after=") {
		t.Errorf("events URL = %q, want the conversation's events after the run's run_queued", u)
	}

	_, err = c.Send(t.Context(), conv.ID, "second", Caller{})
	if !errors.Is(err, mesh.ErrTurnInProgress) || !strings.Contains(err.Error(), run.ID) {
		t.Errorf("second Send while queued: err = %v, want turn_in_progress naming %s", err, run.ID)
	}
	// The same message again with its idempotency key waits for the
	// queued turn rather than queueing another.
	once, err := c.SendOnce(t.Context(), conv.ID, "k1", "keyed", Caller{})
	if err == nil {
		once.Close()
		t.Error("a keyed message was taken while another turn was queued")
	}
}

// An idempotent resend of a queued message waits for it.
func TestSendOnceWaitsForItsQueuedTurn(t *testing.T) {
	m := meshtest.New(t)
	c, _ := queueCore(t, m, time.Hour)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.SendOnce(t.Context(), conv.ID, "k1", "hello", Caller{})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	again, err := c.SendOnce(t.Context(), conv.ID, "k1", "hello", Caller{})
	if err != nil {
		t.Fatalf("resend of a queued message: %v", err)
	}
	defer again.Close()
	if again.ID != first.ID {
		t.Errorf("resend run = %s, want the queued %s", again.ID, first.ID)
	}
	if items := workItems(t, m, conv.ID); len(items) != 1 {
		t.Errorf("%d work items after a resend, want 1", len(items))
	}
}

// A queued turn whose work item left the stream unclaimed is published
// again when a client reads the conversation, up to maxRepublish times,
// then failed: its run ends with RUN_ERROR TURN_LOST and the conversation
// takes messages again.
func TestLostQueuedTurnIsPublishedAgainThenFailed(t *testing.T) {
	m := meshtest.New(t)
	const checkAfter = 15 * time.Second
	c, clk := queueCore(t, m, checkAfter)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Send(t.Context(), conv.ID, "hello", Caller{Authorization: "Bearer t1"})
	if err != nil {
		t.Fatal(err)
	}
	// Young, or still in the stream: nothing to repair.
	if got, err := c.Conversation(t.Context(), conv.ID, Caller{}); err != nil || got.Queued == nil || got.Queued.Republished != 0 {
		t.Fatalf("young queued turn: %+v, %v", got.Queued, err)
	}
	clk.advance(checkAfter)
	if got, _ := c.Conversation(t.Context(), conv.ID, Caller{}); got.Queued == nil || got.Queued.Republished != 0 {
		t.Fatalf("queued turn still in the stream was touched: %+v", got.Queued)
	}
	for i := 1; i <= maxRepublish; i++ {
		if err := m.Work.Purge(t.Context()); err != nil {
			t.Fatal(err)
		}
		clk.advance(checkAfter)
		got, err := c.Conversation(t.Context(), conv.ID, Caller{Authorization: "Bearer t2"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Queued == nil || got.Queued.Republished != i || got.Status != mesh.StatusQueued {
			t.Fatalf("after purge %d: status %s, queued %+v; want queued, republished %d", i, got.Status, got.Queued, i)
		}
		items := workItems(t, m, conv.ID)
		if len(items) != 1 || items[0].TurnID != run.ID || items[0].Message != "hello" {
			t.Fatalf("after purge %d: work items %+v, want the turn again", i, items)
		}
	}
	if err := m.Work.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.advance(checkAfter)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := run.Wait(ctx) // its poll finds the turn lost and fails it
	if err != nil {
		t.Fatal(err)
	}
	if !out.Finished {
		t.Fatal("outcome not finished, want the lost turn failed")
	}
	if out.Event == nil {
		t.Fatalf("outcome without an event, want RUN_ERROR %s", mesh.CodeTurnLost)
	}
	if out.Event.Type != mesh.EventRunError || out.Event.Code != mesh.CodeTurnLost {
		t.Fatalf("outcome event %s %s, want %s %s", out.Event.Type, out.Event.Code, mesh.EventRunError, mesh.CodeTurnLost)
	}
	got := out.Conversation
	checkTurnSettled(t, "failed turn", got, run.ID)
	if got.LastRun.ErrorCode != mesh.CodeTurnLost {
		t.Fatalf("failed turn: last run error code %q, want %q", got.LastRun.ErrorCode, mesh.CodeTurnLost)
	}
	if res := ResultOf(got, run.ID, out.Event); res.Outcome != mesh.OutcomeError || res.ErrorCode != mesh.CodeTurnLost {
		t.Errorf("result = %+v, want error %s", res, mesh.CodeTurnLost)
	}
	next, err := c.Send(t.Context(), conv.ID, "again", Caller{})
	if err != nil {
		t.Fatalf("a message after the lost turn: %v", err)
	}
	next.Close()
}

// A bridge that died between the record and the publish leaves a queued
// turn with no work item: the sender's resend (same idempotency key) finds
// it, and its wait publishes the item.
func TestQueuedTurnWithoutItemIsPublishedForItsResend(t *testing.T) {
	m := meshtest.New(t)
	const checkAfter = 15 * time.Second
	c, clk := queueCore(t, m, checkAfter)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	// The record alone, as a bridge killed before its publish leaves it.
	turnID := keyedTurn(conv.ID, "k1")
	if _, err := c.Sessions.Update(t.Context(), conv.ID, func(cv *mesh.Conversation) error {
		cv.Queued = &mesh.QueuedTurn{ID: turnID, Message: "hello", At: time.Now().UTC()}
		cv.Status = mesh.StatusQueued
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	clk.advance(checkAfter)
	run, err := c.SendOnce(t.Context(), conv.ID, "k1", "hello", Caller{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if out, err := run.Wait(ctx); err != nil || out.Finished {
		t.Fatalf("wait = %+v, %v; want a turn still queued", out, err)
	}
	items := workItems(t, m, conv.ID)
	if len(items) != 1 || items[0].TurnID != turnID {
		t.Fatalf("work items = %+v, want the queued turn published again", items)
	}
}

// When the work item cannot be published, the record is taken back, the
// run ends, and the client is told the mesh is unavailable.
func TestFailedPublishTakesTheQueuedTurnBack(t *testing.T) {
	m := meshtest.New(t)
	c, _ := queueCore(t, m, time.Hour)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.JS.DeleteStream(t.Context(), m.NS.Stream(mesh.StreamWork)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(t.Context(), conv.ID, "hello", Caller{})
	if !errors.Is(err, mesh.ErrUnavailable) {
		t.Fatalf("Send without a work stream: err = %v, want unavailable", err)
	}
	got, err := c.Sessions.Get(t.Context(), conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Queued != nil || got.Status != mesh.StatusActive {
		t.Errorf("after a failed publish: status %s, queued %+v; want active, nothing queued", got.Status, got.Queued)
	}
	evs := m.Events(t, conv.ID)
	if n := eventsNamed(evs, mesh.EventRunError, ""); n != 1 {
		t.Errorf("%d RUN_ERROR events after a failed publish, want 1 (the run_queued one is %d)", n, eventsNamed(evs, mesh.EventCustom, mesh.CustomRunQueued))
	}
}

// A queued turn is cancelled by the bridge itself: recorded as done (an
// agent drops its item) and cancelled, its run finished.
func TestCancelEndsAQueuedTurn(t *testing.T) {
	m := meshtest.New(t)
	c, _ := queueCore(t, m, time.Hour)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Send(t.Context(), conv.ID, "hello", Caller{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(t.Context(), conv.ID, "other-run"); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Sessions.Get(t.Context(), conv.ID); got.Queued == nil {
		t.Fatal("a cancel naming another run cancelled the queued turn")
	}
	if err := c.Cancel(t.Context(), conv.ID, run.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	out, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := out.Conversation
	if !out.Finished {
		t.Fatal("cancelled queued turn: not finished")
	}
	checkTurnSettled(t, "cancelled queued turn", got, run.ID)
	if got.LastRun.Outcome != mesh.OutcomeCancelled {
		t.Fatalf("cancelled queued turn: last run outcome %s, want %s", got.LastRun.Outcome, mesh.OutcomeCancelled)
	}
	// The end event is RUN_FINISHED, cancelled.
	switch {
	case out.Event == nil:
		t.Error("no end event")
	case out.Event.Type != mesh.EventRunFinished:
		t.Errorf("end event %s, want %s", out.Event.Type, mesh.EventRunFinished)
	case out.Event.Outcome == nil:
		t.Errorf("end event %+v without an outcome", out.Event)
	case out.Event.Outcome.Type != mesh.OutcomeCancelled:
		t.Errorf("end event outcome %s, want %s", out.Event.Outcome.Type, mesh.OutcomeCancelled)
	}
}

// A queued turn whose writer is gone is checked at once, not after
// QueueCheckAfter: an earlier life of this bridge, or another bridge that
// mesh_nodes shows restarted since or no longer lists. A live writer's turn
// waits.
func TestQueuedTurnOfAGoneWriterIsCheckedAtOnce(t *testing.T) {
	m := meshtest.New(t)
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "b1"}, Resources: m.Resources, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	live := mesh.NodeInfo{Node: "b2", Role: mesh.RoleBridge, State: mesh.NodeReady, StartedAt: time.Now().Add(-time.Hour)}
	data, _ := json.Marshal(live)
	if _, err := m.Nodes.Put(t.Context(), live.Key(), data); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		by       string
		at       time.Time
		repaired bool
	}{
		{"this bridge's earlier life", "b1", time.Now().Add(-time.Minute), true},
		{"this bridge, now", "b1", time.Now(), false},
		{"a bridge mesh_nodes does not list", "b9", time.Now(), true},
		{"a live bridge", "b2", time.Now(), false},
		{"a bridge restarted since", "b2", time.Now().Add(-2 * time.Hour), true},
		{"no writer named", "", time.Now(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
			if err != nil {
				t.Fatal(err)
			}
			// The record alone: its writer never published the item.
			if _, err := c.Sessions.Update(t.Context(), conv.ID, func(cv *mesh.Conversation) error {
				cv.Queued = &mesh.QueuedTurn{ID: mesh.NewID(), Message: "hello", At: tt.at, By: tt.by}
				cv.Status = mesh.StatusQueued
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			got, err := c.Conversation(t.Context(), conv.ID, Caller{})
			if err != nil {
				t.Fatal(err)
			}
			if repaired := got.Queued.Republished == 1; repaired != tt.repaired {
				t.Errorf("published again: %v, want %v (queued %+v)", repaired, tt.repaired, got.Queued)
			}
			if n := len(workItems(t, m, conv.ID)); tt.repaired && n != 1 || !tt.repaired && n != 0 {
				t.Errorf("%d work items, want the turn published again: %v", n, tt.repaired)
			}
		})
	}
}

// A conversation that still shows an approval already decided waits for
// the decision's resume, not for a human: a message is refused as
// turn_in_progress, not waiting_approval.
func TestMessageWhileADecidedApprovalResumesIsATurnInProgress(t *testing.T) {
	m := meshtest.New(t)
	c, _ := queueCore(t, m, time.Hour)
	for _, status := range []mesh.ApprovalStatus{mesh.ApprovalPending, mesh.ApprovalApproved} {
		t.Run(string(status), func(t *testing.T) {
			conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
			if err != nil {
				t.Fatal(err)
			}
			ap := mesh.Approval{UUID: mesh.NewID(), ConversationID: conv.ID, Agent: "a", RunID: "r1", ToolName: "resources_add", Status: status}
			data, _ := json.Marshal(ap)
			if _, err := m.Approvals.Put(t.Context(), ap.UUID, data); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Sessions.Update(t.Context(), conv.ID, func(cv *mesh.Conversation) error {
				cv.Status = mesh.StatusWaitingApproval
				cv.PendingApproval = &mesh.PendingApproval{UUID: ap.UUID, ConversationID: conv.ID, ToolName: ap.ToolName}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			_, err = c.Send(t.Context(), conv.ID, "next", Caller{})
			var pe *PendingError
			switch {
			case status == mesh.ApprovalPending && (!errors.As(err, &pe) || pe.Approval.UUID != ap.UUID):
				t.Errorf("pending approval: err = %v, want waiting_approval with the approval", err)
			case status != mesh.ApprovalPending && (!errors.Is(err, mesh.ErrTurnInProgress) || errors.As(err, &pe)):
				t.Errorf("decided approval: err = %v, want turn_in_progress", err)
			}
		})
	}
}

// A bridge that cannot follow the message log (here the log is gone; on a
// server set up by an earlier version, its identity may not) starts all
// the same: its answers read the records it would have kept.
func TestStartWithoutFollowingTheLog(t *testing.T) {
	m := meshtest.New(t)
	if err := m.JS.DeleteStream(t.Context(), m.NS.Stream(mesh.StreamMessages)); err != nil {
		t.Fatal(err)
	}
	c, _ := queueCore(t, m, time.Hour)
	if c.stopMessages != nil {
		t.Fatal("the log was followed though it is gone")
	}
}

// checkTurnSettled checks that turn runID of conv is off the queue and
// recorded, the conversation active again, with a last run to read.
func checkTurnSettled(t *testing.T, what string, conv *mesh.Conversation, runID string) {
	t.Helper()
	if conv.Queued != nil {
		t.Fatalf("%s: still queued: %+v", what, conv.Queued)
	}
	if conv.Status != mesh.StatusActive {
		t.Fatalf("%s: status %s, want %s", what, conv.Status, mesh.StatusActive)
	}
	if !conv.HasTurn(runID) {
		t.Fatalf("%s: turn %s not recorded", what, runID)
	}
	if conv.LastRun == nil {
		t.Fatalf("%s: no last run", what)
	}
}
