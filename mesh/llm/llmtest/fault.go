package llmtest

import (
	"io"
	"net/http"
	"time"
)

// Fault is a scripted failure, served instead of the backend's answer (see
// [Server.Fail]). Set one kind: Status (the zero Fault is a 500), Reset,
// Hang, Malformed or Cut.
type Fault struct {
	// Status answers with this HTTP status and the API's error body for it
	// (429: OpenAI rate_limit_exceeded, Anthropic rate_limit_error, Gemini
	// RESOURCE_EXHAUSTED; 500: server_error, api_error, INTERNAL; Anthropic's
	// 529 overloaded_error; …).
	Status int
	// Message is the error message. Empty means one naming the status.
	Message string
	// RetryAfter, when positive, tells the client when to retry the way the
	// API does: OpenAI retry-after (whole seconds, rounded up) and
	// retry-after-ms; Anthropic retry-after; Gemini a google.rpc.RetryInfo
	// retryDelay in the error body.
	RetryAfter time.Duration
	// Reset drops the connection without an answer.
	Reset bool
	// Hang holds the request without answering until the client gives up
	// or the server closes.
	Hang bool
	// Malformed answers 200 with what is not the API's JSON: a truncated
	// object, or to a stream an event whose data is not JSON.
	Malformed bool
	// Cut calls the backend, sends the first half of its answer (of the
	// stream's events, or of the JSON body) and drops the connection.
	Cut bool
	// Times is how many requests the fault answers. Zero means one;
	// negative means every request until [Server.Recover].
	Times int
}

// serveFault answers request i with f.
func (s *Server) serveFault(w http.ResponseWriter, r *http.Request, c *call, i int, f Fault) {
	switch {
	case f.Reset:
		s.update(i, func(rec *Record) { rec.Status = 0 })
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
			return
		}
		panic(http.ErrAbortHandler)
	case f.Hang:
		ctx, done := s.requestContext(r)
		defer done()
		<-ctx.Done()
		s.update(i, func(rec *Record) { rec.Status = 0 })
	case f.Malformed:
		s.update(i, func(rec *Record) { rec.Status = http.StatusOK })
		if c.stream && !c.sseless {
			out := &eventOut{w: w}
			out.writeRaw("data: {\"this is not\": JSON\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "malformed", "choices": [`)
	case f.Cut:
		s.answer(w, r, c, i, true)
	default:
		status := f.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		msg := f.Message
		if msg == "" {
			msg = "scripted failure: " + http.StatusText(status)
			if status == 529 {
				msg = "scripted failure: Overloaded"
			}
		}
		s.refuse(w, i, &apiError{status: status, message: msg, retryAfter: f.RetryAfter})
	}
}
