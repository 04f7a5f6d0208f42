package core

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// Started waits for an agent to take the run up: not before the
// conversation runs it, at once after.
func TestRunStartedWaitsForTheClaim(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 0)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Send(t.Context(), conv.ID, "hello", Caller{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	// No agent runs here: the turn stays queued.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if run.Started(ctx) {
		t.Fatal("Started before any agent took the turn")
	}
	// An agent claims it.
	store := mesh.NewSessionStore(m.Sessions)
	if _, err := store.Update(t.Context(), conv.ID, func(c *mesh.Conversation) error {
		c.Turn = &mesh.Turn{ID: run.ID, Kind: mesh.WorkTurn, StartedAt: time.Now()}
		c.Status = mesh.StatusRunning
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if !run.Started(ctx) {
		t.Error("Started did not see the claim")
	}
}
