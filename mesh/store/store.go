package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// ErrNoChange, returned by a change function, makes an update end without
// writing anything; the update then returns the value as it was read.
var ErrNoChange = errors.New("store: no change")

// casAttempts bounds how often an update is re-applied after revision
// conflicts before it gives up.
const casAttempts = 50

// getJSON reads key and decodes it; a missing key is notFound.
func getJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, notFound *mesh.Error) (*T, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) && replicated(ctx, kv) {
		// Any replica answers a get, and one still applying a create just
		// acknowledged by the others says "not found": ask again, briefly.
		for i := 0; i < 3 && errors.Is(err, jetstream.ErrKeyNotFound); i++ {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			e, err = kv.Get(ctx, key)
		}
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, notFound.With(fmt.Sprintf("%s: %s", notFound.Error(), key))
	}
	if errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, 0, notFound.With(fmt.Sprintf("%s: %q", notFound.Error(), key))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	v := new(T)
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return nil, 0, fmt.Errorf("decode %s: %w", key, err)
	}
	return v, e.Revision(), nil
}

// replicatedBuckets remembers, by bucket handle, whether a bucket has
// replicas: the answer costs a stream info request, and every read of a
// missing key asks it.
var replicatedBuckets sync.Map // jetstream.KeyValue → bool

// replicated reports whether the bucket has replicas (a cluster's).
func replicated(ctx context.Context, kv jetstream.KeyValue) bool {
	if r, ok := replicatedBuckets.Load(kv); ok {
		return r.(bool)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return false // not remembered: asked again next time
	}
	b, ok := st.(*jetstream.KeyValueBucketStatus)
	r := ok && b.StreamInfo() != nil && b.StreamInfo().Config.Replicas > 1
	replicatedBuckets.Store(kv, r)
	return r
}

// updateJSON applies change to the value of key and writes it back with
// compare-and-set. cur, when not nil, is the value as read at rev and saves
// the first read. On a revision conflict it reloads and applies change again,
// so change must compute its result from the value it is given.
func updateJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, notFound *mesh.Error, cur *T, rev uint64, change func(*T) error) (*T, uint64, error) {
	for attempt := 0; ; attempt++ {
		if cur == nil {
			var err error
			cur, rev, err = getJSON[T](ctx, kv, key, notFound)
			if err != nil {
				return nil, 0, err
			}
		}
		if err := change(cur); err != nil {
			if errors.Is(err, ErrNoChange) {
				return cur, rev, nil
			}
			return nil, 0, err
		}
		data, err := json.Marshal(cur)
		if err != nil {
			return nil, 0, fmt.Errorf("encode %s: %w", key, err)
		}
		newRev, err := kv.Update(ctx, key, data, rev)
		if err == nil {
			return cur, newRev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt >= casAttempts {
			telemetry.KVFailure(kv.Bucket())
			return nil, 0, &writeError{key: key, err: err}
		}
		telemetry.KVConflict(kv.Bucket())
		cur = nil
		// A short random pause spreads writers that collided.
		select {
		case <-time.After(time.Duration(rand.IntN(1000)) * time.Microsecond * time.Duration(attempt+1)):
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// IsSaveFailure reports whether err is a write that failed (a conversation
// not saved), rather than a change's own refusal or a missing key.
func IsSaveFailure(err error) bool {
	var we *writeError
	return errors.As(err, &we)
}

// SaveFailure makes err a failed write, as [IsSaveFailure] tells.
func SaveFailure(err error) error { return &writeError{key: "", err: err} }

// writeError is a compare-and-set write that failed for good.
type writeError struct {
	key string
	err error
}

func (e *writeError) Error() string { return fmt.Sprintf("update %s: %v", e.key, e.err) }
func (e *writeError) Unwrap() error { return e.err }

// RunKeyPrefix starts the keys of the sessions bucket that reserve run ids:
// _runs.<run id> holds the id of the conversation the run belongs to. Run
// ids must be unique across the mesh, because the ids of everything a run
// makes derive from it (the Nats-Msg-Id of its work items and events, its
// message, call and approval ids); a client chooses some of them (an AG-UI
// runId, an Idempotency-Key), so the bridge reserves each one before it
// queues its turn. The keys are not conversations: [SessionStore.List]
// skips them (a '.' is no id), and they live as long as the bucket keeps
// its keys (sessions.ttl).
const RunKeyPrefix = "_runs."

// ReserveRun reserves run id runID for conversation conv, unless it is
// reserved already; it returns the conversation that holds it (conv when
// the reservation is new or was conv's already).
func (s *SessionStore) ReserveRun(ctx context.Context, runID, conv string) (string, error) {
	if err := mesh.CheckID(runID); err != nil {
		return "", mesh.ErrBadRequest.With(fmt.Sprintf("run id %s: a run id is %s", mesh.Clip(runID), mesh.IDRule))
	}
	key := RunKeyPrefix + runID
	_, err := s.kv.Create(ctx, key, []byte(conv))
	if err == nil {
		return conv, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", fmt.Errorf("reserve run %s: %w", runID, err)
	}
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("reserve run %s: %w", runID, err)
	}
	return string(e.Value()), nil
}

// FollowNew consumes the messages of stream that match filters and are
// stored from now on, with an ordered consumer, and calls fn with each. It
// starts at the sequence after the stream's last, not DeliverNew: an
// ordered consumer that starts over before its first message (its stream's
// leader moved) would start from the new last message, skipping those
// between. A heartbeat every second makes it start over within 2 s of
// such a move, instead of 10 s.
func FollowNew(ctx context.Context, js jetstream.JetStream, stream string, filters []string, fn func(jetstream.Msg)) (jetstream.ConsumeContext, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: filters,
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    st.CachedInfo().State.LastSeq + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer of %s: %w", stream, err)
	}
	cc, err := cons.Consume(fn, jetstream.PullHeartbeat(time.Second))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", stream, err)
	}
	return cc, nil
}
