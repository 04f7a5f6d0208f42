package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// StreamEvent is one event of the events stream as a follower receives it:
// the AG-UI JSON as stored, with its stream sequence (the SSE event id).
type StreamEvent struct {
	Seq     uint64
	Session string
	// Run is the run the event belongs to (the Mesh-Run header), if any.
	Run  string
	Type mesh.EventType
	Data []byte
}

// Errors a [Follower] ends with.
var (
	// ErrSlowConsumer: the follower's buffer filled up because its client
	// did not read fast enough; the client can resume from the last event
	// it received.
	ErrSlowConsumer = errors.New("core: client too slow, stream cut off")
	// ErrFollowerClosed: the follower or the hub was closed.
	ErrFollowerClosed = errors.New("core: stream closed")
)

// FromNow asks [Core.Follow] for the events published from now on.
const FromNow = ^uint64(0)

// DefaultFollowerBuffer bounds the bytes a follower holds for a client that
// has not read them yet.
const DefaultFollowerBuffer = 768 << 10

// hub fans the events stream out to followers. One ordered consumer per
// bridge reads every event of the mesh once; followers of a session get
// theirs through a bounded in-memory queue, so a slow client is cut off
// instead of slowing the hub or other clients.
type hub struct {
	js     jetstream.JetStream
	ns     mesh.Namespace
	prefix string // "<prefix>.evt."
	limit  int

	cc jetstream.ConsumeContext
	// ends is given every RUN_FINISHED and RUN_ERROR, before the followers.
	ends func(StreamEvent)

	mu        sync.RWMutex
	followers map[string]map[*Follower]struct{}
	taps      map[*tap]struct{}
	lastSeq   atomic.Uint64
}

func newHub(js jetstream.JetStream, ns mesh.Namespace, limit int) *hub {
	if limit <= 0 {
		limit = DefaultFollowerBuffer
	}
	return &hub{js: js, ns: ns, prefix: ns.Prefix() + ".evt.", limit: limit, followers: map[string]map[*Follower]struct{}{}}
}

func (h *hub) start(ctx context.Context) error {
	cons, err := h.js.OrderedConsumer(ctx, h.ns.Stream(mesh.StreamEvents), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{h.ns.EventsAll()},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return fmt.Errorf("core: events consumer: %w", err)
	}
	// A heartbeat every second: when the events stream's leader moves to
	// another server (a cluster node died), two missed ones make the ordered
	// consumer start again from the last event, in 2 s instead of 10 s.
	cc, err := cons.Consume(h.dispatch, jetstream.PullHeartbeat(time.Second))
	if err != nil {
		return fmt.Errorf("core: consume events: %w", err)
	}
	h.cc = cc
	return nil
}

func (h *hub) stop() {
	if h.cc != nil {
		h.cc.Stop()
	}
	h.mu.Lock()
	all := h.followers
	h.followers = map[string]map[*Follower]struct{}{}
	h.mu.Unlock()
	for _, fs := range all {
		for f := range fs {
			f.fail(ErrFollowerClosed)
		}
	}
}

// dispatch hands one event to the followers of its session.
func (h *hub) dispatch(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	h.lastSeq.Store(md.Sequence.Stream)
	ev, ok := h.parse(m.Subject(), md.Sequence.Stream, m)
	if !ok {
		return
	}
	if h.ends != nil && (ev.Type == mesh.EventRunFinished || ev.Type == mesh.EventRunError) {
		h.ends(ev)
	}
	h.mu.RLock()
	for f := range h.followers[ev.Session] {
		f.push(ev)
	}
	for t := range h.taps {
		t.fn(ev)
	}
	h.mu.RUnlock()
}

func (h *hub) parse(subject string, seq uint64, m jetstream.Msg) (StreamEvent, bool) {
	rest, ok := strings.CutPrefix(subject, h.prefix)
	if !ok {
		return StreamEvent{}, false
	}
	session, typ, ok := strings.Cut(rest, ".")
	if !ok {
		return StreamEvent{}, false
	}
	return StreamEvent{Seq: seq, Session: session, Run: m.Headers().Get(mesh.HeaderRun), Type: mesh.EventType(typ), Data: m.Data()}, true
}

func (h *hub) add(f *Follower) {
	h.mu.Lock()
	fs := h.followers[f.session]
	if fs == nil {
		fs = map[*Follower]struct{}{}
		h.followers[f.session] = fs
	}
	fs[f] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(f *Follower) {
	h.mu.Lock()
	if fs := h.followers[f.session]; fs != nil {
		delete(fs, f)
		if len(fs) == 0 {
			delete(h.followers, f.session)
		}
	}
	h.mu.Unlock()
}

// Follow streams the events of session that come after sequence after
// (0: from the first), or only new ones with [FromNow]: first those the
// stream holds, then live ones, in order, with no gap and no duplicate.
func (c *Core) Follow(ctx context.Context, session string, after uint64) (*Follower, error) {
	if err := CheckConversationID(session); err != nil {
		return nil, err
	}
	subj, err := c.ns.EventsOf(session)
	if err != nil {
		return nil, CheckConversationID("")
	}
	if c.hub == nil || c.hub.cc == nil {
		return nil, mesh.ErrUnavailable.With("the bridge is not following the events stream")
	}
	f := &Follower{hub: c.hub, session: session, limit: c.hub.limit, notify: make(chan struct{}, 1)}
	// Registered before the stream is read, so nothing published from here on
	// is missed; what both deliver is dropped by sequence.
	c.hub.add(f)
	stream, err := c.cfg.JS.Stream(ctx, c.ns.Stream(mesh.StreamEvents))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("core: events stream: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("core: events stream: %w", err)
	}
	last := info.State.LastSeq
	if after == FromNow || after >= last {
		f.after = min(after, last)
		return f, nil
	}
	f.after = after
	// Replay through an ephemeral consumer of this session's events.
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject:     subj,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("core: replay consumer: %w", err)
	}
	f.replay = cons
	f.stream = stream
	return f, nil
}

// Follower is one client's view of a session's events.
type Follower struct {
	hub     *hub
	session string
	limit   int

	// replay, while set, serves the stored events before the live ones.
	replay     jetstream.Consumer
	stream     jetstream.Stream
	batch      []StreamEvent
	replayDone bool

	mu     sync.Mutex
	queue  []StreamEvent
	bytes  int
	err    error
	notify chan struct{}
	after  uint64 // last sequence delivered (or replayed); live events up to it are dropped
}

func (f *Follower) push(ev StreamEvent) {
	f.mu.Lock()
	if f.err != nil {
		f.mu.Unlock()
		return
	}
	if f.bytes+len(ev.Data) > f.limit {
		f.err = ErrSlowConsumer
		f.queue, f.bytes = nil, 0
		f.mu.Unlock()
		f.signal()
		go f.hub.remove(f)
		return
	}
	f.queue = append(f.queue, ev)
	f.bytes += len(ev.Data)
	f.mu.Unlock()
	f.signal()
}

func (f *Follower) signal() {
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

func (f *Follower) fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
	f.signal()
}

// Next returns the next event, waiting for one until ctx ends. It fails with
// [ErrSlowConsumer] once the client fell too far behind.
func (f *Follower) Next(ctx context.Context) (StreamEvent, error) {
	if f.replay != nil {
		if ev, ok, err := f.nextReplayed(ctx); err != nil || ok {
			return ev, err
		}
	}
	for {
		f.mu.Lock()
		for len(f.queue) > 0 {
			ev := f.queue[0]
			f.queue[0] = StreamEvent{}
			f.queue = f.queue[1:]
			f.bytes -= len(ev.Data)
			if ev.Seq <= f.after {
				continue
			}
			f.after = ev.Seq
			f.mu.Unlock()
			return ev, nil
		}
		if err := f.err; err != nil {
			f.mu.Unlock()
			return StreamEvent{}, err
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return StreamEvent{}, ctx.Err()
		case <-f.notify:
		}
	}
}

// nextReplayed serves the stored events; ok is false once they are done.
func (f *Follower) nextReplayed(ctx context.Context) (StreamEvent, bool, error) {
	if len(f.batch) == 0 && !f.replayDone {
		msgs, err := f.replay.FetchNoWait(256)
		if err != nil {
			return StreamEvent{}, false, fmt.Errorf("core: replay: %w", err)
		}
		caughtUp := true
		for m := range msgs.Messages() {
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if ev, ok := f.hub.parse(m.Subject(), md.Sequence.Stream, m); ok {
				f.batch = append(f.batch, ev)
			}
			caughtUp = md.NumPending == 0
		}
		if err := msgs.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return StreamEvent{}, false, fmt.Errorf("core: replay: %w", err)
		}
		f.replayDone = caughtUp || len(f.batch) == 0
	}
	if len(f.batch) == 0 {
		f.endReplay(ctx)
		return StreamEvent{}, false, nil
	}
	ev := f.batch[0]
	f.batch = f.batch[1:]
	f.mu.Lock()
	f.after = ev.Seq
	f.mu.Unlock()
	if len(f.batch) == 0 && f.replayDone {
		f.endReplay(ctx)
	}
	return ev, true, nil
}

// endReplay deletes the replay consumer; live events follow.
func (f *Follower) endReplay(ctx context.Context) {
	if f.replay == nil {
		return
	}
	name := f.replay.CachedInfo().Name
	f.replay, f.batch = nil, nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = f.stream.DeleteConsumer(ctx, name)
}

// Close stops following. It is idempotent.
func (f *Follower) Close() {
	f.hub.remove(f)
	f.fail(ErrFollowerClosed)
	f.endReplay(context.Background())
}
