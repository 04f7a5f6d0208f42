package ops

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/store"
)

// rewatchAfter is the pause before a watch that failed or ended is opened
// again.
const rewatchAfter = 2 * time.Second

// watch follows every key of kv until ctx ends, and returns a channel
// closed once it has stopped: apply gets each entry, synced is called after
// the entries present when the watch (re)opened. A watch that cannot open
// or ends is opened again, and starts over with every current entry, so
// apply must take an entry it already has.
func (s *Service) watch(ctx context.Context, what string, kv jetstream.KeyValue, apply func(jetstream.KeyValueEntry), synced func()) <-chan struct{} {
	// KeepTrying: even the first opening that fails is tried again, so
	// WatchKV returns no error.
	done, _ := store.WatchKV(ctx, kv, store.KVWatch{
		Apply:      apply,
		Synced:     synced,
		Reopen:     rewatchAfter,
		KeepTrying: true,
		Retrying:   func(err error) { s.log.Warn().Err(err).Str("bucket", what).Msg("ops: watch bucket") },
	})
	return done
}
