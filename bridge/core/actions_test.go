package core

import (
	"errors"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// answered is a conversation with a user message and its answer.
func answered(t *testing.T, c *Core) string {
	t.Helper()
	conv, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Sessions.Update(t.Context(), conv.ID, func(cv *mesh.Conversation) error {
		cv.Messages = append(cv.Messages,
			mesh.Message{ID: "u1", Role: mesh.RoleUser, Content: "what is up", TurnID: "u1"},
			mesh.Message{ID: "u1-a0", Role: mesh.RoleAssistant, Content: "not much", TurnID: "u1"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return conv.ID
}

// A regenerate queues a turn with the last user message's text, marked as
// a regenerate on the record, the work item and run_queued; it is refused
// while a turn is queued, and where no user message is.
func TestRegenerateQueuesTheLastUserMessage(t *testing.T) {
	m := meshtest.New(t)
	c, _ := queueCore(t, m, time.Hour)
	id := answered(t, c)
	before, err := c.Sessions.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Regenerate(t.Context(), id, "", Caller{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	got, err := c.Sessions.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	q := got.Queued
	if q == nil {
		t.Fatalf("nothing queued, want regenerate turn %s", run.ID)
	}
	if q.ID != run.ID {
		t.Fatalf("queued turn %s, want %s", q.ID, run.ID)
	}
	if !q.Regenerate {
		t.Fatalf("queued turn %+v is not a regenerate", q)
	}
	if q.Message != "what is up" {
		t.Fatalf("queued message %q, want the last user message %q", q.Message, "what is up")
	}
	if n := len(got.Messages); n != len(before.Messages) {
		t.Errorf("%d messages after queueing a regenerate, want %d: the bridge adds none", n, len(before.Messages))
	}
	items := workItems(t, m, id)
	if len(items) != 1 {
		t.Fatalf("%d work items, want one regenerate turn: %+v", len(items), items)
	}
	if !items[0].Regenerate {
		t.Fatalf("work item %+v is not a regenerate", items[0])
	}
	if items[0].Message != "what is up" {
		t.Fatalf("work item message %q, want %q", items[0].Message, "what is up")
	}
	if items[0].TurnID != run.ID {
		t.Fatalf("work item turn %s, want %s", items[0].TurnID, run.ID)
	}
	var queued *mesh.Event
	for _, ev := range m.Events(t, id) {
		if ev.Type == mesh.EventCustom && ev.Name == mesh.CustomRunQueued {
			queued = &ev
		}
	}
	if v, _ := queued.Value.(map[string]any); queued == nil || v["regenerate"] != true {
		t.Errorf("run_queued %+v, want regenerate: true", queued)
	}
	if _, err := c.Regenerate(t.Context(), id, "", Caller{}); !errors.Is(err, mesh.ErrTurnInProgress) {
		t.Errorf("a second regenerate while one is queued: %v, want turn_in_progress", err)
	}

	empty, err := c.CreateConversation(t.Context(), mesh.NewID(), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Regenerate(t.Context(), empty.ID, "", Caller{}); !errors.Is(err, mesh.ErrNothingToRegenerate) || mesh.HTTPStatus(err) != 409 {
		t.Errorf("regenerate without a user message: %v, want 409 nothing_to_regenerate", err)
	}
	if _, err := c.Regenerate(t.Context(), mesh.NewID(), "", Caller{}); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Errorf("regenerate of an unknown conversation: %v, want not found", err)
	}
}

func TestFeedbackOnAMessage(t *testing.T) {
	m := meshtest.New(t)
	c, _ := queueCore(t, m, time.Hour)
	id := answered(t, c)
	ursula := Caller{Principal: &auth.Principal{Name: "ursula"}}
	if _, err := c.Feedback(t.Context(), id, "u1-a0", FeedbackInput{Rating: "like"}, ursula); err != nil {
		t.Fatal(err)
	}
	f, err := c.Feedback(t.Context(), id, "u1-a0", FeedbackInput{Rating: "dislike", Comment: "too short"}, ursula)
	if err != nil {
		t.Fatal(err)
	}
	if f.By != "ursula" || f.Rating != "dislike" || f.MessageID != "u1-a0" {
		t.Errorf("feedback %+v", f)
	}
	if _, err := c.Feedback(t.Context(), id, "u1-a0", FeedbackInput{Rating: "like"}, Caller{}); err != nil {
		t.Fatal(err)
	}
	h, err := c.Sessions.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	list := h.Feedback["u1-a0"]
	// Ursula's latest and anonymous's.
	if len(list) != 2 {
		t.Errorf("%d stored feedbacks, want ursula's latest and anonymous's: %+v", len(list), list)
	} else {
		if list[0].By != "ursula" {
			t.Errorf("stored feedback 0 by %q, want ursula", list[0].By)
		}
		if list[0].Rating != "dislike" {
			t.Errorf("stored feedback 0 rating %q, want her latest, dislike", list[0].Rating)
		}
		if list[0].Comment != "too short" {
			t.Errorf("stored feedback 0 comment %q, want her latest, %q", list[0].Comment, "too short")
		}
		if list[1].By != "anonymous" {
			t.Errorf("stored feedback 1 by %q, want anonymous", list[1].By)
		}
	}
	var evs []map[string]any
	for _, ev := range m.Events(t, id) {
		if ev.Type == mesh.EventCustom && ev.Name == mesh.CustomFeedback {
			v, _ := ev.Value.(map[string]any)
			evs = append(evs, v)
		}
	}
	if len(evs) != 3 {
		t.Errorf("%d feedback events, want 3: %v", len(evs), evs)
	} else {
		for _, c := range []struct{ key, want string }{{"messageId", "u1-a0"}, {"rating", "dislike"}, {"comment", "too short"}, {"by", "ursula"}} {
			if evs[1][c.key] != c.want {
				t.Errorf("feedback event 1 %s = %v, want %q", c.key, evs[1][c.key], c.want)
			}
		}
	}
	for _, tc := range []struct {
		name, msg, rating string
		want              *mesh.Error
	}{
		{"unknown message", "nope", "like", mesh.ErrMessageNotFound},
		{"message id that cannot be", "no/pe", "like", mesh.ErrMessageNotFound},
		{"bad rating", "u1-a0", "meh", mesh.ErrBadRequest},
	} {
		if _, err := c.Feedback(t.Context(), id, tc.msg, FeedbackInput{Rating: tc.rating}, Caller{}); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want.Kind())
		}
	}
}
