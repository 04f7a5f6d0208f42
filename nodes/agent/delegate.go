package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/a2a"
)

// This file runs the calls of a turn that go to sub-agents over A2A, and
// the a2a steps of the tree, which are such calls.
//
// A call is a message/send with the model's message as a text part, the
// turn's Authorization header (from the work item: the caller's, or on a
// resume the decider's) and the conversation's session id as X-Session-ID.
// Its answer becomes the tool result, except an input-required task: that
// pauses the run on a proxy approval (RemoteTaskID, RemoteAgentName) whose
// decision is forwarded to the sub-agent as message/send with the task id
// and the text "approved" or "rejected".
//
// Exactly once: every call is recorded in the calls bucket under its key
// (the call id; for an approved call or a forwarded decision, the approval
// id) before it is sent, and its outcome after. A run executed again
// (redelivery after a crash) reuses a recorded outcome instead of calling
// again. A call found started but not finished was cut off mid-flight:
//   - a forwarded decision is not sent again; tasks/get on the remote task
//     tells where it stands (if it still waits for input, a new proxy
//     approval asks again, which is safe whether or not the decision
//     arrived);
//   - an approved call to a destructive sub-agent is not sent again: the
//     model reads that it may have run (as the toolhost's call_interrupted);
//   - a first call to a sub-agent that is not destructive is sent again with
//     the same messageId, which servers that deduplicate messages run once.

// remoteRecord is what the calls bucket holds for a call to a sub-agent:
// the toolhost's record, plus the sub-agent's outcome.
type remoteRecord struct {
	mesh.CallRecord
	A2A *remoteOutcome `json:"a2a,omitempty"`
}

// remoteSet is the sub-agents of the step this turn runs.
func (t *turn) remoteSet() *remoteSet { return t.step.remotes }

// remote finds a sub-agent of this turn by its configured name.
func (t *turn) remote(name string) *remoteAgent { return t.remoteSet().byName[name] }

// remoteHeaders are the headers of every call this turn makes to a
// sub-agent: the caller's Authorization, forwarded as is and never stored,
// so that the sub-agent sees who asks; and the conversation's session id,
// so that its logs can be matched with this turn's.
func (t *turn) remoteHeaders() http.Header {
	h := http.Header{}
	if v := t.hdr.Get(mesh.HeaderAuthorization); v != "" {
		h.Set(mesh.HeaderAuthorization, v)
	}
	if sid := t.sid(); sid != "" {
		h.Set(mesh.HeaderSessionID, sid)
	}
	return h
}

// delegateMessage is the message argument of a call to a sub-agent.
func delegateMessage(args map[string]any) (string, error) {
	v, ok := args["message"]
	if !ok {
		return "", errors.New(`the argument "message" is required: the task for the agent, in plain words`)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf(`the argument "message" must be a string, not %T`, v)
	}
	if strings.TrimSpace(s) == "" {
		return "", errors.New(`the argument "message" must not be empty`)
	}
	return s, nil
}

// runA2A runs an a2a step: its prompt (placeholders resolved), or without
// one the user's message, goes to the remote agent, whose answer is the
// step's reply. It is a call like a model's call of a sub-agent, so it is
// recorded, approved when the remote agent is destructive, and paused on a
// proxy approval when the remote agent asks for one.
func (t *turn) runA2A(ctx context.Context) {
	r := t.step.remotes.list[0]
	text := resolvePrompt(t.step.cfg.Prompt, t.state())
	if strings.TrimSpace(text) == "" {
		text = t.conv.Tree.UserMessage
	}
	call := mesh.ToolCall{
		ID: t.idPrefix() + "-c0-0", Name: r.fn, Server: remoteServerPrefix + r.cfg.Name, Tool: r.cfg.Name,
		Arguments: map[string]any{"message": text}, Destructive: r.cfg.IsDestructive(),
	}
	if len(t.lastCalls()) == 0 {
		m := t.message(t.idPrefix()+"-a0", mesh.RoleAssistant, "")
		m.ToolCalls = []mesh.ToolCall{call}
		t.ex.add(m)
	}
	if t.resolvePending(ctx) {
		t.end.outcome = mesh.OutcomeInterrupt
		return
	}
	if t.end.rejected != "" {
		t.stopRejected()
		return
	}
	if ctx.Err() != nil {
		t.cancelled(ctx)
		return
	}
	var res *mesh.Message
	for _, list := range [][]mesh.Message{t.conv.Messages, t.ex.added} {
		for i := range list {
			if list[i].Role == mesh.RoleTool && list[i].ToolCallID == call.ID {
				res = &list[i]
			}
		}
	}
	if res == nil {
		t.end.errCode, t.end.errText = mesh.CodeInternal, "the call to the remote agent left no result"
		t.end.outcome = mesh.OutcomeError
		return
	}
	if res.IsError {
		t.end.errCode, t.end.errText = mesh.CodeSubAgentError, res.Content
		t.notice(fmt.Sprintf("Step %s failed: %s", t.step.cfg.Name, res.Content))
		t.end.outcome = mesh.OutcomeError
		return
	}
	id := t.idPrefix() + "-a1"
	t.ex.add(t.message(id, mesh.RoleAssistant, res.Content))
	t.emit(mesh.Event{Type: mesh.EventTextMessageStart, MessageID: id, Role: string(mesh.RoleAssistant), Name: t.author()})
	t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: id, Delta: res.Content})
	t.emit(mesh.Event{Type: mesh.EventTextMessageEnd, MessageID: id})
	t.end.response = res.Content
	t.end.outcome = mesh.OutcomeSuccess
}

// callRemote sends a call to its sub-agent: a first call (key = call id) or
// one approved by a human (key = approval id). It reports whether the run
// paused on a proxy approval.
func (t *turn) callRemote(ctx context.Context, call mesh.ToolCall, key string, approved bool) (paused bool) {
	name, _ := remoteName(call)
	r := t.remote(name)
	if r == nil {
		t.result(call, fmt.Sprintf("error: sub-agent %s is not configured (any more); the call was not sent", name), true)
		return false
	}
	text, err := delegateMessage(call.Arguments)
	if err != nil {
		t.result(call, "error: "+err.Error(), true)
		return false
	}
	hdr := t.remoteHeaders()
	send := func(ctx context.Context) (*remoteOutcome, error) {
		return r.send(ctx, hdr, a2a.SendParams{Message: a2a.Message{
			Kind: a2a.KindMessage, MessageID: key, Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)},
		}})
	}
	interrupted := send
	if approved {
		interrupted = func(context.Context) (*remoteOutcome, error) {
			return &remoteOutcome{Error: fmt.Sprintf("error: the call to sub-agent %s was cut off before its answer arrived and may have run; it is not sent again", name)}, nil
		}
	}
	out := t.recorded(ctx, r, key, interrupted, send)
	return t.settleRemote(ctx, call, r, out, false)
}

// forwardDecision sends the decision of a proxy approval to the sub-agent
// whose task waits for it, and reports whether the run paused again.
func (t *turn) forwardDecision(ctx context.Context, call mesh.ToolCall, ap *mesh.Approval) (paused bool) {
	r := t.remote(ap.RemoteAgentName)
	if r == nil {
		t.result(call, fmt.Sprintf("error: sub-agent %s is not configured (any more); the decision was not forwarded", ap.RemoteAgentName), true)
		return false
	}
	approved := ap.Status == mesh.ApprovalApproved
	word := "rejected"
	if approved {
		word = "approved"
	}
	hdr := t.remoteHeaders()
	current := func(ctx context.Context) (*remoteOutcome, error) { return r.getTask(ctx, hdr, ap.RemoteTaskID) }
	forward := func(ctx context.Context) (*remoteOutcome, error) {
		out, err := r.send(ctx, hdr, a2a.SendParams{Message: a2a.Message{
			Kind: a2a.KindMessage, MessageID: ap.UUID + "-" + word, Role: a2a.RoleUser, TaskID: ap.RemoteTaskID,
			Parts: []a2a.Part{a2a.TextPart(word)},
		}})
		var rpc *a2a.Error
		if errors.As(err, &rpc) {
			// The task may have moved on without this decision (decided on
			// the sub-agent itself, or finished): report where it stands.
			if cur, gerr := current(ctx); gerr == nil && cur.State != a2a.StateInputRequired {
				return cur, nil
			}
		}
		return out, err
	}
	t.log.Info().Str("sub_agent", r.cfg.Name).Str("approval", ap.UUID).Str("remote_task", ap.RemoteTaskID).Str("decision", word).Msg("forwarding decision to sub-agent")
	out := t.recorded(ctx, r, ap.UUID, current, forward)
	paused = t.settleRemote(ctx, call, r, out, !approved)
	if !paused && !approved && !t.a.simple {
		t.end.rejected = call.Name // ends the tree, as a rejection here does (stopRejected)
	}
	return paused
}

// recorded runs call once per key, recording its outcome in the calls
// bucket; see the top of this file. A failure of the call is an outcome
// with Error set: the model reads it.
func (t *turn) recorded(ctx context.Context, r *remoteAgent, key string, interrupted, call func(context.Context) (*remoteOutcome, error)) *remoteOutcome {
	kv, recKey := t.a.cfg.Resources.Calls, mesh.SubAgentCallKey(key)
	rec := remoteRecord{CallRecord: mesh.CallRecord{
		CallID: key, Server: remoteServerPrefix + r.cfg.Name, Tool: r.cfg.Name, State: mesh.CallStarted,
		Host: t.a.cfg.NodeID, StartedAt: time.Now().UTC(),
	}}
	data, err := json.Marshal(rec)
	if err != nil {
		return &remoteOutcome{Error: fmt.Sprintf("error: encode the record of the call: %v", err)}
	}
	run := call
	rev, err := kv.Create(ctx, recKey, data)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		entry, gerr := kv.Get(ctx, recKey)
		if gerr != nil {
			return &remoteOutcome{Error: fmt.Sprintf("error: read the record of call %s: %v", key, gerr)}
		}
		var prev remoteRecord
		if err := json.Unmarshal(entry.Value(), &prev); err != nil {
			return &remoteOutcome{Error: fmt.Sprintf("error: decode the record of call %s: %v", key, err)}
		}
		if prev.State == mesh.CallDone && prev.A2A != nil {
			t.log.Info().Str("sub_agent", r.cfg.Name).Str("call", key).Msg("sub-agent call already made; using its recorded outcome")
			return prev.A2A
		}
		t.log.Warn().Str("sub_agent", r.cfg.Name).Str("call", key).Str("host", prev.Host).Msg("sub-agent call was cut off by an earlier attempt")
		rec.StartedAt = prev.StartedAt
		rev, run = entry.Revision(), interrupted
	case err != nil:
		return &remoteOutcome{Error: fmt.Sprintf("error: could not record the call to sub-agent %s, so it was not sent: %v", r.cfg.Name, err)}
	}

	out, err := run(ctx)
	if err != nil {
		re := classify(ctx, err)
		t.log.Warn().Err(re.err).Str("sub_agent", r.cfg.Name).Str("call", key).Str("error_kind", re.kind).Msg("sub-agent call failed")
		out = &remoteOutcome{Error: re.text(r.cfg.Name)}
	} else if out.Error == "" {
		t.log.Info().Str("sub_agent", r.cfg.Name).Str("call", key).Str("state", string(out.State)).Str("remote_task", out.TaskID).Msg("sub-agent answered")
	}
	if ctx.Err() != nil {
		// Cut short (cancel, shutdown): the record stays started, so that a
		// run executed again treats the call as cut off.
		return out
	}
	rec.State, rec.FinishedAt, rec.A2A = mesh.CallDone, time.Now().UTC(), out
	rec.Result = &mesh.ToolResult{Text: out.Text, IsError: out.Error != ""}
	if out.Error != "" {
		rec.Result.Text = out.Error
	}
	if data, err = json.Marshal(rec); err == nil {
		_, err = kv.Update(ctx, recKey, data, rev)
	}
	if err != nil {
		t.log.Warn().Err(err).Str("call", key).Msg("record sub-agent call outcome")
	}
	return out
}

// settleRemote turns a sub-agent's outcome into the call's result, or
// pauses the run on a proxy approval when the sub-agent waits for one.
// rejected says the outcome answers a forwarded rejection.
func (t *turn) settleRemote(ctx context.Context, call mesh.ToolCall, r *remoteAgent, out *remoteOutcome, rejected bool) (paused bool) {
	name := r.cfg.Name
	text := strings.TrimSpace(out.Text)
	if text == "" {
		text = "(no text)"
	}
	if rejected && out.Error == "" && out.State != a2a.StateInputRequired {
		t.result(call, fmt.Sprintf("rejected: the approver rejected this call; sub-agent %s answered (%s): %s", name, stateName(out.State), text), true)
		return false
	}
	switch {
	case out.Error != "":
		t.result(call, out.Error, true)
	case out.State == "" || out.State == a2a.StateCompleted:
		if strings.TrimSpace(out.Text) == "" {
			t.result(call, fmt.Sprintf("sub-agent %s completed the task without a text answer", name), false)
			break
		}
		t.result(call, strings.TrimSpace(out.Text), false)
	case out.State == a2a.StateInputRequired:
		if err := t.pauseProxy(ctx, call, r, out); err != nil {
			t.result(call, fmt.Sprintf("error: sub-agent %s waits for an approval, but it could not be requested here: %v", name, err), true)
			return false
		}
		return true
	case out.State == a2a.StateAuthRequired:
		t.result(call, fmt.Sprintf("error: sub-agent %s needs authentication: %s", name, text), true)
	default:
		t.result(call, fmt.Sprintf("error: sub-agent %s: task %s: %s", name, stateName(out.State), text), true)
	}
	return false
}

func stateName(s a2a.TaskState) string {
	if s == "" {
		return "message"
	}
	return string(s)
}

// pauseProxy creates the proxy approval of a sub-agent's input-required
// task and pauses the run on it: the decision a person makes here is
// forwarded to the sub-agent's task.
func (t *turn) pauseProxy(ctx context.Context, call mesh.ToolCall, r *remoteAgent, out *remoteOutcome) error {
	what := strings.TrimSpace(out.Approval)
	if what == "" {
		what = strings.TrimSpace(out.Text)
	}
	if what == "" {
		what = "(no description)"
	}
	ap := t.newApproval(call)
	ap.RemoteTaskID = out.TaskID
	ap.RemoteAgentName = r.cfg.Name
	ap.Description = fmt.Sprintf("sub-agent %s asks for approval: %s", r.cfg.Name, what)
	return t.await(ctx, call, ap)
}
