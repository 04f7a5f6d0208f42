package workloop_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// The loop tests' queue. Its AckWait is long: an item the tests see again
// within seconds was handed back, not left to time out.
const (
	loopSubject = "mesh.work.agent.loop.*"
	loopDurable = "agent_loop"
	loopAckWait = 30 * time.Second
)

func loopQueue(handle workloop.Handler) workloop.Queue {
	return workloop.Queue{
		Consumer: jetstream.ConsumerConfig{Durable: loopDurable, FilterSubject: loopSubject, AckPolicy: jetstream.AckExplicitPolicy, AckWait: loopAckWait},
		Handle:   handle,
	}
}

// runningLoop is a work loop whose Run runs in the background.
type runningLoop struct {
	*workloop.Loop
	stop func()       // ends Run's context
	done <-chan error // Run's result
}

// startLoop runs a loop of cfg on m until it is consuming; the test's end
// stops it if the test did not.
func startLoop(t *testing.T, m *meshtest.Mesh, cfg workloop.Config) *runningLoop {
	t.Helper()
	cfg.JS, cfg.Stream = m.JS, m.NS.Stream(mesh.StreamWork)
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	loop, err := workloop.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(cancel)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run returned before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not become ready")
	}
	return &runningLoop{Loop: loop, stop: cancel, done: done}
}

// result waits for Run's result.
func (l *runningLoop) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-l.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func publishItem(t *testing.T, m *meshtest.Mesh, data string) {
	t.Helper()
	if _, err := m.JS.Publish(t.Context(), "mesh.work.agent.loop.c1", []byte(data)); err != nil {
		t.Fatal(err)
	}
}

func loopConsumer(t *testing.T, m *meshtest.Mesh) jetstream.Consumer {
	t.Helper()
	cons, err := m.JS.Consumer(t.Context(), m.NS.Stream(mesh.StreamWork), loopDurable)
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

func consumerInfo(t *testing.T, m *meshtest.Mesh) *jetstream.ConsumerInfo {
	t.Helper()
	info, err := loopConsumer(t, m).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// fetchHandedBack fetches the next item of the queue, which must come
// within a few seconds (well within loopAckWait) on its second delivery.
func fetchHandedBack(t *testing.T, m *meshtest.Mesh) string {
	t.Helper()
	batch, err := loopConsumer(t, m).Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg := <-batch.Messages()
	if msg == nil {
		t.Fatal("no item was handed back")
	}
	md, err := msg.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if md.NumDelivered != 2 {
		t.Errorf("item %q delivered %d times, want 2 (once to the loop, once here)", msg.Data(), md.NumDelivered)
	}
	_ = msg.Ack()
	return string(msg.Data())
}

// logSink is a log writer safe for concurrent writes.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func TestNewLoopValidates(t *testing.T) {
	m := meshtest.New(t)
	ok := workloop.Config{JS: m.JS, Stream: m.NS.Stream(mesh.StreamWork), Queues: []workloop.Queue{loopQueue(func(context.Context, jetstream.Msg) {})}}
	tests := []struct {
		name    string
		change  func(*workloop.Config)
		wantErr bool
	}{
		{name: "complete", change: func(*workloop.Config) {}},
		{name: "no queues", change: func(c *workloop.Config) { c.Queues = nil }},
		{name: "no JS", change: func(c *workloop.Config) { c.JS = nil }, wantErr: true},
		{name: "no stream", change: func(c *workloop.Config) { c.Stream = "" }, wantErr: true},
		{name: "no handler", change: func(c *workloop.Config) { c.Queues = []workloop.Queue{loopQueue(nil)} }, wantErr: true},
		{name: "no durable", change: func(c *workloop.Config) {
			q := loopQueue(func(context.Context, jetstream.Msg) {})
			q.Consumer.Durable = ""
			c.Queues = []workloop.Queue{q}
		}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.change(&cfg)
			_, err := workloop.New(cfg)
			if (err != nil) != tt.wantErr {
				t.Errorf("New: %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestWorkLoopBoundsItsWorkers: no more items than Workers are handled at
// once, though the consume holds more.
func TestWorkLoopBoundsItsWorkers(t *testing.T) {
	m := meshtest.New(t)
	release := make(chan struct{})
	var running, most, handled atomic.Int32
	loop := startLoop(t, m, workloop.Config{Workers: 2, Queues: []workloop.Queue{loopQueue(func(_ context.Context, msg jetstream.Msg) {
		n := running.Add(1)
		for {
			old := most.Load()
			if n <= old || most.CompareAndSwap(old, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		handled.Add(1)
		_ = msg.Ack()
	})}})
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		publishItem(t, m, id)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return loop.Busy() == 2 }, "two items not in hand")
	// The consume pulls ahead: a third item waits for a worker.
	meshtest.Eventually(t, 5*time.Second, func() bool { return consumerInfo(t, m).NumAckPending >= 3 }, "the consume did not pull ahead")
	if got, top := loop.Busy(), most.Load(); got != 2 || top != 2 {
		t.Errorf("busy %d, at most %d at once; want 2 and 2 (Workers)", got, top)
	}
	close(release)
	meshtest.Eventually(t, 5*time.Second, func() bool { return handled.Load() == 6 }, "handled %d of 6 items", handled.Load())
	if top := most.Load(); top > 2 {
		t.Errorf("%d items handled at once, want at most 2", top)
	}
	loop.stop()
	if err := loop.result(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	if loop.Busy() != 0 || loop.Consuming() {
		t.Errorf("after Run: busy %d, consuming %v; want 0, false", loop.Busy(), loop.Consuming())
	}
}

// TestWorkLoopDrainLetsRunningItemsFinish: once stopped the loop takes no
// more items, and Run waits for the one in hand, whose context stays alive,
// to finish and settle.
func TestWorkLoopDrainLetsRunningItemsFinish(t *testing.T) {
	m := meshtest.New(t)
	started, release := make(chan struct{}), make(chan struct{})
	ctxErr := make(chan error, 1)
	loop := startLoop(t, m, workloop.Config{DrainTimeout: time.Minute, Queues: []workloop.Queue{loopQueue(func(ctx context.Context, msg jetstream.Msg) {
		close(started)
		<-release
		ctxErr <- ctx.Err()
		_ = msg.Ack()
	})}})
	if !loop.Consuming() {
		t.Error("a ready loop is not consuming")
	}
	publishItem(t, m, "a")
	<-started
	loop.stop()
	meshtest.Eventually(t, 5*time.Second, func() bool { return !loop.Consuming() }, "the consume did not stop")
	select {
	case err := <-loop.done:
		t.Fatalf("Run returned (%v) with an item in hand", err)
	default:
	}
	close(release)
	if err := loop.result(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := <-ctxErr; err != nil {
		t.Errorf("the item's context ended (%v) before its drain deadline", err)
	}
	if info := consumerInfo(t, m); info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("after the drain: %d pending acks, %d pending items; want the item settled", info.NumAckPending, info.NumPending)
	}
}

// TestWorkLoopHardStopHandsBack: an item still in hand at the drain
// deadline has its context cancelled with StopCause, hands itself back, and
// Run returns.
func TestWorkLoopHardStopHandsBack(t *testing.T) {
	m := meshtest.New(t)
	errStop := errors.New("test: stopping")
	var logs logSink
	started := make(chan struct{})
	cause := make(chan error, 1)
	loop := startLoop(t, m, workloop.Config{
		DrainTimeout: 200 * time.Millisecond, StopCause: errStop, Logger: zerolog.New(&logs),
		Queues: []workloop.Queue{loopQueue(func(ctx context.Context, msg jetstream.Msg) {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			_ = msg.Nak()
		})},
	})
	publishItem(t, m, "stuck")
	<-started
	loop.stop()
	if err := loop.result(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	if got := <-cause; !errors.Is(got, errStop) {
		t.Errorf("cause of the item's context %v, want %v", got, errStop)
	}
	if !strings.Contains(logs.String(), "still running at the drain deadline") {
		t.Errorf("no log line of the drain deadline; logs:\n%s", logs.String())
	}
	if got := fetchHandedBack(t, m); got != "stuck" {
		t.Errorf("handed back %q, want stuck", got)
	}
}

// TestWorkLoopHandsBackAnItemArrivingDuringTheStop: an item the consume
// holds while every worker is busy is handed back when the loop stops, at
// once, not handled after the stop.
func TestWorkLoopHandsBackAnItemArrivingDuringTheStop(t *testing.T) {
	m := meshtest.New(t)
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var seen []string
	loop := startLoop(t, m, workloop.Config{Workers: 1, DrainTimeout: time.Minute, Queues: []workloop.Queue{loopQueue(func(_ context.Context, msg jetstream.Msg) {
		mu.Lock()
		seen = append(seen, string(msg.Data()))
		mu.Unlock()
		if string(msg.Data()) == "first" {
			close(started)
			<-release
		}
		_ = msg.Ack()
	})}})
	publishItem(t, m, "first")
	<-started
	publishItem(t, m, "second")
	meshtest.Eventually(t, 5*time.Second, func() bool { return consumerInfo(t, m).NumAckPending == 2 }, "the second item did not reach the loop")
	loop.stop()
	// Handed back while the first is still running: the drain does not hold it.
	if got := fetchHandedBack(t, m); got != "second" {
		t.Errorf("handed back %q, want second", got)
	}
	close(release)
	if err := loop.result(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "first" {
		t.Errorf("the loop handled %v, want only first", seen)
	}
}

// TestWorkLoopReportsConsumeErrors: a consume that stops on its own (its
// consumer deleted) is logged with the queue's logger and is no longer
// Consuming, so a health check fails; Run still drains on its stop.
func TestWorkLoopReportsConsumeErrors(t *testing.T) {
	m := meshtest.New(t)
	var logs logSink
	q := loopQueue(func(_ context.Context, msg jetstream.Msg) { _ = msg.Ack() })
	q.Logger = zerolog.New(&logs)
	loop := startLoop(t, m, workloop.Config{Queues: []workloop.Queue{q}})
	// The consume's pull request is waiting on the consumer: its deletion
	// answers it.
	meshtest.Eventually(t, 5*time.Second, func() bool { return consumerInfo(t, m).NumWaiting > 0 }, "the consume did not ask for items")
	if err := m.JS.DeleteConsumer(t.Context(), m.NS.Stream(mesh.StreamWork), loopDurable); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return !loop.Consuming() }, "a loop whose consumer is deleted still reports consuming")
	meshtest.Eventually(t, 5*time.Second, func() bool {
		return strings.Contains(logs.String(), `"message":"consume"`) && strings.Contains(strings.ToLower(logs.String()), "consumer deleted")
	}, "the consume error was not logged; logs:\n%s", logs.String())
	loop.stop()
	if err := loop.result(t); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestWorkLoopStartFailure: a queue that cannot be consumed fails Run, after
// the queues started before it are stopped; a start cut short by the stop of
// Run's context is no failure.
func TestWorkLoopStartFailure(t *testing.T) {
	m := meshtest.New(t)
	bad := loopQueue(func(context.Context, jetstream.Msg) {})
	bad.Consumer.Durable, bad.Consumer.FilterSubject = "not.a.name", "mesh.work.agent.bad.*"
	var readied atomic.Bool
	loop, err := workloop.New(workloop.Config{
		JS: m.JS, Stream: m.NS.Stream(mesh.StreamWork), Ready: func() { readied.Store(true) },
		Queues: []workloop.Queue{loopQueue(func(context.Context, jetstream.Msg) {}), bad},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = loop.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "consumer on mesh.work.agent.bad") {
		t.Errorf("Run: %v, want the failure of the second queue's consumer", err)
	}
	if readied.Load() || loop.Consuming() {
		t.Errorf("after a failed start: ready called %v, consuming %v; want neither", readied.Load(), loop.Consuming())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := loop.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context: %v, want nil", err)
	}
}
