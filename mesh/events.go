package mesh

import (
	"encoding/json"
)

// EventType is an AG-UI event type. The constants are the official names of
// AG-UI 1.0; they are also the last token of the event subjects.
type EventType string

// AG-UI event types.
const (
	EventRunStarted         EventType = "RUN_STARTED"
	EventRunFinished        EventType = "RUN_FINISHED"
	EventRunError           EventType = "RUN_ERROR"
	EventStepStarted        EventType = "STEP_STARTED"
	EventStepFinished       EventType = "STEP_FINISHED"
	EventTextMessageStart   EventType = "TEXT_MESSAGE_START"
	EventTextMessageContent EventType = "TEXT_MESSAGE_CONTENT"
	EventTextMessageEnd     EventType = "TEXT_MESSAGE_END"
	EventToolCallStart      EventType = "TOOL_CALL_START"
	EventToolCallArgs       EventType = "TOOL_CALL_ARGS"
	EventToolCallEnd        EventType = "TOOL_CALL_END"
	EventToolCallResult     EventType = "TOOL_CALL_RESULT"
	EventStateSnapshot      EventType = "STATE_SNAPSHOT"
	EventStateDelta         EventType = "STATE_DELTA"
	EventMessagesSnapshot   EventType = "MESSAGES_SNAPSHOT"
	EventRaw                EventType = "RAW"
	EventCustom             EventType = "CUSTOM"

	// A model's reasoning: a span (REASONING_START … REASONING_END) holding
	// one streamed reasoning message (role "reasoning").
	EventReasoningStart          EventType = "REASONING_START"
	EventReasoningMessageStart   EventType = "REASONING_MESSAGE_START"
	EventReasoningMessageContent EventType = "REASONING_MESSAGE_CONTENT"
	EventReasoningMessageEnd     EventType = "REASONING_MESSAGE_END"
	EventReasoningEnd            EventType = "REASONING_END"
)

// RoleReasoning is the role of a REASONING_MESSAGE_START.
const RoleReasoning = "reasoning"

// Names of the CUSTOM events the mesh publishes for its own facts.
const (
	// CustomApprovalRequested: value is the [Approval] that was created.
	CustomApprovalRequested = "approval_requested"
	// CustomApprovalDecided: value is the decided [Approval].
	CustomApprovalDecided = "approval_decided"
	// CustomRunRetried: a run is being executed again after the process that
	// ran it stopped; value is {"attempt": n, "runId": id}, and for one step
	// of an agent tree also "node" (the step's name) and "prefixes", the id
	// prefixes of the messages and calls that step's run reissues. Events of
	// the earlier attempt that precede it (of that step) are superseded.
	CustomRunRetried = "run_retried"
	// CustomRunQueued: the bridge accepted a user's message and enqueued
	// its turn; value is {"runId", "message"}, and "regenerate": true for
	// a turn that answers the last user message again. It comes before the run's
	// RUN_STARTED, which an agent publishes when it takes the turn up.
	CustomRunQueued = "run_queued"
	// CustomFeedback: a user rated a message; value is {"messageId",
	// "rating", "comment"?, "by"} (actions.go). It belongs to no run.
	CustomFeedback = "feedback"
)

// MetaWrittenBy is the metadata field of a RUN_STARTED or RUN_FINISHED
// that GET /conversations/{id}/events wrote itself, so that the replay is a
// sequence of AG-UI runs; its value says why (RunWritten…). Clients that
// track runs of their own skip the envelopes.
const MetaWrittenBy = "mesh"

// Why the events stream wrote a run's start or end (metadata "mesh").
const (
	// RunWrittenQueued: the run starts where its turn was queued; the
	// stored run_queued follows, and the agent's own RUN_STARTED is not sent
	// again. Metadata "regenerate": true says the turn answers the last
	// message again.
	RunWrittenQueued = "queued"
	// RunWrittenDecided: a resume starts where the approval it resumes was
	// decided (the resume's run id is the approval's); approval_decided
	// follows.
	RunWrittenDecided = "decided"
	// RunWrittenResumed: the stream was opened inside a run, after its
	// RUN_STARTED.
	RunWrittenResumed = "resumed"
	// RunWrittenEnvelope: a run around one event that belongs to no run (a
	// rating).
	RunWrittenEnvelope = "envelope"
	// RunWrittenUnfinished: a run that never sent its end, closed before
	// the next one starts.
	RunWrittenUnfinished = "unfinished"
)

// WrittenBy returns why the events stream wrote e (MetaWrittenBy), or "".
func (e Event) WrittenBy() string {
	s, _ := e.Metadata[MetaWrittenBy].(string)
	return s
}

// Outcome types of RUN_FINISHED (AG-UI 1.0).
const (
	OutcomeSuccess   = "success"
	OutcomeInterrupt = "interrupt"
	OutcomeCancelled = "cancelled"

	// InterruptReasonToolApproval is the reason of an interrupt that waits for a
	// human to approve a tool call.
	InterruptReasonToolApproval = "tool_approval"

	// Run outcomes recorded in RunSummary besides the AG-UI ones.
	OutcomeError = "error"
)

// Run error codes carried by RUN_ERROR events.
const (
	CodeLLMError       = "LLM_ERROR"
	CodeLLMTimeout     = "LLM_TIMEOUT"
	CodeRateLimit      = "RATE_LIMIT"
	CodeToolError      = "TOOL_ERROR"
	CodeSubAgentError  = "SUB_AGENT_ERROR"
	CodeInternal       = "INTERNAL_ERROR"
	CodeCancelled      = "CANCELLED"
	CodeConflict       = "CONFLICT"
	CodeMaxDeliveries  = "MAX_DELIVERIES"
	CodeWaitingApprove = "WAITING_APPROVAL"
	// CodeTurnLost: a queued turn's work item left the work stream without
	// any agent taking it up, and was not published again.
	CodeTurnLost = "TURN_LOST"
	// CodeUnavailable: the bridge could not enqueue the turn.
	CodeUnavailable = "UNAVAILABLE"
	// CodeNoSpeaker: a group chat found no member that may speak.
	CodeNoSpeaker = "GROUP_NO_SPEAKER"
	// CodeOutputInvalid: a tree step with an output_schema got no answer
	// matching it, after one retry.
	CodeOutputInvalid = "OUTPUT_INVALID"
)

// Outcome is the outcome of a finished run.
type Outcome struct {
	Type       string      `json:"type"`
	Interrupts []Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is something a run waits for from outside; for a tool approval its
// id is the approval id.
type Interrupt struct {
	ID         string         `json:"id"`
	Reason     string         `json:"reason"`
	Message    string         `json:"message,omitempty"`
	ToolCallID string         `json:"toolCallId,omitempty"`
	ExpiresAt  string         `json:"expiresAt,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

// Event is one AG-UI event. It is the union of the fields of every type, all
// optional in JSON, so that it can be published and decoded without a type
// switch; the constructors below fill the fields each type requires.
type Event struct {
	Type      EventType `json:"type"`
	Timestamp int64     `json:"timestamp,omitempty"`

	ThreadID    string   `json:"threadId,omitempty"`
	RunID       string   `json:"runId,omitempty"`
	ParentRunID string   `json:"parentRunId,omitempty"`
	Result      any      `json:"result,omitempty"`
	Outcome     *Outcome `json:"outcome,omitempty"`

	Message string `json:"message,omitempty"`
	Code    string `json:"code,omitempty"`

	StepName string `json:"stepName,omitempty"`

	MessageID string `json:"messageId,omitempty"`
	Role      string `json:"role,omitempty"`
	// Name is the author of a TEXT_MESSAGE_START, or the name of a CUSTOM event.
	Name string `json:"name,omitempty"`
	// Delta is a string for TEXT_MESSAGE_CONTENT and TOOL_CALL_ARGS, and a JSON
	// Patch ([]PatchOp) for STATE_DELTA.
	Delta any `json:"delta,omitempty"`

	ToolCallID      string `json:"toolCallId,omitempty"`
	ToolCallName    string `json:"toolCallName,omitempty"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
	// Content is the result of TOOL_CALL_RESULT; always sent for that type.
	Content string `json:"content,omitempty"`

	Snapshot any            `json:"snapshot,omitempty"`
	Messages []any          `json:"messages,omitempty"`
	Value    any            `json:"value,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// MarshalJSON writes the fields AG-UI requires even when they are empty
// (TOOL_CALL_RESULT content, STATE_SNAPSHOT snapshot) and omits the others.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	out := struct {
		plain
		Content  *string `json:"content,omitempty"`
		Snapshot any     `json:"snapshot,omitempty"`
	}{plain: plain(e), Snapshot: e.Snapshot}
	if e.Content != "" || e.Type == EventToolCallResult {
		c := e.Content
		out.Content = &c
	}
	if e.Type == EventStateSnapshot && e.Snapshot == nil {
		out.Snapshot = map[string]any{}
	}
	return json.Marshal(out)
}

// DeltaText returns the delta of a TEXT_MESSAGE_CONTENT,
// REASONING_MESSAGE_CONTENT or TOOL_CALL_ARGS event.
func (e Event) DeltaText() string {
	s, _ := e.Delta.(string)
	return s
}

// PatchOp is one RFC 6902 JSON Patch operation, as STATE_DELTA carries.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
	From  string `json:"from,omitempty"`
}

// RunStarted is the first event of a run.
func RunStarted(threadID, runID string) Event {
	return Event{Type: EventRunStarted, ThreadID: threadID, RunID: runID}
}

// RunFinished closes a run with an outcome; result may be nil.
func RunFinished(threadID, runID string, outcome Outcome, result any) Event {
	return Event{Type: EventRunFinished, ThreadID: threadID, RunID: runID, Outcome: &outcome, Result: result}
}

// RunError closes a run that failed.
func RunError(code, message string) Event {
	return Event{Type: EventRunError, Code: code, Message: message}
}

// Custom is a CUSTOM event carrying a mesh fact.
func Custom(name string, value any) Event {
	return Event{Type: EventCustom, Name: name, Value: value}
}

// MarshalJSON writes value for the operations that take one (add, replace,
// test) even when it is null, false, 0 or "", and omits it for the others.
func (p PatchOp) MarshalJSON() ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		From  string `json:"from,omitempty"`
		Value *any   `json:"value,omitempty"`
	}
	o := op{Op: p.Op, Path: p.Path, From: p.From}
	switch p.Op {
	case "add", "replace", "test":
		v := p.Value
		o.Value = &v
	}
	return json.Marshal(o)
}
