package mesh

import (
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
// the kinds match.
type Error struct {
	// Kind names the error for programs: "approval_decided", "not_found" …
	Kind string
	// Status is the HTTP status a bridge answers with: 404, 409, 503 …
	Status int
	// Message is for people.
	Message string
	// RetryAfter, when not zero, is how many seconds a client should wait
	// before trying again (HTTP Retry-After).
	RetryAfter int
}

func (e *Error) Error() string { return e.Message }

// Is matches errors of the same kind; a conversation deleted or expired
// (lifecycle.go) is also not found.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && (t.Kind == e.Kind || t.Kind == ErrSessionNotFound.Kind && goneKinds[e.Kind])
}

// With returns an error of the same kind and status with a specific message.
func (e *Error) With(message string) *Error {
	return &Error{Kind: e.Kind, Status: e.Status, Message: message, RetryAfter: e.RetryAfter}
}

// Sentinels. Compare with errors.Is; the messages are defaults that
// [Error.With] replaces with specifics.
var (
	ErrBadRequest       = &Error{Kind: "bad_request", Status: http.StatusBadRequest, Message: "mesh: bad request"}
	ErrSessionNotFound  = &Error{Kind: "session_not_found", Status: http.StatusNotFound, Message: "mesh: conversation not found"}
	ErrApprovalNotFound = &Error{Kind: "approval_not_found", Status: http.StatusNotFound, Message: "mesh: approval not found"}
	ErrApprovalDecided  = &Error{Kind: "approval_decided", Status: http.StatusConflict, Message: "mesh: approval already decided"}
	ErrWaitingApproval  = &Error{Kind: "waiting_approval", Status: http.StatusConflict, Message: "mesh: conversation is waiting for an approval"}
	ErrTurnInProgress   = &Error{Kind: "turn_in_progress", Status: http.StatusConflict, Message: "mesh: a turn is already running in this conversation"}
	ErrToolNotFound     = &Error{Kind: "tool_not_found", Status: http.StatusNotFound, Message: "mesh: tool not found"}
	ErrGroupNotFound    = &Error{Kind: "group_not_found", Status: http.StatusNotFound, Message: "mesh: group not found"}
	ErrAgentNotFound    = &Error{Kind: "agent_not_found", Status: http.StatusNotFound, Message: "mesh: agent not found"}
	ErrToolUnavailable  = &Error{Kind: "tool_unavailable", Status: http.StatusServiceUnavailable, Message: "mesh: tool server unavailable"}
	ErrCallInterrupted  = &Error{Kind: "call_interrupted", Status: http.StatusConflict, Message: "mesh: an earlier attempt of this call was interrupted"}
	ErrUnavailable      = &Error{Kind: "unavailable", Status: http.StatusServiceUnavailable, Message: "mesh: service unavailable"}
	ErrInternal         = &Error{Kind: "internal", Status: http.StatusInternalServerError, Message: "mesh: internal error"}
	// ErrApprovalRequired: a tool that is not read-only was asked to run
	// without a signed approval.
	ErrApprovalRequired = &Error{Kind: "approval_required", Status: http.StatusForbidden, Message: "mesh: this tool runs only with an approval signed by the approver"}
	// ErrApprovalInvalid: the signed approval sent with a call is not a
	// valid approval of that exact call.
	ErrApprovalInvalid = &Error{Kind: "approval_invalid", Status: http.StatusForbidden, Message: "mesh: the approval does not approve this call"}
	// ErrApprovalTampered: the approval record no longer matches what the
	// approver sealed when it was asked for (its arguments were rewritten).
	ErrApprovalTampered = &Error{Kind: "approval_tampered", Status: http.StatusConflict, Message: "mesh: the approval record was changed after it was asked for"}
	// ErrApprovalArgsChanged: the decider saw other arguments than the
	// record holds (the decision's args_hash differs).
	ErrApprovalArgsChanged = &Error{Kind: "approval_args_changed", Status: http.StatusConflict, Message: "mesh: the arguments shown differ from the approval's"}
	// ErrApprovalPolicy: a decision by policy was asked for a call that
	// the policy does not cover.
	ErrApprovalPolicy = &Error{Kind: "approval_policy", Status: http.StatusForbidden, Message: "mesh: no policy approves this call"}
	// ErrDegraded refuses new conversations while the mesh is in
	// degradation mode (too many nodes down); existing ones go on.
	ErrDegraded = &Error{Kind: "degraded", Status: http.StatusServiceUnavailable, Message: "mesh: degraded: new conversations are paused while failed nodes recover", RetryAfter: 30}

	// Sentinels of the user actions.
	// ErrNothingToRegenerate refuses a regenerate in a conversation with no
	// user message to answer again (or none among its newest messages).
	ErrNothingToRegenerate = &Error{Kind: "nothing_to_regenerate", Status: http.StatusConflict, Message: "mesh: no user message to regenerate the answer of"}
	// ErrMessageNotFound: feedback on a message the conversation does not
	// hold.
	ErrMessageNotFound = &Error{Kind: "message_not_found", Status: http.StatusNotFound, Message: "mesh: message not found"}

	// Errors of files, with the HTTP statuses every surface answers them with.
	ErrFileTooLarge = &Error{Kind: "file_too_large", Status: http.StatusRequestEntityTooLarge, Message: "mesh: file too large"}
	ErrFileType     = &Error{Kind: "unsupported_media_type", Status: http.StatusUnsupportedMediaType, Message: "mesh: media type not accepted"}
	ErrFileNotFound = &Error{Kind: "file_not_found", Status: http.StatusNotFound, Message: "mesh: file not found"}

	// ErrSessionDeleted and ErrSessionExpired answer a request for a conversation
	// that was deleted or expired: 410 Gone. Both match [ErrSessionNotFound]
	// with errors.Is too, so that a role that drops the work of a missing
	// conversation (an agent's claim, a group's round) drops theirs alike.
	ErrSessionDeleted = &Error{Kind: "deleted", Status: http.StatusGone, Message: "mesh: conversation deleted"}
	ErrSessionExpired = &Error{Kind: "expired", Status: http.StatusGone, Message: "mesh: conversation expired"}
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
		HeaderServiceError:     []string{e.Message},
		HeaderServiceErrorCode: []string{strconv.Itoa(e.Status)},
		HeaderErrorKind:        []string{e.Kind},
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
		kind = ErrInternal.Kind
	}
	return &Error{Kind: kind, Status: status, Message: msg}
}

// HTTPStatus is the status a bridge answers err with.
func HTTPStatus(err error) int {
	if e := kindOf(err); e != nil && e.Status != 0 {
		return e.Status
	}
	return http.StatusInternalServerError
}

// RetryAfter is the Retry-After of err in seconds, or 0.
func RetryAfter(err error) int {
	if e := kindOf(err); e != nil {
		return e.RetryAfter
	}
	return 0
}

// ErrorKind is the kind of err, "internal" when it has none.
func ErrorKind(err error) string {
	if e := kindOf(err); e != nil {
		return e.Kind
	}
	return ErrInternal.Kind
}

// errNATSUnavailable is what [kindOf] makes of a NATS error that says the
// server or the stream is away for now.
var errNATSUnavailable = &Error{Kind: ErrUnavailable.Kind, Status: http.StatusServiceUnavailable, Message: ErrUnavailable.Message, RetryAfter: 1}

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
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return errNATSUnavailable
	}
	return nil
}

// IsUnavailable reports whether err says a part of the mesh is away for
// now ([ErrUnavailable], or a NATS error of a moment: see kindOf).
func IsUnavailable(err error) bool { return ErrorKind(err) == ErrUnavailable.Kind }

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
