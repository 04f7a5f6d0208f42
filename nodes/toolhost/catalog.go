package toolhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// tool is one tool of a connected server, as the endpoints serve it.
type tool struct {
	name     string // the MCP name
	key      string // <server>.<tool token> in the tools bucket
	subject  string // mesh.tool.<server>.<tool token>
	readOnly bool
	entry    mesh.ToolEntry
}

// toolSet is the tools of one connected server by MCP name. It is replaced
// whole, never changed.
type toolSet map[string]*tool

// newTool turns a listed MCP tool into its catalog entry and subject;
// forwardAuth says the server gets the caller's Authorization (HTTP).
func newTool(ns mesh.Namespace, server, node string, t *mcp.Tool, forwardAuth bool, now time.Time) (*tool, error) {
	key, err := mesh.ToolKey(server, t.Name)
	if err != nil {
		return nil, err
	}
	subj, err := ns.Tool(server, t.Name)
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	if bytes.Equal(in, []byte("null")) {
		in = json.RawMessage(`{"type":"object"}`)
	}
	var out json.RawMessage
	if t.OutputSchema != nil {
		if out, err = json.Marshal(t.OutputSchema); err != nil {
			return nil, fmt.Errorf("tool %s: output schema: %w", t.Name, err)
		}
	}
	ann := annotations(t.Annotations)
	e := mesh.ToolEntry{
		Server:          server,
		Name:            t.Name,
		Title:           t.Title,
		Description:     t.Description,
		InputSchema:     in,
		OutputSchema:    out,
		Annotations:     ann,
		DestructiveHint: ann.Destructive(),
		ReadOnlyHint:    ann.ReadOnly(),
		ForwardAuth:     forwardAuth,
		Host:            node,
		UpdatedAt:       now.UTC(),
	}
	return &tool{name: t.Name, key: key, subject: subj, readOnly: e.ReadOnlyHint, entry: e}, nil
}

// annotations converts the SDK's hints. The SDK decodes readOnlyHint and
// idempotentHint into plain booleans, so an absent hint and a false one look
// alike; both mean false, and false is kept as absent.
func annotations(a *mcp.ToolAnnotations) *mesh.ToolAnnotations {
	if a == nil {
		return nil
	}
	out := &mesh.ToolAnnotations{
		Title:           a.Title,
		DestructiveHint: a.DestructiveHint,
		OpenWorldHint:   a.OpenWorldHint,
	}
	if a.ReadOnlyHint {
		out.ReadOnlyHint = &a.ReadOnlyHint
	}
	if a.IdempotentHint {
		out.IdempotentHint = &a.IdempotentHint
	}
	return out
}

// publishCatalog makes the tools bucket hold exactly tools for server. It
// writes an entry only when it changed (apart from its Host and UpdatedAt),
// so replicas of a server do not churn revisions, and deletes the entries of
// tools the server no longer lists.
func publishCatalog(ctx context.Context, kv jetstream.KeyValue, server string, tools toolSet) error {
	stale := map[string]bool{}
	lister, err := kv.ListKeysFiltered(ctx, server+".*")
	if err != nil {
		return fmt.Errorf("list tools of %s: %w", server, err)
	}
	for k := range lister.Keys() {
		stale[k] = true
	}
	_ = lister.Stop() // already stopped once the keys are listed
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list tools of %s: %w", server, err)
	}
	for _, t := range tools {
		delete(stale, t.key)
		if err := putIfChanged(ctx, kv, t.key, t.entry); err != nil {
			return err
		}
	}
	for k := range stale {
		if err := kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("delete tool %s: %w", k, err)
		}
	}
	return nil
}

func putIfChanged(ctx context.Context, kv jetstream.KeyValue, key string, e mesh.ToolEntry) error {
	cur, err := kv.Get(ctx, key)
	switch {
	case err == nil:
		var old mesh.ToolEntry
		if json.Unmarshal(cur.Value(), &old) == nil && sameEntry(old, e) {
			return nil
		}
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
	default:
		return fmt.Errorf("get tool %s: %w", key, err)
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode tool %s: %w", key, err)
	}
	if _, err := kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("put tool %s: %w", key, err)
	}
	return nil
}

// sameEntry compares two entries apart from who published them and when.
func sameEntry(a, b mesh.ToolEntry) bool {
	a.Host, b.Host = "", ""
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(compact(ja), compact(jb))
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// endpointName derives a micro endpoint name (letters, digits, '-', '_')
// from a tool token, unique among taken.
func endpointName(token string, taken map[string]bool) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, token)
	base := name
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	taken[name] = true
	return name
}
