package a2a

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// rpcError is a JSON-RPC error before it is written in a version's shape.
type rpcError struct {
	Code    int
	Message string
	// Field is the parameter at fault of an invalid-params error.
	Field string
	// Meta goes in the ErrorInfo of 1.0 errors (taskId …).
	Meta map[string]string
	// Status is the HTTP status of the answer; zero means 200, the status
	// of every JSON-RPC error but a body over the size limit.
	Status int
	// RetryAfter, when not zero, goes in a Retry-After header (seconds).
	RetryAfter int
	// Data is the 0.3 error's data (a limit's {code, resetAt, retryAfter});
	// 1.0 has Meta instead.
	Data map[string]any
}

func (e *rpcError) Error() string { return fmt.Sprintf("a2a error %d: %s", e.Code, e.Message) }

func errParse(msg string) *rpcError { return &rpcError{Code: wire.CodeParseError, Message: msg} }
func errInvalidRequest(msg string) *rpcError {
	return &rpcError{Code: wire.CodeInvalidRequest, Message: msg}
}
func errMethod(msg string) *rpcError { return &rpcError{Code: wire.CodeMethodNotFound, Message: msg} }

func errParams(field, msg string) *rpcError {
	return &rpcError{Code: wire.CodeInvalidParams, Message: msg, Field: field}
}

func errTaskNotFound(id string) *rpcError {
	return &rpcError{Code: wire.CodeTaskNotFound, Message: fmt.Sprintf("task %q not found", clip(id)), Meta: map[string]string{"taskId": clip(id)}}
}

func errNotCancelable(id, why string) *rpcError {
	return &rpcError{Code: wire.CodeTaskNotCancelable, Message: fmt.Sprintf("task %s cannot be canceled: %s", id, why), Meta: map[string]string{"taskId": id}}
}

// errGone answers a task whose conversation was deleted or expired:
// -32050 (the mesh's code), HTTP 410, the kind (deleted, expired) in the
// metadata of 1.0 errors.
func errGone(err error, taskID string) *rpcError {
	return &rpcError{Code: wire.CodeTaskGone, Message: err.Error(), Status: http.StatusGone,
		Meta: map[string]string{"taskId": clip(taskID), "code": mesh.ErrorKind(err)}}
}

func errUnsupported(msg string) *rpcError {
	return &rpcError{Code: wire.CodeUnsupportedOperation, Message: msg}
}

// errForbidden refuses what the caller's roles do not allow: HTTP 403,
// as the bridge answers a request without the role for /a2a at all.
func errForbidden(msg string) *rpcError {
	return &rpcError{Code: wire.CodeInvalidRequest, Message: msg, Status: http.StatusForbidden}
}

func errInternal(msg string) *rpcError { return &rpcError{Code: wire.CodeInternalError, Message: msg} }

// toRPC maps an error of the core or the mesh to a JSON-RPC error:
//
//	conversation deleted or expired           -32050 task gone (HTTP 410)
//	conversation not found                    -32001 task not found
//	a turn runs, or it waits for an approval  -32004 unsupported operation (busy)
//	bad request, a file too large             -32602 invalid params
//	a file's media type refused               -32005 content type not supported
//	unavailable, degraded                     -32603 internal error, Retry-After
//	anything else                             -32603 internal error
func toRPC(err error, taskID string) *rpcError {
	var re *rpcError
	var pending *core.PendingError
	switch {
	case errors.As(err, &re):
		return re
	case mesh.IsGone(err):
		return errGone(err, taskID)
	case core.LimitOf(err) != nil:
		return limitError(core.LimitOf(err))
	case errors.Is(err, mesh.ErrSessionNotFound):
		return errTaskNotFound(taskID)
	case errors.Is(err, core.ErrForbidden):
		return errForbidden(err.Error())
	case errors.As(err, &pending), errors.Is(err, mesh.ErrWaitingApproval), errors.Is(err, mesh.ErrTurnInProgress):
		e := errUnsupported(err.Error())
		e.Meta = map[string]string{"taskId": taskID}
		return e
	case errors.Is(err, mesh.ErrBadRequest), errors.Is(err, mesh.ErrFileTooLarge):
		return errParams("", err.Error())
	case errors.Is(err, mesh.ErrFileType):
		return &rpcError{Code: wire.CodeContentTypeNotSupported, Message: err.Error()}
	case mesh.IsUnavailable(err), errors.Is(err, mesh.ErrDegraded):
		e := errInternal("the mesh is unavailable: " + err.Error())
		e.RetryAfter = mesh.RetryAfter(err)
		return e
	}
	return errInternal("internal error: " + err.Error())
}

// limitError is a limit's refusal: CodeRateLimited (429) or
// CodeOverCapacity (503), keeping its HTTP status and Retry-After, with
// the limit's code and resetAt.
func limitError(le *core.LimitError) *rpcError {
	code := wire.CodeRateLimited
	if le.Err.Status() == http.StatusServiceUnavailable {
		code = wire.CodeOverCapacity
	}
	reset := le.ResetAt.Format(time.RFC3339)
	return &rpcError{Code: code, Message: le.Error(), Status: le.Err.Status(), RetryAfter: le.Err.RetryAfter(),
		Meta: map[string]string{"code": le.Err.Kind(), "resetAt": reset},
		Data: map[string]any{"code": le.Err.Kind(), "resetAt": reset, "retryAfter": le.Err.RetryAfter()}}
}

// object writes the error in the shape of a version: 0.3 clients (a2a-go
// 0.3) decode "data" as an object, so it is left out; 1.0 carries details,
// ErrorInfo for A2A errors and BadRequest for invalid params.
func (e *rpcError) object(version string) *wire.Error {
	out := &wire.Error{Code: e.Code, Message: e.Message}
	if version != wire.Version10 {
		if e.Data != nil {
			out.Data = e.Data
		}
		return out
	}
	var details []any
	if reason := wire.ErrorReason(e.Code); reason != "" {
		details = append(details, wire.ErrorInfo{Type: wire.ErrorInfoType, Reason: reason, Domain: wire.ErrorDomain, Metadata: e.Meta})
	}
	if e.Code == wire.CodeInvalidParams && e.Field != "" {
		details = append(details, wire.BadRequest{Type: wire.BadRequestType, FieldViolations: []wire.FieldViolation{{Field: e.Field, Description: e.Message}}})
	}
	if len(details) > 0 {
		out.Data = details
	}
	return out
}

func (e *rpcError) status() int {
	if e.Status == 0 {
		return http.StatusOK
	}
	return e.Status
}

// clip shortens what a client sent before it is echoed in an error.
func clip(s string) string {
	if r := []rune(s); len(r) > mesh.ClipLen {
		return string(r[:mesh.ClipLen]) + "…"
	}
	return s
}
