package agent

import (
	"context"
	"sync"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// A turn whose model call waits for its provider's capacity (the model
// client's queue: its concurrency bound, its pace, a rate limit's pause)
// is taken but not started: while its first call waits, its conversation
// stays queued (the deferred claim waits, claim.go), and the agent's
// heartbeat counts it as waiting rather than busy.

// modelQueue counts a turn's model calls waiting for their provider.
type modelQueue struct {
	a       *Role
	mu      sync.Mutex
	waiting int
	free    chan struct{} // closed when waiting drops to 0; nil while none waits
}

// context is ctx with the queue as the observer of its model calls.
func (q *modelQueue) context(ctx context.Context) context.Context {
	return llm.WithQueueObserver(ctx, q.observe)
}

func (q *modelQueue) observe(waiting bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if waiting {
		if q.waiting == 0 {
			q.free = make(chan struct{})
			q.a.modelWaiting.Add(1)
		}
		q.waiting++
		return
	}
	q.waiting--
	if q.waiting == 0 {
		close(q.free)
		q.free = nil
		q.a.modelWaiting.Add(-1)
	}
}

// idle waits until none of the turn's calls waits for its provider; false
// when done or ctx ended first.
func (q *modelQueue) idle(ctx context.Context, done <-chan struct{}) bool {
	q.mu.Lock()
	free := q.free
	q.mu.Unlock()
	if free == nil {
		return true
	}
	select {
	case <-free:
		return true
	case <-done:
		return false
	case <-ctx.Done():
		return false
	}
}
