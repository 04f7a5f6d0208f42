package agent

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// The claim takes a queued turn up in the save that claims: no revision of
// the conversation is without both the queued record and the claim.
func TestClaimTakesTheQueuedTurnUpInOneSave(t *testing.T) {
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "ok"}, nil
	}), nil)
	conv := f.conversation()
	id := mesh.NewID()
	// As the bridge records it before it publishes the item.
	if _, err := f.store.Update(t.Context(), conv, func(c *mesh.Conversation) error {
		c.Queued = &mesh.QueuedTurn{ID: id, Message: "hello", At: time.Now().UTC()}
		c.Status = mesh.StatusQueued
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "hello"})
	c := f.waitApplied(conv, id)
	if c.Queued != nil || c.Status != mesh.StatusActive {
		t.Fatalf("after the turn: status %s, queued %+v; want active, nothing queued", c.Status, c.Queued)
	}
	hist, err := f.m.Sessions.History(t.Context(), conv)
	if err != nil {
		t.Fatal(err)
	}
	var queued, claimed bool
	for _, e := range hist {
		var rev mesh.Conversation
		if err := json.Unmarshal(e.Value(), &rev); err != nil {
			t.Fatal(err)
		}
		switch {
		case rev.Queued != nil:
			queued = true
		case queued && !claimed:
			// The first revision without the record is the claim.
			if rev.Turn == nil || rev.Turn.ID != id || rev.Status != mesh.StatusRunning || rev.Turn.Seq == 0 {
				t.Errorf("revision %d took the queued turn off without claiming it: status %s, turn %+v", e.Revision(), rev.Status, rev.Turn)
			}
			claimed = true
		}
	}
	if !queued || !claimed {
		t.Errorf("history: queued %v, claimed %v; want both", queued, claimed)
	}
}

// A second copy of a turn (its lost work item published again while the
// first copy was only slow) never runs the turn twice: while the first
// runs, the copy is dropped.
func TestCopyOfARunningTurnIsDropped(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	f := newFixture(t, script(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &llm.Response{Text: "ok"}, nil
	}), nil)
	conv := f.conversation()
	id := mesh.NewID()
	item := mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "once"}
	f.enqueue(item)
	meshtest.Eventually(t, 5*time.Second, func() bool { return calls.Load() == 1 }, "the turn never called its model")
	// The copy as a bridge publishes it again: a new Nats-Msg-Id.
	cp, err := mesh.WorkMsg(f.m.NS, mesh.RoleAgent, "tester", item, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp.Header.Set(mesh.HeaderMsgID, "turn:"+id+":r1")
	if _, err := f.m.JS.PublishMsg(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	// The copy is settled (acknowledged) while the first still runs.
	meshtest.Eventually(t, 5*time.Second, func() bool {
		info, err := f.m.Work.Info(t.Context())
		return err == nil && info.State.Msgs == 1
	}, "the copy was not settled while the first copy ran")
	close(release)
	c := f.waitApplied(conv, id)
	if n := calls.Load(); n != 1 {
		t.Errorf("the model was called %d times for one turn, want 1", n)
	}
	if got := roles(c); got != "user,assistant" {
		t.Errorf("roles = %s, want the turn once", got)
	}
}
