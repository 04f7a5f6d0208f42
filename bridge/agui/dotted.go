package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/mesh"
)

// Headers of the dialects' answers.
const (
	headerConversationID = "X-Conversation-Id"
)

// registerDialects mounts the endpoints of the dotted and the simple
// dialects and the AI SDK's (aisdk.go).
func (h *handler) registerDialects(mux core.Mux) {
	mux.HandleFunc("POST /api/conversation", h.dotted)
	mux.HandleFunc("POST /api/chat", h.simple)
	mux.HandleFunc("POST "+AISDKPath, h.aisdk)
}

// conversationBody is the dotted dialect's request.
type conversationBody struct {
	Message   *string `json:"message"`
	SessionID *string `json:"sessionId"`
	// Action "regenerate" answers the session's last user message again
	// (no message then; actions.go).
	Action string `json:"action"`
}

// dotted serves POST /api/conversation: the dotted dialect (message.start,
// message.content … events).
func (h *handler) dotted(w http.ResponseWriter, r *http.Request) {
	var in conversationBody
	if err := core.DecodeBody(w, r, h.cfg.MaxBodyBytes, &in, false); err != nil {
		writeError(w, err)
		return
	}
	regenerate := in.Action == actionRegenerate
	switch {
	case in.Action != "" && !regenerate:
		writeError(w, mesh.ErrBadRequest.With(`field "action" is "regenerate" or absent`))
		return
	case regenerate && (in.SessionID == nil || *in.SessionID == ""):
		writeError(w, mesh.ErrBadRequest.With(`"action": "regenerate" needs the "sessionId" whose last answer to regenerate`))
		return
	case in.Message == nil && !regenerate:
		writeError(w, mesh.ErrBadRequest.With(`field "message" is required: {"message": "…", "sessionId": "…"}`))
		return
	}
	id := ""
	if in.SessionID != nil {
		id = *in.SessionID
	}
	var err error
	if regenerate {
		err = core.CheckConversationID(id)
	} else {
		err = checkInput(*in.Message, id, "sessionId")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	closeStream, opened := h.acquire(w, r)
	if !opened {
		return
	}
	defer closeStream()
	var rs *runStream
	var ok bool
	if regenerate {
		rs, ok = h.startRegenerate(w, r, id)
	} else {
		rs, ok = h.startDialectRun(w, r, id, *in.Message)
	}
	if !ok {
		return
	}
	defer rs.close()

	out := sse.New(w).Observe(r, "dotted")
	if err := out.Start(http.Header{headerConversationID: {rs.session}}); err != nil {
		rs.cancelRun()
		return
	}
	tr := newDottedTranslator(rs.runID)
	tr.oneMessage = h.cfg.DottedOneMessage
	emit := func(evs []dottedEvent) error { return writeJSON(out, evs) }
	if err := emit(tr.begin(nowMillis())); err != nil {
		rs.cancelRun()
		h.logStreamEnd(r, "dotted", rs, out, "", err)
		return
	}
	err = rs.each(r.Context(), h.cfg.KeepAlive, func() error { return out.Comment("keep-alive") }, func(_ core.StreamEvent, ev *mesh.Event) error {
		return emit(tr.translate(ev))
	})
	if msg, ok := h.streamEndText(r, rs, tr.ended, err); ok {
		if errors.Is(err, core.ErrSlowConsumer) {
			out.CutOff()
		}
		_ = emit([]dottedEvent{{Type: "error", Timestamp: nowMillis(), Error: &dialectError{Code: slowOrInternal(err), Message: msg}}})
	}
	h.logStreamEnd(r, "dotted", rs, out, tr.outcome, err)
}

// checkInput validates a dialect's message and conversation id.
func checkInput(message, id, idField string) error {
	if strings.TrimSpace(message) == "" {
		return mesh.ErrBadRequest.With(`field "message" must not be empty`)
	}
	if id != "" {
		return core.CheckID(fmt.Sprintf("field %q", idField), id)
	}
	return nil
}

// startDialectRun opens conversation id (see [handler.openConversation]) and
// starts a turn with message in it, answering errors with their status
// (400, 409 for a conversation waiting for approval or running, 503).
func (h *handler) startDialectRun(w http.ResponseWriter, r *http.Request, id, message string) (*runStream, bool) {
	caller := core.CallerOf(r)
	id, err := h.openConversation(r.Context(), id, caller)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	rs, err := h.startRun(r.Context(), id, func() (*core.Run, error) { return h.core.Send(r.Context(), id, message, caller) })
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return rs, true
}

// openConversation returns the conversation a dialect's request names: id
// when it exists, a new one with id when it does not, a new one with a new
// id when id is empty.
func (h *handler) openConversation(ctx context.Context, id string, caller core.Caller) (string, error) {
	if id == "" {
		conv, err := h.core.NewConversation(ctx, caller)
		if err != nil {
			return "", err
		}
		return conv.ID, nil
	}
	return id, h.openThread(ctx, id, threadFor{}, caller)
}

// openThread makes sure conversation id exists and is the caller's: it
// creates it (a chat of a group, a conversation with an agent, or a branch
// of another thread, as target says) when it does not exist; one that
// belongs to someone else is not found, never joined.
func (h *handler) openThread(ctx context.Context, id string, target threadFor, caller core.Caller) error {
	if target.fork != nil {
		return h.openBranch(ctx, id, target.fork, caller)
	}
	head, err := h.core.Sessions.Head(ctx, id)
	if errors.Is(err, mesh.ErrSessionNotFound) {
		if target.agent != "" {
			_, err = h.core.CreateFor(ctx, id, target.agent, caller)
		} else {
			_, err = h.core.CreateChat(ctx, id, target.group, caller)
		}
		if !isExists(err) {
			return err
		}
		// Created meanwhile by another request: whose is it?
		head, err = h.core.Sessions.Head(ctx, id)
	}
	if owner, gone := mesh.GoneOwner(err); gone && !h.core.Sees(caller, owner) {
		return mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %q not found", id)) // deleted, and not theirs
	}
	if err != nil {
		return err
	}
	if !h.core.Sees(caller, head.Owner) {
		return mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %q not found", id))
	}
	return nil
}

// streamEndText says whether a stream that stopped with err (from
// runStream.each) still owes its client a final error event, and its text:
// not when the run ended, nor when the client is gone.
func (h *handler) streamEndText(r *http.Request, rs *runStream, ended bool, err error) (string, bool) {
	switch {
	case ended || errors.Is(err, errEnded) || r.Context().Err() != nil:
		return "", false
	case errors.Is(err, core.ErrSlowConsumer):
		return "the client did not keep up; the run goes on: follow GET /conversations/" + rs.session + "/events", true
	case errors.Is(err, core.ErrCredentialExpired):
		return "the token of this stream expired; the run goes on: follow GET /conversations/" + rs.session + "/events with a fresh token", true
	case errors.Is(err, core.ErrFollowerClosed):
		return "the bridge stopped following the run; it goes on: follow GET /conversations/" + rs.session + "/events", true
	}
	return "", false // a write failed: the client is gone
}

// logStreamEnd logs the end of a dialect's stream: how long it lasted, how
// many events it sent and why it ended (reason ended, with the run's
// outcome, or why it stopped first). A client that left before the run
// ended, whose run was therefore cancelled, is a warning.
func (h *handler) logStreamEnd(r *http.Request, dialect string, rs *runStream, out *sse.Writer, outcome string, err error) {
	reason := "ended"
	switch {
	case outcome != "" || errors.Is(err, errEnded):
	case r.Context().Err() != nil:
		reason = "client_left"
	case errors.Is(err, core.ErrSlowConsumer):
		reason = "slow_consumer"
	case errors.Is(err, core.ErrCredentialExpired):
		reason = "token_expired"
	case errors.Is(err, core.ErrFollowerClosed):
		reason = "follower_closed"
	default:
		reason = "write_failed" // the client is gone
	}
	ev := h.log.Info()
	if reason == "client_left" || reason == "write_failed" {
		ev = h.log.Warn()
	}
	ev = ev.Str("dialect", dialect).Str("session", rs.session).Str("run", rs.runID).
		Dur("duration", time.Since(rs.started)).Int("events", out.Events()).Str("reason", reason)
	if outcome != "" {
		ev = ev.Str("outcome", outcome)
	}
	if reason == "client_left" || reason == "write_failed" {
		ev.Msg("client left early; run cancelled")
		return
	}
	ev.Msg("stream closed")
}

func slowOrInternal(err error) string {
	switch {
	case errors.Is(err, core.ErrSlowConsumer):
		return CodeSlowConsumer
	case errors.Is(err, core.ErrCredentialExpired):
		return CodeTokenExpired
	}
	return mesh.CodeInternal
}

// dialectError is the error object of both dialects.
type dialectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// ResetAt is the simple dialect's: when a rate limit resets.
	ResetAt string `json:"resetAt,omitempty"`
	Details any    `json:"details,omitempty"`
}

// retryOf is when a run that ended on a rate limit may try again, as its
// RUN_ERROR's metadata says (the model provider asked to wait).
func retryOf(e *mesh.Event) (retryAfter float64, resetAt string, ok bool) {
	retryAfter, _ = e.Metadata["retryAfter"].(float64)
	resetAt, _ = e.Metadata["resetAt"].(string)
	return retryAfter, resetAt, resetAt != ""
}

// withDetail sets details[key] of e.
func (e *dialectError) withDetail(key string, value any) *dialectError {
	details, _ := e.Details.(map[string]any)
	if details == nil {
		details = map[string]any{}
	}
	details[key] = value
	e.Details = details
	return e
}

// dottedEvent is one event of the dotted dialect; each type fills its fields.
type dottedEvent struct {
	Type        string         `json:"type"`
	Timestamp   int64          `json:"timestamp"`
	MessageID   string         `json:"messageId,omitempty"`
	Content     *string        `json:"content,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	ToolCallID  string         `json:"toolCallId,omitempty"`
	ActivityID  string         `json:"activityId,omitempty"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Input       any            `json:"input,omitempty"`
	Output      any            `json:"output,omitempty"`
	State       any            `json:"state,omitempty"`
	Patch       any            `json:"patch,omitempty"`
	Approval    any            `json:"approval,omitempty"`
	Feedback    any            `json:"feedback,omitempty"`
	Error       *dialectError  `json:"error,omitempty"`
}

// dottedTranslator turns the AG-UI events of one run into the dotted
// dialect. Events first go through the official translator, which drops
// what a retried attempt sends twice.
type dottedTranslator struct {
	run   string
	norm  *officialTranslator
	calls toolCalls
	steps []step
	nstep int
	held  *dottedEvent // the last message.end, until another event or the end
	ended bool
	// outcome is how the run ended: success, interrupt, cancelled or error.
	outcome string
	// text holds back the open message's content until it makes a chunk
	// of dottedChunks; textMsg is that message.
	text    chunker
	textMsg string
	// oneMessage sends the turn as one message whose id is the run's: the
	// model's messages are its paragraphs, tool calls fall inside it.
	oneMessage bool
	wroteText  bool
}

type step struct{ name, id string }

func newDottedTranslator(run string) *dottedTranslator {
	return &dottedTranslator{run: run, norm: newOfficialTranslator("", run), calls: newToolCalls(), text: chunker{size: dottedChunks}}
}

func (t *dottedTranslator) activityID() string { return t.run + "-thinking" }

// begin is the stream's first events: the thinking activity, after the
// turn's message.start when the turn is one message.
func (t *dottedTranslator) begin(ts int64) []dottedEvent {
	thinking := dottedEvent{Type: "activity.start", Timestamp: ts, ActivityID: t.activityID(), Name: "thinking", Description: "Processing your request..."}
	if t.oneMessage {
		return []dottedEvent{{Type: "message.start", Timestamp: ts, MessageID: t.run}, thinking}
	}
	return []dottedEvent{thinking}
}

func (t *dottedTranslator) translate(ev *mesh.Event) []dottedEvent {
	var out []dottedEvent
	for _, e := range t.norm.translate(ev) {
		out = t.one(out, &e)
	}
	return out
}

// one appends what e becomes to out.
func (t *dottedTranslator) one(out []dottedEvent, e *mesh.Event) []dottedEvent {
	ts := e.Timestamp
	if ts == 0 {
		ts = nowMillis()
	}
	emit := func(d dottedEvent) []dottedEvent {
		d.Timestamp = ts
		if t.held != nil {
			out = append(out, *t.held)
			t.held = nil
		}
		return append(out, d)
	}
	content := func(chunks ...string) []dottedEvent {
		for _, c := range chunks {
			if c != "" {
				out = emit(dottedEvent{Type: "message.content", MessageID: t.textMsg, Content: &c})
			}
		}
		return out
	}
	msgID := e.MessageID
	if t.oneMessage {
		msgID = t.run
	}
	if e.Type != mesh.EventTextMessageContent || msgID != t.textMsg {
		// Whatever comes next, the open message's rest goes first.
		out = content(t.text.flush())
	}
	switch e.Type {
	case mesh.EventTextMessageStart:
		if t.oneMessage {
			if t.wroteText { // the next paragraph of the one message
				t.textMsg = msgID
				return content(t.text.add("\n\n")...)
			}
			return out
		}
		return emit(dottedEvent{Type: "message.start", MessageID: e.MessageID})
	case mesh.EventTextMessageContent:
		t.textMsg = msgID
		if e.DeltaText() != "" {
			t.wroteText = true
		}
		return content(t.text.add(e.DeltaText())...)
	case mesh.EventTextMessageEnd:
		if t.oneMessage {
			return out
		}
		out = emit(dottedEvent{Type: "message.end", MessageID: e.MessageID})
		held := out[len(out)-1]
		t.held = &held
		return out[:len(out)-1]
	case mesh.EventToolCallStart, mesh.EventToolCallArgs:
		t.calls.add(e)
	case mesh.EventToolCallEnd:
		name, input := t.calls.end(e.ToolCallID)
		return emit(dottedEvent{Type: "tool_call.start", ToolCallID: e.ToolCallID, Name: name, Input: input})
	case mesh.EventToolCallResult:
		d := dottedEvent{Type: "tool_call.end", ToolCallID: e.ToolCallID}
		if code, msg, failed := toolFailure(e); failed {
			d.Error = &dialectError{Code: code, Message: msg}
		} else {
			d.Output = parseOutput(e.Content)
		}
		return emit(d)
	case mesh.EventStateSnapshot:
		state := e.Snapshot
		if state == nil {
			state = map[string]any{}
		}
		return emit(dottedEvent{Type: "state.snapshot", State: state})
	case mesh.EventStateDelta:
		return emit(dottedEvent{Type: "state.delta", Patch: e.Delta})
	case mesh.EventStepStarted:
		t.nstep++
		s := step{name: e.StepName, id: t.run + "-step" + strconv.Itoa(t.nstep)}
		t.steps = append(t.steps, s)
		return emit(dottedEvent{Type: "activity.start", ActivityID: s.id, Name: s.name})
	case mesh.EventStepFinished:
		for i := len(t.steps) - 1; i >= 0; i-- {
			if t.steps[i].name == e.StepName {
				id := t.steps[i].id
				t.steps = append(t.steps[:i], t.steps[i+1:]...)
				return emit(dottedEvent{Type: "activity.end", ActivityID: id})
			}
		}
	case mesh.EventCustom:
		switch e.Name {
		case mesh.CustomApprovalRequested:
			t.calls.approval(approvalOf(e.Value))
		case mesh.CustomApprovalDecided:
			if ap := approvalOf(e.Value); ap != nil {
				t.calls.approval(ap)
				return emit(dottedEvent{Type: "approval.decided", Approval: decidedView{UUID: ap.UUID, Status: ap.Status}})
			}
		case mesh.CustomFeedback:
			// A user rated a message: {rating, comment?, by} of messageId.
			if v, ok := e.Value.(map[string]any); ok {
				id, _ := v["messageId"].(string)
				fb := map[string]any{}
				for _, k := range []string{"rating", "comment", "by"} {
					if x, ok := v[k]; ok {
						fb[k] = x
					}
				}
				return emit(dottedEvent{Type: "message.feedback", MessageID: id, Feedback: fb})
			}
		}
	case mesh.EventRunFinished, mesh.EventRunError:
		return append(out, t.end(e, ts)...)
	}
	return out
}

// end closes the activities, releases the held message.end with the run's
// metadata, and adds the run's outcome when it is not a plain success.
func (t *dottedTranslator) end(e *mesh.Event, ts int64) []dottedEvent {
	t.ended, t.outcome = true, "error"
	if e.Type == mesh.EventRunFinished {
		t.outcome = string(mesh.OutcomeSuccess)
		if e.Outcome != nil {
			t.outcome = string(e.Outcome.Type)
		}
	}
	var out []dottedEvent
	for i := len(t.steps) - 1; i >= 0; i-- {
		out = append(out, dottedEvent{Type: "activity.end", Timestamp: ts, ActivityID: t.steps[i].id})
	}
	t.steps = nil
	out = append(out, dottedEvent{Type: "activity.end", Timestamp: ts, ActivityID: t.activityID()})
	if t.oneMessage {
		t.held = &dottedEvent{Type: "message.end", MessageID: t.run}
	}
	if t.held != nil {
		held := *t.held
		held.Timestamp = ts
		md := map[string]any{}
		if intent := intentOf(e); intent != "" {
			md["intent"] = intent
		}
		if n, ok := totalTokens(e.Result); ok {
			md["totalTokens"] = n
		}
		if len(md) > 0 {
			held.Metadata = md
		}
		out = append(out, held)
		t.held = nil
	}
	switch {
	case e.Type == mesh.EventRunError:
		code := e.Code
		if code == "" {
			code = mesh.CodeInternal
		}
		de := &dialectError{Code: code, Message: e.Message}
		if wait, reset, ok := retryOf(e); ok {
			de.withDetail("retryAfter", wait).withDetail("resetAt", reset)
		}
		out = append(out, dottedEvent{Type: "error", Timestamp: ts, Error: de})
	case e.Outcome != nil && e.Outcome.Type == mesh.OutcomeInterrupt:
		for _, in := range e.Outcome.Interrupts {
			out = append(out, dottedEvent{Type: "approval.requested", Timestamp: ts, Approval: t.calls.view(in)})
		}
	case e.Outcome != nil && e.Outcome.Type == mesh.OutcomeCancelled:
		out = append(out, dottedEvent{Type: "error", Timestamp: ts, Error: &dialectError{Code: mesh.CodeCancelled, Message: "the turn was cancelled"}})
	}
	return out
}

// toolCalls remembers the tool calls and approvals of a run: names,
// accumulated arguments, and what an interrupt needs to describe itself.
type toolCalls struct {
	names     map[string]string
	args      map[string]*strings.Builder
	approvals map[string]*mesh.Approval // by uuid
}

func newToolCalls() toolCalls {
	return toolCalls{names: map[string]string{}, args: map[string]*strings.Builder{}, approvals: map[string]*mesh.Approval{}}
}

// add records a TOOL_CALL_START or TOOL_CALL_ARGS.
func (c toolCalls) add(e *mesh.Event) {
	if e.Type == mesh.EventToolCallStart {
		c.names[e.ToolCallID] = e.ToolCallName
		c.args[e.ToolCallID] = &strings.Builder{}
		return
	}
	if b := c.args[e.ToolCallID]; b != nil {
		b.WriteString(e.DeltaText())
	}
}

// end returns a finished call's name and its parsed arguments (the text
// itself when it is not JSON).
func (c toolCalls) end(id string) (string, any) {
	var input any = map[string]any{}
	if b := c.args[id]; b != nil && strings.TrimSpace(b.String()) != "" {
		if v, ok := decodeJSON(b.String()); ok {
			input = v
		} else {
			input = b.String()
		}
	}
	delete(c.args, id)
	return c.name(id), input
}

// name is the tool of a call; a resumed call was started by an earlier run,
// so its approval names it.
func (c toolCalls) name(id string) string {
	if n := c.names[id]; n != "" {
		return n
	}
	for _, ap := range c.approvals {
		if ap.ToolCallID == id {
			return ap.ToolName
		}
	}
	return "tool"
}

func (c toolCalls) approval(ap *mesh.Approval) {
	if ap != nil && ap.UUID != "" {
		c.approvals[ap.UUID] = ap
	}
}

// approvalView is the approval both dialects send for an interrupt.
type approvalView struct {
	UUID        string         `json:"uuid"`
	ToolName    string         `json:"toolName,omitempty"`
	ToolArgs    map[string]any `json:"toolArgs,omitempty"`
	Description string         `json:"description,omitempty"`
	ToolCallID  string         `json:"toolCallId,omitempty"`
}

// decidedView is the approval of approval.decided.
type decidedView struct {
	UUID   string              `json:"uuid"`
	Status mesh.ApprovalStatus `json:"status"`
}

// view describes interrupt in from the approval_requested event that
// preceded it, or from the interrupt alone.
func (c toolCalls) view(in mesh.Interrupt) approvalView {
	v := approvalView{UUID: in.ID, Description: in.Message, ToolCallID: in.ToolCallID}
	if ap := c.approvals[in.ID]; ap != nil {
		v.ToolName, v.ToolArgs = ap.ToolName, ap.ToolArgs
		if v.Description == "" {
			v.Description = ap.Description
		}
		if v.ToolCallID == "" {
			v.ToolCallID = ap.ToolCallID
		}
	}
	if v.ToolName == "" && v.ToolCallID != "" {
		if n := c.names[v.ToolCallID]; n != "" {
			v.ToolName = n
		}
	}
	return v
}

// approvalOf reads the mesh.Approval a CUSTOM approval event carries.
func approvalOf(value any) *mesh.Approval {
	data, err := json.Marshal(value)
	if err != nil {
		return nil
	}
	var ap mesh.Approval
	if json.Unmarshal(data, &ap) != nil || ap.UUID == "" {
		return nil
	}
	return &ap
}

// toolFailure says whether a TOOL_CALL_RESULT is a failure: its content
// starts with "error:" or "rejected:" (as the agent writes them), or its
// metadata says isError.
func toolFailure(e *mesh.Event) (code, message string, failed bool) {
	content := strings.TrimSpace(e.Content)
	if rest, ok := strings.CutPrefix(content, "rejected:"); ok {
		return "REJECTED", strings.TrimSpace(rest), true
	}
	if rest, ok := strings.CutPrefix(content, "error:"); ok {
		return mesh.CodeToolError, strings.TrimSpace(rest), true
	}
	if isErr, _ := e.Metadata["isError"].(bool); isErr {
		return mesh.CodeToolError, content, true
	}
	return "", "", false
}

// parseOutput is a tool result as the dialects send it: the JSON object or
// array the content holds, else the text itself.
func parseOutput(content string) any {
	if v, ok := decodeJSON(content); ok {
		return v
	}
	return content
}

// decodeJSON returns s, compacted, when it is one JSON object or array, so
// that it is sent as JSON with its keys and numbers as the tool wrote them.
func decodeJSON(s string) (json.RawMessage, bool) {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// totalTokens is input+output of the usage in a RUN_FINISHED result.
func totalTokens(result any) (int, bool) {
	r, _ := result.(map[string]any)
	u, _ := r["usage"].(map[string]any)
	if u == nil {
		return 0, false
	}
	in, ok1 := u["input_tokens"].(float64)
	out, ok2 := u["output_tokens"].(float64)
	if !ok1 && !ok2 {
		return 0, false
	}
	return int(in + out), true
}

// intentOf is the intent a run's end names in its result or metadata, if any.
func intentOf(e *mesh.Event) string {
	if r, ok := e.Result.(map[string]any); ok {
		if s, _ := r["intent"].(string); s != "" {
			return s
		}
	}
	s, _ := e.Metadata["intent"].(string)
	return s
}

func nowMillis() int64 { return time.Now().UnixMilli() }
