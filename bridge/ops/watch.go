package ops

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// rewatchAfter is the pause before a watch that failed or ended is opened
// again.
const rewatchAfter = 2 * time.Second

// watch follows every key of kv until ctx ends: apply gets each entry,
// synced is called after the entries present when the watch (re)opened.
// A watch that cannot open or ends is opened again, and starts over with
// every current entry, so apply must take an entry it already has.
func (s *Service) watch(ctx context.Context, what string, kv jetstream.KeyValue, apply func(jetstream.KeyValueEntry), synced func()) {
	for ctx.Err() == nil {
		w, err := kv.WatchAll(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn().Err(err).Str("bucket", what).Msg("ops: watch bucket")
			}
		} else {
			s.follow(ctx, w, apply, synced)
			_ = w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(rewatchAfter):
		}
	}
}

func (s *Service) follow(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry), synced func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return
			case e == nil:
				synced()
			default:
				apply(e)
			}
		}
	}
}
