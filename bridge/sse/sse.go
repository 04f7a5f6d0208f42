// Package sse writes Server-Sent Events for the bridge's streaming
// surfaces (AG-UI and its dialects, A2A): the headers that keep proxies
// from caching or buffering a stream, "\n\n" framing, a flush after every
// event, and a bound on every write.
package sse

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// WriteTimeout bounds one write to a client: a client that stops reading
// cannot hold its stream's goroutine forever.
const WriteTimeout = 15 * time.Second

// DefaultKeepAlive is how often an idle stream gets a comment, so that
// proxies and clients do not take it for dead.
const DefaultKeepAlive = 15 * time.Second

// Writer writes the events of one stream.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
	// dialect names the stream in metrics; "" counts nothing.
	dialect string
	closed  context.Context
	events  int
}

// New returns a writer of w.
func New(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
}

// Observe makes the stream count in the mesh's metrics as one of dialect
// (mesh_sse_*) until r's context ends, that is until its handler returns.
func (s *Writer) Observe(r *http.Request, dialect string) *Writer {
	s.dialect, s.closed = dialect, r.Context()
	return s
}

// CutOff counts the stream's end for a client that fell too far behind.
func (s *Writer) CutOff() {
	if s.dialect != "" {
		telemetry.SSECutOff(s.dialect)
	}
}

// Start writes the headers, with extra ones; nothing can be refused with a
// status afterwards. A stream outlives the server's write timeout
// (http.write_timeout) and the body's read deadline (http.read_timeout):
// Start lifts both, and from then on each write has its own deadline,
// [WriteTimeout].
func (s *Writer) Start(extra http.Header) error {
	_ = s.rc.SetReadDeadline(time.Time{})
	_ = s.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	for k, v := range extra {
		for _, x := range v {
			h.Add(k, x)
		}
	}
	s.w.WriteHeader(http.StatusOK)
	if s.dialect != "" {
		context.AfterFunc(s.closed, telemetry.SSEOpened(s.dialect))
	}
	return s.rc.Flush()
}

// Retry tells an EventSource how long to wait before it reconnects (its
// default is about 3 s).
func (s *Writer) Retry(ms int) error {
	return s.write([]byte("retry: " + strconv.Itoa(ms) + "\n\n"))
}

// Event writes one event whose data is one line; id 0 writes no "id:" line.
func (s *Writer) Event(id uint64, data []byte) error {
	s.buf = s.buf[:0]
	if id != 0 {
		s.buf = append(s.buf, "id: "...)
		s.buf = strconv.AppendUint(s.buf, id, 10)
		s.buf = append(s.buf, '\n')
	}
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, "\n\n"...)
	if s.dialect != "" {
		telemetry.SSESent(s.dialect)
	}
	s.events++
	return s.write(s.buf)
}

// Events is how many events were written (comments not counted).
func (s *Writer) Events() int { return s.events }

// Comment writes an SSE comment, which clients ignore: a keep-alive.
func (s *Writer) Comment(text string) error {
	return s.write([]byte(": " + text + "\n\n"))
}

func (s *Writer) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}
