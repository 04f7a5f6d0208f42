package llm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Server-sent events, the framing of every provider's stream: lines of
// "field: value", an event ends at a blank line, "data" lines of one event
// join with "\n", lines starting with ":" are comments.

// maxSSELine bounds one line of a stream (a tool call's arguments can be
// long, but not unbounded).
const maxSSELine = 16 << 20

// sseEvent is one event of a stream.
type sseEvent struct {
	Event string
	Data  []byte
}

// sseReader reads events from a stream.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	b := sseBuffers.Get().(*bufio.Reader)
	b.Reset(r)
	return &sseReader{r: b}
}

// sseBuffers are the read buffers of streams: each model call streams
// one, and a buffer of its own per call was a good part of what a turn
// allocated.
var sseBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 8<<10) }}

// release gives s's buffer back for another stream; s is not used after.
// What Next returned stays valid: it is copied out of the buffer.
func (s *sseReader) release() {
	s.r.Reset(nil)
	sseBuffers.Put(s.r)
	s.r = nil
}

// readError is a failure to read the body (connection reset, cut chunked
// stream), as opposed to a body that reads fine but is wrong.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// Next returns the next event with data. At the clean end of the stream it
// returns io.EOF; a last event not followed by a blank line still counts
// when its line was complete.
func (s *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data bytes.Buffer
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) && hasData && line == nil {
				ev.Data = data.Bytes()
				return ev, nil
			}
			if errors.Is(err, io.EOF) && line == nil {
				return sseEvent{}, io.EOF
			}
			if errors.Is(err, io.EOF) {
				// A last line without its newline: the stream was cut.
				return sseEvent{}, &readError{io.ErrUnexpectedEOF}
			}
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = data.Bytes()
				return ev, nil
			}
			ev = sseEvent{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Event = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		}
	}
}

// line returns one line without its end of line. At the end of the stream
// it returns (nil, io.EOF), or the partial line with io.EOF when the last
// line had no newline.
func (s *sseReader) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxSSELine {
			return nil, fmt.Errorf("%w: stream line longer than %d bytes", ErrMalformedResponse, maxSSELine)
		}
		if err == nil {
			buf = bytes.TrimSuffix(buf[:len(buf)-1], []byte("\r"))
			return buf, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(buf) == 0 {
				return nil, io.EOF
			}
			return buf, io.EOF
		}
		return nil, &readError{err}
	}
}
