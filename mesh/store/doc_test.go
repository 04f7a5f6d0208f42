package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
)

// TestDocOfStoredHead: the answer made from a head as the bucket holds it
// (DocOf, the head passed on as stored) encodes exactly as the one read
// and encoded again (GetDoc), for a head with every kind of field.
func TestDocOfStoredHead(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), SessionID: "0123abcd", Agent: "a", Owner: "o <&>", Status: mesh.StatusActive}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for i := range 3 {
		if _, err := s.Update(ctx, c.ID, func(cv *mesh.Conversation) error {
			cv.Messages = append(cv.Messages,
				mesh.Message{ID: mesh.NewID(), Role: mesh.RoleUser, Content: "list <all> & \"every\" resource é\u2028"},
				mesh.Message{ID: mesh.NewID(), Role: mesh.RoleAssistant, Content: strings.Repeat("y", 50+i)})
			cv.MarkTurn(mesh.NewID())
			cv.LastRun = &mesh.RunSummary{ID: "r", Outcome: mesh.OutcomeSuccess, Response: "done <b>", Usage: &mesh.Usage{InputTokens: 3}}
			cv.State = map[string]any{"n": 1.5e21, "big": 1e300, "s": "<x>", "list": []any{1.0, "a", nil, true}, "m": map[string]any{"z": 1.0, "a": 2.0}}
			cv.PendingApprovals = []mesh.PendingApproval{{UUID: "u", ToolArgs: map[string]any{"k": "v <>"}, CreatedAt: at}}
			cv.Feedback = map[string][]mesh.Feedback{"m": {{MessageID: "m", Rating: "up", By: "o", At: at}}}
			cv.Superseded = map[string]string{"x": "y"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := s.GetDoc(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.kv.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	head, err := DecodeHead(c.ID, e.Value(), e.Revision())
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.DocOf(ctx, head, e.Value())
	if err != nil {
		t.Fatal(err)
	}
	if got.head == nil {
		t.Fatal("DocOf encodes the head again: it should pass it on as stored")
	}
	g, _ := got.MarshalJSON()
	w, _ := want.MarshalJSON()
	if string(g) != string(w) {
		t.Fatalf("DocOf\n got %s\nwant %s", g, w)
	}
	if _, err := DecodeHead("another", e.Value(), e.Revision()); err == nil {
		t.Fatal("DecodeHead took the head of another conversation")
	}
}

// TestUpdateHeadFrom: a change from a kept head saves without a read when
// the head is current, and from a fresh read when it is stale: a refusal
// on the stale head is checked again, a save meets the newer revision.
func TestUpdateHeadFrom(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Messages: []mesh.Message{{ID: "s", Role: mesh.RoleSystem, Content: "p"}}}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	kept := *c
	// Current: saved on top of it.
	got, err := s.UpdateHeadFrom(ctx, &kept, func(cv *mesh.Conversation) error { cv.Title = "one"; return nil })
	if err != nil || got.Revision <= c.Revision || kept.Title != "" {
		t.Fatalf("from a current head: %v, revision %d after %d, kept changed: %q", err, got.Revision, c.Revision, kept.Title)
	}
	// Stale (the save above is newer): the change sees the bucket's head.
	var seen []string
	got, err = s.UpdateHeadFrom(ctx, &kept, func(cv *mesh.Conversation) error {
		seen = append(seen, cv.Title)
		cv.Status = mesh.StatusQueued
		return nil
	})
	if err != nil {
		t.Fatalf("from a stale head: %v", err)
	}
	if len(seen) != 2 || seen[1] != "one" {
		t.Fatalf("from a stale head: the change saw titles %q, want two, the second the bucket's \"one\"", seen)
	}
	if got.Title != "one" {
		t.Fatalf("from a stale head: title = %q, want the bucket's \"one\"", got.Title)
	}
	if got.Status != mesh.StatusQueued {
		t.Fatalf("from a stale head: status = %q, want the change's %q", got.Status, mesh.StatusQueued)
	}
	// A refusal on a stale head is asked again of the bucket.
	seen = nil
	_, err = s.UpdateHeadFrom(ctx, &kept, func(cv *mesh.Conversation) error {
		seen = append(seen, string(cv.Status))
		if cv.Status != mesh.StatusQueued {
			return ErrNoChange
		}
		return mesh.ErrTurnInProgress
	})
	if !errors.Is(err, mesh.ErrTurnInProgress) || len(seen) != 2 {
		t.Fatalf("refusal from a stale head: %v after %q, want turn_in_progress from the bucket's head", err, seen)
	}
	head, err := s.Head(ctx, c.ID)
	if err != nil || head.Status != mesh.StatusQueued {
		t.Fatalf("head %+v, %v", head, err)
	}
}
