package core

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/mesh"
)

// tap is a function that sees the run events the hub reads.
type tap struct{ fn func(StreamEvent) }

// Tap calls fn with every run start and end (RUN_STARTED, RUN_FINISHED,
// RUN_ERROR) and every event of the mesh itself (mesh.evt._mesh.CUSTOM),
// live ones from [Core.Start] on, in stream order, on the hub's goroutine:
// fn must return at once and must not keep ev.Data. The ops API counts and
// times runs with it, without a consumer of its own. The returned function
// removes the tap; it is idempotent.
func (c *Core) Tap(fn func(StreamEvent)) (remove func()) {
	t := &tap{fn: fn}
	h := c.hub
	h.mu.Lock()
	if h.taps == nil {
		h.taps = map[*tap]struct{}{}
	}
	h.taps[t] = struct{}{}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.taps, t)
		h.mu.Unlock()
	}
}

// EventsSeq is the events stream's last sequence, which grows by one with
// each event the mesh publishes (its conversations' and its own, whether
// this bridge reads them or not): rates come from one reading to the next.
func (c *Core) EventsSeq(ctx context.Context) (uint64, error) {
	s, err := c.cfg.JS.Stream(ctx, c.ns.Stream(mesh.StreamEvents))
	if err != nil {
		return 0, fmt.Errorf("core: events stream: %w", err)
	}
	return s.CachedInfo().State.LastSeq, nil
}
