package workloop_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// TestKeepInProgressHoldsTheItem: a work item held past its ack wait is not
// redelivered while KeepInProgress runs, and is once it stops.
func TestKeepInProgressHoldsTheItem(t *testing.T) {
	m := meshtest.New(t)
	const ackWait = time.Second
	filter, _ := m.NS.WorkFilter(mesh.RoleAgent, "keeper")
	cons, err := m.JS.CreateOrUpdateConsumer(t.Context(), m.NS.Stream(mesh.StreamWork), jetstream.ConsumerConfig{
		Durable: "agent_keeper", FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := workloop.Publish(t.Context(), m.JS, m.NS, mesh.RoleAgent, "keeper", mesh.WorkItem{Kind: mesh.WorkTurn, Session: "s", TurnID: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg := <-batch.Messages()
	if msg == nil {
		t.Fatal("no work item")
	}
	stop := workloop.KeepInProgress(msg, ackWait)
	time.Sleep(5 * ackWait / 2)
	if again, err := cons.Fetch(1, jetstream.FetchMaxWait(ackWait)); err == nil {
		if m := <-again.Messages(); m != nil {
			t.Fatal("the item was redelivered while held")
		}
	}
	stop()
	again, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if m := <-again.Messages(); m == nil {
		t.Error("the item was not redelivered once no longer held")
	}
}
