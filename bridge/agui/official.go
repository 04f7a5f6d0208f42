package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/mesh"
)

// runAgentInput is AG-UI's RunAgentInput as the official client sends it.
// Client-side tools, context and state are accepted and not used: the
// mesh's tools are its toolhosts'.
type runAgentInput struct {
	ThreadID       *string         `json:"threadId"`
	RunID          *string         `json:"runId"`
	ParentRunID    *string         `json:"parentRunId"`
	State          any             `json:"state"`
	Messages       []inputMessage  `json:"messages"`
	Tools          []any           `json:"tools"`
	Context        []any           `json:"context"`
	ForwardedProps json.RawMessage `json:"forwardedProps"`
	Resume         []resumeEntry   `json:"resume"`
}

type inputMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is the message's text: a string, or the text parts of an array of
// input content parts.
func (m inputMessage) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", fmt.Errorf("message %s: content must be a string or an array of content parts", mesh.Clip(m.ID))
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// resumeEntry answers an interrupt: for a tool approval, interruptId is the
// approval id and payload {"approved": bool} the decision.
type resumeEntry struct {
	InterruptID string `json:"interruptId"`
	Status      string `json:"status"`
	Payload     *struct {
		Approved *bool `json:"approved"`
	} `json:"payload"`
}

// decision is the body sent to the approvers for a resume entry. It names
// no decider: the bridge records the caller's principal.
func (e resumeEntry) decision() ([]byte, error) {
	switch e.Status {
	case "cancelled":
		return []byte(`{"approved": false, "reason": "interrupt cancelled"}`), nil
	case "resolved", "":
		if e.Payload == nil || e.Payload.Approved == nil {
			return nil, mesh.ErrBadRequest.With(fmt.Sprintf(`resume of %s: payload must be {"approved": true|false}`, mesh.Clip(e.InterruptID)))
		}
		return json.Marshal(map[string]any{"approved": *e.Payload.Approved})
	}
	return nil, mesh.ErrBadRequest.With(fmt.Sprintf("resume of %s: status %s is not resolved or cancelled", mesh.Clip(e.InterruptID), mesh.Clip(e.Status)))
}

func (in *runAgentInput) validate() error {
	switch {
	case in.ThreadID == nil || *in.ThreadID == "":
		return mesh.ErrBadRequest.With(`RunAgentInput: "threadId" is required`)
	case in.RunID == nil || *in.RunID == "":
		return mesh.ErrBadRequest.With(`RunAgentInput: "runId" is required`)
	case in.Messages == nil && len(in.Resume) == 0 && !in.hasAction():
		return mesh.ErrBadRequest.With(`RunAgentInput: "messages" is required`)
	}
	if err := core.CheckID(`RunAgentInput: "threadId"`, *in.ThreadID); err != nil {
		return err
	}
	if err := core.CheckID(`RunAgentInput: "runId"`, *in.RunID); err != nil {
		return err
	}
	for _, e := range in.Resume {
		if e.InterruptID == "" {
			return mesh.ErrBadRequest.With(`RunAgentInput: every "resume" entry needs an "interruptId"`)
		}
		if err := core.CheckApprovalID(e.InterruptID); err != nil {
			return err
		}
	}
	return nil
}

// threadFor is what a new thread is: a chat of group, a conversation
// with agent (empty: the default agent), or a branch of another thread
// (fork, fork.go).
type threadFor struct {
	group, agent string
	fork         *forkProps
}

// target is what forwardedProps names: a new thread is a chat of the group
// of forwardedProps.group, or a conversation with the agent of
// forwardedProps.agent (an existing one keeps what it is).
func (in *runAgentInput) target() (threadFor, error) {
	if len(in.ForwardedProps) == 0 || string(in.ForwardedProps) == "null" {
		return threadFor{}, nil
	}
	var props struct {
		Group any `json:"group"`
		Agent any `json:"agent"`
	}
	if err := json.Unmarshal(in.ForwardedProps, &props); err != nil {
		return threadFor{}, nil // forwardedProps is the client's business; only group and agent are read
	}
	var t threadFor
	for _, f := range []struct {
		v    any
		out  *string
		what string
	}{{props.Group, &t.group, "group"}, {props.Agent, &t.agent, "agent"}} {
		switch v := f.v.(type) {
		case nil:
		case string:
			*f.out = v
		default:
			return threadFor{}, mesh.ErrBadRequest.With("RunAgentInput: forwardedProps." + f.what + " must be the name of a " + f.what)
		}
	}
	if t.group != "" && t.agent != "" {
		return threadFor{}, mesh.ErrBadRequest.With("RunAgentInput: forwardedProps names a group or an agent, not both")
	}
	return t, nil
}

// agui serves POST /agui: the official AG-UI endpoint.
func (h *handler) agui(w http.ResponseWriter, r *http.Request) {
	var in runAgentInput
	if err := core.DecodeBody(w, r, h.cfg.MaxBodyBytes, &in, false); err != nil {
		writeError(w, err)
		return
	}
	if p, err := in.action(); err != nil || p.Action == actionFeedback {
		if err != nil {
			writeError(w, err)
			return
		}
		h.feedbackRun(w, r, &in, p)
		return
	}
	caller := core.CallerOf(r)
	dest, start, err := h.starter(r.Context(), &in, caller)
	if err != nil {
		writeError(w, err)
		return
	}
	thread, runID := *in.ThreadID, *in.RunID
	closeStream, opened := h.acquire(w, r)
	if !opened {
		return
	}
	defer closeStream()
	if err := h.openThread(r.Context(), thread, dest, caller); err != nil {
		writeError(w, err)
		return
	}
	rs, err := h.startRun(r.Context(), thread, start)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rs.close()

	out := sse.New(w).Observe(r, "agui")
	if err := out.Start(http.Header{"X-Conversation-Id": {thread}}); err != nil {
		rs.cancelRun()
		return
	}
	tr := newOfficialTranslator(thread, runID)
	emit := func(id uint64, ev mesh.Event) error {
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		return out.Event(id, data)
	}
	if err := emit(0, mesh.RunStarted(thread, runID)); err != nil {
		rs.cancelRun()
		return
	}
	err = rs.each(r.Context(), h.cfg.KeepAlive, func() error { return out.Comment("keep-alive") }, func(sev core.StreamEvent, ev *mesh.Event) error {
		for _, e := range tr.translate(ev) {
			if err := emit(sev.Seq, e); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, core.ErrSlowConsumer):
		out.CutOff()
		_ = emit(0, mesh.RunError(CodeSlowConsumer, "the client did not keep up; the run goes on: follow GET /conversations/"+thread+"/events"))
	case errors.Is(err, core.ErrCredentialExpired):
		_ = emit(0, mesh.RunError(CodeTokenExpired, "the token of this stream expired; the run goes on: follow GET /conversations/"+thread+"/events with a fresh token"))
	}
}

// starter checks everything a RunAgentInput says before anything is
// created, and returns what a new thread is (threadFor) and what starts
// its run: a turn with the last user message, or the decisions of resume.
func (h *handler) starter(ctx context.Context, in *runAgentInput, caller core.Caller) (threadFor, func() (*core.Run, error), error) {
	if err := in.validate(); err != nil {
		return threadFor{}, nil, err
	}
	dest, err := in.target()
	if err == nil {
		dest.fork, err = in.fork()
	}
	switch {
	case err != nil:
	case dest.fork != nil && (dest.group != "" || dest.agent != "" || len(in.Resume) > 0 || in.hasAction()):
		err = mesh.ErrBadRequest.With("RunAgentInput: forwardedProps.fork runs the last user message on a new branch, which keeps the agent or group of the thread it is forked from: no group, agent, action or resume with it")
	case dest.group != "":
		_, err = h.core.Group(dest.group)
	case dest.agent != "":
		_, err = h.core.Agent(ctx, dest.agent)
	}
	if err != nil {
		return threadFor{}, nil, err
	}
	if len(in.Resume) > 0 {
		// Refused before the thread is opened: a refusal creates nothing.
		if !h.core.May(caller, auth.Decide) {
			return threadFor{}, nil, core.ErrForbidden.With("a resume decides approvals, which needs the approver or admin role")
		}
		for _, e := range in.Resume {
			if _, err := e.decision(); err != nil {
				return threadFor{}, nil, err
			}
		}
		return dest, func() (*core.Run, error) { return h.resume(ctx, in.Resume, caller) }, nil
	}
	thread, runID := *in.ThreadID, *in.RunID
	if p, err := in.action(); err != nil || p.Action != "" {
		if err == nil && p.Action != actionRegenerate {
			err = mesh.ErrBadRequest.With(`RunAgentInput: forwardedProps.action "feedback" is not a run of the agent`)
		}
		if err == nil {
			// Only an existing thread has an answer to regenerate.
			_, err = h.core.HeadFor(ctx, thread, caller)
		}
		if err != nil {
			return threadFor{}, nil, err
		}
		return dest, func() (*core.Run, error) { return h.core.Regenerate(ctx, thread, runID, caller) }, nil
	}
	text, ups, err := lastUserInput(in.Messages)
	if err != nil {
		return threadFor{}, nil, err
	}
	if err := h.core.CheckUploads(ups); err != nil {
		return threadFor{}, nil, err
	}
	return dest, func() (*core.Run, error) {
		files, err := h.core.StoreFiles(ctx, thread, ups, caller)
		if err != nil {
			return nil, err
		}
		return h.core.SendTurn(ctx, thread, runID, text, caller, files...)
	}, nil
}

// resume decides the interrupts the client answers and returns the run of
// the first decision (the resume of its approval).
func (h *handler) resume(ctx context.Context, entries []resumeEntry, caller core.Caller) (*core.Run, error) {
	var first *core.Run
	for _, e := range entries {
		body, err := e.decision()
		if err != nil {
			return nil, err
		}
		_, run, err := h.core.Decide(ctx, e.InterruptID, body, caller)
		if err != nil {
			if first != nil {
				first.Close()
			}
			return nil, err
		}
		if first == nil {
			first = run
		} else {
			run.Close()
		}
	}
	return first, nil
}

// lastUserInput is the text and files of the last message, which must be
// the user's.
func lastUserInput(msgs []inputMessage) (string, []core.Upload, error) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return "", nil, mesh.ErrBadRequest.With(`RunAgentInput: the last message must be the user's (role "user"), or "resume" must answer the interrupts`)
	}
	text, err := msgs[len(msgs)-1].text()
	if err != nil {
		return "", nil, mesh.ErrBadRequest.With("RunAgentInput: " + err.Error())
	}
	ups, err := msgs[len(msgs)-1].uploads()
	if err != nil {
		return "", nil, err
	}
	if strings.TrimSpace(text) == "" && len(ups) == 0 {
		return "", nil, mesh.ErrBadRequest.With("RunAgentInput: the last user message is empty")
	}
	return text, ups, nil
}

// isExists reports a conversation created meanwhile by another request.
func isExists(err error) bool { return errors.Is(err, jetstream.ErrKeyExists) }

// officialTranslator adapts the mesh's events of one run to what the
// client that started it expects: its own thread and run ids, one
// RUN_STARTED (sent by the handler), and, after a redelivered attempt
// (run_retried), nothing opened twice. A message or tool call the
// interrupted attempt left open is closed, and the new attempt's copy of it
// comes under a new id ("<id>~<attempt>"), whole; what the interrupted
// attempt completed is not repeated.
//
// Steps pair up within the run, as clients check: a step started again (a
// node's retried run) is not started twice, a step finished that this run
// did not start (a tree node resumed in a later run) is dropped, and the
// steps still open when the run ends (a tree that pauses for an approval)
// are finished before its end.
type officialTranslator struct {
	thread, run string
	attempt     int
	open        map[string]mesh.EventType // message or tool call id → its END type
	done        map[string]bool
	partial     map[string]bool // closed by a retry: re-sent under a new id
	results     map[string]bool
	steps       []string // open, in the order they started
}

func newOfficialTranslator(thread, run string) *officialTranslator {
	return &officialTranslator{thread: thread, run: run, attempt: 1, open: map[string]mesh.EventType{}, done: map[string]bool{}, partial: map[string]bool{}, results: map[string]bool{}}
}

// retriedPrefixes are the id prefixes a run_retried event names: the items
// of one tree node's run; none means every item of the run.
func retriedPrefixes(ev *mesh.Event) []string {
	v, _ := ev.Value.(map[string]any)
	list, _ := v["prefixes"].([]any)
	var out []string
	for _, p := range list {
		if s, ok := p.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	if typed, ok := v["prefixes"].([]string); ok {
		out = append(out, typed...)
	}
	return out
}

func hasAnyPrefix(id string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

func (t *officialTranslator) translate(ev *mesh.Event) []mesh.Event {
	if ev.Type == mesh.EventCustom && ev.Name == mesh.CustomRunRetried {
		t.attempt++
		out := []mesh.Event{*ev}
		prefixes := retriedPrefixes(ev)
		for oid, end := range t.open {
			if !hasAnyPrefix(oid, prefixes) {
				continue // another branch's, still streaming
			}
			e := mesh.Event{Type: end}
			if end == mesh.EventToolCallEnd {
				e.ToolCallID = oid
			} else {
				e.MessageID = oid
			}
			out = append(out, e)
			t.partial[oid] = true
			delete(t.open, oid)
		}
		return out
	}
	t.renameRetried(ev)
	id := ev.MessageID
	if ev.ToolCallID != "" && ev.Type != mesh.EventToolCallResult {
		id = ev.ToolCallID
	}
	switch ev.Type {
	case mesh.EventRunStarted:
		return nil
	case mesh.EventRunFinished, mesh.EventRunError:
		if ev.Type == mesh.EventRunFinished {
			ev.ThreadID, ev.RunID = t.thread, t.run
		}
		var out []mesh.Event
		for i := len(t.steps) - 1; i >= 0; i-- {
			out = append(out, mesh.Event{Type: mesh.EventStepFinished, StepName: t.steps[i]})
		}
		t.steps = nil
		return append(out, *ev)
	case mesh.EventStepStarted:
		if slices.Contains(t.steps, ev.StepName) {
			return nil
		}
		t.steps = append(t.steps, ev.StepName)
	case mesh.EventStepFinished:
		i := slices.Index(t.steps, ev.StepName)
		if i < 0 {
			return nil
		}
		t.steps = slices.Delete(t.steps, i, i+1)
	case mesh.EventTextMessageStart, mesh.EventToolCallStart, mesh.EventReasoningStart, mesh.EventReasoningMessageStart:
		if t.done[id] || t.open[id] != "" {
			return nil
		}
		t.open[id] = closing[ev.Type]
	case mesh.EventTextMessageContent, mesh.EventToolCallArgs, mesh.EventReasoningMessageContent:
		if t.open[id] == "" {
			return nil
		}
	case mesh.EventTextMessageEnd, mesh.EventToolCallEnd, mesh.EventReasoningEnd, mesh.EventReasoningMessageEnd:
		if t.open[id] == "" {
			return nil
		}
		delete(t.open, id)
		t.done[id] = true
	case mesh.EventToolCallResult:
		if t.results[ev.ToolCallID] {
			return nil
		}
		t.results[ev.ToolCallID] = true
	}
	return []mesh.Event{*ev}
}

// closing is the event that ends what each start event opens: a reasoning
// span and its message have ids of their own, so one map holds them all.
var closing = map[mesh.EventType]mesh.EventType{
	mesh.EventTextMessageStart:      mesh.EventTextMessageEnd,
	mesh.EventToolCallStart:         mesh.EventToolCallEnd,
	mesh.EventReasoningStart:        mesh.EventReasoningEnd,
	mesh.EventReasoningMessageStart: mesh.EventReasoningMessageEnd,
}

// renameRetried gives the new attempt's copy of an item the interrupted
// attempt left open its own id.
func (t *officialTranslator) renameRetried(ev *mesh.Event) {
	suffix := "~" + strconv.Itoa(t.attempt)
	if ev.MessageID != "" && t.partial[ev.MessageID] && ev.Type != mesh.EventToolCallResult {
		ev.MessageID += suffix
	}
	if ev.ToolCallID != "" && t.partial[ev.ToolCallID] {
		ev.ToolCallID += suffix
	}
	if ev.ParentMessageID != "" && t.partial[ev.ParentMessageID] {
		ev.ParentMessageID += suffix
	}
}
