package store

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KVWatch says which keys of a bucket [WatchKV] follows, what it does with
// their entries, and whether it opens its watch again when the watch ends.
type KVWatch struct {
	// Keys names the keys followed: a key, or a filter with wildcards.
	// Empty means every key.
	Keys string
	// IgnoreDeletes leaves deletions and purges out: Apply gets puts only.
	IgnoreDeletes bool
	// Apply gets each entry: the current ones when the watch opens, then
	// each change as it comes, on WatchKV's goroutine. Required.
	Apply func(jetstream.KeyValueEntry)
	// Synced, when not nil, is called each time the entries present when
	// the watch opened have all been applied.
	Synced func()
	// Opened, when not nil, is called on WatchKV's goroutine each time a
	// watch opens, before its first entry: a watch opened again starts
	// over, and what an earlier one applied may since have been deleted.
	Opened func()
	// Reopen is the pause before a watch that ended (a reconnect) is
	// opened again. A watch opened again starts over with every current
	// entry, so Apply must take an entry it already has, and Synced is
	// called again. Zero means a watch that ends is not opened again: the
	// goroutine ends with it.
	Reopen time.Duration
	// Retry is the pause before another try at opening a watch that could
	// not be opened. Zero means Reopen.
	Retry time.Duration
	// Retrying, when not nil, is told why an opening failed that will be
	// tried again; never once the context has ended.
	Retrying func(error)
	// KeepTrying makes a first opening that fails be tried again like the
	// others, instead of WatchKV returning its error. It needs Reopen.
	KeepTrying bool
	// WaitSynced, when positive, makes WatchKV return only once the
	// entries present when the watch opened have been applied, or the
	// watch ended before that, or WaitSynced has passed. Zero means WatchKV
	// returns as soon as the watch is open.
	WaitSynced time.Duration
}

// WatchKV follows the keys of kv that w names until ctx ends, on a
// goroutine of its own; done is closed once that goroutine has ended. It
// returns the error of the first opening of the watch (unless
// w.KeepTrying), or ctx's error when ctx ends while it waits for
// w.WaitSynced, after the goroutine has ended.
func WatchKV(ctx context.Context, kv jetstream.KeyValue, w KVWatch) (done <-chan struct{}, err error) {
	var opts []jetstream.WatchOpt
	if w.IgnoreDeletes {
		opts = append(opts, jetstream.IgnoreDeletes())
	}
	keys := cmp.Or(w.Keys, jetstream.AllKeys)
	open := func() (jetstream.KeyWatcher, error) { return kv.Watch(ctx, keys, opts...) }
	// openErr, not err: the goroutine must not see the result WatchKV returns.
	watcher, openErr := open()
	if openErr != nil && (!w.KeepTrying || w.Reopen <= 0) {
		return nil, openErr
	}
	finished := make(chan struct{})
	first := make(chan struct{}) // closed once the first watch synced or ended
	var once sync.Once
	go func() {
		defer close(finished)
		w.follow(ctx, open, watcher, openErr, func() { once.Do(func() { close(first) }) })
	}()
	if w.WaitSynced > 0 {
		t := time.NewTimer(w.WaitSynced)
		defer t.Stop()
		select {
		case <-first:
		case <-t.C: // go on: the rest comes with the updates
		case <-ctx.Done():
			<-finished
			return nil, ctx.Err()
		}
	}
	return finished, nil
}

// follow applies the updates of watcher (or, when err is set, tries to
// open a watch again after a pause), and opens a new watch whenever one
// ends, until ctx ends; first is called once the first watch synced or
// ended.
func (w *KVWatch) follow(ctx context.Context, open func() (jetstream.KeyWatcher, error), watcher jetstream.KeyWatcher, err error, first func()) {
	for {
		pause := w.Reopen
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if w.Retrying != nil {
				w.Retrying(err)
			}
			pause = cmp.Or(w.Retry, w.Reopen)
		} else {
			w.apply(ctx, watcher, first)
			_ = watcher.Stop()
			if w.Reopen <= 0 || ctx.Err() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		watcher, err = open()
	}
}

// apply hands the updates of one watch to Apply and Synced until the watch
// ends or ctx does.
func (w *KVWatch) apply(ctx context.Context, watcher jetstream.KeyWatcher, first func()) {
	if w.Opened != nil {
		w.Opened()
	}
	updates := watcher.Updates()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			switch {
			case !ok:
				first()
				return
			case e != nil:
				w.Apply(e)
			default: // the current entries are all applied
				if w.Synced != nil {
					w.Synced()
				}
				first()
			}
		}
	}
}
