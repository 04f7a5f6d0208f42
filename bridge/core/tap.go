package core

// tap is a function that sees every event the hub reads.
type tap struct{ fn func(StreamEvent) }

// Tap calls fn with every event of the mesh this bridge reads from the
// events stream (live ones, from [Core.Start] on), in stream order, on the
// hub's goroutine: fn must return at once and must not keep ev.Data. The
// ops API counts events and times runs with it, without a consumer of its
// own. The returned function removes the tap; it is idempotent.
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
