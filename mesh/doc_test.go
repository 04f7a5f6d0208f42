package mesh

import (
	"strings"
	"testing"
	"time"
)

// TestDocOfStoredHead: the answer made from a head as the bucket holds it
// (DocOf, the head passed on as stored) encodes exactly as the one read
// and encoded again (GetDoc), for a head with every kind of field.
func TestDocOfStoredHead(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	c := &Conversation{ID: NewID(), SessionID: "0123abcd", Agent: "a", Owner: "o <&>", Status: StatusActive}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for i := range 3 {
		if _, err := s.Update(ctx, c.ID, func(cv *Conversation) error {
			cv.Messages = append(cv.Messages,
				Message{ID: NewID(), Role: RoleUser, Content: "list <all> & \"every\" resource é\u2028"},
				Message{ID: NewID(), Role: RoleAssistant, Content: strings.Repeat("y", 50+i)})
			cv.MarkTurn(NewID())
			cv.LastRun = &RunSummary{ID: "r", Outcome: OutcomeSuccess, Response: "done <b>", Usage: &Usage{InputTokens: 3}}
			cv.State = map[string]any{"n": 1.5e21, "big": 1e300, "s": "<x>", "list": []any{1.0, "a", nil, true}, "m": map[string]any{"z": 1.0, "a": 2.0}}
			cv.PendingApprovals = []PendingApproval{{UUID: "u", ToolArgs: map[string]any{"k": "v <>"}, CreatedAt: at}}
			cv.Feedback = map[string][]Feedback{"m": {{MessageID: "m", Rating: "up", By: "o", At: at}}}
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
