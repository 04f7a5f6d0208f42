package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// failoverAttempt bounds one attempt. A request that reached a leader
// which then died is never answered: without this bound, it would wait
// out the caller's whole deadline instead of asking the next leader.
const failoverAttempt = 3 * time.Second

// Failover returns js whose operations on a user's path wait out a stream
// or meta leader election, for at most within, instead of failing at the
// first "no response from stream": publishes, the key-value buckets'
// reads and writes, and streams' message reads and lookups (KeyValue and
// Stream hand out handles that wait the same way). What is retried is
// what cannot be done twice by mistake: a publish with a message id (the
// stream drops the duplicate) or one the stream surely never got (no
// responders), a read, a put of the same value, and compare-and-set writes
// whose lost acknowledgement is recognised when the value read back is
// the one written. Zero or less for within returns js unchanged.
func Failover(js jetstream.JetStream, within time.Duration) jetstream.JetStream {
	if within <= 0 {
		return js
	}
	if f, ok := js.(*failoverJS); ok {
		js = f.JetStream
	}
	return &failoverJS{JetStream: js, p: &patience{within: within}}
}

// opKind is what an operation does, for how it may be asked again.
type opKind int

const (
	opRead      opKind = iota // a read: asked again whatever became of it
	opWrite                   // a write that may be asked again (a second copy is dropped or harmless)
	opWriteOnce               // a write asked again only when the stream surely did not get it
)

// jsFault is how an operation's error reads for a retry.
type jsFault int

const (
	faultFinal     jsFault = iota // an answer (or the caller gave up): never retried
	faultNotStored                // nobody answered: nothing was done
	faultUnknown                  // the answer did not come: it may have been done
)

// classify tells an answer from a leader's absence. A 503 from the API
// (no meta or stream leader for now) and "no responders" (no leader has
// subscribed the stream's subjects yet) mean nothing was done; a timeout
// of one attempt may have come after the work.
func classify(ctx context.Context, err error) jsFault {
	var api *jetstream.APIError
	switch {
	case ctx.Err() != nil:
		return faultFinal
	case errors.As(err, &api):
		if api.Code == http.StatusServiceUnavailable {
			return faultNotStored
		}
		return faultFinal
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return faultNotStored
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, jetstream.ErrServerShutdown):
		return faultUnknown
	}
	return faultFinal
}

// patience is how long the operations of one client wait out an
// election, and since when JetStream has taken none of their writes.
type patience struct {
	within time.Duration
	// failingSince is when writes began to meet no leader (Unix
	// nanoseconds), 0 once one was stored. Past within, the cluster has
	// lost its majority rather than a leader: then no operation waits, and
	// every request fails at once, until a write is stored again. Reads
	// neither start nor end it: a replica answers them without a majority.
	failingSince atomic.Int64
}

// lost reports whether JetStream has stored none of the writes for
// longer than an election may take.
func (p *patience) lost(now time.Time) bool {
	since := p.failingSince.Load()
	return since != 0 && now.UnixNano()-since > int64(p.within)
}

// failover runs op until it succeeds, fails with an answer, or p.within has
// passed since the first attempt (no attempt starts after that; the last
// may end up to failoverAttempt later). An attempt of an opWriteOnce whose
// outcome is unknown is not retried; op learns (unsure) that an earlier
// attempt's outcome is unknown, so that it may recognise its own write.
func failover[T any](ctx context.Context, p *patience, kind opKind, op func(ctx context.Context, unsure bool) (T, error)) (T, error) {
	deadline := time.Now().Add(p.within)
	wait := 50 * time.Millisecond
	unsure := false
	for {
		started := time.Now()
		actx, cancel := context.WithTimeout(ctx, failoverAttempt)
		v, err := op(actx, unsure)
		cancel()
		fault := faultFinal
		if err != nil {
			fault = classify(ctx, err)
		}
		if fault == faultFinal {
			if kind != opRead && ctx.Err() == nil {
				p.failingSince.Store(0) // JetStream answered a write
			}
			return v, err
		}
		now := time.Now()
		if kind != opRead {
			// Failing since the attempt began, not since it timed out: the
			// request that waited the whole bound leaves the next one lost.
			p.failingSince.CompareAndSwap(0, started.UnixNano())
		}
		if fault == faultUnknown {
			if kind == opWriteOnce {
				return v, err
			}
			unsure = true
		}
		if now.Add(wait).After(deadline) || p.lost(now) {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

type failoverJS struct {
	jetstream.JetStream
	p *patience
}

func (f *failoverJS) Publish(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return f.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: data}, opts...)
}

// PublishMsg retries a message with an id whatever became of the last
// attempt (the stream's duplicate window drops a second copy and answers
// with the first one's sequence), and one without only when the stream
// surely did not get it.
func (f *failoverJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	kind := opWriteOnce
	if m.Header.Get(jetstream.MsgIDHeader) != "" {
		kind = opWrite
	}
	return failover(ctx, f.p, kind, func(ctx context.Context, _ bool) (*jetstream.PubAck, error) {
		return f.JetStream.PublishMsg(ctx, m, opts...)
	})
}

func (f *failoverJS) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	kv, err := failover(ctx, f.p, opRead, func(ctx context.Context, _ bool) (jetstream.KeyValue, error) {
		return f.JetStream.KeyValue(ctx, bucket)
	})
	return f.kv(kv), err
}

func (f *failoverJS) CreateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := f.JetStream.CreateKeyValue(ctx, cfg)
	return f.kv(kv), err
}

func (f *failoverJS) UpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := f.JetStream.UpdateKeyValue(ctx, cfg)
	return f.kv(kv), err
}

func (f *failoverJS) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := f.JetStream.CreateOrUpdateKeyValue(ctx, cfg)
	return f.kv(kv), err
}

func (f *failoverJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := failover(ctx, f.p, opRead, func(ctx context.Context, _ bool) (jetstream.Stream, error) {
		return f.JetStream.Stream(ctx, name)
	})
	return f.stream(s), err
}

func (f *failoverJS) CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := f.JetStream.CreateStream(ctx, cfg)
	return f.stream(s), err
}

func (f *failoverJS) UpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := f.JetStream.UpdateStream(ctx, cfg)
	return f.stream(s), err
}

func (f *failoverJS) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := f.JetStream.CreateOrUpdateStream(ctx, cfg)
	return f.stream(s), err
}

func (f *failoverJS) kv(kv jetstream.KeyValue) jetstream.KeyValue {
	if kv == nil {
		return nil
	}
	return &failoverKV{KeyValue: kv, p: f.p}
}

func (f *failoverJS) stream(s jetstream.Stream) jetstream.Stream {
	if s == nil {
		return nil
	}
	return &failoverStream{Stream: s, p: f.p}
}

// failoverKV is a bucket whose reads and writes wait out an election.
type failoverKV struct {
	jetstream.KeyValue
	p *patience
}

func (kv *failoverKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return failover(ctx, kv.p, opRead, func(ctx context.Context, _ bool) (jetstream.KeyValueEntry, error) {
		return kv.KeyValue.Get(ctx, key)
	})
}

func (kv *failoverKV) GetRevision(ctx context.Context, key string, revision uint64) (jetstream.KeyValueEntry, error) {
	return failover(ctx, kv.p, opRead, func(ctx context.Context, _ bool) (jetstream.KeyValueEntry, error) {
		return kv.KeyValue.GetRevision(ctx, key, revision)
	})
}

// Put writes the same value again when an attempt's outcome is unknown:
// at worst, one revision more of the same value.
func (kv *failoverKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return failover(ctx, kv.p, opWrite, func(ctx context.Context, _ bool) (uint64, error) {
		return kv.KeyValue.Put(ctx, key, value)
	})
}

func (kv *failoverKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	return kv.Put(ctx, key, []byte(value))
}

// Create, retried after an attempt whose outcome is unknown, takes the
// key found holding exactly value for its own write.
func (kv *failoverKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	return failover(ctx, kv.p, opWrite, func(ctx context.Context, unsure bool) (uint64, error) {
		rev, err := kv.KeyValue.Create(ctx, key, value, opts...)
		if errors.Is(err, jetstream.ErrKeyExists) {
			if unsure {
				return kv.ownWrite(ctx, key, value, 0, err)
			}
			return kv.refused(ctx, key, 0, err)
		}
		return rev, err
	})
}

// Update, retried after an attempt whose outcome is unknown, takes a newer
// revision holding exactly value for its own write.
func (kv *failoverKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	return failover(ctx, kv.p, opWrite, func(ctx context.Context, unsure bool) (uint64, error) {
		rev, err := kv.KeyValue.Update(ctx, key, value, revision)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			if unsure {
				return kv.ownWrite(ctx, key, value, revision, err)
			}
			return kv.refused(ctx, key, revision, err)
		}
		return rev, err
	})
}

// ownWrite is the revision of key when it holds value at a revision after
// after (the write of an attempt whose acknowledgement was lost); conflict
// when it holds another writer's; errNotCommitted when the bucket refuses
// the write yet shows nothing newer (a write still waiting for a majority).
func (kv *failoverKV) ownWrite(ctx context.Context, key string, value []byte, after uint64, conflict error) (uint64, error) {
	e, err := kv.KeyValue.Get(ctx, key)
	switch {
	case err == nil && e.Revision() > after && bytes.Equal(e.Value(), value):
		return e.Revision(), nil
	case err == nil && e.Revision() > after, err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
		return 0, conflict
	}
	return 0, errNotCommitted
}

// refused tells a compare-and-set refusal of a first attempt: conflict when
// the key shows a revision after after (another writer's), errNotCommitted
// when it shows none (the leader holds a write, an earlier request's, that
// it cannot commit: with no majority, every later write meets it).
func (kv *failoverKV) refused(ctx context.Context, key string, after uint64, conflict error) (uint64, error) {
	e, err := kv.KeyValue.Get(ctx, key)
	switch {
	case err == nil && e.Revision() <= after, errors.Is(err, jetstream.ErrKeyNotFound) && after == 0:
		return 0, errNotCommitted
	}
	return 0, conflict
}

// errNotCommitted is a compare-and-set write refused for a revision that no
// replica shows yet: the leader holds a write it cannot commit (a lost
// attempt's, with no majority to store it). It is a moment's error, asked
// again like a timeout.
var errNotCommitted = fmt.Errorf("the bucket holds a write it has not committed: %w", nats.ErrTimeout)

// Delete and Purge are retried only when the bucket surely did not get
// the attempt: a delete that names the revision it expects would fail
// its second time.
func (kv *failoverKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	_, err := failover(ctx, kv.p, deleteKind(opts), func(ctx context.Context, _ bool) (struct{}, error) {
		return struct{}{}, kv.KeyValue.Delete(ctx, key, opts...)
	})
	return err
}

func (kv *failoverKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	_, err := failover(ctx, kv.p, deleteKind(opts), func(ctx context.Context, _ bool) (struct{}, error) {
		return struct{}{}, kv.KeyValue.Purge(ctx, key, opts...)
	})
	return err
}

// failoverStream is a stream whose message reads wait out an election.
type failoverStream struct {
	jetstream.Stream
	p *patience
}

func (s *failoverStream) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	return failover(ctx, s.p, opRead, func(ctx context.Context, _ bool) (*jetstream.RawStreamMsg, error) {
		return s.Stream.GetMsg(ctx, seq, opts...)
	})
}

func (s *failoverStream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return failover(ctx, s.p, opRead, func(ctx context.Context, _ bool) (*jetstream.RawStreamMsg, error) {
		return s.Stream.GetLastMsgForSubject(ctx, subject)
	})
}

func (s *failoverStream) Info(ctx context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	return failover(ctx, s.p, opRead, func(ctx context.Context, _ bool) (*jetstream.StreamInfo, error) {
		return s.Stream.Info(ctx, opts...)
	})
}

// ElectionWait is how long operations over h (a JetStream, bucket or
// stream handle) wait out a leader election ([Failover]): 0 when they do
// not. Work that bounds several operations with a deadline of its own adds
// it, lest the deadline cut the wait.
func ElectionWait(h any) time.Duration {
	if w, ok := h.(interface{ electionWait() time.Duration }); ok {
		return w.electionWait()
	}
	return 0
}

func (f *failoverJS) electionWait() time.Duration     { return f.p.within }
func (kv *failoverKV) electionWait() time.Duration    { return kv.p.within }
func (s *failoverStream) electionWait() time.Duration { return s.p.within }

// AwaitLeaders waits until the stores a turn writes (the events stream,
// the sessions' bucket and the message log, those r holds) answer again,
// each within the time its handle waits out a leader election. A role
// whose work failed while NATS was unavailable calls it before handing the
// work back, so that the next attempt does not fail the same way.
func (r *Resources) AwaitLeaders(ctx context.Context) error {
	if r.Events != nil {
		if _, err := r.Events.Info(ctx); err != nil {
			return err
		}
	}
	if r.Sessions != nil {
		if _, err := r.Sessions.Status(ctx); err != nil {
			return err
		}
	}
	if r.Messages != nil {
		if _, err := r.Messages.js.Stream(ctx, r.Messages.stream); err != nil {
			return err
		}
	}
	return nil
}

// Status is read again while the bucket's stream has no leader.
func (kv *failoverKV) Status(ctx context.Context) (jetstream.KeyValueStatus, error) {
	return failover(ctx, kv.p, opRead, func(ctx context.Context, _ bool) (jetstream.KeyValueStatus, error) {
		return kv.KeyValue.Status(ctx)
	})
}

// deleteKind is a delete's kind: one that names the revision it expects
// would fail its second time.
func deleteKind(opts []jetstream.KVDeleteOpt) opKind {
	if len(opts) == 0 {
		return opWrite
	}
	return opWriteOnce
}
