package llm

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []sseEvent
		wantErr error // after the events; io.EOF for a clean end
	}{
		{
			name: "events",
			in:   "event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {}\n\n",
			want: []sseEvent{{Event: "message_start", Data: []byte(`{"a":1}`)}, {Event: "ping", Data: []byte(`{}`)}},
		},
		{
			name: "crlf",
			in:   "data: {\"x\":1}\r\n\r\ndata: {\"x\":2}\r\n\r\n",
			want: []sseEvent{{Data: []byte(`{"x":1}`)}, {Data: []byte(`{"x":2}`)}},
		},
		{
			name: "multi-line data, comments, other fields",
			in:   ": keep-alive\nid: 7\nretry: 100\ndata: first\ndata:second\n\n",
			want: []sseEvent{{Data: []byte("first\nsecond")}},
		},
		{
			name: "no data is no event",
			in:   "event: ping\n\n\n\ndata: x\n\n",
			want: []sseEvent{{Data: []byte("x")}},
		},
		{
			name: "last event without blank line",
			in:   "data: [DONE]\n",
			want: []sseEvent{{Data: []byte("[DONE]")}},
		},
		{
			name:    "cut in a line",
			in:      "data: {\"x\":1}\n\ndata: {\"x\"",
			want:    []sseEvent{{Data: []byte(`{"x":1}`)}},
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name: "long line",
			in:   "data: " + strings.Repeat("a", 200000) + "\n\n",
			want: []sseEvent{{Data: []byte(strings.Repeat("a", 200000))}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tt.in))
			var got []sseEvent
			var err error
			for {
				var ev sseEvent
				ev, err = r.Next()
				if err != nil {
					break
				}
				got = append(got, ev)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %q, want %q", got, tt.want)
			}
			wantErr := tt.wantErr
			if wantErr == nil {
				wantErr = io.EOF
			}
			if !errors.Is(err, wantErr) {
				t.Errorf("end = %v, want %v", err, wantErr)
			}
		})
	}
}
