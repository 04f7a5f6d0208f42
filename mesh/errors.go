package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

var (
	// ErrInvalidToken reports a name that cannot be a subject token or key part.
	ErrInvalidToken = errors.New("mesh: invalid subject token")

	// ErrInvalidID reports an id that [CheckID] refuses.
	ErrInvalidID = errors.New("mesh: invalid id")

	// Errors of state patches.
	ErrStatePatch    = errors.New("mesh: a state patch must be a JSON object")
	ErrStateTooLarge = errors.New("mesh: state too large")
)

// Error is an error with a stable kind and an HTTP-like status, so that it can
// cross NATS (in the micro service error headers) and come out as the same
// sentinel on the other side: errors.Is(remote, ErrApprovalDecided) holds when
// the kinds match. An Error does not change once made: With, WithStatus and
// WithRetryAfter return new ones, so no importer can alter a sentinel.
type Error struct {
	// kind names the error for programs: "approval_decided", "not_found" …
	kind string
	// status is the HTTP status a bridge answers with: 404, 409, 503 …
	status int
	// message is for people.
	message string
	// retryAfter, when not zero, is how many seconds a client should wait
	// before trying again (HTTP Retry-After).
	retryAfter int
}

// NewError is an error of kind, answered over HTTP with status.
func NewError(kind string, status int, message string) *Error {
	return &Error{kind: kind, status: status, message: message}
}

func (e *Error) Error() string { return e.message }

// Kind names the error for programs: "approval_decided", "not_found" …
func (e *Error) Kind() string { return e.kind }

// Status is the HTTP status a bridge answers the error with.
func (e *Error) Status() int { return e.status }

// RetryAfter is how many seconds a client should wait before trying again
// (HTTP Retry-After), 0 for none.
func (e *Error) RetryAfter() int { return e.retryAfter }

// Is matches errors of the same kind; a conversation deleted or expired
// (lifecycle.go) is also not found.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && (t.kind == e.kind || t.kind == ErrSessionNotFound.kind && goneKinds[e.kind])
}

// With returns an error of the same kind and status with a specific message.
func (e *Error) With(message string) *Error {
	c := *e
	c.message = message
	return &c
}

// WithStatus returns the error answered with another status.
func (e *Error) WithStatus(status int) *Error {
	c := *e
	c.status = status
	return &c
}

// WithRetryAfter returns the error with a Retry-After of seconds.
func (e *Error) WithRetryAfter(seconds int) *Error {
	c := *e
	c.retryAfter = seconds
	return &c
}

// Sentinels. Compare with errors.Is; the messages are defaults that
// [Error.With] replaces with specifics.
var (
	ErrBadRequest       = &Error{kind: "bad_request", status: http.StatusBadRequest, message: "mesh: bad request"}
	ErrSessionNotFound  = &Error{kind: "session_not_found", status: http.StatusNotFound, message: "mesh: conversation not found"}
	ErrApprovalNotFound = &Error{kind: "approval_not_found", status: http.StatusNotFound, message: "mesh: approval not found"}
	ErrApprovalDecided  = &Error{kind: "approval_decided", status: http.StatusConflict, message: "mesh: approval already decided"}
	ErrWaitingApproval  = &Error{kind: "waiting_approval", status: http.StatusConflict, message: "mesh: conversation is waiting for an approval"}
	ErrTurnInProgress   = &Error{kind: "turn_in_progress", status: http.StatusConflict, message: "mesh: a turn is already running in this conversation"}
	ErrToolNotFound     = &Error{kind: "tool_not_found", status: http.StatusNotFound, message: "mesh: tool not found"}
	ErrGroupNotFound    = &Error{kind: "group_not_found", status: http.StatusNotFound, message: "mesh: group not found"}
	ErrAgentNotFound    = &Error{kind: "agent_not_found", status: http.StatusNotFound, message: "mesh: agent not found"}
	ErrToolUnavailable  = &Error{kind: "tool_unavailable", status: http.StatusServiceUnavailable, message: "mesh: tool server unavailable"}
	ErrCallInterrupted  = &Error{kind: "call_interrupted", status: http.StatusConflict, message: "mesh: an earlier attempt of this call was interrupted"}
	ErrUnavailable      = &Error{kind: "unavailable", status: http.StatusServiceUnavailable, message: "mesh: service unavailable"}
	ErrInternal         = &Error{kind: "internal", status: http.StatusInternalServerError, message: "mesh: internal error"}
	// ErrApprovalRequired: a tool that is not read-only was asked to run
	// without a signed approval.
	ErrApprovalRequired = &Error{kind: "approval_required", status: http.StatusForbidden, message: "mesh: this tool runs only with an approval signed by the approver"}
	// ErrApprovalInvalid: the signed approval sent with a call is not a
	// valid approval of that exact call.
	ErrApprovalInvalid = &Error{kind: "approval_invalid", status: http.StatusForbidden, message: "mesh: the approval does not approve this call"}
	// ErrApprovalTampered: the approval record no longer matches what the
	// approver sealed when it was asked for (its arguments were rewritten).
	ErrApprovalTampered = &Error{kind: "approval_tampered", status: http.StatusConflict, message: "mesh: the approval record was changed after it was asked for"}
	// ErrApprovalArgsChanged: the decider saw other arguments than the
	// record holds (the decision's args_hash differs).
	ErrApprovalArgsChanged = &Error{kind: "approval_args_changed", status: http.StatusConflict, message: "mesh: the arguments shown differ from the approval's"}
	// ErrApprovalPolicy: a decision by policy was asked for a call that
	// the policy does not cover.
	ErrApprovalPolicy = &Error{kind: "approval_policy", status: http.StatusForbidden, message: "mesh: no policy approves this call"}
	// ErrDegraded refuses new conversations while the mesh is in
	// degradation mode (too many nodes down); existing ones go on.
	ErrDegraded = &Error{kind: "degraded", status: http.StatusServiceUnavailable, message: "mesh: degraded: new conversations are paused while failed nodes recover", retryAfter: 30}

	// Sentinels of the user actions.
	// ErrNothingToRegenerate refuses a regenerate in a conversation with no
	// user message to answer again (or none among its newest messages).
	ErrNothingToRegenerate = &Error{kind: "nothing_to_regenerate", status: http.StatusConflict, message: "mesh: no user message to regenerate the answer of"}
	// ErrMessageNotFound: feedback on a message the conversation does not
	// hold.
	ErrMessageNotFound = &Error{kind: "message_not_found", status: http.StatusNotFound, message: "mesh: message not found"}

	// Errors of files, with the HTTP statuses every surface answers them with.
	ErrFileTooLarge = &Error{kind: "file_too_large", status: http.StatusRequestEntityTooLarge, message: "mesh: file too large"}
	ErrFileType     = &Error{kind: "unsupported_media_type", status: http.StatusUnsupportedMediaType, message: "mesh: media type not accepted"}
	ErrFileNotFound = &Error{kind: "file_not_found", status: http.StatusNotFound, message: "mesh: file not found"}
	// ErrReplayNotFound: no stored report of a replay has that id.
	ErrReplayNotFound = &Error{kind: "replay_not_found", status: http.StatusNotFound, message: "mesh: replay not found"}

	// ErrSessionDeleted and ErrSessionExpired answer a request for a conversation
	// that was deleted or expired: 410 Gone. Both match [ErrSessionNotFound]
	// with errors.Is too, so that a role that drops the work of a missing
	// conversation (an agent's claim, a group's round) drops theirs alike.
	ErrSessionDeleted = &Error{kind: "deleted", status: http.StatusGone, message: "mesh: conversation deleted"}
	ErrSessionExpired = &Error{kind: "expired", status: http.StatusGone, message: "mesh: conversation expired"}
)

// Headers of a micro service error reply. The first two are the standard
// ones of github.com/nats-io/nats.go/micro; HeaderErrorKind is ours.
const (
	HeaderServiceError     = "Nats-Service-Error"
	HeaderServiceErrorCode = "Nats-Service-Error-Code"
	HeaderErrorKind        = "Mesh-Error-Kind"
)

// ErrorHeaders returns the headers that carry err across NATS. Errors that
// are not an [*Error] travel as [ErrInternal] with their message (NATS
// errors of a moment as [ErrUnavailable]).
func ErrorHeaders(err error) nats.Header {
	e := kindOf(err)
	switch {
	case e == nil:
		e = ErrInternal.With(err.Error())
	case e == errNATSUnavailable:
		e = ErrUnavailable.With(err.Error())
	}
	return nats.Header{
		HeaderServiceError:     []string{e.message},
		HeaderServiceErrorCode: []string{strconv.Itoa(e.status)},
		HeaderErrorKind:        []string{e.kind},
	}
}

// ErrorFromMsg returns the error a reply carries in its headers, or nil.
func ErrorFromMsg(m *nats.Msg) error {
	if m == nil || m.Header == nil {
		return nil
	}
	msg := m.Header.Get(HeaderServiceError)
	code := m.Header.Get(HeaderServiceErrorCode)
	if msg == "" && code == "" {
		return nil
	}
	status, _ := strconv.Atoi(code)
	if status == 0 {
		status = http.StatusInternalServerError
	}
	kind := m.Header.Get(HeaderErrorKind)
	if kind == "" {
		kind = ErrInternal.kind
	}
	return &Error{kind: kind, status: status, message: msg}
}

// HTTPStatus is the status a bridge answers err with.
func HTTPStatus(err error) int {
	if e := kindOf(err); e != nil && e.status != 0 {
		return e.status
	}
	return http.StatusInternalServerError
}

// RetryAfter is the Retry-After of err in seconds, or 0.
func RetryAfter(err error) int {
	if e := kindOf(err); e != nil {
		return e.retryAfter
	}
	return 0
}

// ErrorKind is the kind of err, "internal" when it has none.
func ErrorKind(err error) string {
	if e := kindOf(err); e != nil {
		return e.kind
	}
	return ErrInternal.kind
}

// errNATSUnavailable is what [kindOf] makes of a NATS error that says the
// server or the stream is away for now.
var errNATSUnavailable = &Error{kind: ErrUnavailable.kind, status: http.StatusServiceUnavailable, message: ErrUnavailable.message, retryAfter: 1}

// kindOf is the [*Error] err carries. A NATS error of a moment (no
// responders, a request timed out, a stream without a leader while a
// cluster elects one: JetStream's own 503s) counts as [ErrUnavailable]
// with a Retry-After of a second: the client may simply try again.
func kindOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && api.Code == http.StatusServiceUnavailable,
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrServerShutdown),
		// An operation that waited out its deadline for a stream's answer
		// (a leader that died with it, a cluster without a majority).
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return errNATSUnavailable
	}
	return nil
}

// IsUnavailable reports whether err says a part of the mesh is away for
// now ([ErrUnavailable], or a NATS error of a moment: see kindOf).
func IsUnavailable(err error) bool { return ErrorKind(err) == ErrUnavailable.kind }

// RespondError answers a micro request with err, in headers that
// [ErrorFromMsg] maps back to the same kind of error on the caller's side.
func RespondError(req micro.Request, err error) error {
	h := ErrorHeaders(err)
	return req.Error(h.Get(HeaderServiceErrorCode), h.Get(HeaderServiceError), nil, micro.WithHeaders(micro.Headers(h)))
}

// JSONErrorText describes a JSON decoding error for people, naming the field
// and the type expected where the decoder knows them: the text of the
// [ErrBadRequest] that [ParseDecision] and the bridge's body decoding return.
func JSONErrorText(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case asErr(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return fmt.Sprintf("field %q must be %s, not %s", field, jsonTypeName(te.Type.Kind().String()), te.Value)
	case asErr(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)
	default:
		return "malformed JSON: " + err.Error()
	}
}

func jsonTypeName(kind string) string {
	switch kind {
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "int", "int64", "int32", "uint64", "float64", "float32":
		return "a number"
	case "slice":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return kind
}
