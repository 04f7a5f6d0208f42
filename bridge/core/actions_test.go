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
	if q := got.Queued; q == nil || q.ID != run.ID || !q.Regenerate || q.Message != "what is up" {
		t.Fatalf("queued %+v, want regenerate turn %s of the last user message", q, run.ID)
	}
	if n := len(got.Messages); n != len(before.Messages) {
		t.Errorf("%d messages after queueing a regenerate, want %d: the bridge adds none", n, len(before.Messages))
	}
	items := workItems(t, m, id)
	if len(items) != 1 || !items[0].Regenerate || items[0].Message != "what is up" || items[0].TurnID != run.ID {
		t.Fatalf("work items %+v, want one regenerate turn", items)
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
	if len(list) != 2 || list[0].By != "ursula" || list[0].Rating != "dislike" || list[0].Comment != "too short" || list[1].By != "anonymous" {
		t.Errorf("stored feedback %+v, want ursula's latest and anonymous's", list)
	}
	var evs []map[string]any
	for _, ev := range m.Events(t, id) {
		if ev.Type == mesh.EventCustom && ev.Name == mesh.CustomFeedback {
			v, _ := ev.Value.(map[string]any)
			evs = append(evs, v)
		}
	}
	if len(evs) != 3 || evs[1]["messageId"] != "u1-a0" || evs[1]["rating"] != "dislike" || evs[1]["comment"] != "too short" || evs[1]["by"] != "ursula" {
		t.Errorf("feedback events %v", evs)
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
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want.Kind)
		}
	}
}
