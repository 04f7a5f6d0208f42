package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// Nodes reads the nodes bucket.
type Nodes struct{ kv jetstream.KeyValue }

// NewNodes returns a reader of the nodes bucket.
func NewNodes(kv jetstream.KeyValue) *Nodes { return &Nodes{kv: kv} }

// List returns every node the bucket knows, live or marked down.
func (n *Nodes) List(ctx context.Context) ([]mesh.NodeInfo, error) {
	keys, err := n.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []mesh.NodeInfo
	for key := range keys.Keys() {
		if strings.HasPrefix(key, "_mesh.") {
			continue
		}
		e, err := n.kv.Get(ctx, key)
		if err != nil {
			continue
		}
		var info mesh.NodeInfo
		if json.Unmarshal(e.Value(), &info) == nil {
			out = append(out, info)
		}
	}
	return out, nil
}

// Degraded returns the degradation in force, or nil.
func (n *Nodes) Degraded(ctx context.Context) (*mesh.Degradation, error) {
	e, err := n.kv.Get(ctx, mesh.DegradedKey)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	var d mesh.Degradation
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}
