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
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
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
	// ErrCredentialExpired: the credential of the request that opened the
	// follower expired (a stream token, a JWT): a stream lasts no longer
	// than its credential. The client opens a new one with a fresh token,
	// after the last event it received.
	ErrCredentialExpired = errors.New("core: the token that opened the stream expired")
)

// FromNow asks [Core.Follow] for the events published from now on.
const FromNow = ^uint64(0)

// DefaultFollowerBuffer bounds the bytes a follower holds for a client that
// has not read them yet.
const DefaultFollowerBuffer = 768 << 10

// hub reads the events stream for the bridge. Its run consumer, always on,
// reads only the run starts and ends and the mesh's own events (what run
// waiters and taps need: 2 or 3 of a turn's dozen events); its all
// consumer reads every event of the mesh, and runs only while a follower
// exists and for allLinger after the last one leaves. Followers of a
// session get theirs through a bounded in-memory queue, so a slow client is
// cut off instead of slowing the hub or other clients.
type hub struct {
	js     jetstream.JetStream
	ns     mesh.Namespace
	prefix string // "<prefix>.evt."
	limit  int
	// linger is how long the all consumer outlives the last follower.
	linger time.Duration

	runs jetstream.ConsumeContext
	// ends is given every RUN_FINISHED and RUN_ERROR, before the taps.
	ends func(StreamEvent)

	mu        sync.RWMutex
	followers map[string]map[*Follower]struct{}
	taps      map[*tap]struct{}

	// allMu orders the all consumer's starts and stops with the followers
	// that hold it (users), so none registers while it stops unseen.
	allMu   sync.Mutex
	all     jetstream.ConsumeContext
	allGen  atomic.Uint64 // bumped at each start and stop: a stopped consumer's late messages are dropped
	users   int
	idle    *time.Timer
	stopped bool

	log      zerolog.Logger
	lateMu   sync.Mutex
	lateLog  time.Time // when the last WARN of late events was written
	lateSeen int       // late events since then
}

// lateEvent is the delivery time past which a live event is late, and
// lateLogEvery how often at most a WARN line says so.
const (
	lateEvent    = 10 * time.Millisecond
	lateLogEvery = 10 * time.Second
)

// allLinger is how long the all consumer runs on after its last follower
// left: a client that reconnects, or the next turn of an AG-UI client,
// finds it running instead of starting it again.
const allLinger = 10 * time.Second

func newHub(js jetstream.JetStream, ns mesh.Namespace, limit int, log zerolog.Logger) *hub {
	if limit <= 0 {
		limit = DefaultFollowerBuffer
	}
	return &hub{js: js, ns: ns, prefix: ns.Prefix() + ".evt.", limit: limit, linger: allLinger, followers: map[string]map[*Follower]struct{}{}, log: log}
}

// runFilters are the run consumer's subjects: mesh.evt.*.RUN_STARTED,
// RUN_FINISHED, RUN_ERROR and mesh.evt._mesh.CUSTOM.
func (h *hub) runFilters() ([]string, error) {
	var out []string
	for _, t := range []mesh.EventType{mesh.EventRunStarted, mesh.EventRunFinished, mesh.EventRunError} {
		s, err := h.ns.EventsOfType(t)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	s, err := h.ns.Event(mesh.SystemSession, mesh.EventCustom)
	if err != nil {
		return nil, err
	}
	return append(out, s), nil
}

func (h *hub) start(ctx context.Context) error {
	filters, err := h.runFilters()
	if err != nil {
		return fmt.Errorf("core: events consumer: %w", err)
	}
	cc, err := h.consume(ctx, filters, h.dispatchRun)
	if err != nil {
		return err
	}
	h.runs = cc
	return nil
}

// consume follows the events of filters stored from now on
// (mesh.FollowNew).
func (h *hub) consume(ctx context.Context, filters []string, fn func(jetstream.Msg)) (jetstream.ConsumeContext, error) {
	cc, err := store.FollowNew(ctx, h.js, h.ns.Stream(mesh.StreamEvents), filters, fn)
	if err != nil {
		return nil, fmt.Errorf("core: events: %w", err)
	}
	return cc, nil
}

func (h *hub) stop() {
	if h.runs != nil {
		h.runs.Stop()
	}
	h.allMu.Lock()
	h.stopped = true
	h.stopAll()
	h.allMu.Unlock()
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

// acquire makes sure the all consumer runs, for one more follower; release
// gives it back.
func (h *hub) acquire(ctx context.Context) error {
	h.allMu.Lock()
	defer h.allMu.Unlock()
	if h.stopped {
		return mesh.ErrUnavailable.With("the bridge is not following the events stream")
	}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.all == nil {
		gen := h.allGen.Add(1)
		cc, err := h.consume(ctx, []string{h.ns.EventsAll()}, func(m jetstream.Msg) { h.dispatchAll(m, gen) })
		if err != nil {
			return err
		}
		h.all = cc
	}
	h.users++
	return nil
}

func (h *hub) release() {
	h.allMu.Lock()
	defer h.allMu.Unlock()
	h.users--
	if h.users > 0 || h.all == nil || h.stopped {
		return
	}
	if h.idle != nil {
		h.idle.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(h.linger, func() {
		h.allMu.Lock()
		defer h.allMu.Unlock()
		// A follower that came meanwhile stopped this timer, or will find
		// the consumer stopped and start another.
		if h.idle == t && h.users == 0 {
			h.stopAll()
		}
	})
	h.idle = t
}

// stopAll stops the all consumer; allMu is held.
func (h *hub) stopAll() {
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.all != nil {
		h.allGen.Add(1)
		h.all.Stop()
		h.all = nil
	}
}

// allRunning reports whether the all consumer runs (tests).
func (h *hub) allRunning() bool {
	h.allMu.Lock()
	defer h.allMu.Unlock()
	return h.all != nil
}

// dispatchRun gives a run's start or end, or a mesh event, to the waiters
// and the taps.
func (h *hub) dispatchRun(m jetstream.Msg) {
	ev, ok := h.event(m)
	if !ok {
		return
	}
	if h.ends != nil && (ev.Type == mesh.EventRunFinished || ev.Type == mesh.EventRunError) {
		h.ends(ev)
	}
	h.mu.RLock()
	for t := range h.taps {
		t.fn(ev)
	}
	h.mu.RUnlock()
}

// dispatchAll hands one event to the followers of its session, unless the
// consumer of generation gen has been stopped since.
func (h *hub) dispatchAll(m jetstream.Msg, gen uint64) {
	if h.allGen.Load() != gen {
		return
	}
	ev, ok := h.event(m)
	if !ok {
		return
	}
	h.mu.RLock()
	fs := h.followers[ev.Session]
	for f := range fs {
		f.push(ev)
	}
	live := len(fs) > 0
	h.mu.RUnlock()
	if live {
		if md, err := m.Metadata(); err == nil {
			h.delivered(ev.Session, md.Timestamp)
		}
	}
}

// delivered records the time an event took from its storing in
// MESH_EVENTS (the server's clock) to its hand-off to live followers
// (this process's): a late one is counted, and a WARN line says so at
// most every lateLogEvery, with how many there were meanwhile.
func (h *hub) delivered(session string, stored time.Time) {
	d := max(time.Since(stored), 0)
	if !telemetry.EventPropagated(d, lateEvent) {
		return
	}
	h.lateMu.Lock()
	h.lateSeen++
	if time.Since(h.lateLog) < lateLogEvery {
		h.lateMu.Unlock()
		return
	}
	n := h.lateSeen
	h.lateLog, h.lateSeen = time.Now(), 0
	h.lateMu.Unlock()
	h.log.Warn().Str("session", session).Dur("latency", d).Int("late_events", n).Dur("over", lateEvent).
		Msg("live events reached their followers late")
}

// event is the event m delivers, with its stream sequence.
func (h *hub) event(m jetstream.Msg) (StreamEvent, bool) {
	md, err := m.Metadata()
	if err != nil {
		return StreamEvent{}, false
	}
	return h.parse(m.Subject(), md.Sequence.Stream, m)
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

// remove takes f out of the hub, and gives back its hold on the all
// consumer the first time.
func (h *hub) remove(f *Follower) {
	h.mu.Lock()
	if fs := h.followers[f.session]; fs != nil {
		delete(fs, f)
		if len(fs) == 0 {
			delete(h.followers, f.session)
		}
	}
	h.mu.Unlock()
	if f.holds.CompareAndSwap(true, false) {
		h.release()
	}
}

// Follow streams the events of session that come after sequence after
// (0: from the first), or only new ones with [FromNow]: first those the
// stream holds, then live ones, in order, with no gap and no duplicate.
// When the principal ctx carries has a credential that expires
// ([auth.Principal.Expires]), the follower ends then with
// [ErrCredentialExpired], whatever it still holds: every stream of a
// conversation (AG-UI, its dialects, A2A, a socket's threads) reads
// through a follower, so none outlives its credential.
func (c *Core) Follow(ctx context.Context, session string, after uint64) (*Follower, error) {
	if err := CheckConversationID(session); err != nil {
		return nil, err
	}
	subj, err := c.ns.EventsOf(session)
	if err != nil {
		return nil, CheckConversationID("")
	}
	if c.hub == nil || c.hub.runs == nil {
		return nil, mesh.ErrUnavailable.With("the bridge is not following the events stream")
	}
	// The all consumer runs from here on, and the follower is registered
	// before the stream's last sequence is read: every event after it
	// reaches the follower live, those before it come from the replay, and
	// what both deliver is dropped by sequence.
	if err := c.hub.acquire(ctx); err != nil {
		return nil, err
	}
	f := &Follower{hub: c.hub, session: session, limit: c.hub.limit, notify: make(chan struct{}, 1)}
	f.holds.Store(true)
	if p := auth.FromContext(ctx); p != nil && !p.Expires.IsZero() {
		f.expiry = time.AfterFunc(time.Until(p.Expires), f.expire)
	}
	c.hub.add(f)
	// Stream reads the stream's info: its state is as of now.
	stream, err := c.cfg.JS.Stream(ctx, c.ns.Stream(mesh.StreamEvents))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("core: events stream: %w", err)
	}
	last := stream.CachedInfo().State.LastSeq
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
	// holds: the follower keeps the hub's all consumer running until it
	// is removed.
	holds atomic.Bool

	// replay, while set, serves the stored events before the live ones.
	replay     jetstream.Consumer
	stream     jetstream.Stream
	batch      []StreamEvent
	replayDone bool

	// expiry ends the follower when its caller's credential expires.
	expiry *time.Timer

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

// expire ends the follower for good: nothing it holds, nothing still to
// replay, is delivered after its credential expired.
func (f *Follower) expire() {
	f.mu.Lock()
	if f.err == nil {
		f.err = ErrCredentialExpired
		f.queue, f.bytes = nil, 0
	}
	f.mu.Unlock()
	f.signal()
}

// expired reports whether the follower's credential expired.
func (f *Follower) expired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err == ErrCredentialExpired
}

// Next returns the next event, waiting for one until ctx ends. It fails with
// [ErrSlowConsumer] once the client fell too far behind, and with
// [ErrCredentialExpired] once its credential expired.
func (f *Follower) Next(ctx context.Context) (StreamEvent, error) {
	if f.expired() {
		return StreamEvent{}, ErrCredentialExpired
	}
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
	if f.expiry != nil {
		f.expiry.Stop()
	}
	f.hub.remove(f)
	f.fail(ErrFollowerClosed)
	f.endReplay(context.Background())
}
