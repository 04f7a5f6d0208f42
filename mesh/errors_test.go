package mesh

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A NATS error of a moment answers 503 with a Retry-After, so a client
// tries again instead of taking a 500 for a bug; the mesh's own kinds keep
// theirs, and any other error stays internal.
func TestErrorKinds(t *testing.T) {
	// What a stream without a leader answers while a cluster elects one.
	noLeader := &jetstream.APIError{Code: http.StatusServiceUnavailable, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	tests := []struct {
		err        error
		status     int
		kind       string
		retryAfter int
	}{
		{fmt.Errorf("save: %w", nats.ErrNoResponders), 503, "unavailable", 1},
		{fmt.Errorf("get: %w", nats.ErrTimeout), 503, "unavailable", 1},
		{fmt.Errorf("update: %w", noLeader), 503, "unavailable", 1},
		{fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), 503, "unavailable", 1},
		{nats.ErrConnectionClosed, 503, "unavailable", 1},
		{ErrDegraded, 503, "degraded", 30},
		{fmt.Errorf("read: %w", ErrSessionNotFound), 404, "session_not_found", 0},
		{&jetstream.APIError{Code: http.StatusBadRequest, ErrorCode: 10003, Description: "bad request"}, 500, "internal", 0},
		{errors.New("boom"), 500, "internal", 0},
		{fmt.Errorf("save: %w", jetstream.ErrKeyNotFound), 500, "internal", 0},
	}
	for _, tt := range tests {
		if got := HTTPStatus(tt.err); got != tt.status {
			t.Errorf("HTTPStatus(%v) = %d, want %d", tt.err, got, tt.status)
		}
		if got := ErrorKind(tt.err); got != tt.kind {
			t.Errorf("ErrorKind(%v) = %q, want %q", tt.err, got, tt.kind)
		}
		if got := RetryAfter(tt.err); got != tt.retryAfter {
			t.Errorf("RetryAfter(%v) = %d, want %d", tt.err, got, tt.retryAfter)
		}
		if got, want := IsUnavailable(tt.err), tt.kind == "unavailable"; got != want {
			t.Errorf("IsUnavailable(%v) = %v", tt.err, got)
		}
	}
}

// Across NATS, a NATS error of a moment stays unavailable.
func TestUnavailableCrossesNATS(t *testing.T) {
	back := ErrorFromMsg(&nats.Msg{Header: ErrorHeaders(fmt.Errorf("call: %w", nats.ErrNoResponders))})
	if !IsUnavailable(back) || HTTPStatus(back) != http.StatusServiceUnavailable {
		t.Errorf("no responders came back as %v (%d)", back, HTTPStatus(back))
	}
	if back := ErrorFromMsg(&nats.Msg{Header: ErrorHeaders(errors.New("boom"))}); ErrorKind(back) != "internal" {
		t.Errorf("an internal error came back as %v", back)
	}
}
