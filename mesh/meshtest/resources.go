package meshtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
)

// Resources is a toolhost serving mesh.tool.resources.* from memory, with
// catalog entries shaped like those of cmd/mcp-resources: resources_list is
// read-only, resources_add destructive. Its answers are JSON text with
// stable ids, so that streams are the same each run, and an add sent again
// with the same call id answers as the first did.
type Resources struct {
	mu    sync.Mutex
	items []resource
	seen  map[string]string // call id → first answer
}

type resource struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// StartResources publishes the tools to m's catalog and serves them until
// the test ends; one resource, db-1, exists from the start.
func StartResources(t testing.TB, m *Mesh) *Resources {
	t.Helper()
	r := &Resources{items: []resource{{ID: "res-1", Name: "db-1", Value: 3}}, seen: map[string]string{}}
	for _, e := range []mesh.ToolEntry{
		{
			Server: "resources", Name: "resources_list", Title: "List resources",
			Description:  "List resources, optionally filtered by a name pattern (regular expression)",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string","description":"regular expression (RE2 syntax) matched anywhere in the resource name; use ^name$ for an exact name; omit to list all resources"}}}`),
			ReadOnlyHint: true,
		},
		{
			Server: "resources", Name: "resources_add", Title: "Add resource",
			Description:     "Add (create) a new resource with a name and an integer value",
			InputSchema:     json.RawMessage(`{"type":"object","required":["name","value"],"properties":{"name":{"type":"string","description":"name of the new resource"},"value":{"type":"integer","description":"integer value of the new resource"}}}`),
			DestructiveHint: true,
		},
	} {
		key, err := mesh.ToolKey(e.Server, e.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Tools.Put(t.Context(), key, JSON(e)); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := m.NC.Subscribe("mesh.tool.resources.*", func(msg *nats.Msg) {
		var req mesh.ToolRequest
		if err := json.Unmarshal(msg.Data, &req); err != nil {
			_ = msg.Respond(JSON(mesh.ToolResult{Text: "bad request", IsError: true}))
			return
		}
		tool := msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:]
		_ = msg.Respond(JSON(mesh.ToolResult{Text: r.call(tool, req)}))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

func (r *Resources) call(tool string, req mesh.ToolRequest) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch tool {
	case "resources_list":
		return string(JSON(map[string]any{"resources": r.items, "count": len(r.items)}))
	case "resources_add":
		if prev, ok := r.seen[req.CallID]; ok {
			return prev
		}
		name, _ := req.Arguments["name"].(string)
		value, _ := req.Arguments["value"].(float64)
		res := resource{ID: fmt.Sprintf("res-%d", len(r.items)+1), Name: name, Value: int64(value)}
		r.items = append(r.items, res)
		out := string(JSON(res))
		r.seen[req.CallID] = out
		return out
	}
	return "error: no tool " + tool
}

// Has reports whether a resource of that name exists.
func (r *Resources) Has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range r.items {
		if res.Name == name {
			return true
		}
	}
	return false
}

// JSON encodes v without HTML escaping and without a trailing newline, as
// the mesh's peers write JSON; it panics on a value JSON cannot encode.
func JSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
