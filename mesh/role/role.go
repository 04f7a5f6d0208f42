// Package role holds what every role of the mesh is given by the process
// it runs in: its connections to NATS, the mesh's names, its node id and
// its logger ([Node]).
//
// Each role's Config embeds a Node, so cmd/mesh fills it once per process
// and hands the same one to the role, and to its heartbeat:
//
//	agent.New(agent.Config{Node: n, Resources: res, Agent: cfg, Provider: p})
//
// A Node only carries: each role's New says which of its fields it needs
// and applies the defaults documented on them. The package does no I/O and
// starts no goroutine.
package role

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
)

// Node is what a role is given by the process, the node, it runs in.
type Node struct {
	// NC is the process's connection to NATS, on the role's own identity.
	NC *nats.Conn
	// Responder is the connection the role answers requests on (its
	// services, liveness probes): its responder identity, which may publish
	// nothing but answers to inboxes (identity.ResponderSuffix). Nil means
	// NC.
	Responder *nats.Conn
	// JS is JetStream over NC.
	JS jetstream.JetStream
	// NS names the mesh's subjects, streams and buckets. The zero value
	// means the namespace of the resources the role is given, else
	// mesh.DefaultNamespace().
	NS mesh.Namespace
	// NodeID names this process: in its heartbeats, its service metadata
	// and on the work it takes.
	NodeID string
	// Logger receives the role's logs. The zero value discards them.
	Logger zerolog.Logger
}
