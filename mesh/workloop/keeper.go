package workloop

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keeper keeps the items of one queue held while they are handled: every
// third of the queue's AckWait it signals progress for each item held that
// long, so that a long item is not redelivered while its holder lives, and
// one whose holder died is within AckWait. One ticker serves every item of
// the queue: most items of a mesh wait (on a model, a tool, a person), and
// thousands of them would otherwise be thousands of goroutines and timers.
type keeper struct {
	every time.Duration // a third of AckWait
	mu    sync.Mutex
	held  map[jetstream.Msg]time.Time // since when
	stop  chan struct{}
	done  chan struct{}
}

func newKeeper(ackWait time.Duration) *keeper {
	k := &keeper{every: ackWait / 3, held: map[jetstream.Msg]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	return k
}

// hold keeps msg in progress until the returned release is called.
func (k *keeper) hold(msg jetstream.Msg) (release func()) {
	k.mu.Lock()
	k.held[msg] = time.Now()
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		delete(k.held, msg)
		k.mu.Unlock()
	}
}

// run signals progress at each tick for the items held a third of AckWait
// or more: an item's first signal comes before two thirds of it have
// passed, and the next ones a third apart.
func (k *keeper) run() {
	defer close(k.done)
	t := time.NewTicker(k.every)
	defer t.Stop()
	var due []jetstream.Msg
	for {
		select {
		case <-k.stop:
			return
		case now := <-t.C:
			due = due[:0]
			k.mu.Lock()
			for msg, since := range k.held {
				if now.Sub(since) >= k.every {
					due = append(due, msg)
				}
			}
			k.mu.Unlock()
			for _, msg := range due {
				_ = msg.InProgress()
			}
		}
	}
}

// close stops the keeper once no item is held any more.
func (k *keeper) close() {
	close(k.stop)
	<-k.done
}
