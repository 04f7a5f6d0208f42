package memory

import (
	"slices"
	"testing"
	"time"
)

// TestIdleRelease feeds an IdleRelease readings of a process's allocations,
// one per tick, and checks on which ticks it releases memory.
func TestIdleRelease(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		// per tick, what the process allocated during it (MiB); the first
		// entry is the first reading
		allocs []uint64
		want   []int         // the ticks that release
		again  time.Duration // IdleRelease.Again
	}{
		{name: "started, then quiet: once, for what starting took", allocs: []uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, want: []int{6}},
		{name: "a burst, then quiet long enough", allocs: []uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 40, 0, 0, 0, 0, 0, 0, 0, 0}, want: []int{6, 29}},
		{name: "a burst soon after a release", allocs: []uint64{0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0, 0}, want: []int{6, 13}},
		{name: "a burst, then quiet too short", allocs: []uint64{0, 40, 40, 0, 0, 0, 0, 40, 0, 0}},
		{name: "too little allocated since the last release", allocs: []uint64{0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, want: []int{6}},
		{name: "a small burst waits for 30 s since the last release", allocs: []uint64{0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, want: []int{6, 21}},
		{name: "quiet ticks add up, released at most every 30 s", allocs: []uint64{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, want: []int{6, 21}},
		{name: "again a minute after a burst", again: time.Minute, allocs: append([]uint64{0, 40}, make([]uint64, 40)...), want: []int{7, 31}},
		{name: "again when quiet after the time", again: time.Minute, allocs: append([]uint64{0, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3}, make([]uint64, 12)...), want: []int{7, 33}},
		{name: "again at the first burst's time", again: time.Minute, allocs: append([]uint64{0, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40}, make([]uint64, 30)...), want: []int{7, 18, 31}},
		{name: "again after the releases between", again: time.Minute, allocs: append([]uint64{0, 40}, slices.Repeat([]uint64{1}, 40)...), want: []int{7, 22, 31}},
		{name: "a busy process does not release", allocs: []uint64{0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &IdleRelease{Tick: 2 * time.Second, IdleBytes: 2 * mib, IdleAfter: 11 * time.Second, BurstBytes: 32 * mib, MinBytes: 4 * mib, Every: 30 * time.Second, Again: tt.again}
			now := time.Unix(1000, 0)
			total := uint64(5 * mib) // what the process allocated before the first reading
			var got []int
			for i, a := range tt.allocs {
				total += a * mib
				if r.Observe(now, total) {
					got = append(got, i)
				}
				now = now.Add(r.Tick)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("released on ticks %v, want %v", got, tt.want)
			}
		})
	}
}
