package memory

import (
	"runtime"
	"testing"
)

type cache struct{ entries map[string]int }

func (c *cache) reset() { clear(c.entries) }

// TestOnRelease: a release empties a registered cache that lives, and the
// registry does not keep a cache alive.
func TestOnRelease(t *testing.T) {
	kept := &cache{entries: map[string]int{"a": 1}}
	OnRelease(kept, (*cache).reset)
	gone := &cache{entries: map[string]int{"b": 2}}
	collected := make(chan struct{})
	runtime.AddCleanup(gone, func(ch chan struct{}) { close(ch) }, collected)
	OnRelease(gone, (*cache).reset)
	gone = nil
	Release()
	if len(kept.entries) != 0 {
		t.Errorf("a live cache kept %v after a release", kept.entries)
	}
	runtime.GC()
	select {
	case <-collected:
	default:
		runtime.GC()
		<-collected // blocks (and the test times out) if the registry held it
	}
	hooks.mu.Lock()
	n := len(hooks.list)
	hooks.mu.Unlock()
	Release()
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if len(hooks.list) >= n && n > 1 {
		t.Errorf("the hook of a collected cache is still there: %d hooks, %d before", len(hooks.list), n)
	}
	runtime.KeepAlive(kept)
}
