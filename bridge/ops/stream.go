package ops

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
)

// The SSE streams of the API carry one JSON object per event, its "type"
// saying what it is:
//
//	{"type": "approvals", …Inbox}      /ops/approvals/events: at once, then at every change
//	{"type": "history", "samples": […]} /ops/mesh/events: the rates of the last minutes, at once
//	{"type": "mesh", …View}            /ops/mesh/events: then every tick
//
// A stream holds no queue: a client that reads slowly gets the latest
// state when it reads again, never a backlog.

// coalesce is how long an approvals stream waits after a change for the
// changes that come with it (a decision writes the record, then marks its
// resume), so that one snapshot says them all.
const coalesce = 100 * time.Millisecond

// approvalEvents serves GET /ops/approvals/events.
func (s *Service) approvalEvents(w http.ResponseWriter, r *http.Request) {
	history, err := historyParam(r, s.cfg.Decided)
	if err != nil {
		core.WriteError(w, err)
		return
	}
	s.stream(w, r, func(ctx context.Context, out *sse.Writer) error {
		for {
			changed := s.inbox.changed.wait()
			if err := send(out, "approvals", s.inboxView(ctx, history)); err != nil {
				return err
			}
			if err := waitFor(ctx, out, changed); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(coalesce):
			}
		}
	})
}

// meshEvents serves GET /ops/mesh/events.
func (s *Service) meshEvents(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, func(ctx context.Context, out *sse.Writer) error {
		if err := send(out, "history", map[string]any{"tick_ms": s.cfg.Tick.Milliseconds(), "samples": s.stats.history()}); err != nil {
			return err
		}
		for {
			tick := s.tick.wait()
			if err := send(out, "mesh", s.meshView(ctx)); err != nil {
				return err
			}
			if err := waitFor(ctx, out, tick); err != nil {
				return err
			}
		}
	})
}

// stream starts an SSE response on one of the bridge's stream slots and
// runs body until the client leaves, the body fails or the credential of
// the request (a stream token, a JWT) expires: the stream then ends (its
// events have no error type); an EventSource reconnects, and is refused
// until the page gives it a fresh token.
func (s *Service) stream(w http.ResponseWriter, r *http.Request, body func(context.Context, *sse.Writer) error) {
	closeStream, err := s.core.OpenStream(r.Context())
	if err != nil {
		core.WriteError(w, err)
		return
	}
	defer closeStream()
	out := sse.New(w).Observe(r, "ops")
	if err := out.Start(nil); err != nil {
		return
	}
	if err := out.Retry(2000); err != nil {
		return
	}
	ctx := r.Context()
	if p := auth.FromContext(ctx); p != nil && !p.Expires.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, p.Expires)
		defer cancel()
	}
	_ = body(ctx, out)
}

// send writes one event: v's JSON object with "type" first.
func send(out *sse.Writer, typ string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	head := `{"type":"` + typ + `"`
	if len(data) > 2 {
		head += ","
	}
	return out.Event(0, append([]byte(head), data[1:]...))
}

// waitFor waits until ready is closed, writing keep-alive comments
// meanwhile.
func waitFor(ctx context.Context, out *sse.Writer, ready <-chan struct{}) error {
	keep := time.NewTicker(sse.DefaultKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ready:
			return nil
		case <-keep.C:
			if err := out.Comment("keep-alive"); err != nil {
				return err
			}
		}
	}
}
