package group

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// queue records turn as the chat's queued message, as the bridge does
// before it publishes it.
func (h *harness) queue(id, turn, text string, change func(*mesh.Conversation)) {
	h.t.Helper()
	if _, err := h.store.Update(h.t.Context(), id, func(c *mesh.Conversation) error {
		c.Queued = &mesh.QueuedTurn{ID: turn, Message: text, At: time.Now().UTC()}
		c.Status = mesh.StatusQueued
		if change != nil {
			change(c)
		}
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
}

// The start of a round takes the queued message up in the save that
// starts it.
func TestRoundTakesTheQueuedMessageUp(t *testing.T) {
	h := newHarness(t, trio(2), []*fakeMember{{name: "a"}, {name: "b"}, {name: "c"}})
	id := mesh.NewID()
	if err := h.store.Create(t.Context(), &mesh.Conversation{ID: id, SessionID: mesh.NewTraceID(), Status: mesh.StatusActive, Group: &mesh.GroupRun{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	turn := mesh.NewID()
	h.queue(id, turn, "hello team", nil)
	if err := workloop.Publish(t.Context(), h.m.JS, h.m.NS, mesh.RoleGroup, "team", mesh.WorkItem{Kind: mesh.WorkTurn, Session: id, TurnID: turn, Message: "hello team"}, nil); err != nil {
		t.Fatal(err)
	}
	c := h.waitRound(id, turn)
	if c.Queued != nil || c.Status != mesh.StatusActive {
		t.Fatalf("after the round: status %s, queued %+v; want active, nothing queued", c.Status, c.Queued)
	}
	hist, err := h.m.Sessions.History(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var prev *mesh.Conversation
	for _, e := range hist {
		var rev mesh.Conversation
		if err := json.Unmarshal(e.Value(), &rev); err != nil {
			t.Fatal(err)
		}
		if prev != nil && prev.Queued != nil && rev.Queued == nil && (rev.Turn == nil || rev.Turn.ID != turn || rev.Group.Round == nil) {
			t.Errorf("revision %d took the queued message off without starting its round: turn %+v", e.Revision(), rev.Turn)
		}
		prev = &rev
	}
}

// A queued message the chat refuses (it waits for an approval) leaves the
// queue, and its run ends with the refusal.
func TestRefusedQueuedMessageLeavesTheQueue(t *testing.T) {
	h := newHarness(t, trio(2), []*fakeMember{{name: "a"}, {name: "b"}, {name: "c"}})
	id := mesh.NewID()
	if err := h.store.Create(t.Context(), &mesh.Conversation{ID: id, SessionID: mesh.NewTraceID(), Status: mesh.StatusActive, Group: &mesh.GroupRun{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	turn := mesh.NewID()
	h.queue(id, turn, "hello team", func(c *mesh.Conversation) {
		c.Status = mesh.StatusWaitingApproval // raced an approval
	})
	if err := workloop.Publish(t.Context(), h.m.JS, h.m.NS, mesh.RoleGroup, "team", mesh.WorkItem{Kind: mesh.WorkTurn, Session: id, TurnID: turn, Message: "hello team"}, nil); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, func() bool {
		c, err := h.store.Get(t.Context(), id)
		return err == nil && c.Queued == nil && c.HasTurn(turn)
	}, "the refused message stayed queued")
	var ended bool
	for _, ev := range h.events(id) {
		ended = ended || ev.Type == mesh.EventRunError && ev.Code == mesh.CodeWaitingApprove
	}
	if !ended {
		t.Error("no RUN_ERROR ended the refused message's run")
	}
}
