package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ToolEntry is one tool of the catalog: what the tools bucket holds under
// <server>.<tool token>.
type ToolEntry struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema is the tool's declared structured output, if any.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations are the MCP hints as the server sent them.
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	// DestructiveHint is the effective hint: true when a call needs approval.
	DestructiveHint bool `json:"destructiveHint"`
	// ReadOnlyHint is the effective read-only hint.
	ReadOnlyHint bool `json:"readOnlyHint"`
	// ForwardAuth: the host sends the caller's Authorization to this tool's
	// MCP server (a streamable HTTP server), so a call carries it; calls to
	// other tools never do.
	ForwardAuth bool `json:"forward_auth,omitempty"`
	// Host is the node that last published the entry.
	Host      string    `json:"host,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ToolAnnotations are the MCP tool hints. Absent hints keep their MCP
// defaults: readOnly false, destructive true, idempotent false, openWorld true.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// ReadOnly is the effective readOnlyHint.
func (a *ToolAnnotations) ReadOnly() bool {
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint
}

// Destructive reports whether a call of the tool needs a person's
// approval: its effective destructiveHint says so, or, read from its
// annotations with MCP's defaults, it is neither read-only nor declared not
// destructive. Either saying so is enough.
func (t *ToolEntry) Destructive() bool {
	return t.DestructiveHint || !t.ReadOnlyHint && t.Annotations.Destructive()
}

// Destructive is the effective destructiveHint as MCP defines it: a tool that
// is not read-only is destructive unless it says destructiveHint: false.
func (a *ToolAnnotations) Destructive() bool {
	if a.ReadOnly() {
		return false
	}
	return a == nil || a.DestructiveHint == nil || *a.DestructiveHint
}

// decodeToolEntry reads the catalog entry stored under key. ok is false for
// a value that is not an entry, or is the entry of another key: only a tool
// host writes the bucket, and an entry is believed only where it belongs.
func decodeToolEntry(key string, value []byte) (t ToolEntry, ok bool) {
	if json.Unmarshal(value, &t) != nil {
		return ToolEntry{}, false
	}
	if k, err := ToolKey(t.Server, t.Name); err != nil || k != key || t.Name == "" {
		return ToolEntry{}, false
	}
	return t, true
}

// ToolKey is the key of a tool in the tools bucket: <server>.<tool token>.
func ToolKey(server, tool string) (string, error) {
	if err := CheckToken(server); err != nil {
		return "", err
	}
	return server + "." + ToolToken(tool), nil
}

// Catalog reads the tools bucket.
type Catalog struct {
	kv jetstream.KeyValue
}

// NewCatalog returns a reader of the tools bucket.
func NewCatalog(kv jetstream.KeyValue) *Catalog { return &Catalog{kv: kv} }

// List returns every tool, ordered by server then name. A value that is not
// the entry of its key is left out.
func (c *Catalog) List(ctx context.Context) ([]ToolEntry, error) {
	keys, err := c.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	var out []ToolEntry
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
func SortTools(ts []ToolEntry) {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Server != ts[j].Server {
			return ts[i].Server < ts[j].Server
		}
		return ts[i].Name < ts[j].Name
	})
}

// Watch keeps fn informed of the catalog: it is called with the whole catalog
// once the bucket's current content is read, and again after every change,
// until ctx ends.
func (c *Catalog) Watch(ctx context.Context, fn func([]ToolEntry)) error {
	// Only the watch's goroutine touches tools and ready.
	tools := map[string]ToolEntry{}
	ready := false
	publish := func() {
		out := make([]ToolEntry, 0, len(tools))
		for _, t := range tools {
			out = append(out, t)
		}
		SortTools(out)
		fn(out)
	}
	err := WatchKV(ctx, c.kv, ">", func(e jetstream.KeyValueEntry) {
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
	}, func() {
		ready = true
		publish()
	})
	if err != nil {
		return fmt.Errorf("watch tools: %w", err)
	}
	return nil
}
