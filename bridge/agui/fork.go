package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// Branches over AG-UI. A client forks a thread by starting a run on a new
// thread whose forwardedProps name the thread and the point to fork at:
//
//	forwardedProps {"fork": {"from": "<thread id>", "before": "<message id>"}}
//	               {"fork": {"from": "<thread id>", "after": "<message id>"}}
//	               {"fork": {"from": "<thread id>", "event_seq": <SSE id>}}
//
// The new threadId becomes the branch (core.Core.ForkAs: the caller's, its
// history the original's up to the point, no pending approval), and the
// run answers the input's last user message on it. Message ids are the
// mesh's: an assistant message's is the messageId of its
// TEXT_MESSAGE_START (the client's messages keep it), a user message's the
// runId of the run it started. A later run on the branch may send the same
// fork again (a client that keeps its forwardedProps): it runs on the
// branch; a threadId that exists and is not a branch of "from" is a 409.
//
// AG-UI has no fork of its own: forwardedProps is the client's channel
// to the server, as for the actions (actions.go).

// forkProps is forwardedProps.fork.
type forkProps = core.ForkPoint

// fork reads forwardedProps.fork: nil when there is none.
func (in *runAgentInput) fork() (*forkProps, error) {
	if len(in.ForwardedProps) == 0 || string(in.ForwardedProps) == "null" {
		return nil, nil
	}
	var raw struct {
		Fork json.RawMessage `json:"fork"`
	}
	if json.Unmarshal(in.ForwardedProps, &raw) != nil || len(raw.Fork) == 0 || string(raw.Fork) == "null" {
		return nil, nil // forwardedProps is the client's business
	}
	const shape = `RunAgentInput: forwardedProps.fork is {"from": thread id, and one of "before" or "after" (a message id) or "event_seq" (an event's id)}`
	var f forkProps
	dec := json.NewDecoder(bytes.NewReader(raw.Fork))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, mesh.ErrBadRequest.With(shape + ": " + mesh.JSONErrorText(err))
	}
	if err := core.CheckID(`RunAgentInput: forwardedProps.fork.from`, f.From); err != nil {
		return nil, err
	}
	n := 0
	for _, set := range []bool{f.Before != "", f.After != "", f.EventSeq != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, mesh.ErrBadRequest.With(shape + fmt.Sprintf(": it names %d points", n))
	}
	for field, id := range map[string]string{"before": f.Before, "after": f.After} {
		if id != "" {
			if err := core.CheckID("RunAgentInput: forwardedProps.fork."+field, id); err != nil {
				return nil, err
			}
		}
	}
	if f.From == *in.ThreadID {
		return nil, mesh.ErrBadRequest.With("RunAgentInput: forwardedProps.fork.from is the thread itself: a branch needs a new threadId")
	}
	return &f, nil
}

// openBranch makes thread id the branch forwardedProps.fork asks for: it
// forks f.From into id when id does not exist; an existing id must be the
// caller's branch of f.From (a later run on it).
func (h *handler) openBranch(ctx context.Context, id string, f *forkProps, caller core.Caller) error {
	_, err := h.core.ForkAs(ctx, f.From, id, f.Request(), caller)
	if !isExists(err) {
		return err
	}
	// The thread exists: a later run of the branch, or a refusal.
	from, err := h.core.ForkedFrom(ctx, id, caller)
	if err != nil {
		return err
	}
	if from == nil || from.Conversation != f.From {
		return core.ErrNotABranch.With(fmt.Sprintf("thread %s exists and is not a branch of %s: fork into a new threadId", mesh.Clip(id), mesh.Clip(f.From)))
	}
	return nil
}
