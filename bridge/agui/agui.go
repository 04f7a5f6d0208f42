// Package agui streams the mesh's AG-UI events to browsers over Server-Sent
// Events, in the official AG-UI form and in two simpler dialects that
// existing chat clients speak:
//
//	POST /agui                           official AG-UI: RunAgentInput in, the run's events out
//	GET  /conversations/{id}/events      every event of a conversation: replay, then follow
//	POST /api/conversation               the dotted dialect (message.start …)
//	POST /api/chat                       the simple dialect (log/text/data/done/error)
//
// A message the bridge accepts waits in the work queue until an agent takes
// it up: the bridge records it in the conversation (status queued) and
// publishes CUSTOM run_queued {runId, message} before the work item, so a
// follower sees the turn before any agent takes it up. /events and /agui
// both send it right after the run's RUN_STARTED: /events starts the run
// there ([runSequence]), /agui sends its own first.
//
// Events come from the events stream through the bridge core's followers
// ([core.Core.Follow]): a client that reconnects with Last-Event-ID gets
// exactly the events after it; a client too slow for its bounded buffer is
// cut off with a final error event and can resume. A client that disconnects
// from a run it started cancels that run; one that only follows /events just
// stops following.
//
// The two dialects, POST /api/conversation and POST /api/chat, follow one
// run each like POST /agui does, and translate its AG-UI events.
//
// # The dotted dialect: POST /api/conversation
//
// Body {"message": "…", "sessionId": "…"}; sessionId is the conversation id:
// continued when it exists, created with that id when it does not, new when
// absent. The answer carries X-Conversation-Id. Events are
// "data: <json>\n\n", no "id:" lines, each with "type" and "timestamp" (ms);
// ": keep-alive" comments fill the silences:
//
//	(stream start)           activity.start {activityId, name:"thinking", description}
//	TEXT_MESSAGE_START       message.start {messageId}
//	TEXT_MESSAGE_CONTENT     message.content {messageId, content}
//	TEXT_MESSAGE_END         message.end {messageId, metadata?}; the last one is held
//	                         back to the run's end, where metadata gets totalTokens
//	                         (and intent when the run names one)
//	TOOL_CALL_START/ARGS/END tool_call.start {toolCallId, name, input} at TOOL_CALL_END
//	TOOL_CALL_RESULT         tool_call.end {toolCallId, output} or
//	                         tool_call.end {toolCallId, error:{code:"TOOL_ERROR"|"REJECTED", message}}
//	STATE_SNAPSHOT           state.snapshot {state}
//	STATE_DELTA              state.delta {patch}
//	STEP_STARTED/FINISHED    activity.start {activityId, name: stepName} / activity.end
//	CUSTOM approval_decided  approval.decided {approval:{uuid, status}}  (extension)
//	RUN_FINISHED             activity.end, the held message.end, then
//	                         interrupt: approval.requested {approval:{uuid, toolName,
//	                         toolArgs, description, toolCallId}}  (extension);
//	                         cancelled: error {error:{code:"CANCELLED", message}}
//	RUN_ERROR                activity.end, the held message.end, error {error:{code, message}}
//
// With Config.DottedOneMessage the turn is one message instead, whose id is
// the run's: message.start first, then activity.start "thinking", text and
// tool calls, then activity.end and message.end.
//
// The dotted dialect has no event of its own for a run that pauses for a
// human: approval.requested and approval.decided are this bridge's
// extensions. A client decides with
// POST /approvals/{uuid}; the next message continues the conversation.
//
// # The simple dialect: POST /api/chat
//
// Body {"message": "…"} or Vercel useChat's {"messages": [{role, content}]}
// (the last user message is the input; content may be a string or text
// parts), with an optional "conversationId" (same rules as sessionId above;
// useChat's chat "id" is used when conversationId is absent). The answer
// carries X-Conversation-Id. Events are "data: <json>\n\n" only:
//
//	(stream start)        log {content:"Understanding your query...", timestamp}
//	TEXT_MESSAGE_*        text {delta}, re-cut into chunks of 20–50 characters (at a
//	                      space when there is one, never inside a rune); a message's
//	                      last chunk may be shorter; messages after the first start
//	                      with "\n\n"
//	TOOL_CALL_END         log "Calling <tool>..."
//	TOOL_CALL_RESULT      log "<tool> done" or "<tool> failed: …", then
//	                      data {structuredData:{type:"tool_result", tool, result, isError?}}
//	STEP_STARTED          log <stepName>
//	CUSTOM approval_decided  log "Approval <uuid> approved|rejected"
//	CUSTOM run_retried    log "Retrying after an interruption..."
//	RUN_FINISHED success  done {stats:{executionTime, agentInvocations, totalCandidates,
//	                      intent?, totalTokens?}}; totalCandidates counts what the
//	                      run's successful tool results returned (the items of a
//	                      JSON array, of an object's longest array field, else 1)
//	RUN_FINISHED interrupt   log "Waiting for approval <uuid>: <description>",
//	                      data {structuredData:{type:"approval_required", approval}}, then
//	                      done: the turn is over; decide with POST /approvals/{uuid}
//	RUN_FINISHED cancelled, RUN_ERROR   error {error:{code, message, details?}}
//	(every PingEvery once the turn ran PingAfter)   {"type":"ping"}
//
// Error codes are the dialect's own: LLM_TIMEOUT, RATE_LIMIT, LLM_ERROR,
// VALIDATION_ERROR (a message the conversation cannot take now), TIMEOUT (a
// turn given up after its redeliveries) and UNKNOWN (cancelled, and the
// rest); details.meshCode keeps the mesh's code when it differs, and
// details.partialText the text the stream already sent (a model that timed
// out mid-answer). The dotted dialect's error codes are the mesh's, and
// INTERNAL_ERROR for a run error without one.
//
// Each dialect stream logs its end: "stream closed" (info) with its
// duration, events sent, reason and the run's outcome, or "client left
// early; run cancelled" (warn) when the client went away mid-run.
//
// In both dialects a body that cannot be read is a 400 JSON error and a
// conversation that waits for an approval or runs a turn a 409, before any
// stream starts; a client that leaves mid-run cancels the run.
package agui

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/config"
)

// Config configures the streaming endpoints.
type Config struct {
	Core *core.Core
	// MaxBodyBytes bounds request bodies. Zero means 1 MiB.
	MaxBodyBytes int64
	// KeepAlive is the interval of SSE comments on idle streams. Zero means 15s.
	KeepAlive time.Duration
	// PingAfter and PingEvery: the simple dialect sends {"type":"ping"} every
	// PingEvery once a turn has run for PingAfter. Zero means 10s and 5s.
	PingAfter, PingEvery time.Duration
	// DottedOneMessage makes the dotted dialect send one message per turn
	// (message.start, then activity.start, text and tool calls, then
	// activity.end and message.end) instead of one per model message.
	DottedOneMessage bool
	Logger           zerolog.Logger
}

type handler struct {
	cfg  Config
	core *core.Core
	log  zerolog.Logger
}

// Register mounts the endpoints on mux.
func Register(mux core.Mux, cfg Config) {
	h := newHandler(cfg)
	mux.HandleFunc("GET /conversations/{id}/events", h.events)
	mux.HandleFunc("POST /agui", h.agui)
	h.registerDialects(mux)
}

// newHandler copies cfg with its defaults.
func newHandler(cfg Config) *handler {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = config.DefaultMaxBodyBytes
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = sse.DefaultKeepAlive
	}
	if cfg.PingAfter == 0 {
		cfg.PingAfter = 10 * time.Second
	}
	if cfg.PingEvery == 0 {
		cfg.PingEvery = 5 * time.Second
	}
	return &handler{cfg: cfg, core: cfg.Core, log: cfg.Logger}
}

// ErrTooManyStreams refuses a stream past the core's MaxStreams, or past
// its caller's limits.streams_per_principal.
var ErrTooManyStreams = core.ErrTooManyStreams

// acquire takes a stream slot of the bridge and of r's caller, or answers
// 503 (the bridge's) or 429 (the caller's) and returns false.
func (h *handler) acquire(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	release, err := h.core.OpenStream(r.Context())
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return release, true
}

// next waits for the follower's next event, writing keep-alive comments
// while there is none.
func (h *handler) next(ctx context.Context, f *core.Follower, out *sse.Writer) (core.StreamEvent, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, h.cfg.KeepAlive)
		ev, err := f.Next(wait)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return ev, err
		}
		if err := out.Comment("keep-alive"); err != nil {
			return core.StreamEvent{}, err
		}
	}
}
