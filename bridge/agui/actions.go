package agui

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/mesh"
)

// The user actions on answers, over AG-UI (core/actions.go does them):
//
//	forwardedProps {"action": "regenerate"}     the run answers the thread's
//	                                            last user message again
//	                                            ("messages" may be empty)
//	forwardedProps {"action": "feedback", "messageId", "rating", "comment"?}
//	                                            the run records the rating:
//	                                            RUN_STARTED, CUSTOM feedback,
//	                                            RUN_FINISHED
//	POST /api/conversation {"action": "regenerate", "sessionId"}
//	                                            the dotted dialect's
//	POST /api/ai-sdk {"trigger": "regenerate-message", "id"}
//	                                            useChat's regenerate()
//	{"type": "feedback", "threadId", "messageId", "rating", "comment"?}
//	                                            on the WebSocket: answered by
//	                                            an events frame with the
//	                                            CUSTOM feedback
//
// AG-UI has no message of its own for either: forwardedProps is the
// client's channel to the server, and a CUSTOM event its way back.

// Actions forwardedProps.action names.
const (
	actionRegenerate = "regenerate"
	actionFeedback   = "feedback"
)

// actionProps is what forwardedProps says of a user action.
type actionProps struct {
	Action    string `json:"action"`
	MessageID string `json:"messageId"`
	Rating    string `json:"rating"`
	Comment   string `json:"comment"`
}

// action reads forwardedProps.action; none is the empty action.
func (in *runAgentInput) action() (actionProps, error) {
	var p actionProps
	if len(in.ForwardedProps) == 0 || string(in.ForwardedProps) == "null" {
		return p, nil
	}
	var raw struct {
		Action any `json:"action"`
	}
	if json.Unmarshal(in.ForwardedProps, &raw) != nil || raw.Action == nil {
		return p, nil // forwardedProps is the client's business
	}
	switch a := raw.Action.(type) {
	case string:
		if a != actionRegenerate && a != actionFeedback {
			return p, mesh.ErrBadRequest.With(`RunAgentInput: forwardedProps.action is "regenerate" or "feedback"`)
		}
	default:
		return p, mesh.ErrBadRequest.With(`RunAgentInput: forwardedProps.action is "regenerate" or "feedback"`)
	}
	if err := json.Unmarshal(in.ForwardedProps, &p); err != nil {
		return p, mesh.ErrBadRequest.With("RunAgentInput: forwardedProps of a feedback: " + mesh.JSONErrorText(err))
	}
	return p, nil
}

// hasAction reports whether forwardedProps names an action (valid or not:
// action says).
func (in *runAgentInput) hasAction() bool {
	p, err := in.action()
	return err != nil || p.Action != ""
}

// feedbackEvents records a feedback action of a run and returns the run's
// events: RUN_STARTED, CUSTOM feedback, RUN_FINISHED.
func (h *handler) feedbackEvents(ctx context.Context, in *runAgentInput, p actionProps, caller core.Caller) ([]mesh.Event, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	thread, runID := *in.ThreadID, *in.RunID
	f, err := h.core.Feedback(ctx, thread, p.MessageID, core.FeedbackInput{Rating: p.Rating, Comment: p.Comment}, caller)
	if err != nil {
		return nil, err
	}
	return []mesh.Event{
		mesh.RunStarted(thread, runID),
		mesh.Custom(mesh.CustomFeedback, core.FeedbackValue(*f)),
		mesh.RunFinished(thread, runID, mesh.Outcome{Type: mesh.OutcomeSuccess}, nil),
	}, nil
}

// feedbackRun answers POST /agui with a feedback action: a run of three
// events, or the refusal's status before any of them.
func (h *handler) feedbackRun(w http.ResponseWriter, r *http.Request, in *runAgentInput, p actionProps) {
	evs, err := h.feedbackEvents(r.Context(), in, p, core.CallerOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	out := sse.New(w).Observe(r, "agui")
	if err := out.Start(http.Header{"X-Conversation-Id": {*in.ThreadID}}); err != nil {
		return
	}
	_ = writeJSON(out, evs)
}

// feedbackFrame does a WebSocket feedback frame: an events frame with the
// CUSTOM feedback answers it.
func (c *socket) feedbackFrame(f clientFrame) error {
	if err := core.CheckConversationID(f.ThreadID); err != nil {
		return err
	}
	fb, err := c.h.core.Feedback(c.ctx, f.ThreadID, f.MessageID, core.FeedbackInput{Rating: f.Rating, Comment: f.Comment}, c.caller)
	if err != nil {
		return err
	}
	ev, _ := json.Marshal(mesh.Custom(mesh.CustomFeedback, core.FeedbackValue(*fb)))
	c.send(serverFrame{Type: "events", ThreadID: f.ThreadID, Events: []json.RawMessage{ev}})
	return nil
}

// feedbackRunFrame answers a RunAgentInput frame with a feedback action:
// one events frame with the run's three events.
func (c *socket) feedbackRunFrame(in *runAgentInput, p actionProps) error {
	evs, err := c.h.feedbackEvents(c.ctx, in, p, c.caller)
	if err != nil {
		return err
	}
	raw := make([]json.RawMessage, 0, len(evs))
	for _, e := range evs {
		b, _ := json.Marshal(e)
		raw = append(raw, b)
	}
	c.send(serverFrame{Type: "events", ThreadID: *in.ThreadID, RunID: *in.RunID, Events: raw})
	return nil
}

// startRegenerate starts the run that answers conversation id's last user
// message again, for a dialect (the caller holds the stream slot); a
// refusal is answered.
func (h *handler) startRegenerate(w http.ResponseWriter, r *http.Request, id string) (*runStream, bool) {
	caller := core.CallerOf(r)
	if _, err := h.core.HeadFor(r.Context(), id, caller); err != nil {
		writeError(w, err)
		return nil, false
	}
	rs, err := h.startRun(r.Context(), id, func() (*core.Run, error) { return h.core.Regenerate(r.Context(), id, "", caller) })
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return rs, true
}
