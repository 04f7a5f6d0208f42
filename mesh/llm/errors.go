package llm

import (
	"errors"
	"regexp"
	"strings"
	"time"
)

// Codes of a provider [Error], as the agent reports them in RUN_ERROR. They
// have the values of mesh.CodeLLMTimeout, mesh.CodeRateLimit and
// mesh.CodeLLMError.
const (
	// CodeTimeout: no complete answer within Options.Timeout (or before the
	// caller's deadline).
	CodeTimeout = "LLM_TIMEOUT"
	// CodeRateLimit: the provider still answered 429 after every retry.
	CodeRateLimit = "RATE_LIMIT"
	// CodeError: anything else (bad key, bad request, provider down,
	// circuit breaker open, malformed answer, stream cut, cancellation).
	CodeError = "LLM_ERROR"
)

// Causes a provider [Error] wraps, for errors.Is.
var (
	// ErrBreakerOpen: the endpoint's circuit breaker is open after repeated
	// failures, so the call failed fast without reaching the provider.
	ErrBreakerOpen = errors.New("llm: circuit breaker open")
	// ErrMalformedResponse: the provider answered with something that is not
	// its API's format (bad JSON, unknown framing, broken tool arguments).
	ErrMalformedResponse = errors.New("llm: malformed response")
	// ErrStreamInterrupted: the answer stopped before it was complete
	// (connection cut, stream ended without its final event).
	ErrStreamInterrupted = errors.New("llm: stream interrupted")
	// ErrNoAPIKey: New was given no key for a provider that needs one.
	ErrNoAPIKey = errors.New("llm: no API key")
)

// Error is the failure of a cloud provider's call. Message is complete, safe
// to show to a user, and never holds an API key; Err is the cause, for
// errors.Is and errors.As (context.DeadlineExceeded, context.Canceled,
// ErrBreakerOpen, ErrMalformedResponse, ErrStreamInterrupted, or a transport
// error).
type Error struct {
	// Code is CodeTimeout, CodeRateLimit or CodeError.
	Code string
	// Status is the HTTP status of the provider's answer, 0 when there was
	// none (timeout, connection failure, open breaker).
	Status int
	// Message says what failed, naming the provider.
	Message string
	// RetryAfter is how long the provider asked to wait, when it said so.
	RetryAfter time.Duration
	// Err is the cause.
	Err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// RunErrorCode is the code the agent reports in RUN_ERROR.
func (e *Error) RunErrorCode() string { return e.Code }

// causeError is a cause whose text was scrubbed of secrets; it still
// unwraps to the original error.
type causeError struct {
	text  string
	cause error
}

func (c *causeError) Error() string { return c.text }
func (c *causeError) Unwrap() error { return c.cause }

// keyParam matches API keys passed in URLs (?key=…, &api_key=…).
var keyParam = regexp.MustCompile(`(?i)([?&](?:key|api_key|api-key|apikey|access_token)=)[^&\s"']+`)

// redactor removes one API key from text that came from the network or from
// errors that echo URLs.
type redactor struct{ key string }

func (r redactor) scrub(s string) string {
	if r.key != "" && len(r.key) >= 4 {
		s = strings.ReplaceAll(s, r.key, "[redacted]")
	}
	return keyParam.ReplaceAllString(s, "${1}[redacted]")
}

// wrap returns err with its text scrubbed.
func (r redactor) wrap(err error) error {
	if err == nil {
		return nil
	}
	return &causeError{text: r.scrub(err.Error()), cause: err}
}

// clip shortens s to about n bytes for an error message.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
