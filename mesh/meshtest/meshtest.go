// Package meshtest starts what the mesh's tests need: an embedded JetStream
// server on a random port with storage in t.TempDir(), connections to it, the
// provisioned streams and buckets, a polling helper that replaces sleeps, a
// runner for roles, an in-memory toolhost of the resources tools, approver
// signing keys, golden files, and what /proc says a process used (proc.go).
package meshtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Server starts an embedded JetStream server that stops when the test ends.
func Server(t testing.TB) *natsserver.Server {
	t.Helper()
	s, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start embedded server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Conn connects to url; the connection closes when the test ends.
func Conn(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Mesh is a provisioned mesh on its own embedded server.
type Mesh struct {
	Server *natsserver.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	NS     mesh.Namespace
	*store.Resources
}

// New starts a server and provisions the default namespace on it.
func New(t testing.TB) *Mesh {
	t.Helper()
	s := Server(t)
	nc := Conn(t, s.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := store.Provision(ctx, js, mesh.DefaultNamespace(), store.ProvisionConfig{})
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	return &Mesh{Server: s, NC: nc, JS: js, NS: mesh.DefaultNamespace(), Resources: r}
}

// Events reads the AG-UI events stored so far for conversation conv, in
// order.
func (m *Mesh) Events(t testing.TB, conv string) []mesh.Event {
	t.Helper()
	subj, err := m.NS.EventsOf(conv)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := m.JS.OrderedConsumer(t.Context(), m.NS.Stream(mesh.StreamEvents), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10000, jetstream.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var out []mesh.Event
	for msg := range batch.Messages() {
		var ev mesh.Event
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// Eventually polls cond every 10 ms until it is true, and fails the test with
// what when it is not true within timeout.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, fmt.Sprintf(what, args...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Run runs a role's Run until the test ends, then stops it and checks it
// returned no error.
func Run(t testing.TB, name string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s Run: %v", name, err)
		}
	})
}

// SigningKey is a fresh approver signing key, as `mesh up` makes one.
func SigningKey(t testing.TB) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}
