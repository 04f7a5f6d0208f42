package ops

import (
	"context"
	"net/http"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
)

// The SSE streams of the operations API are snapshot streams
// ([core.ServeSnapshots]):
//
//	{"type": "approvals", …Inbox}      /ops/approvals/events: at once, then at every change
//	{"type": "history", "samples": […]} /ops/mesh/events: the rates of the last minutes, at once
//	{"type": "mesh", …View}            /ops/mesh/events: then every tick

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
	s.core.ServeSnapshots(w, r, "ops", func(ctx context.Context, out *sse.Writer) error {
		for {
			changed := s.inbox.changed.Wait()
			if err := core.SendSnapshot(out, "approvals", s.inboxView(ctx, history)); err != nil {
				return err
			}
			if err := core.WaitFor(ctx, out, changed); err != nil {
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
	s.core.ServeSnapshots(w, r, "ops", func(ctx context.Context, out *sse.Writer) error {
		if err := core.SendSnapshot(out, "history", map[string]any{"tick_ms": s.cfg.Tick.Milliseconds(), "samples": s.stats.history()}); err != nil {
			return err
		}
		for {
			tick := s.tick.Wait()
			if err := core.SendSnapshot(out, "mesh", s.meshView(ctx)); err != nil {
				return err
			}
			if err := core.WaitFor(ctx, out, tick); err != nil {
				return err
			}
		}
	})
}
