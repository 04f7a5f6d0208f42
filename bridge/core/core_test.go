package core

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/natsconn"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
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
	sessions := store.NewSessionStore(m.Sessions, m.Messages)
	if _, err := sessions.Update(t.Context(), conv.ID, func(c *mesh.Conversation) error {
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

// The stream slots are one pool for the whole bridge.
func TestStreamSlotsAreBoundedByMaxStreams(t *testing.T) {
	m := meshtest.New(t)
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "a", MaxStreams: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !c.AcquireStream() {
			t.Fatalf("stream %d of 2 did not get a slot", i+1)
		}
	}
	if c.AcquireStream() {
		t.Fatal("a third stream got a slot past MaxStreams 2")
	}
	c.ReleaseStream()
	if !c.AcquireStream() {
		t.Error("a released slot was not given again")
	}
}

// Off the bus, /ready says so at once, for every check, rather than after
// each check's timeout.
func TestReadinessOffTheBus(t *testing.T) {
	m := meshtest.New(t)
	nc := meshtest.Conn(t, m.Server.ClientURL())
	c, err := New(Config{Node: role.Node{NC: nc, JS: m.JS}, Resources: m.Resources, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	start := time.Now()
	ready, checks := c.Readiness(t.Context())
	if ready || checks["event_bus"] != "failed: closed" || checks["storage"] != "unknown: nats closed" {
		t.Errorf("ready %v, checks %v; want not ready, event_bus failed: closed", ready, checks)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("readiness took %v off the bus", d)
	}
}

// A role's connection (natsconn.Connect) whose server went away reconnects
// rather than closes; meanwhile /ready says the bus is down and why.
func TestReadinessWhileReconnecting(t *testing.T) {
	m := meshtest.New(t)
	nc, err := natsconn.Connect(natsconn.Config{URL: m.Server.ClientURL(), Name: "bridge-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := New(Config{Node: role.Node{NC: nc, JS: m.JS}, Resources: m.Resources, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	m.Server.Shutdown()
	meshtest.Eventually(t, 5*time.Second, func() bool { return !nc.IsConnected() }, "the connection did not notice the server left")
	ready, checks := c.Readiness(t.Context())
	if ready || checks["event_bus"] != "failed: reconnecting" {
		t.Errorf("ready %v, checks %v; want not ready, event_bus failed: reconnecting", ready, checks)
	}
	if nc.IsClosed() {
		t.Error("the connection closed instead of reconnecting")
	}
}

// A caller whose credential only reads (a stream token) changes nothing,
// through whichever method of the core: each refuses it with ErrReadOnly
// (403), and the conversation is as it was.
func TestReadOnlyCallerChangesNothing(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 0)
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	ro := Caller{Principal: &auth.Principal{Name: "root", Roles: []string{"admin"}, Via: auth.ViaStream}}
	fresh := mesh.NewID()
	for name, call := range map[string]func() error{
		"create": func() error { _, err := c.CreateConversation(t.Context(), fresh, ro); return err },
		"send":   func() error { _, err := c.Send(t.Context(), conv.ID, "hello", ro); return err },
		"send run": func() error {
			_, err := c.SendTurn(t.Context(), conv.ID, "run-of-a-stream-token", "hello", ro)
			return err
		},
		"send once": func() error {
			_, err := c.SendOnce(t.Context(), conv.ID, "key-1", "hello", ro)
			return err
		},
		"regenerate": func() error { _, err := c.Regenerate(t.Context(), conv.ID, "", ro); return err },
		"decide": func() error {
			_, _, err := c.Decide(t.Context(), "00000000-0000-4000-8000-000000000000", []byte(`{"approved":true}`), ro)
			return err
		},
		"feedback": func() error {
			_, err := c.Feedback(t.Context(), conv.ID, conv.ID+"-system", FeedbackInput{Rating: "like"}, ro)
			return err
		},
		"files": func() error {
			_, err := c.StoreFiles(t.Context(), conv.ID, []Upload{{Name: "a.txt", MediaType: "text/plain", Base64: "aGk="}}, ro)
			return err
		},
		"delete": func() error { _, err := c.Delete(t.Context(), conv.ID, false, ro); return err },
	} {
		if err := call(); !errors.Is(err, ErrReadOnly) || mesh.HTTPStatus(err) != http.StatusForbidden {
			t.Errorf("%s with a stream token: %v, want %v (403)", name, err, ErrReadOnly)
		}
	}
	if _, err := c.Sessions.Head(t.Context(), fresh); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Errorf("the conversation a stream token asked for: %v, want not found", err)
	}
	h, err := c.Sessions.Head(t.Context(), conv.ID)
	if err != nil {
		t.Fatalf("the conversation after the refusals: %v", err)
	}
	// Idle as it was.
	if h.Queued != nil {
		t.Errorf("the conversation after the refusals: queued %+v, want nothing", h.Queued)
	}
	if h.Turn != nil {
		t.Errorf("the conversation after the refusals: turn %+v, want none", h.Turn)
	}
	if h.Status != mesh.StatusActive {
		t.Errorf("the conversation after the refusals: status %s, want %s", h.Status, mesh.StatusActive)
	}
	if holder, err := c.Sessions.ReserveRun(t.Context(), "run-of-a-stream-token", "another"); err != nil || holder != "another" {
		t.Errorf("the run id a stream token named was reserved for %q (%v)", holder, err)
	}
}
