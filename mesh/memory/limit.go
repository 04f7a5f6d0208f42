package memory

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Limit keeps Go's soft memory limit of a process at Floor while what the
// process holds alive fits under it with room, and raises it with the live
// heap beyond that, keeping Headroom over it.
//
// Why: a soft limit under what the process must hold alive makes the
// collector run without pause (Go caps it at half the process's CPU), so a
// fixed bound is paid in CPU by every request once the data outgrows it.
// The embedded NATS server's live heap grows with what its streams index
// (a few KiB per conversation), and at 96 MiB and about 20,000
// conversations it spent 70 % of its CPU collecting.
type Limit struct {
	// Floor is the limit while the live heap leaves room under it: the
	// bound a small mesh keeps to. Zero or less sets no limit.
	Floor int64
	// Headroom is the room kept over the live heap, as a fraction of it:
	// 0.5 lets the heap grow by half of what survived the last
	// collection before the next one (GOGC=50), never less.
	Headroom float64
	// Tick is how often the live heap is read.
	Tick time.Duration
}

// ServerLimit is the Limit of a process that runs the embedded NATS
// server, at floor bytes.
func ServerLimit(floor int64) Limit {
	return Limit{Floor: floor, Headroom: 0.5, Tick: time.Second}
}

// limitSamples are the runtime metrics Target reads: the live heap, and
// what the memory limit counts beside the heap (stacks, the runtime's
// metadata and buffers).
var limitSamples = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// Target is the limit for a live heap of live bytes and other bytes of
// the runtime's own memory: Floor, or the live heap with its headroom and
// the rest when that is more.
func (l Limit) Target(live, other uint64) int64 {
	need := float64(live)*(1+l.Headroom) + float64(other)
	if need >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(l.Floor, int64(need))
}

// Run sets the limit at once and follows the live heap every Tick until
// ctx ends; it does nothing when Floor sets no limit.
func (l Limit) Run(ctx context.Context) {
	if l.Floor <= 0 {
		return
	}
	samples := make([]metrics.Sample, len(limitSamples))
	for i, name := range limitSamples {
		samples[i].Name = name
	}
	set := l.Floor
	debug.SetMemoryLimit(set)
	t := time.NewTicker(l.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(samples)
		var v [6]uint64
		for i, s := range samples {
			if s.Value.Kind() != metrics.KindUint64 {
				return // a runtime without the metrics: stay at the floor
			}
			v[i] = s.Value.Uint64()
		}
		live, mapped, heap := v[0], v[1]-v[2], v[3]+v[4]+v[5]
		other := uint64(0)
		if mapped > heap {
			other = mapped - heap
		}
		// Follow only a change of more than 1/16: the live heap moves a
		// little with every collection, which changes nothing that matters.
		if next := l.Target(live, other); next > set+set/16 || next < set-set/16 || (next == l.Floor && set != l.Floor) {
			set = next
			debug.SetMemoryLimit(set)
		}
	}
}
