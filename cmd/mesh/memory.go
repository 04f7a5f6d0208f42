package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Go gives a process's memory back to the system only as its collector
// frees it: after a burst of turns the heap keeps its size (up to twice the
// live heap, GOGC 100) until the next collection, which an idle process
// runs only every 2 minutes. A role that has gone quiet after a burst
// therefore collects and returns its free memory at once (debug.FreeOSMemory),
// as the embedded server's JetStream drops the caches of its message blocks
// after 10 s idle.

// idleRelease decides when a process gives its free memory back: after it
// allocated at least MinBytes since it last did, once it has allocated less
// than IdleBytes per Tick for IdleAfter.
type idleRelease struct {
	// Tick is how often the allocations are read.
	Tick time.Duration
	// IdleBytes is the most a tick may allocate and count as idle: the
	// heartbeats, probes and timers of a quiet mesh stay under it.
	IdleBytes uint64
	// IdleAfter is how long the process must have been idle. Longer than
	// JetStream's 10 s, so that the server's block caches are garbage then.
	IdleAfter time.Duration
	// MinBytes is how much the process must have allocated since the last
	// release: a collection is only worth it after a burst.
	MinBytes uint64

	last     uint64    // allocations at the last reading
	pending  uint64    // allocated since the last release
	lastBusy time.Time // the last reading of a busy tick
}

// defaultIdleRelease is the idleRelease of every role and of `mesh up`.
func defaultIdleRelease() *idleRelease {
	return &idleRelease{Tick: 2 * time.Second, IdleBytes: 2 << 20, IdleAfter: 11 * time.Second, MinBytes: 32 << 20}
}

// observe takes the process's total allocations at now and reports whether
// it should release its memory now.
func (r *idleRelease) observe(now time.Time, allocs uint64) bool {
	delta := allocs - r.last
	if r.last == 0 || allocs < r.last {
		delta = 0 // the first reading
	}
	r.last = allocs
	r.pending += delta
	if delta > r.IdleBytes || r.lastBusy.IsZero() {
		r.lastBusy = now
		return false
	}
	if r.pending < r.MinBytes || now.Sub(r.lastBusy) < r.IdleAfter {
		return false
	}
	r.pending = 0
	return true
}

// run releases the process's memory whenever observe says so, until ctx ends.
func (r *idleRelease) run(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	t := time.NewTicker(r.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && r.observe(now, sample[0].Value.Uint64()) {
				release()
			}
		}
	}
}

// release collects three times and returns the free memory to the system.
// The embedded server's message blocks give their buffers back to a
// sync.Pool when a collection finds them unused, and a pool keeps what it
// holds through one more collection: the third frees them.
func release() {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
}
