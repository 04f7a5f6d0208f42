package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// plainJS is a JetStream client on a server of its own, provisioned with
// nothing.
func plainJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(meshtest.Conn(t, meshtest.Server(t).ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A stream that has no leader yet answers nobody: the publish waits until
// one answers (here, until the stream exists) instead of failing.
func TestFailoverPublishWaitsForTheStreamToAnswer(t *testing.T) {
	js := plainJS(t)
	fjs := store.Failover(js, 10*time.Second)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	}()
	start := time.Now()
	ack, err := fjs.Publish(t.Context(), "orders.1", []byte("one"))
	if err != nil {
		t.Fatalf("publish while the stream is away: %v", err)
	}
	if ack.Stream != "ORDERS" || ack.Sequence != 1 {
		t.Errorf("ack %+v, want ORDERS sequence 1", ack)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("answered after %s, before the stream existed", waited)
	}
}

// Past the bound, the error is the last one JetStream gave.
func TestFailoverGivesUpAfterItsBound(t *testing.T) {
	fjs := store.Failover(plainJS(t), 400*time.Millisecond)
	start := time.Now()
	_, err := fjs.Publish(t.Context(), "nowhere.1", []byte("x"))
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("err %v, want %v", err, jetstream.ErrNoStreamResponse)
	}
	if waited := time.Since(start); waited < 400*time.Millisecond || waited > 5*time.Second {
		t.Errorf("gave up after %s, want the bound (400ms) and little more", waited)
	}
}

// An answer is not retried: a refused write fails at once.
func TestFailoverReturnsAnAnswerAtOnce(t *testing.T) {
	js := plainJS(t)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	fjs := store.Failover(js, 10*time.Second)
	start := time.Now()
	_, err := fjs.Publish(t.Context(), "orders.1", []byte("x"), jetstream.WithExpectLastSequence(41))
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("err %v, want wrong last sequence", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("a refusal took %s: it was retried", waited)
	}
}

// lossyJS stores a message, then reports the acknowledgement lost, on
// the first publish (an attempt whose leader died before it answered).
type lossyJS struct {
	jetstream.JetStream
	lost atomic.Bool
	kv   *lossyKV
}

func (l *lossyJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := l.JetStream.PublishMsg(ctx, m, opts...)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return nil, nats.ErrTimeout
	}
	return ack, err
}

func (l *lossyJS) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	kv, err := l.JetStream.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	l.kv = &lossyKV{KeyValue: kv}
	return l.kv, nil
}

// lossyKV is lossyJS for a bucket's Create and Update.
type lossyKV struct {
	jetstream.KeyValue
	lost atomic.Bool
}

func (l *lossyKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := l.KeyValue.Create(ctx, key, value, opts...)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

func (l *lossyKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	rev, err := l.KeyValue.Update(ctx, key, value, last)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

// A message with an id is published again when its acknowledgement was
// lost, and the stream keeps one copy; one without an id is not, since a
// second copy could not be told from the first.
func TestFailoverRepublishesOnlyWhatTheStreamDeduplicates(t *testing.T) {
	js := plainJS(t)
	st, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	fjs := store.Failover(&lossyJS{JetStream: js}, 10*time.Second)
	m := nats.NewMsg("orders.1")
	m.Header.Set(jetstream.MsgIDHeader, "order-1")
	ack, err := fjs.PublishMsg(t.Context(), m)
	if err != nil {
		t.Fatalf("a message with an id, its first acknowledgement lost: %v", err)
	}
	if ack.Sequence != 1 || !ack.Duplicate {
		t.Errorf("ack %+v, want the first copy's sequence 1, as a duplicate", ack)
	}

	fjs = store.Failover(&lossyJS{JetStream: js}, 10*time.Second)
	if _, err := fjs.Publish(t.Context(), "orders.2", []byte("x")); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("a message without an id, its acknowledgement lost: err %v, want the timeout", err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("the stream holds %d messages, want 2 (one of each)", info.State.Msgs)
	}
}

// A compare-and-set write whose acknowledgement was lost finds its own
// value at the next revision and takes it for its write; another writer's
// value is still a conflict.
func TestFailoverRecognisesItsOwnCompareAndSetWrite(t *testing.T) {
	js := plainJS(t)
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "docs"}); err != nil {
		t.Fatal(err)
	}
	lossy := &lossyJS{JetStream: js}
	lossy.lost.Store(true) // the publishes are not lost here: the bucket's writes are
	kv, err := store.Failover(lossy, 10*time.Second).KeyValue(t.Context(), "docs")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Create(t.Context(), "a", []byte("v1"))
	if err != nil || rev != 1 {
		t.Fatalf("create, its acknowledgement lost: rev %d, err %v; want 1", rev, err)
	}
	lossy.kv.lost.Store(false)
	rev, err = kv.Update(t.Context(), "a", []byte("v2"), 1)
	if err != nil || rev != 2 {
		t.Fatalf("update, its acknowledgement lost: rev %d, err %v; want 2", rev, err)
	}
	if _, err := kv.Update(t.Context(), "a", []byte("v3"), 1); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Errorf("an update from a stale revision: err %v, want a revision mismatch", err)
	}
	if _, err := kv.Create(t.Context(), "a", []byte("v2")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Errorf("a create of an existing key, no acknowledgement lost: err %v, want key exists", err)
	}
}

// Without a bound the client is returned as it was.
func TestFailoverOffIsThePlainClient(t *testing.T) {
	js := plainJS(t)
	if got := store.Failover(js, 0); got != js {
		t.Error("Failover(js, 0) wrapped the client")
	}
	if w := store.ElectionWait(store.Failover(js, 3*time.Second)); w != 3*time.Second {
		t.Errorf("ElectionWait %s, want 3s", w)
	}
	if w := store.ElectionWait(js); w != 0 {
		t.Errorf("ElectionWait of the plain client %s, want 0", w)
	}
}

// When no operation has been answered for longer than the bound (the
// cluster lost its majority, not a leader), the next ones fail after one
// attempt instead of waiting; one answer makes them wait again.
func TestFailoverStopsWaitingOnceNothingAnswersForTheWholeBound(t *testing.T) {
	t.Parallel()
	js := plainJS(t)
	fjs := store.Failover(js, 2*time.Second)
	timed := func(subj string) (time.Duration, error) {
		start := time.Now()
		_, err := fjs.Publish(t.Context(), subj, []byte("x"))
		return time.Since(start), err
	}
	if took, err := timed("nowhere.1"); err == nil || took < 2*time.Second {
		t.Fatalf("first publish to no stream: %s, err %v; want a failure after the bound (2s)", took, err)
	}
	if took, err := timed("nowhere.2"); err == nil || took >= 1500*time.Millisecond {
		t.Errorf("a publish after the bound passed unanswered: %s, err %v; want a failure after one attempt", took, err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := timed("orders.1"); err != nil {
		t.Fatalf("publish to the stream: %v", err)
	}
	if took, err := timed("nowhere.3"); err == nil || took < 2*time.Second {
		t.Errorf("after an answer, a publish to no stream: %s, err %v; want the whole wait again", took, err)
	}
}
