package group

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// liveness knows which agents a live process serves, from the agent nodes
// of the nodes bucket: a node's key expires when it stops beating, and a
// monitor marks a node it found dead down.
type liveness struct {
	kv jetstream.KeyValue

	mu    sync.RWMutex
	nodes map[string]mesh.NodeInfo // by key
	// revs are the revisions applied, by key, deletes included: a reload's
	// read must not undo a newer entry the watch applied meanwhile.
	revs map[string]uint64
}

func newLiveness(kv jetstream.KeyValue) *liveness {
	return &liveness{kv: kv, nodes: map[string]mesh.NodeInfo{}, revs: map[string]uint64{}}
}

// start watches the agent nodes until ctx ends; it returns once the
// current ones are known.
func (l *liveness) start(ctx context.Context) error {
	ready := make(chan struct{})
	if _, err := store.WatchKV(ctx, l.kv, store.KVWatch{Keys: mesh.RoleAgent + ".*", Apply: l.apply, Synced: func() { close(ready) }}); err != nil {
		return err
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return errors.New("the nodes bucket did not answer")
	}
}

func (l *liveness) apply(e jetstream.KeyValueEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Revision() <= l.revs[e.Key()] {
		return
	}
	l.revs[e.Key()] = e.Revision()
	if e.Operation() != jetstream.KeyValuePut {
		delete(l.nodes, e.Key())
		return
	}
	var info mesh.NodeInfo
	if json.Unmarshal(e.Value(), &info) != nil {
		return
	}
	l.nodes[e.Key()] = info
}

// reload reads the agent nodes afresh. The watch lags the bucket by a
// moment; a chat posted as the mesh starts must not find every member down.
func (l *liveness) reload(ctx context.Context) error {
	keys, err := l.kv.ListKeysFiltered(ctx, mesh.RoleAgent+".*")
	if err != nil {
		return err
	}
	for key := range keys.Keys() {
		if e, err := l.kv.Get(ctx, key); err == nil {
			l.apply(e)
		}
	}
	return nil
}

// serves reports whether a live process serves agent.
func (l *liveness) serves(agent string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, n := range l.nodes {
		if n.State != mesh.NodeDown && slices.Contains(n.Serves, agent) {
			return true
		}
	}
	return false
}
