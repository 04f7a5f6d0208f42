package workloop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Defaults of a [Config].
const (
	// DefaultWorkers: a worker is a goroutine, and the items of a mesh
	// mostly wait (on a model, a tool, a person), so the bound is memory,
	// not CPU: a few KiB each.
	DefaultWorkers      = 4096
	DefaultDrainTimeout = 30 * time.Second
)

// ErrStopped is the cause of the context of the items still in hand
// when a [Loop]'s drain deadline passes, unless its StopCause says
// otherwise.
var ErrStopped = errors.New("workloop: stopped")

// Handler handles one work item and settles it with its queue: Ack, Nak
// (with or without a delay) or Term. Its ctx carries the values of Run's
// context but not its end: it is cancelled, with the loop's StopCause, only
// when the drain deadline passes with the item still in hand, and the
// handler should then hand the item back with Nak.
type Handler func(ctx context.Context, msg jetstream.Msg)

// Queue is one work queue of a [Loop]: a durable pull consumer on
// the loop's stream, and the handler of its items.
type Queue struct {
	// Consumer is created, or updated, on the loop's stream when Run starts.
	// Its AckWait also paces the items' in-progress signals (a third of
	// it); zero means the server's default.
	Consumer jetstream.ConsumerConfig
	// Handle handles the queue's items. Required.
	Handle Handler
	// Logger receives the queue's consume errors. The zero value discards
	// them.
	Logger zerolog.Logger
}

// Config configures a [Loop].
type Config struct {
	// JS creates the consumers. Required.
	JS jetstream.JetStream
	// Stream holds the queues: the namespace's work stream. Required.
	Stream string
	// Queues are the work queues the loop consumes; its workers serve them
	// all.
	Queues []Queue
	// Workers bounds the items handled at once, over all the queues; each
	// queue also pulls at most that many ahead (and at most 256). Zero
	// means [DefaultWorkers].
	Workers int
	// DrainTimeout is how long the items in hand may take to finish once
	// Run's context ends. Zero means [DefaultDrainTimeout].
	DrainTimeout time.Duration
	// StopCause is the cause of the items' context when the drain deadline
	// passes. Nil means [ErrStopped].
	StopCause error
	// Ready, when set, is called once every queue is consumed.
	Ready func()
	// Logger receives the loop's own logs (the drain deadline). The zero
	// value discards them.
	Logger zerolog.Logger
}

// maxPullAhead bounds the items a queue asks for ahead of its workers: the
// items in a pull are this process's, so a large pull would keep them from
// other replicas that have room.
const maxPullAhead = 256

// Loop consumes work queues with a bounded number of workers: each item
// is handled on a worker of its own and kept in progress while it is. When
// Run's context ends the loop stops taking items, lets those in hand finish
// within DrainTimeout, hands back the rest, and returns.
type Loop struct {
	cfg       Config
	busy      atomic.Int32 // items being handled
	consuming atomic.Int32 // queues whose consume is alive
}

// New validates cfg and returns a loop; Run starts it.
func New(cfg Config) (*Loop, error) {
	if cfg.JS == nil || cfg.Stream == "" {
		return nil, errors.New("workloop: needs JS and Stream")
	}
	for i, q := range cfg.Queues {
		if q.Handle == nil || q.Consumer.Durable == "" {
			return nil, fmt.Errorf("workloop: queue %d needs a durable consumer and a handler", i)
		}
	}
	cfg.Queues = append([]Queue(nil), cfg.Queues...)
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.StopCause == nil {
		cfg.StopCause = ErrStopped
	}
	return &Loop{cfg: cfg}, nil
}

// Busy is the number of items being handled now.
func (l *Loop) Busy() int { return int(l.busy.Load()) }

// Consuming reports whether every queue of the loop is being consumed: false
// before Run, after it, and once a queue's consume has stopped on its own
// (its consumer deleted, the connection closed), which a health check should
// report.
func (l *Loop) Consuming() bool { return int(l.consuming.Load()) == len(l.cfg.Queues) }

// Run creates the consumers and consumes their queues until ctx ends, then
// drains and returns nil. A start that fails half-way stops the queues
// already consumed, like a stop, and returns the error, or nil when it
// failed only because ctx ended meanwhile ([StoppedStarting]).
func (l *Loop) Run(ctx context.Context) error {
	// Items run on their own context: a stop lets them finish (up to
	// DrainTimeout) instead of cutting them off mid-call.
	itemsCtx, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(l.cfg.StopCause)
	w := &workers{
		loop:     l,
		ctx:      itemsCtx,
		sem:      make(chan struct{}, l.cfg.Workers),
		stopping: make(chan struct{}),
	}
	var startErr error
	for _, q := range l.cfg.Queues {
		if err := w.consume(ctx, q); err != nil {
			startErr = err
			break
		}
	}
	if startErr == nil {
		if l.cfg.Ready != nil {
			l.cfg.Ready()
		}
		<-ctx.Done()
	}
	w.drain(hardStop)
	if startErr != nil && !StoppedStarting(ctx, startErr) {
		return startErr
	}
	return nil
}

// workers are the workers of one Run and the queues they serve.
type workers struct {
	loop *Loop
	ctx  context.Context // of the items, cancelled at the drain deadline
	sem  chan struct{}   // a slot per worker

	// mu orders wg.Add before the drain's wg.Wait: an item dispatched as
	// the loop stops is either counted, so the drain waits for it, or
	// handed back.
	mu       sync.Mutex
	stopping chan struct{} // closed under mu when the drain begins
	wg       sync.WaitGroup

	ccs      []jetstream.ConsumeContext
	keepers  []*keeper
	watchers sync.WaitGroup // of the consume contexts' ends
}

// consume creates q's consumer and starts consuming it.
func (w *workers) consume(ctx context.Context, q Queue) error {
	l := w.loop
	subject := q.Consumer.FilterSubject
	if subject == "" {
		subject = strings.Join(q.Consumer.FilterSubjects, ", ")
	}
	cons, err := l.cfg.JS.CreateOrUpdateConsumer(ctx, l.cfg.Stream, q.Consumer)
	if err != nil {
		return fmt.Errorf("consumer on %s: %w", subject, err)
	}
	// The consumer's own AckWait: the server fills in its default.
	ackWait := q.Consumer.AckWait
	if info := cons.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		ackWait = info.Config.AckWait
	}
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}
	log := q.Logger
	k := newKeeper(ackWait)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		w.dispatch(msg, q.Handle, k)
	}, jetstream.PullMaxMessages(min(l.cfg.Workers, maxPullAhead)),
		// A heartbeat every second: a pull whose server died, or whose
		// stream's leader moved to another server, is found dead in 2 s and
		// pulled again, instead of in 30 s (half the default expiry, twice).
		jetstream.PullHeartbeat(time.Second), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
				log.Warn().Err(err).Msg("consume")
			}
		}))
	if err != nil {
		k.close()
		return fmt.Errorf("consume %s: %w", subject, err)
	}
	l.consuming.Add(1)
	w.ccs = append(w.ccs, cc)
	w.keepers = append(w.keepers, k)
	w.watchers.Add(1)
	go func() {
		defer w.watchers.Done()
		<-cc.Closed()
		l.consuming.Add(-1)
	}()
	return nil
}

// dispatch runs on the consume callback: it waits for a free worker and
// hands it msg, or hands msg back once the loop stops.
//
// The order is what makes the drain right. Waiting for a worker also
// watches stopping, so an item that arrives while every worker is busy and
// the loop stops is handed back at once rather than started after the stop
// (and perhaps after the drain deadline). The item is counted (wg.Add)
// under mu, after a second look at stopping, and the drain closes stopping
// under mu before it waits: no Add can follow that Wait, and no item is
// both counted and handed back. (Counting first and then waiting for a
// worker, as the group role once did, let the drain wait for items that
// had arrived after the stop.)
func (w *workers) dispatch(msg jetstream.Msg, handle Handler, k *keeper) {
	select {
	case w.sem <- struct{}{}:
	case <-w.stopping:
		_ = msg.Nak()
		return
	}
	w.mu.Lock()
	select {
	case <-w.stopping:
		w.mu.Unlock()
		<-w.sem
		_ = msg.Nak()
		return
	default:
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.wg.Done()
		defer func() { <-w.sem }()
		w.loop.busy.Add(1)
		defer w.loop.busy.Add(-1)
		defer k.hold(msg)()
		handle(w.ctx, msg)
	}()
}

// drain stops taking items, waits for those in hand until the drain
// deadline, then cancels them with hardStop and waits for them to hand
// their items back; it returns once every consume has closed.
//
// The consumes stop before stopping is closed: a stopped consume asks for
// no more items, so an item handed back here is not pulled again by this
// very consume, to be dropped on its way to a subscription that is gone
// and come back only after its AckWait. An item dispatched between the two
// still finds a worker and is counted, and the drain waits for it.
func (w *workers) drain(hardStop context.CancelCauseFunc) {
	l := w.loop
	for _, cc := range w.ccs {
		cc.Stop()
	}
	w.mu.Lock()
	close(w.stopping)
	w.mu.Unlock()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	deadline := time.NewTimer(l.cfg.DrainTimeout)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		l.cfg.Logger.Warn().Dur("timeout", l.cfg.DrainTimeout).Int("running", l.Busy()).Msg("work items still running at the drain deadline; handing them back")
		hardStop(l.cfg.StopCause)
		<-done
	}
	// Then wait for the consumes to close (their subscriptions gone) and
	// for the goroutines that count them.
	for _, cc := range w.ccs {
		<-cc.Closed()
	}
	w.watchers.Wait()
	for _, k := range w.keepers {
		k.close()
	}
}

// StoppedStarting reports whether err only says that ctx ended while a role
// was starting: a stop asked before the role got going, which its Run
// returns as nil, like any stop, rather than as a failure.
func StoppedStarting(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, ctx.Err())
}

// CopyCallerHeaders copies the caller's credentials and trace id from src to
// a new header, so they follow the work a request starts.
func CopyCallerHeaders(src nats.Header) nats.Header {
	h := nats.Header{}
	for _, k := range []string{mesh.HeaderAuthorization, mesh.HeaderSessionID} {
		if v := src.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	return h
}
