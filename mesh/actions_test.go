package mesh

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSupersede(t *testing.T) {
	c := &Conversation{Messages: []Message{
		{ID: "t1", Role: RoleUser, TurnID: "t1"},
		{ID: "t1-a0", Role: RoleAssistant, TurnID: "t1"},
		{ID: "t2", Role: RoleUser, TurnID: "t2"},
		{ID: "t2-a0", Role: RoleAssistant, TurnID: "t2", ToolCalls: []ToolCall{{ID: "t2-c0-0"}}},
		{ID: "t2-c0-0-r", Role: RoleTool, TurnID: "t2"},
		{ID: "ap1-a1", Role: RoleAssistant, TurnID: "ap1"}, // a resume's answer
		{ID: "r1-a0", Role: RoleAssistant, TurnID: "r1"},   // the regenerate's own, on a redelivery
	}}
	marked, ok := c.Supersede("r1")
	if !ok {
		t.Fatal("no user message found")
	}
	if want := []string{"t2-a0", "t2-c0-0-r", "ap1-a1"}; !slices.Equal(marked, want) {
		t.Errorf("marked %v, want %v", marked, want)
	}
	for id, want := range map[string]bool{"t1": false, "t1-a0": false, "t2": false, "t2-a0": true, "t2-c0-0-r": true, "ap1-a1": true, "r1-a0": false} {
		if got := c.IsSuperseded(id); got != want {
			t.Errorf("IsSuperseded(%s) = %v, want %v", id, got, want)
		}
	}
	if c.Superseded["t2-a0"] != "r1" {
		t.Errorf("superseded by %q, want r1", c.Superseded["t2-a0"])
	}
	// A second regenerate supersedes the first one's answer; the earlier
	// marks stay with the turn that made them.
	c.Messages = append(c.Messages, Message{ID: "r2-a0", Role: RoleAssistant, TurnID: "r2"})
	marked, _ = c.Supersede("r2")
	if want := []string{"r1-a0"}; !slices.Equal(marked, want) {
		t.Errorf("second regenerate marked %v, want %v", marked, want)
	}
	if c.Superseded["t2-a0"] != "r1" || c.IsSuperseded("r2-a0") {
		t.Errorf("after the second regenerate: %v", c.Superseded)
	}
	if _, ok := (&Conversation{Messages: []Message{{ID: "s", Role: RoleSystem}}}).Supersede("x"); ok {
		t.Error("a conversation without a user message had something to regenerate")
	}
}

func TestSupersededBounded(t *testing.T) {
	c := &Conversation{Superseded: map[string]string{}}
	for i := range SupersededKept + 10 {
		c.Superseded[fmt.Sprintf("old-%d", i)] = "r0"
	}
	c.Messages = []Message{{ID: "u", Role: RoleUser}, {ID: "a", Role: RoleAssistant, TurnID: "u"}}
	c.Supersede("r1")
	if len(c.Superseded) != 1 || c.Superseded["a"] != "r1" {
		t.Errorf("past %d entries, those of messages no longer read stay: %d left", SupersededKept, len(c.Superseded))
	}
}

func TestFeedback(t *testing.T) {
	for _, c := range []struct {
		name, rating, comment string
		wantErr               bool
	}{
		{"like", RatingLike, "", false},
		{"dislike with comment", RatingDislike, "wrong tool", false},
		{"bad rating", "love", "", true},
		{"empty rating", "", "", true},
		{"comment at the bound", RatingLike, strings.Repeat("é", MaxFeedbackComment), false},
		{"comment too long", RatingLike, strings.Repeat("x", MaxFeedbackComment+1), true},
	} {
		err := CheckFeedback(c.rating, c.comment)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err %v, wantErr %v", c.name, err, c.wantErr)
		}
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err %v is not a bad request", c.name, err)
		}
	}
	conv := &Conversation{}
	t0 := time.Now()
	conv.AddFeedback(Feedback{MessageID: "m1", Rating: RatingLike, By: "ursula", At: t0})
	conv.AddFeedback(Feedback{MessageID: "m1", Rating: RatingDislike, By: "admin", At: t0.Add(time.Second)})
	conv.AddFeedback(Feedback{MessageID: "m1", Rating: RatingDislike, Comment: "changed my mind", By: "ursula", At: t0.Add(2 * time.Second)})
	got := conv.Feedback["m1"]
	if len(got) != 2 {
		t.Fatalf("feedback on m1: %+v, want one per principal", got)
	}
	for _, f := range got {
		if f.By == "ursula" && (f.Rating != RatingDislike || f.Comment != "changed my mind") {
			t.Errorf("ursula's feedback %+v: the latest should win", f)
		}
	}
	for i := range FeedbackKept + 5 {
		conv.AddFeedback(Feedback{MessageID: fmt.Sprintf("x%d", i), Rating: RatingLike, By: "ursula", At: t0.Add(time.Duration(10+i) * time.Second)})
	}
	n := 0
	for _, l := range conv.Feedback {
		n += len(l)
	}
	if n != FeedbackKept || conv.Feedback["m1"] != nil || conv.Feedback[fmt.Sprintf("x%d", FeedbackKept+4)] == nil {
		t.Errorf("past the bound: %d kept (want %d), m1 %v", n, FeedbackKept, conv.Feedback["m1"])
	}
}
