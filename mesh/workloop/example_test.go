package workloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// A work loop consumes the turns of one agent, two at a time, and drains
// when its context ends.
func ExampleLoop() {
	dir, _ := os.MkdirTemp("", "workloop")
	defer os.RemoveAll(dir)
	srv, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ns := mesh.DefaultNamespace()
	if _, err := store.Provision(ctx, js, ns, store.ProvisionConfig{}); err != nil {
		fmt.Println(err)
		return
	}

	// Every conversation's work items for agent "echo".
	filter, _ := ns.WorkFilter(mesh.RoleAgent, "echo")
	ready, handled := make(chan struct{}), make(chan struct{})
	loop, err := workloop.New(workloop.Config{
		JS: js, Stream: ns.Stream(mesh.StreamWork), Workers: 2,
		Queues: []workloop.Queue{{
			Consumer: jetstream.ConsumerConfig{Durable: "agent_echo", FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy},
			Handle: func(ctx context.Context, msg jetstream.Msg) {
				var item mesh.WorkItem
				_ = json.Unmarshal(msg.Data(), &item)
				fmt.Println("handled", item.Kind, item.TurnID)
				_ = msg.Ack()
				close(handled)
			},
		}},
		Ready: func() { close(ready) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ran := make(chan error, 1)
	go func() { ran <- loop.Run(ctx) }()
	<-ready
	fmt.Println("consuming:", loop.Consuming())

	_ = workloop.Publish(ctx, js, ns, mesh.RoleAgent, "echo", mesh.WorkItem{Kind: mesh.WorkTurn, Session: "s1", TurnID: "t1"}, nil)
	<-handled
	stop()
	fmt.Println("drained:", <-ran)
	fmt.Println("consuming:", loop.Consuming())
	// Output:
	// consuming: true
	// handled turn t1
	// drained: <nil>
	// consuming: false
}
