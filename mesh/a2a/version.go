package a2a

import (
	"strings"
)

// NegotiateVersion reads the A2A-Version header of a request: empty means
// 0.3 (the spec's rule for clients that predate the header), and a patch
// number is ignored ("1.0.1" is 1.0). ok is false for any version this
// package does not speak.
func NegotiateVersion(header string) (version string, ok bool) {
	v := strings.TrimSpace(header)
	if v == "" {
		return Version03, true
	}
	if parts := strings.Split(v, "."); len(parts) == 3 {
		v = parts[0] + "." + parts[1]
	}
	switch v {
	case Version03, Version10:
		return v, true
	}
	return "", false
}

// SupportedVersions lists the versions NegotiateVersion accepts.
func SupportedVersions() []string { return []string{Version03, Version10} }

// Details of 1.0 errors: JSON-RPC errors carry in "data" an array of
// ProtoJSON Any objects, google.rpc.ErrorInfo for the A2A errors and
// google.rpc.BadRequest for invalid params.
const (
	ErrorInfoType  = "type.googleapis.com/google.rpc.ErrorInfo"
	BadRequestType = "type.googleapis.com/google.rpc.BadRequest"
	// ErrorDomain is the domain of ErrorInfo details of A2A errors.
	ErrorDomain = "a2a-protocol.org"
)

// ErrorInfo is google.rpc.ErrorInfo.
type ErrorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// BadRequest is google.rpc.BadRequest.
type BadRequest struct {
	Type            string           `json:"@type"`
	FieldViolations []FieldViolation `json:"fieldViolations"`
}

// FieldViolation names a field of a request and what is wrong with it.
type FieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// ErrorReason is the ErrorInfo reason of an A2A error code (TASK_NOT_FOUND
// …), or "" for the generic JSON-RPC codes.
func ErrorReason(code int) string {
	switch code {
	case CodeTaskNotFound:
		return "TASK_NOT_FOUND"
	case CodeTaskNotCancelable:
		return "TASK_NOT_CANCELABLE"
	case CodePushNotificationUnsupported:
		return "PUSH_NOTIFICATION_NOT_SUPPORTED"
	case CodeUnsupportedOperation:
		return "UNSUPPORTED_OPERATION"
	case CodeContentTypeNotSupported:
		return "CONTENT_TYPE_NOT_SUPPORTED"
	case CodeVersionNotSupported:
		return "VERSION_NOT_SUPPORTED"
	case CodeTaskGone:
		return "TASK_GONE"
	case CodeRateLimited:
		return "RATE_LIMITED"
	case CodeOverCapacity:
		return "OVER_CAPACITY"
	}
	return ""
}
