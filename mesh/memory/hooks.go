package memory

import (
	"slices"
	"sync"
	"weak"
)

// The caches of a process (the records of the message log, the heads the
// bridge keeps) hold what the last burst touched: a quiet process does not
// need them warm, so Release empties them first. A cache registers with
// OnRelease; the registry holds it weakly, so that a cache nothing else
// holds any more (a test's store) is collected as before and its hook
// forgotten.

// A hook empties one object's cache, while the object lives.
type hook interface {
	live() bool
	release()
}

type weakHook[T any] struct {
	obj weak.Pointer[T]
	fn  func(*T)
}

func (h weakHook[T]) live() bool { return h.obj.Value() != nil }

func (h weakHook[T]) release() {
	if p := h.obj.Value(); p != nil {
		h.fn(p)
	}
}

var hooks struct {
	mu   sync.Mutex
	list []hook
	// pruneAt is the number of hooks at which OnRelease next forgets those
	// whose object is gone: the registry stays bounded in a process that
	// registers many caches and never releases.
	pruneAt int
}

// OnRelease has release(obj) run at every Release for as long as obj
// lives; it does not keep obj alive. release must not block.
func OnRelease[T any](obj *T, release func(*T)) {
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	hooks.list = append(hooks.list, weakHook[T]{obj: weak.Make(obj), fn: release})
	if len(hooks.list) >= max(hooks.pruneAt, 64) {
		hooks.list = slices.DeleteFunc(hooks.list, func(h hook) bool { return !h.live() })
		hooks.pruneAt = 2 * len(hooks.list)
	}
}

// runHooks runs the hooks of the objects that live and forgets the others.
func runHooks() {
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	hooks.list = slices.DeleteFunc(hooks.list, func(h hook) bool {
		if !h.live() {
			return true
		}
		h.release()
		return false
	})
}
