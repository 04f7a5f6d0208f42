package llmtest

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// Fault is a scripted failure, served instead of the backend's answer (see
// [Server.Fail]). Set one kind: Status (the zero Fault is a 500), Body,
// Reset, Hang, Malformed, Cut or End.
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
	// Header adds these headers to a Status or Body answer, their names as
	// written (not canonicalised): a Retry-After in a form the API does
	// not use, say.
	Header map[string]string
	// Body answers with this body as it is, under ContentType (empty means
	// application/json) and Status (zero means 200): an answer of the
	// test's own making, malformed or in a form the API allows but this
	// server does not produce (an error array, a stream of a compatible
	// server).
	Body        string
	ContentType string
	// Reset drops the connection without an answer.
	Reset bool
	// Hang holds the request without answering until the client gives up
	// or the server closes. With Until, a stream is answered up to Until
	// first.
	Hang bool
	// Malformed answers 200 with what is not the API's JSON: a truncated
	// object, or to a stream an event whose data is not JSON.
	Malformed bool
	// Cut calls the backend, sends the first half of its answer (of the
	// stream's events, or of the JSON body) and drops the connection.
	// With Until, the stream's events up to Until are sent; with Early,
	// half of its first event, so that nothing of it can be read.
	Cut   bool
	Early bool
	// End calls the backend and ends a stream cleanly but early: after
	// the first half of its events, or up to Until, without the API's
	// last events. A whole answer is sent half, then ended.
	End bool
	// Until, with Hang, Cut or End on a stream, is where it stops: after
	// the first event that holds this text (after every event when none
	// does). The backend's whole answer is made before any of it is sent.
	Until string
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
	case f.Hang && f.Until != "" && c.stream:
		s.answer(w, r, c, i, &f)
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
	case f.Cut, f.End:
		s.answer(w, r, c, i, &f)
	case f.Body != "":
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		s.update(i, func(rec *Record) { rec.Status = status })
		setHeaders(w.Header(), f.Header)
		ct := f.ContentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, f.Body)
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
		setHeaders(w.Header(), f.Header)
		s.refuse(w, i, &apiError{status: status, message: msg, retryAfter: f.RetryAfter})
	}
}

// setHeaders sets each header of hs under its name as written.
func setHeaders(h http.Header, hs map[string]string) {
	for k, v := range hs {
		h[k] = []string{v}
	}
}

// stopAt is how many of a stream's events f lets through: up to the first
// that holds f.Until, or the first half.
func stopAt(events []string, f *Fault) int {
	if f.Until == "" {
		return len(events) / 2
	}
	for i, e := range events {
		if strings.Contains(e, f.Until) {
			return i + 1
		}
	}
	return len(events)
}
