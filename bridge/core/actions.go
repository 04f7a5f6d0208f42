package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// This file holds the user actions on a conversation's answers that every
// surface offers besides sending and stopping: regenerate the last answer,
// and rate a message. Both are recorded in the conversation's head
// (mesh/actions.go).

// Regenerate starts a new run (turn turnID; empty: a new id) that answers
// the conversation's last user message again. The answer after it is kept
// and marked superseded when an agent claims the turn: people still see
// it, models no longer get it. It is refused as sending is: 409 while a
// turn runs or is queued or an approval waits, and 409
// nothing_to_regenerate when the conversation's newest messages hold no
// user message. A group chat's rounds are not regenerated (400).
func (c *Core) Regenerate(ctx context.Context, id, turnID string, caller Caller) (*Run, error) {
	turnID, err := c.runIDFor(ctx, id, turnID, caller)
	if err != nil {
		return nil, err
	}
	conv, err := c.GetFor(ctx, id, caller)
	if err != nil {
		return nil, err
	}
	if conv.Group != nil {
		return nil, mesh.ErrBadRequest.With(fmt.Sprintf("conversation %s is a chat of group %s: its rounds are not regenerated; send a message instead", id, conv.Group.Name))
	}
	u := conv.LastUserMessage()
	if u < 0 {
		return nil, mesh.ErrNothingToRegenerate.With(fmt.Sprintf("conversation %s has no user message to answer again", id))
	}
	return c.queueTurn(ctx, id, turnQ{id: turnID, text: conv.Messages[u].Content, regenerate: true, count: conv.MessageCount}, caller)
}

// FeedbackInput is a user's rating of a message.
type FeedbackInput struct {
	Rating  string `json:"rating"`
	Comment string `json:"comment,omitempty"`
}

// Feedback records the caller's rating of message msgID of conversation
// id (the latest of one principal on one message wins), publishes CUSTOM
// feedback on the conversation's events and counts it. A message the
// conversation does not hold is 404 message_not_found, a rating that is
// not like or dislike or a comment too long 400.
func (c *Core) Feedback(ctx context.Context, id, msgID string, in FeedbackInput, caller Caller) (*mesh.Feedback, error) {
	if err := c.Writes(caller); err != nil {
		return nil, err
	}
	if err := CheckConversationID(id); err != nil {
		return nil, err
	}
	if err := mesh.CheckFeedback(in.Rating, in.Comment); err != nil {
		return nil, err
	}
	if _, err := c.HeadFor(ctx, id, caller); err != nil {
		return nil, err
	}
	if mesh.CheckID(msgID) != nil {
		return nil, mesh.ErrMessageNotFound.With(fmt.Sprintf("message %s not found: a message id is %s", mesh.Clip(msgID), mesh.IDRule))
	}
	found, err := c.hasMessage(ctx, id, msgID)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, mesh.ErrMessageNotFound.With(fmt.Sprintf("message %s not found in conversation %s", msgID, id))
	}
	// A client leaving mid-way does not leave the record without its event.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), feedbackTimeout+store.ElectionWait(c.cfg.JS))
	defer cancel()
	f := mesh.Feedback{MessageID: msgID, Rating: in.Rating, Comment: in.Comment, By: c.principalName(caller), At: c.now().UTC()}
	// The head alone: a running turn's save meets the new revision and
	// applies its change again.
	if _, err := c.Sessions.UpdateHead(ctx, id, func(cv *mesh.Conversation) error {
		if !c.Sees(caller, cv.Owner) {
			return notFound(id)
		}
		cv.AddFeedback(f)
		return nil
	}); err != nil {
		return nil, c.hideGone(caller, id, err)
	}
	telemetry.Feedback(f.Rating)
	ev := mesh.Custom(mesh.CustomFeedback, FeedbackValue(f))
	// One event per recorded rating: its time keeps a changed mind apart.
	key := "feedback:" + msgID + ":" + strconv.FormatInt(f.At.UnixNano(), 10)
	if _, err := c.events.Publish(ctx, id, "", key, ev); err != nil {
		c.log.Warn().Err(err).Str("session", id).Msg("could not publish a feedback event")
	}
	return &f, nil
}

// FeedbackValue is the value of a CUSTOM feedback event: AG-UI's names.
func FeedbackValue(f mesh.Feedback) map[string]any {
	v := map[string]any{"messageId": f.MessageID, "rating": f.Rating, "by": f.By}
	if f.Comment != "" {
		v["comment"] = f.Comment
	}
	return v
}

// principalName is who a caller's feedback is by.
func (c *Core) principalName(caller Caller) string {
	if caller.Principal == nil || caller.Principal.Name == "" {
		return "anonymous"
	}
	return caller.Principal.Name
}

// hasMessage reports whether conversation id holds message msgID: among
// its newest page, or any page before, read back one page at a time.
func (c *Core) hasMessage(ctx context.Context, id, msgID string) (bool, error) {
	want := []byte(`"` + msgID + `"`)
	before := ""
	for range 1000 { // a bound, far past any conversation's pages
		d, err := c.Sessions.GetPage(ctx, id, MaxPageSize, before)
		if err != nil {
			return false, err
		}
		for _, raw := range d.Messages {
			if !bytes.Contains(raw, want) {
				continue
			}
			var m struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &m) == nil && m.ID == msgID {
				return true, nil
			}
		}
		if d.Before == "" {
			return false, nil
		}
		before = d.Before
	}
	return false, nil
}

// feedbackTimeout bounds a feedback's writes when its client leaves.
const feedbackTimeout = 10 * time.Second
