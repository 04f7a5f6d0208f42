package mesh

import (
	"fmt"
	"slices"
	"time"
)

// This file holds what users do to a conversation's answers besides
// writing: regenerate the last answer (Supersede) and rate a message
// (AddFeedback). Messages in the log are never edited (messages.go), so
// both are recorded in the head: Conversation.Superseded, a map of the
// superseded messages' ids to the turn that superseded them, and
// Conversation.Feedback, by message id. Appends stay as cheap as before:
// neither touches the message log.

const (
	// SupersededKept bounds Conversation.Superseded: past it, the entries of
	// messages no longer among the history a read loads (which alone reaches
	// models) are dropped.
	SupersededKept = 256

	// Ratings of feedback.
	RatingLike    = "like"
	RatingDislike = "dislike"

	// MaxFeedbackComment bounds a feedback comment, in characters.
	MaxFeedbackComment = 1000

	// FeedbackKept bounds the feedback a conversation keeps: past it, the
	// oldest is dropped. With MaxFeedbackComment it keeps the head, which
	// every read decodes, within a few hundred KiB at worst.
	FeedbackKept = 200
)

// LastUserMessage is the index in Messages of the last user message, or -1.
func (c *Conversation) LastUserMessage() int {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == RoleUser {
			return i
		}
	}
	return -1
}

// Supersede marks the answer to the last user message, every message after
// it but those of turn by itself (a redelivered regenerate's own), as
// superseded by turn by. It returns the ids it marked, and false when the
// conversation's messages hold no user message.
func (c *Conversation) Supersede(by string) ([]string, bool) {
	u := c.LastUserMessage()
	if u < 0 {
		return nil, false
	}
	var marked []string
	for _, m := range c.Messages[u+1:] {
		if m.TurnID == by || c.Superseded[m.ID] != "" {
			continue
		}
		if c.Superseded == nil {
			c.Superseded = map[string]string{}
		}
		c.Superseded[m.ID] = by
		marked = append(marked, m.ID)
	}
	if len(c.Superseded) > SupersededKept {
		for id := range c.Superseded {
			if !c.HasMessage(id) {
				delete(c.Superseded, id)
			}
		}
	}
	return marked, true
}

// IsSuperseded reports whether message id was superseded by a regenerated
// answer: shown to people, not sent to models.
func (c *Conversation) IsSuperseded(id string) bool { return c.Superseded[id] != "" }

// Feedback is one principal's rating of one message.
type Feedback struct {
	MessageID string    `json:"message_id"`
	Rating    string    `json:"rating"`
	Comment   string    `json:"comment,omitempty"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
}

// CheckFeedback validates a rating and its comment.
func CheckFeedback(rating, comment string) error {
	if rating != RatingLike && rating != RatingDislike {
		return ErrBadRequest.With(fmt.Sprintf(`"rating" %s is not %q or %q`, Clip(rating), RatingLike, RatingDislike))
	}
	if n := len([]rune(comment)); n > MaxFeedbackComment {
		return ErrBadRequest.With(fmt.Sprintf(`"comment" has %d characters; at most %d`, n, MaxFeedbackComment))
	}
	return nil
}

// AddFeedback records f: it replaces the feedback of the same principal on
// the same message (the latest wins).
func (c *Conversation) AddFeedback(f Feedback) {
	list := slices.DeleteFunc(c.Feedback[f.MessageID], func(o Feedback) bool { return o.By == f.By })
	if c.Feedback == nil {
		c.Feedback = map[string][]Feedback{}
	}
	c.Feedback[f.MessageID] = append(list, f)
	n := 0
	for _, l := range c.Feedback {
		n += len(l)
	}
	for ; n > FeedbackKept; n-- {
		c.dropOldestFeedback()
	}
}

func (c *Conversation) dropOldestFeedback() {
	var key string
	var at time.Time
	idx := -1
	for k, l := range c.Feedback {
		for i, f := range l {
			if idx < 0 || f.At.Before(at) {
				key, at, idx = k, f.At, i
			}
		}
	}
	if idx < 0 {
		return
	}
	c.Feedback[key] = slices.Delete(c.Feedback[key], idx, idx+1)
	if len(c.Feedback[key]) == 0 {
		delete(c.Feedback, key)
	}
}
