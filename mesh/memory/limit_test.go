package memory

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestLimitTargetKeepsRoomOverTheLiveHeap checks the limit for a live
// heap: the floor while the heap and its headroom fit under it, the heap
// with its headroom and the runtime's other memory beyond.
func TestLimitTargetKeepsRoomOverTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	l := ServerLimit(96 * mib)
	for _, tt := range []struct {
		live, other uint64
		want        int64
	}{
		{live: 10 * mib, other: 8 * mib, want: 96 * mib},
		{live: 58 * mib, other: 8 * mib, want: 96 * mib},
		{live: 60 * mib, other: 8 * mib, want: 98 * mib},
		{live: 200 * mib, other: 10 * mib, want: 310 * mib},
	} {
		if got := l.Target(tt.live, tt.other); got != tt.want {
			t.Errorf("live %d MiB, other %d MiB: limit %d MiB, want %d MiB", tt.live/mib, tt.other/mib, got/mib, tt.want/mib)
		}
	}
}

// TestLimitFollowsTheLiveHeapAndComesBack runs a Limit whose floor is
// under a heap the test keeps alive: the process's limit rises over that
// heap, and returns to the floor once the heap is garbage.
func TestLimitFollowsTheLiveHeapAndComesBack(t *testing.T) {
	const mib = 1 << 20
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	floor := int64(ms.HeapAlloc) + 64*mib // room enough for the test's own heap
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Limit{Floor: floor, Headroom: 0.5, Tick: 10 * time.Millisecond}.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, ok func(int64) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC()
			if got := debug.SetMemoryLimit(-1); ok(got) {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("the limit is %d MiB, want %s (floor %d MiB)", got/mib, what, floor/mib)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the floor", func(got int64) bool { return got == floor })
	func() {
		held := make([]byte, 2*floor)
		for i := range held {
			held[i] = 1
		}
		waitFor("1.5 times the live heap at least", func(got int64) bool { return got >= 3*floor })
		runtime.KeepAlive(held)
	}()
	waitFor("the floor again", func(got int64) bool { return got == floor })
}
