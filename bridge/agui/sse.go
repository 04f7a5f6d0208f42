package agui

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// writeTimeout bounds one write to a client: a client that stops reading
// cannot hold its stream's goroutine forever.
const writeTimeout = 15 * time.Second

// sse writes Server-Sent Events: headers of seed 001, "\n\n" framing, a
// flush after every event.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// ids says whether events carry "id:" lines (the stream sequence).
	ids bool
	buf []byte
}

func newSSE(w http.ResponseWriter, ids bool) *sse {
	return &sse{w: w, rc: http.NewResponseController(w), ids: ids}
}

// start writes the headers; nothing can be refused with a status afterwards.
func (s *sse) start(extra http.Header) error {
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
	return s.flush()
}

// retry tells an EventSource how long to wait before it reconnects (its
// default is about 3 s).
func (s *sse) retry(ms int) error {
	if _, err := s.w.Write([]byte("retry: " + strconv.Itoa(ms) + "\n\n")); err != nil {
		return err
	}
	return s.flush()
}

// event writes one event; id 0 writes none.
func (s *sse) event(id uint64, data []byte) error {
	s.buf = s.buf[:0]
	if s.ids && id != 0 {
		s.buf = append(s.buf, "id: "...)
		s.buf = strconv.AppendUint(s.buf, id, 10)
		s.buf = append(s.buf, '\n')
	}
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, "\n\n"...)
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.flush()
}

// writeJSON writes each value as one event without an id.
func writeJSON[T any](s *sse, evs []T) error {
	for _, e := range evs {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := s.event(0, data); err != nil {
			return err
		}
	}
	return nil
}

// comment writes an SSE comment, which clients ignore: a keep-alive.
func (s *sse) comment(text string) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.w.Write([]byte(": " + text + "\n\n")); err != nil {
		return err
	}
	return s.flush()
}

func (s *sse) flush() error { return s.rc.Flush() }
