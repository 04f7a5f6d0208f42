// Package sse writes Server-Sent Events for the bridge's streaming
// surfaces (AG-UI and its dialects, A2A): the headers of seed 001, "\n\n"
// framing, a flush after every event, and a bound on every write.
package sse

import (
	"net/http"
	"strconv"
	"time"
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
}

// New returns a writer of w.
func New(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
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
	return s.write(s.buf)
}

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
