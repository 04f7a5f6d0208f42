package agui

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/mesh"
)

// The AI SDK dialect: POST /api/ai-sdk speaks the Vercel AI SDK's UI
// message stream protocol (v1), which useChat's default transport reads.
//
// The body is useChat's: {"id", "messages": [{id, role, parts}], …}; the
// last user message is the input, "id" the conversation (continued when it
// exists, created when it does not). A last message of the assistant whose
// tool part carries "approval": {id, approved, reason?} (useChat's
// addToolApprovalResponse) decides that approval instead, and the stream
// is the run it resumes, added to that message (its tool part gets the
// output; nothing is sent twice); any other last message is refused (400), so that
// the user's message is never run twice. "trigger": "regenerate-message"
// (useChat's regenerate()) answers the chat's last user message again
// instead (actions.go). The answer is SSE with
// x-vercel-ai-ui-message-stream: v1, each chunk "data: <json>", the last
// "data: [DONE]":
//
//	(stream start)        start {messageId: run id, messageMetadata: {conversationId}}, start-step;
//	                      continuing the message that answered an approval:
//	                      start {messageId: that message's id}, and start-step
//	                      only after the approved calls' outputs
//	TEXT_MESSAGE_*        text-start {id} / text-delta {id, delta} / text-end {id}
//	REASONING_MESSAGE_*   reasoning-start {id} / reasoning-delta {id, delta} / reasoning-end {id}
//	TOOL_CALL_START       tool-input-start {toolCallId, toolName, dynamic: true}
//	TOOL_CALL_ARGS        tool-input-delta {toolCallId, inputTextDelta}
//	TOOL_CALL_END         tool-input-available {toolCallId, toolName, input, dynamic}
//	TOOL_CALL_RESULT      tool-output-available {toolCallId, output, dynamic}, or
//	                      tool-output-error {toolCallId, errorText}, or, rejected,
//	                      tool-output-denied {toolCallId}
//	CUSTOM approval_*     data-approval {id: uuid, data: {uuid, status, toolName, …}}
//	STATE_SNAPSHOT/DELTA  data-state {id: "state", data: the whole state}, which
//	                      useChat reconciles by id: at each delta, and at a
//	                      snapshot unless it is empty
//	RUN_FINISHED          finish-step, then success: finish {finishReason: "stop"};
//	                      interrupt: tool-approval-request {approvalId, toolCallId}
//	                      per approval, finish {finishReason: "tool-calls"};
//	                      cancelled: abort {reason}
//	RUN_ERROR             error {errorText}
//
// The mesh's tools are its own, not the client's: tool parts are dynamic
// (useChat's "dynamic-tool" parts). A result of a call this stream did not
// see start (the run resumed after an approval) gets its tool-input-available
// first.

// AISDKPath is the route of the AI SDK dialect.
const AISDKPath = "/api/ai-sdk"

// headerUIMessageStream marks a UI message stream for the AI SDK's client.
const headerUIMessageStream = "x-vercel-ai-ui-message-stream"

// aiChunk is one chunk of the UI message stream; each type fills its fields.
type aiChunk struct {
	Type            string `json:"type"`
	MessageID       string `json:"messageId,omitempty"`
	MessageMetadata any    `json:"messageMetadata,omitempty"`
	ID              string `json:"id,omitempty"`
	Delta           string `json:"delta,omitempty"`
	ToolCallID      string `json:"toolCallId,omitempty"`
	ToolName        string `json:"toolName,omitempty"`
	InputTextDelta  string `json:"inputTextDelta,omitempty"`
	Input           any    `json:"input,omitempty"`
	Output          any    `json:"output,omitempty"`
	Dynamic         bool   `json:"dynamic,omitempty"`
	ErrorText       string `json:"errorText,omitempty"`
	ApprovalID      string `json:"approvalId,omitempty"`
	FinishReason    string `json:"finishReason,omitempty"`
	Reason          string `json:"reason,omitempty"`
	Data            any    `json:"data,omitempty"`
}

// aiMessagePart is the part of a useChat message part the dialect reads
// for an approval answer.
type aiMessagePart struct {
	Type     string `json:"type"`
	Approval *struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	} `json:"approval"`
}

// aiContinued is the assistant message a request continues (useChat sends
// its answer to an approval with the message that asked): its id, which the
// stream's start keeps so that the answer lands in that message, and the
// tool calls its parts already show.
type aiContinued struct {
	messageID string
	calls     map[string]bool
}

// aiContinuation reads the continued message: the body's messageId, else
// the last message's id.
func aiContinuation(in *chatBody) *aiContinued {
	last := in.Messages[len(in.Messages)-1]
	c := &aiContinued{messageID: in.MessageID, calls: map[string]bool{}}
	if c.messageID == "" {
		c.messageID = last.ID
	}
	var parts []struct {
		ToolCallID string `json:"toolCallId"`
	}
	if json.Unmarshal(last.Parts, &parts) == nil {
		for _, p := range parts {
			if p.ToolCallID != "" {
				c.calls[p.ToolCallID] = true
			}
		}
	}
	return c
}

// aiApprovalAnswer finds useChat's answer to an approval in the last
// message, when it is the assistant's: the decision's body and approval id.
func aiApprovalAnswer(in *chatBody) (uuid string, body []byte, ok bool) {
	if len(in.Messages) == 0 {
		return "", nil, false
	}
	last := in.Messages[len(in.Messages)-1]
	if last.Role != "assistant" {
		return "", nil, false
	}
	var parts []aiMessagePart
	if json.Unmarshal(last.Parts, &parts) != nil {
		return "", nil, false
	}
	for _, p := range parts {
		if a := p.Approval; a != nil && a.Approved != nil && a.ID != "" {
			body, _ := json.Marshal(map[string]any{"approved": *a.Approved, "by": "ai-sdk", "reason": a.Reason})
			return a.ID, body, true
		}
	}
	return "", nil, false
}

// aisdk serves POST /api/ai-sdk.
func (h *handler) aisdk(w http.ResponseWriter, r *http.Request) {
	var in chatBody
	if err := core.DecodeBody(w, r, h.cfg.MaxBodyBytes, &in, false); err != nil {
		writeError(w, err)
		return
	}
	caller := core.CallerOf(r)
	var (
		rs        *runStream
		continued *aiContinued
	)
	if in.Trigger == triggerRegenerate {
		// Before any approval answer the messages hold: regenerate() sends
		// the chat up to its last user message, and an answer earlier in
		// it was decided long ago.
		var ok bool
		if rs, ok = h.regenerateAISDK(w, r, &in); !ok {
			return
		}
	} else if uuid, body, ok := aiApprovalAnswer(&in); ok {
		if err := core.CheckApprovalID(uuid); err != nil {
			writeError(w, err)
			return
		}
		closeStream, opened := h.acquire(w, r)
		if !opened {
			return
		}
		defer closeStream()
		ap, err := h.core.Approvals.Get(r.Context(), uuid)
		if err == nil && !h.core.SeesApproval(r.Context(), caller, ap, map[string]string{}) {
			err = mesh.ErrApprovalNotFound.With("approval " + uuid + " not found")
		}
		if err != nil {
			writeError(w, err)
			return
		}
		rs, err = h.startRun(r.Context(), ap.ConversationID, func() (*core.Run, error) {
			_, run, err := h.core.Decide(r.Context(), uuid, body, caller)
			return run, err
		})
		if err != nil {
			writeError(w, err)
			return
		}
		continued = aiContinuation(&in)
	} else {
		message, id, err := in.input()
		if err == nil && len(in.Messages) > 0 && in.Messages[len(in.Messages)-1].Role != "user" {
			// Not the last user message again: that would run it twice.
			err = mesh.ErrBadRequest.With(`the last message must be the user's, or the assistant's with a tool part answering its "approval"`)
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
		var ok bool
		if rs, ok = h.startDialectRun(w, r, id, message); !ok {
			return
		}
	}
	defer rs.close()
	h.streamAISDK(w, r, rs, continued)
}

// triggerRegenerate is what useChat's regenerate() sends as "trigger".
const triggerRegenerate = "regenerate-message"

// regenerateAISDK starts the run that answers the chat's last user message
// again: the chat ("id") must exist; the messages are not read.
func (h *handler) regenerateAISDK(w http.ResponseWriter, r *http.Request, in *chatBody) (*runStream, bool) {
	var id string
	if in.ConversationID != nil {
		id = *in.ConversationID
	} else if json.Unmarshal(in.ChatID, &id) != nil || id == "" {
		writeError(w, mesh.ErrBadRequest.With(`trigger "regenerate-message" needs the chat's "id"`))
		return nil, false
	}
	closeStream, opened := h.acquire(w, r)
	if !opened {
		return nil, false
	}
	rs, ok := h.startRegenerate(w, r, id)
	if !ok {
		closeStream()
		return nil, false
	}
	rs.release = closeStream
	return rs, true
}

// streamAISDK writes the run's chunks. A run that continues a message
// (continued: the resume after an approval answered in it) keeps that
// message's id, so that useChat adds to it rather than beside it, and opens
// its next step only after the approved calls' outputs, as the AI SDK's
// own server does: those outputs belong to the step that asked.
func (h *handler) streamAISDK(w http.ResponseWriter, r *http.Request, rs *runStream, continued *aiContinued) {
	out := sse.New(w)
	if err := out.Start(http.Header{headerConversationID: {rs.session}, headerUIMessageStream: {"v1"}}); err != nil {
		rs.cancelRun()
		return
	}
	tr := newAITranslator(rs.runID)
	emit := func(cs []aiChunk) error { return writeJSON(out, cs) }
	start := []aiChunk{{Type: "start", MessageID: rs.runID, MessageMetadata: map[string]any{"conversationId": rs.session}}, {Type: "start-step"}}
	if continued != nil && continued.messageID != "" {
		start = start[:1]
		start[0].MessageID = continued.messageID
		tr.stepOpen = false
		for id := range continued.calls {
			tr.seen[id] = true
		}
	}
	if err := emit(start); err != nil {
		rs.cancelRun()
		return
	}
	err := rs.each(r.Context(), h.cfg.KeepAlive, func() error { return out.Comment("keep-alive") }, func(_ core.StreamEvent, ev *mesh.Event) error {
		return emit(tr.translate(ev))
	})
	if msg, ok := h.streamEndText(r, rs, tr.ended, err); ok {
		_ = emit([]aiChunk{{Type: "error", ErrorText: msg}})
	}
	if r.Context().Err() == nil {
		_ = out.Event(0, []byte("[DONE]"))
	}
}

// aiTranslator turns the AG-UI events of one run into UI message stream
// chunks, after the official translator (which drops what a retried
// attempt sends twice).
type aiTranslator struct {
	norm  *officialTranslator
	calls toolCalls
	seen  map[string]bool // tool calls whose input the client has
	ended bool
	// stepOpen is false until a step starts: a continuation's outputs of
	// calls already shown come before its first step.
	stepOpen bool
	// state is the conversation state as the run's events leave it.
	state map[string]any
}

func newAITranslator(run string) *aiTranslator {
	return &aiTranslator{norm: newOfficialTranslator("", run), calls: newToolCalls(), seen: map[string]bool{}, stepOpen: true}
}

func (t *aiTranslator) translate(ev *mesh.Event) []aiChunk {
	var out []aiChunk
	for _, e := range t.norm.translate(ev) {
		n := len(out)
		out = t.one(out, &e)
		if !t.stepOpen && opensStep(out[n:]) {
			out = slices.Insert(out, n, aiChunk{Type: "start-step"})
			t.stepOpen = true
		}
	}
	return out
}

// opensStep says whether chunks hold something of a new step: text, or a
// tool call's input. An output of a call the client already shows, data
// parts and the stream's end do not.
func opensStep(chunks []aiChunk) bool {
	for _, c := range chunks {
		switch c.Type {
		case "text-start", "text-delta", "reasoning-start", "reasoning-delta", "tool-input-start", "tool-input-delta", "tool-input-available":
			return true
		}
	}
	return false
}

func (t *aiTranslator) one(out []aiChunk, e *mesh.Event) []aiChunk {
	switch e.Type {
	case mesh.EventTextMessageStart:
		out = append(out, aiChunk{Type: "text-start", ID: e.MessageID})
	case mesh.EventTextMessageContent:
		if d := e.DeltaText(); d != "" {
			out = append(out, aiChunk{Type: "text-delta", ID: e.MessageID, Delta: d})
		}
	case mesh.EventTextMessageEnd:
		out = append(out, aiChunk{Type: "text-end", ID: e.MessageID})
	case mesh.EventReasoningMessageStart:
		out = append(out, aiChunk{Type: "reasoning-start", ID: e.MessageID})
	case mesh.EventReasoningMessageContent:
		if d := e.DeltaText(); d != "" {
			out = append(out, aiChunk{Type: "reasoning-delta", ID: e.MessageID, Delta: d})
		}
	case mesh.EventReasoningMessageEnd:
		out = append(out, aiChunk{Type: "reasoning-end", ID: e.MessageID})
	case mesh.EventToolCallStart:
		t.calls.add(e)
		out = append(out, aiChunk{Type: "tool-input-start", ToolCallID: e.ToolCallID, ToolName: e.ToolCallName, Dynamic: true})
	case mesh.EventToolCallArgs:
		t.calls.add(e)
		if d := e.DeltaText(); d != "" {
			out = append(out, aiChunk{Type: "tool-input-delta", ToolCallID: e.ToolCallID, InputTextDelta: d})
		}
	case mesh.EventToolCallEnd:
		name, input := t.calls.end(e.ToolCallID)
		t.seen[e.ToolCallID] = true
		out = append(out, aiChunk{Type: "tool-input-available", ToolCallID: e.ToolCallID, ToolName: name, Input: input, Dynamic: true})
	case mesh.EventToolCallResult:
		out = t.result(out, e)
	case mesh.EventCustom:
		switch e.Name {
		case mesh.CustomApprovalRequested, mesh.CustomApprovalDecided:
			if ap := approvalOf(e.Value); ap != nil {
				t.calls.approval(ap)
				out = append(out, aiChunk{Type: "data-approval", ID: ap.UUID, Data: map[string]any{
					"uuid": ap.UUID, "status": ap.Status, "toolName": ap.ToolName, "toolCallId": ap.ToolCallID, "description": ap.Description}})
			}
		}
	case mesh.EventStateSnapshot, mesh.EventStateDelta:
		out = t.stateChunk(out, e)
	case mesh.EventRunError:
		t.ended = true
		out = append(out, aiChunk{Type: "error", ErrorText: strings.TrimSpace(e.Code + ": " + e.Message)})
	case mesh.EventRunFinished:
		t.ended = true
		if t.stepOpen {
			out = append(out, aiChunk{Type: "finish-step"})
		}
		out = t.finish(out, e)
	}
	return out
}

// stateChunk follows the state through a snapshot or a delta and sends it
// whole as data-state: a UI message stream has no patches, and a data part
// sent again with its id replaces the earlier one. A delta that does not
// apply is skipped, as AG-UI clients skip it.
func (t *aiTranslator) stateChunk(out []aiChunk, e *mesh.Event) []aiChunk {
	if e.Type == mesh.EventStateSnapshot {
		s, _ := e.Snapshot.(map[string]any)
		t.state = mesh.CloneState(s)
		if len(t.state) == 0 {
			return out
		}
	} else {
		next, err := mesh.ApplyStateDelta(t.state, e.Delta)
		if err != nil {
			return out
		}
		t.state = next
	}
	return append(out, aiChunk{Type: "data-state", ID: "state", Data: mesh.CloneState(t.state)})
}

// result is a tool's result; a call this stream did not see start gets
// its input first, as the AI SDK's reader needs the part.
func (t *aiTranslator) result(out []aiChunk, e *mesh.Event) []aiChunk {
	if !t.seen[e.ToolCallID] {
		t.seen[e.ToolCallID] = true
		var input any = map[string]any{}
		for _, ap := range t.calls.approvals {
			if ap.ToolCallID == e.ToolCallID && ap.ToolArgs != nil {
				input = ap.ToolArgs
			}
		}
		out = append(out, aiChunk{Type: "tool-input-available", ToolCallID: e.ToolCallID, ToolName: t.calls.name(e.ToolCallID), Input: input, Dynamic: true})
	}
	code, msg, failed := toolFailure(e)
	switch {
	case failed && code == "REJECTED":
		return append(out, aiChunk{Type: "tool-output-denied", ToolCallID: e.ToolCallID})
	case failed:
		return append(out, aiChunk{Type: "tool-output-error", ToolCallID: e.ToolCallID, ErrorText: msg, Dynamic: true})
	}
	return append(out, aiChunk{Type: "tool-output-available", ToolCallID: e.ToolCallID, Output: parseOutput(e.Content), Dynamic: true})
}

// finish ends the message by the run's outcome.
func (t *aiTranslator) finish(out []aiChunk, e *mesh.Event) []aiChunk {
	outcome := mesh.OutcomeSuccess
	if e.Outcome != nil {
		outcome = e.Outcome.Type
	}
	meta := map[string]any{}
	if n, ok := totalTokens(e.Result); ok {
		meta["totalTokens"] = n
	}
	if intent := intentOf(e); intent != "" {
		meta["intent"] = intent
	}
	switch outcome {
	case mesh.OutcomeCancelled:
		return append(out, aiChunk{Type: "abort", Reason: "the turn was cancelled"})
	case mesh.OutcomeInterrupt:
		for _, in := range e.Outcome.Interrupts {
			v := t.calls.view(in)
			if v.ToolCallID != "" && t.seen[v.ToolCallID] {
				out = append(out, aiChunk{Type: "tool-approval-request", ApprovalID: v.UUID, ToolCallID: v.ToolCallID})
			}
		}
		return append(out, aiChunk{Type: "finish", FinishReason: "tool-calls", MessageMetadata: meta})
	}
	return append(out, aiChunk{Type: "finish", FinishReason: "stop", MessageMetadata: meta})
}
