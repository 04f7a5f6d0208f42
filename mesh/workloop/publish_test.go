package workloop_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// TestHandledItemIsNotRedelivered: an item whose handler runs for twice its
// queue's AckWait is kept in progress meanwhile, so it is delivered once;
// one whose handler hands it back (a holder that died) comes back.
func TestHandledItemIsNotRedelivered(t *testing.T) {
	m := meshtest.New(t)
	const ackWait = time.Second
	filter, _ := m.NS.WorkFilter(mesh.RoleAgent, "keeper")
	var deliveries atomic.Int32
	handled := make(chan struct{}, 4)
	loop, err := workloop.New(workloop.Config{JS: m.JS, Stream: m.NS.Stream(mesh.StreamWork), Queues: []workloop.Queue{{
		Consumer: jetstream.ConsumerConfig{Durable: "agent_keeper", FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait},
		Handle: func(ctx context.Context, msg jetstream.Msg) {
			if deliveries.Add(1) == 1 {
				time.Sleep(5 * ackWait / 2)
			}
			_ = msg.Ack()
			handled <- struct{}{}
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := workloop.Publish(t.Context(), m.JS, m.NS, mesh.RoleAgent, "keeper", mesh.WorkItem{Kind: mesh.WorkTurn, Session: "s", TurnID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("the item was not handled")
	}
	time.Sleep(ackWait)
	if n := deliveries.Load(); n != 1 {
		t.Errorf("delivered %d times while its handler ran past AckWait, want once", n)
	}
}
