package main

import (
	"slices"
	"testing"
	"time"
)

// TestIdleRelease feeds idleRelease readings of a process's allocations,
// one per tick, and checks on which ticks it releases memory.
func TestIdleRelease(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		// per tick, what the process allocated during it (MiB)
		allocs []uint64
		want   []int // the ticks that release
	}{
		{name: "idle from the start: nothing to give back", allocs: []uint64{0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0}},
		{name: "a burst, then idle long enough", allocs: []uint64{0, 40, 40, 0, 0, 0, 0, 0, 0, 0, 0}, want: []int{8}},
		{name: "a burst, then idle too short", allocs: []uint64{0, 40, 40, 0, 0, 0, 0, 40, 0, 0}},
		{name: "a small burst is not worth a collection", allocs: []uint64{0, 10, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{name: "once per burst", allocs: []uint64{0, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0}, want: []int{7, 20}},
		{name: "quiet ticks add up to a release", allocs: []uint64{0, 30, 1, 1, 1, 1, 1, 1, 1}, want: []int{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &idleRelease{Tick: 2 * time.Second, IdleBytes: 2 * mib, IdleAfter: 11 * time.Second, MinBytes: 32 * mib}
			now := time.Unix(1000, 0)
			total := uint64(5 * mib) // what the process allocated before the first reading
			var got []int
			for i, a := range tt.allocs {
				total += a * mib
				if r.observe(now, total) {
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
