package memory

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// IdleRelease decides when a process gives its memory back: once it has
// been quiet (allocated less than IdleBytes per Tick) for IdleAfter, after
// a burst of at least BurstBytes allocated since its last release; or, a
// quiet process that keeps allocating a little, once it has allocated
// MinBytes and its last release is Every ago.
type IdleRelease struct {
	// Tick is how often the allocations are read.
	Tick time.Duration
	// IdleBytes is the most a tick may allocate and count as quiet: the
	// heartbeats, probes and timers of a quiet mesh stay under it.
	IdleBytes uint64
	// IdleAfter is how long the process must have been quiet.
	IdleAfter time.Duration
	// BurstBytes: a process that allocated this much since its last
	// release releases as soon as it has been quiet for IdleAfter.
	BurstBytes uint64
	// MinBytes and Every: a quiet process releases again once it has
	// allocated MinBytes since its last release, Every after it.
	MinBytes uint64
	Every    time.Duration
	// Again, when positive: after the release that follows a burst, the
	// process releases once more when Again has passed since the burst
	// (or once quiet after that), whatever it allocated (ForServer).
	Again time.Duration

	last        uint64    // allocations at the last reading
	pending     uint64    // allocated since the last release
	lastBusy    time.Time // the last reading of a busy tick
	lastRelease time.Time
	againAt     time.Time // when to release again (Again); zero: not due
}

// Default is the IdleRelease of a role process and of the sample MCP
// server: quiet for 5 s (under 1 MiB allocated a second) after 8 MiB
// allocated, or after 1 MiB at most every 30 s.
func Default() *IdleRelease {
	return &IdleRelease{Tick: time.Second, IdleBytes: 1 << 20, IdleAfter: 5 * time.Second, BurstBytes: 8 << 20, MinBytes: 1 << 20, Every: 30 * time.Second}
}

// ForServer is the IdleRelease of a process that runs the embedded NATS
// server (`mesh up`, `mesh nats`). It waits 11 s, since JetStream drops the
// cache of a message block 10 s after the block's last use, and only then
// are the block's buffers garbage; and it releases again 2 minutes after
// the burst, when JetStream drops the blocks' subject indexes (2 minutes
// after their last use: some for each conversation a burst wrote).
func ForServer() *IdleRelease {
	r := Default()
	r.IdleAfter = 11 * time.Second
	r.Again = 2*time.Minute + 5*time.Second
	return r
}

// Observe takes the process's total allocations at now and reports whether
// it should release its memory now. The first reading counts as busy, and
// as BurstBytes allocated: a process releases once after it has started
// and gone quiet, giving back what starting took.
func (r *IdleRelease) Observe(now time.Time, allocs uint64) bool {
	if r.lastBusy.IsZero() {
		r.last, r.pending, r.lastBusy = allocs, r.BurstBytes, now
		return false
	}
	delta := allocs - r.last
	if allocs < r.last {
		delta = 0
	}
	r.last = allocs
	r.pending += delta
	if delta > r.IdleBytes {
		r.lastBusy = now
		return false
	}
	if now.Sub(r.lastBusy) < r.IdleAfter {
		return false
	}
	burst := r.pending >= r.BurstBytes
	trickle := r.pending >= r.MinBytes && (r.lastRelease.IsZero() || now.Sub(r.lastRelease) >= r.Every)
	again := !r.againAt.IsZero() && !now.Before(r.againAt)
	if !burst && !trickle && !again {
		return false
	}
	if again {
		r.againAt = time.Time{}
	}
	// A later burst keeps the deadline of an earlier one: it comes first,
	// and the releases every Every cover the rest.
	if at := r.lastBusy.Add(r.Again); burst && r.Again > 0 && (r.againAt.IsZero() || at.Before(r.againAt)) {
		r.againAt = at
	}
	r.pending, r.lastRelease = 0, now
	return true
}

// Run releases the process's memory whenever Observe says so, until ctx
// ends.
func (r *IdleRelease) Run(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	t := time.NewTicker(r.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && r.Observe(now, sample[0].Value.Uint64()) {
				Release()
			}
		}
	}
}

// Release empties the caches registered with [OnRelease], collects,
// returns the free heap to the system and unmaps the pages of the code and
// read-only data of the program and its libraries ([DropFilePages]). The
// embedded NATS server's message blocks give their buffers back to a
// sync.Pool when a collection finds them unused, and a pool keeps what it
// holds through one more collection: the third (FreeOSMemory's) frees them.
func Release() {
	runHooks()
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	DropFilePages()
}
