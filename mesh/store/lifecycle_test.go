package store_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

func TestSessionStoreDeleteLeavesATombstone(t *testing.T) {
	m := meshtest.New(t)
	sessions := store.NewSessionStore(m.Sessions, m.Messages).WithConn(m.NC)
	ctx := t.Context()
	conv := &mesh.Conversation{ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Owner: "alice", Agent: "a", Status: mesh.StatusWaitingApproval,
		Messages:        []mesh.Message{{ID: "m1", Role: mesh.RoleUser, Content: "hello"}},
		PendingApproval: &mesh.PendingApproval{UUID: "ap1"}, Queued: &mesh.QueuedTurn{ID: "t2", Message: "next"}}
	if err := sessions.Create(ctx, conv); err != nil {
		t.Fatal(err)
	}
	d, err := sessions.Delete(ctx, conv.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if d.Before == nil || d.Before.PendingApproval == nil || d.Before.Queued == nil {
		t.Fatalf("the deletion did not return what the conversation waited for: %+v", d.Before)
	}
	ts := d.Tombstone
	if ts.Status != mesh.StatusDeleted {
		t.Fatalf("tombstone status = %q, want %q", ts.Status, mesh.StatusDeleted)
	}
	if ts.Owner != "alice" {
		t.Fatalf("tombstone owner = %q, want alice", ts.Owner)
	}
	if ts.DeletedBy != "bob" {
		t.Fatalf("tombstone deleted by = %q, want bob", ts.DeletedBy)
	}
	if ts.DeletedAt == nil {
		t.Fatal("tombstone deleted at = nil, want the time of the deletion")
	}
	if ts.ID != conv.ID {
		t.Fatalf("tombstone id = %q, want %q", ts.ID, conv.ID)
	}
	// Every read and write of it is 410 deleted, which is also not found.
	_, errGet := sessions.Get(ctx, conv.ID)
	_, errHead := sessions.Head(ctx, conv.ID)
	_, errDoc := sessions.GetDoc(ctx, conv.ID)
	_, errUpd := sessions.Update(ctx, conv.ID, func(*mesh.Conversation) error { t.Error("a change was applied to a tombstone"); return nil })
	_, errUpdDoc := sessions.UpdateHead(ctx, conv.ID, func(*mesh.Conversation) error { t.Error("a change was applied to a tombstone"); return nil })
	for i, err := range []error{errGet, errHead, errDoc, errUpd, errUpdDoc} {
		if !errors.Is(err, mesh.ErrSessionDeleted) || !errors.Is(err, mesh.ErrSessionNotFound) || mesh.HTTPStatus(err) != http.StatusGone {
			t.Errorf("access %d: %v (status %d), want 410 deleted", i, err, mesh.HTTPStatus(err))
		}
		if owner, ok := mesh.GoneOwner(err); !ok || owner != "alice" {
			t.Errorf("access %d: the tombstone's owner %q, %v", i, owner, ok)
		}
	}
	h, err := sessions.HeadAny(ctx, conv.ID)
	if err != nil {
		t.Fatalf("HeadAny: %v", err)
	}
	if h.Status != mesh.StatusDeleted {
		t.Fatalf("HeadAny status = %q, want %q", h.Status, mesh.StatusDeleted)
	}
	if h.Queued != nil {
		t.Fatalf("HeadAny of a tombstone kept its queued turn: %+v", h.Queued)
	}
	if h.PendingApproval != nil {
		t.Fatalf("HeadAny of a tombstone kept its pending approval: %+v", h.PendingApproval)
	}
	// Deleting again changes nothing.
	again, err := sessions.Delete(ctx, conv.ID, "carol")
	if err != nil || again.Before != nil || again.Tombstone.DeletedBy != "bob" {
		t.Fatalf("second delete: %+v, %v", again, err)
	}
	// A new conversation cannot take the id of a tombstone.
	if err := sessions.Create(ctx, &mesh.Conversation{ID: conv.ID}); err == nil {
		t.Fatal("a conversation was created over a tombstone")
	}
	// Purged, it is not found: no longer gone.
	if err := sessions.Purge(ctx, conv.ID); err != nil {
		t.Fatal(err)
	}
	_, err = sessions.Get(ctx, conv.ID)
	if !errors.Is(err, mesh.ErrSessionNotFound) || mesh.IsGone(err) {
		t.Fatalf("after purge: %v, want not found", err)
	}
}

func TestPurgeEventsRemovesOneConversationsEvents(t *testing.T) {
	m := meshtest.New(t)
	ctx := t.Context()
	pub := bus.NewPublisher(m.JS, m.NS)
	for _, id := range []string{"c1", "c2"} {
		if _, err := pub.Publish(ctx, id, "r1", id+":1", mesh.RunStarted(id, "r1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.PurgeEvents(ctx, m.JS, m.NS, "c1"); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Events(t, "c1")); n != 0 {
		t.Errorf("c1 has %d events after its purge", n)
	}
	if n := len(m.Events(t, "c2")); n != 1 {
		t.Errorf("c2 has %d events, want 1", n)
	}
}

// A conversation left alone expires after the TTL: 410 expired while the
// bucket keeps its limit marker, then not found; one saved meanwhile does
// not expire.
func TestSessionStoreExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a TTL")
	}
	s := meshtest.Server(t)
	nc := meshtest.Conn(t, s.ClientURL())
	js := jsOf(t, nc)
	ns, err := mesh.NewNamespace("exp")
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.Provision(t.Context(), js, ns, store.ProvisionConfig{SessionTTL: 2 * time.Second, ExpiredKept: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sessions := store.NewSessionStore(r.Sessions, r.Messages).WithConn(nc)
	ctx := t.Context()
	idle := &mesh.Conversation{ID: "idle", Status: mesh.StatusActive}
	busy := &mesh.Conversation{ID: "busy", Status: mesh.StatusActive}
	for _, c := range []*mesh.Conversation{idle, busy} {
		if err := sessions.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sessions.ReserveRun(ctx, "run1", "busy"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // busy is saved every 500 ms
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				if err := sessions.Touch(ctx, "busy", time.Now()); err != nil {
					t.Errorf("touch: %v", err)
					return
				}
			}
		}
	}()
	var expiredErr error
	meshtest.Eventually(t, 10*time.Second, func() bool {
		_, expiredErr = sessions.Get(ctx, "idle")
		return expiredErr != nil
	}, "the idle conversation expires")
	if !errors.Is(expiredErr, mesh.ErrSessionExpired) || mesh.HTTPStatus(expiredErr) != http.StatusGone || !strings.Contains(expiredErr.Error(), "expired") {
		t.Fatalf("expired conversation: %v, want 410 expired", expiredErr)
	}
	if _, err := sessions.Head(ctx, "idle"); !errors.Is(err, mesh.ErrSessionExpired) {
		t.Errorf("head of the expired conversation: %v", err)
	}
	// Its id is not taken again while it says expired.
	if err := sessions.Create(ctx, &mesh.Conversation{ID: "idle"}); !errors.Is(err, mesh.ErrSessionExpired) {
		t.Errorf("create over an expired conversation: %v, want 410 expired", err)
	}
	if _, err := sessions.Get(ctx, "busy"); err != nil {
		t.Errorf("the conversation in use expired: %v", err)
	}
	// Once the marker is cleaned up: not found.
	meshtest.Eventually(t, 15*time.Second, func() bool {
		_, err := sessions.Get(ctx, "idle")
		return errors.Is(err, mesh.ErrSessionNotFound) && !mesh.IsGone(err)
	}, "the expired conversation is cleaned up")
	if _, err := sessions.Get(ctx, "busy"); err != nil {
		t.Errorf("the conversation in use expired: %v", err)
	}
	close(stop)
	<-done
}

func jsOf(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestSummaryOfReadsTheHead(t *testing.T) {
	conv := &mesh.Conversation{ID: "c1", Status: mesh.StatusActive, Owner: "o", Messages: []mesh.Message{
		{ID: "s", Role: mesh.RoleSystem, Content: `a "quoted" ] } [ { \ system`},
		{ID: "u1", Role: mesh.RoleUser, Content: strings.Repeat("é", 100)},
		{ID: "a1", Role: mesh.RoleAssistant, ToolCalls: []mesh.ToolCall{{ID: "x", Name: "n", Arguments: map[string]any{"k": []any{1, map[string]any{"z": "]"}}}}}},
		{ID: "u2", Role: mesh.RoleUser, Content: "second"},
	}}
	data, err := json.Marshal(conv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.SummaryOf(data)
	if err != nil {
		t.Fatal(err)
	}
	// A head of an earlier version, its messages inside: counted, titled
	// by its first user message.
	if s.MessageCount != 4 {
		t.Fatalf("summary message count = %d, want 4", s.MessageCount)
	}
	if want := strings.Repeat("é", 80) + "…"; s.Title != want {
		t.Fatalf("summary title = %q, want %q", s.Title, want)
	}
	if s.Owner != "o" {
		t.Fatalf("summary owner = %q, want o", s.Owner)
	}
	if s.ID != "c1" {
		t.Fatalf("summary id = %q, want c1", s.ID)
	}
	// A head of today: its count and title, no message read.
	head, err := store.SummaryOf([]byte(`{"id":"c3","status":"active","message_count":7,"title":"list it"}`))
	if err != nil || head.MessageCount != 7 || head.Title != "list it" {
		t.Fatalf("head: %+v, %v", head, err)
	}
	empty, err := store.SummaryOf([]byte(`{"id":"c2","status":"active","messages":null}`))
	if err != nil || empty.MessageCount != 0 || empty.Title != "" {
		t.Fatalf("empty: %+v, %v", empty, err)
	}
}

// TestSummaryOfEveryField: SummaryOf decodes only the list form's fields of
// a head; every one of them comes out as Summary gives it.
func TestSummaryOfEveryField(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	conv := &mesh.Conversation{ID: "c1", SessionID: "0123abcd", Agent: "a", Owner: "o", Status: mesh.StatusDeleted, Title: "t",
		MessageCount: 9, MessageTail: mesh.MessageTail{{Seq: 4}}, RecentTurns: []string{"r1"},
		PendingApproval: &mesh.PendingApproval{UUID: "u", ToolName: "delete"},
		Queued:          &mesh.QueuedTurn{ID: "q", Message: "m", At: at, By: "b"},
		Group:           &mesh.GroupRun{Name: "g", Recent: []string{"x"}},
		LastRun:         &mesh.RunSummary{ID: "r1", Response: "done"},
		State:           map[string]any{"k": 1.5},
		CreatedAt:       at, UpdatedAt: at.Add(time.Hour), DeletedAt: &at, DeletedBy: "d", Version: 3}
	data, err := json.Marshal(conv)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.SummaryOf(data)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(conv.Summary())
	if g, _ := json.Marshal(got); string(g) != string(want) {
		t.Fatalf("summary\n got %s\nwant %s", g, want)
	}
	if got.Group != "g" {
		t.Fatalf("summary lost the group: %q, want g", got.Group)
	}
	if got.QueuedTurn == nil {
		t.Fatalf("summary lost the queued turn: %+v", got)
	}
	if got.PendingApproval == nil {
		t.Fatalf("summary lost the pending approval: %+v", got)
	}
	if got.DeletedAt == nil {
		t.Fatalf("summary lost deleted at: %+v", got)
	}
}
