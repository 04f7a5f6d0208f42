package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// decodeToolEntry reads the catalog entry stored under key. ok is false for
// a value that is not an entry, or is the entry of another key: only a tool
// host writes the bucket, and an entry is believed only where it belongs.
func decodeToolEntry(key string, value []byte) (t mesh.ToolEntry, ok bool) {
	if json.Unmarshal(value, &t) != nil {
		return mesh.ToolEntry{}, false
	}
	if k, err := mesh.ToolKey(t.Server, t.Name); err != nil || k != key || t.Name == "" {
		return mesh.ToolEntry{}, false
	}
	return t, true
}

// Catalog reads the tools bucket.
type Catalog struct {
	kv jetstream.KeyValue
}

// NewCatalog returns a reader of the tools bucket.
func NewCatalog(kv jetstream.KeyValue) *Catalog { return &Catalog{kv: kv} }

// List returns every tool, ordered by server then name. A value that is not
// the entry of its key is left out.
func (c *Catalog) List(ctx context.Context) ([]mesh.ToolEntry, error) {
	keys, err := c.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	var out []mesh.ToolEntry
	for key := range keys.Keys() {
		e, err := c.kv.Get(ctx, key)
		if err != nil {
			continue // deleted between the listing and the read
		}
		if t, ok := decodeToolEntry(key, e.Value()); ok {
			out = append(out, t)
		}
	}
	SortTools(out)
	return out, nil
}

// SortTools orders tools by server, then name.
func SortTools(ts []mesh.ToolEntry) {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Server != ts[j].Server {
			return ts[i].Server < ts[j].Server
		}
		return ts[i].Name < ts[j].Name
	})
}

// catalogReopen is the pause before a catalog watch is opened again.
const catalogReopen = time.Second

// Watch keeps fn informed of the catalog: it is called with the whole catalog
// once the bucket's current content is read, and again after every change,
// until ctx ends.
func (c *Catalog) Watch(ctx context.Context, fn func([]mesh.ToolEntry)) error {
	// Only the watch's goroutine touches tools and ready.
	tools := map[string]mesh.ToolEntry{}
	ready := false
	publish := func() {
		out := make([]mesh.ToolEntry, 0, len(tools))
		for _, t := range tools {
			out = append(out, t)
		}
		SortTools(out)
		fn(out)
	}
	// A watch that could not open, or that ended (a reconnection, a
	// leader's election), is opened again: the catalog starts over from
	// the bucket, and fn gets it once whole again.
	_, err := WatchKV(ctx, c.kv, KVWatch{Reopen: catalogReopen, KeepTrying: true, Opened: func() {
		tools = map[string]mesh.ToolEntry{}
		ready = false
	}, Apply: func(e jetstream.KeyValueEntry) {
		if e.Operation() != jetstream.KeyValuePut {
			delete(tools, e.Key())
		} else {
			if t, ok := decodeToolEntry(e.Key(), e.Value()); ok {
				tools[e.Key()] = t
			} else {
				delete(tools, e.Key())
			}
		}
		if ready {
			publish()
		}
	}, Synced: func() {
		ready = true
		publish()
	}})
	if err != nil {
		return fmt.Errorf("watch tools: %w", err)
	}
	return nil
}
