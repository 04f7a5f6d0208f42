package toolhost_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/nodes/toolhost"
)

// Host the MCP memory server on a mesh, then call one of its tools the way
// an agent does. (It needs a NATS server and npx, so it is not run.)
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		panic(err)
	}
	js, _ := jetstream.New(nc)
	res, err := store.Provision(ctx, js, mesh.DefaultNamespace(), store.ProvisionConfig{})
	if err != nil {
		panic(err)
	}
	h, err := toolhost.New(toolhost.Config{
		Node:  role.Node{NC: nc, NS: res.NS, NodeID: "toolhost-1", Logger: zerolog.New(zerolog.NewConsoleWriter())},
		Tools: res.Tools, Calls: res.Calls,
		Environ: os.Environ(), // npx needs PATH and HOME
		Servers: []config.MCPServer{{
			Name:    "memory",
			Command: "npx",
			Args:    []string{"-y", "@modelcontextprotocol/server-memory"},
		}},
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()

	// read_graph is read-only; a destructive tool needs a call id, and
	// runs once per call id.
	out, err := bus.CallTool(ctx, nc, res.NS, "memory", "read_graph", mesh.ToolRequest{}, nil)
	if err != nil {
		panic(err) // mesh.ErrToolUnavailable until the server is up
	}
	fmt.Println(out.Text)

	stop()
	if err := <-done; err != nil {
		panic(err)
	}
}
