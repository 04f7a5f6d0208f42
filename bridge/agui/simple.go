package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/mesh"
)

// chunkSize bounds the text chunks of a dialect, in characters.
type chunkSize struct{ min, max int }

// Text chunks: the simple dialect sends 20–50 characters, the dotted
// dialect 5–20, the sizes their clients were written for.
var (
	simpleChunks = chunkSize{min: 20, max: 50}
	dottedChunks = chunkSize{min: 5, max: 20}
)

// Error codes of the simple dialect not among the mesh's run error codes.
const (
	codeTimeout    = "TIMEOUT"
	codeValidation = "VALIDATION_ERROR"
	codeUnknown    = "UNKNOWN"
)

// chatBody is the simple dialect's request: {"message"} or useChat's
// {"messages"}, and the conversation to continue.
type chatBody struct {
	Message        *string         `json:"message"`
	Messages       []chatMessage   `json:"messages"`
	ConversationID *string         `json:"conversationId"`
	ChatID         json.RawMessage `json:"id"` // useChat's chat id; used when it is a valid id
	// Trigger is useChat's: "regenerate-message" (its regenerate()) runs
	// the conversation's last user message again (aisdk.go).
	Trigger string `json:"trigger"`
	// MessageID is useChat's: the assistant message a request after an
	// approval answer continues (aisdk.go).
	MessageID string `json:"messageId"`
}

// chatMessage is a useChat message: content as a string or text parts
// (AI SDK 4), or parts (AI SDK 5).
type chatMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Parts   json.RawMessage `json:"parts"`
}

// input returns the message the request sends and the conversation it names.
func (b *chatBody) input() (message, id string, err error) {
	switch {
	case b.Message != nil:
		message = *b.Message
	case b.Messages != nil:
		i := len(b.Messages) - 1
		for i >= 0 && b.Messages[i].Role != "user" {
			i--
		}
		if i < 0 {
			return "", "", mesh.ErrBadRequest.With(`field "messages" holds no message with role "user"`)
		}
		m := b.Messages[i]
		content := m.Content
		if len(content) == 0 || string(content) == "null" {
			content = m.Parts
		}
		message, err = inputMessage{ID: m.ID, Content: content}.text()
		if err != nil {
			return "", "", mesh.ErrBadRequest.With(`field "messages": ` + err.Error())
		}
	default:
		return "", "", mesh.ErrBadRequest.With(`field "message" (or useChat's "messages") is required: {"message": "…", "conversationId": "…"}`)
	}
	if b.ConversationID != nil {
		id = *b.ConversationID
	} else if len(b.ChatID) > 0 {
		var s string
		if json.Unmarshal(b.ChatID, &s) == nil && mesh.CheckID(s) == nil {
			id = s
		}
	}
	return message, id, checkInput(message, id, "conversationId")
}

// simple serves POST /api/chat: the simple dialect (log, text, data, done
// and error events).
func (h *handler) simple(w http.ResponseWriter, r *http.Request) {
	begun := time.Now()
	var in chatBody
	if err := core.DecodeBody(w, r, h.cfg.MaxBodyBytes, &in, false); err != nil {
		writeError(w, err)
		return
	}
	message, id, err := in.input()
	if err != nil {
		writeError(w, err)
		return
	}
	closeStream, opened := h.acquire(w, r)
	if !opened {
		return
	}
	defer closeStream()
	rs, ok := h.startDialectRun(w, r, id, message)
	if !ok {
		return
	}
	defer rs.close()

	out := sse.New(w).Observe(r, "simple")
	if err := out.Start(http.Header{headerConversationID: {rs.session}}); err != nil {
		rs.cancelRun()
		return
	}
	tr := newSimpleTranslator(rs.runID, begun)
	emit := func(evs []simpleEvent) error { return writeJSON(out, evs) }
	if err := emit([]simpleEvent{logEvent("Understanding your query...", nowMillis())}); err != nil {
		rs.cancelRun()
		h.logStreamEnd(r, "simple", rs, out, "", err)
		return
	}
	err = rs.each(r.Context(), min(h.cfg.PingAfter, h.cfg.PingEvery), h.pinger(rs, out), func(_ core.StreamEvent, ev *mesh.Event) error {
		return emit(tr.translate(ev))
	})
	if msg, ok := h.streamEndText(r, rs, tr.ended, err); ok {
		if errors.Is(err, core.ErrSlowConsumer) {
			out.CutOff()
		}
		_ = emit([]simpleEvent{{Type: "error", Error: &dialectError{Code: codeUnknown, Message: msg, Details: map[string]any{"meshCode": slowOrInternal(err)}}}})
	}
	h.logStreamEnd(r, "simple", rs, out, tr.outcome, err)
}

// pinger is the tick of a simple stream: {"type":"ping"} every PingEvery
// once the run has lasted PingAfter. It is called every
// min(PingAfter, PingEvery), so a ping is at most that late.
func (h *handler) pinger(rs *runStream, out *sse.Writer) func() error {
	slack := min(h.cfg.PingAfter, h.cfg.PingEvery) / 4
	var last time.Time
	return func() error {
		now := time.Now()
		if now.Sub(rs.started)+slack < h.cfg.PingAfter || (!last.IsZero() && now.Sub(last)+slack < h.cfg.PingEvery) {
			return nil
		}
		last = now
		return out.Event(0, []byte(`{"type":"ping"}`))
	}
}

// simpleEvent is one event of the simple dialect; each type fills its fields.
type simpleEvent struct {
	Type           string        `json:"type"`
	Content        string        `json:"content,omitempty"`
	Timestamp      int64         `json:"timestamp,omitempty"`
	Delta          string        `json:"delta,omitempty"`
	StructuredData any           `json:"structuredData,omitempty"`
	Stats          *simpleStats  `json:"stats,omitempty"`
	Error          *dialectError `json:"error,omitempty"`
}

type simpleStats struct {
	// ExecutionTime is the time since the request, in milliseconds.
	ExecutionTime int64 `json:"executionTime"`
	// AgentInvocations counts the tool calls of the run.
	AgentInvocations int `json:"agentInvocations"`
	// TotalCandidates counts what the run's tool results returned (see
	// [candidates]).
	TotalCandidates int    `json:"totalCandidates"`
	Intent          string `json:"intent,omitempty"`
	TotalTokens     *int   `json:"totalTokens,omitempty"`
}

// toolResultData and approvalData are the structuredData of data events.
type toolResultData struct {
	Type    string `json:"type"`
	Tool    string `json:"tool"`
	Result  any    `json:"result"`
	IsError bool   `json:"isError,omitempty"`
}

type approvalData struct {
	Type     string       `json:"type"`
	Approval approvalView `json:"approval"`
}

func logEvent(text string, ts int64) simpleEvent {
	return simpleEvent{Type: "log", Content: text, Timestamp: ts}
}

// simpleTranslator turns the AG-UI events of one run into the simple
// dialect. Events first go through the official translator, which drops
// what a retried attempt sends twice.
type simpleTranslator struct {
	norm        *officialTranslator
	begun       time.Time
	calls       toolCalls
	text        chunker
	wrote       bool // some text was taken: the next message is set apart
	invocations int
	candidates  int
	// sent is the text given to the client so far, for an error's
	// details.partialText.
	sent  strings.Builder
	ended bool
	// outcome is how the run ended: success, interrupt, cancelled or error.
	outcome string
}

func newSimpleTranslator(run string, begun time.Time) *simpleTranslator {
	return &simpleTranslator{norm: newOfficialTranslator("", run), begun: begun, calls: newToolCalls(), text: chunker{size: simpleChunks}}
}

func (t *simpleTranslator) translate(ev *mesh.Event) []simpleEvent {
	var out []simpleEvent
	for _, e := range t.norm.translate(ev) {
		out = t.one(out, &e)
	}
	return out
}

// one appends what e becomes to out.
func (t *simpleTranslator) one(out []simpleEvent, e *mesh.Event) []simpleEvent {
	switch e.Type {
	case mesh.EventTextMessageStart:
		if t.wrote {
			t.sent.WriteString("\n\n")
			return t.texts(out, t.text.add("\n\n"))
		}
		return out
	case mesh.EventTextMessageContent:
		delta := e.DeltaText()
		if delta == "" {
			return out
		}
		t.wrote = true
		t.sent.WriteString(delta)
		return t.texts(out, t.text.add(delta))
	case mesh.EventTextMessageEnd:
		return t.flushText(out)
	}
	// Whatever comes next follows the text taken so far.
	out = t.flushText(out)
	ts := e.Timestamp
	if ts == 0 {
		ts = nowMillis()
	}
	switch e.Type {
	case mesh.EventToolCallStart, mesh.EventToolCallArgs:
		t.calls.add(e)
	case mesh.EventToolCallEnd:
		t.invocations++
		name, _ := t.calls.end(e.ToolCallID)
		out = append(out, logEvent("Calling "+name+"...", ts))
	case mesh.EventToolCallResult:
		name := t.calls.name(e.ToolCallID)
		data := toolResultData{Type: "tool_result", Tool: name, Result: parseOutput(e.Content)}
		if _, msg, failed := toolFailure(e); failed {
			out = append(out, logEvent(name+" failed: "+msg, ts))
			data.IsError = true
		} else {
			t.candidates += candidates(data.Result)
			out = append(out, logEvent(name+" done", ts))
		}
		out = append(out, simpleEvent{Type: "data", StructuredData: data})
	case mesh.EventStepStarted:
		out = append(out, logEvent(e.StepName, ts))
	case mesh.EventCustom:
		switch e.Name {
		case mesh.CustomApprovalRequested:
			t.calls.approval(approvalOf(e.Value))
		case mesh.CustomApprovalDecided:
			if ap := approvalOf(e.Value); ap != nil {
				t.calls.approval(ap)
				out = append(out, logEvent(fmt.Sprintf("Approval %s %s", ap.UUID, ap.Status), ts))
			}
		case mesh.CustomRunRetried:
			out = append(out, logEvent("Retrying after an interruption...", ts))
		}
	case mesh.EventRunError:
		t.ended, t.outcome = true, "error"
		de := simpleError(e.Code, e.Message)
		if wait, reset, ok := retryOf(e); ok {
			de.ResetAt = reset
			de.withDetail("retryAfter", wait)
		}
		out = append(out, simpleEvent{Type: "error", Error: t.withPartialText(de)})
	case mesh.EventRunFinished:
		t.ended = true
		out = t.finish(out, e, ts)
	}
	return out
}

// finish ends the stream: done after a success or an interrupt (the turn is
// over; a human decides the approval with POST /approvals/{uuid}), error
// after a cancellation.
func (t *simpleTranslator) finish(out []simpleEvent, e *mesh.Event, ts int64) []simpleEvent {
	outcome := mesh.OutcomeSuccess
	if e.Outcome != nil {
		outcome = e.Outcome.Type
	}
	t.outcome = string(outcome)
	switch outcome {
	case mesh.OutcomeCancelled:
		return append(out, simpleEvent{Type: "error", Error: t.withPartialText(simpleError(mesh.CodeCancelled, "the turn was cancelled"))})
	case mesh.OutcomeInterrupt:
		for _, in := range e.Outcome.Interrupts {
			v := t.calls.view(in)
			out = append(out,
				logEvent(fmt.Sprintf("Waiting for approval %s: %s", v.UUID, v.Description), ts),
				simpleEvent{Type: "data", StructuredData: approvalData{Type: "approval_required", Approval: v}})
		}
	}
	stats := &simpleStats{ExecutionTime: time.Since(t.begun).Milliseconds(), AgentInvocations: t.invocations, TotalCandidates: t.candidates, Intent: intentOf(e)}
	if n, ok := totalTokens(e.Result); ok {
		stats.TotalTokens = &n
	}
	return append(out, simpleEvent{Type: "done", Stats: stats})
}

// withPartialText adds the text the client already got to the details of a
// run's error: a turn cut short (a model that timed out) still said that.
func (t *simpleTranslator) withPartialText(e *dialectError) *dialectError {
	if t.sent.Len() == 0 {
		return e
	}
	return e.withDetail("partialText", t.sent.String())
}

// candidates is what one successful tool result returned, as
// stats.totalCandidates counts it: the items of a JSON array; for a JSON
// object, the items of its longest array field (resources, items …), or 1
// when it has none; 1 for a result in text.
func candidates(result any) int {
	raw, ok := result.(json.RawMessage)
	if !ok {
		return 1
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		return len(list)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return 1
	}
	n := -1
	for _, v := range fields {
		if json.Unmarshal(v, &list) == nil {
			n = max(n, len(list))
		}
	}
	if n < 0 {
		return 1
	}
	return n
}

func (t *simpleTranslator) texts(out []simpleEvent, chunks []string) []simpleEvent {
	for _, c := range chunks {
		out = append(out, simpleEvent{Type: "text", Delta: c})
	}
	return out
}

func (t *simpleTranslator) flushText(out []simpleEvent) []simpleEvent {
	if rest := t.text.flush(); rest != "" {
		out = append(out, simpleEvent{Type: "text", Delta: rest})
	}
	return out
}

// simpleError maps a mesh run error code to the simple dialect's codes;
// details keep the mesh's code when it differs.
func simpleError(meshCode, message string) *dialectError {
	var code string
	switch meshCode {
	case mesh.CodeLLMTimeout, mesh.CodeRateLimit, mesh.CodeLLMError:
		code = meshCode
	case mesh.CodeWaitingApprove, mesh.CodeConflict:
		code = codeValidation
	case mesh.CodeMaxDeliveries:
		code = codeTimeout
	default:
		code = codeUnknown
	}
	e := &dialectError{Code: code, Message: message}
	if meshCode != "" && meshCode != code {
		e.Details = map[string]any{"meshCode": meshCode}
	}
	return e
}

// chunker re-cuts streamed text into chunks of size.min to size.max runes:
// at the last white space in that range, else at size.max runes. It never
// splits a rune.
type chunker struct {
	size chunkSize
	buf  []byte
}

// add takes delta and returns the chunks that are complete.
func (c *chunker) add(delta string) []string {
	c.buf = append(c.buf, delta...)
	var out []string
	for hasRunes(c.buf, c.size.max) {
		n := c.size.cut(c.buf)
		out = append(out, string(c.buf[:n]))
		c.buf = c.buf[n:]
	}
	if len(c.buf) == 0 {
		c.buf = nil
	}
	return out
}

// flush returns what is left, shorter than size.max runes.
func (c *chunker) flush() string {
	s := string(c.buf)
	c.buf = nil
	return s
}

// hasRunes reports whether b holds at least n runes.
func hasRunes(b []byte, n int) bool {
	for i := 0; i < len(b); n-- {
		if n == 0 {
			return true
		}
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return n <= 0
}

// cut is the byte length of the next chunk of b, which holds at least
// s.max runes.
func (s chunkSize) cut(b []byte) int {
	at, i := 0, 0
	for n := 1; n <= s.max; n++ {
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if n >= s.min && unicode.IsSpace(r) {
			at = i
		}
	}
	if at == 0 {
		return i
	}
	return at
}
