package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// typedListServer serves resources_list through the SDK's typed path
// (mcp.AddTool), as the server did before list.go: the reference that the
// plain handler must match.
func typedListServer(st *store) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-resources", Title: "Resources", Version: serverVersion}, nil)
	mcp.AddTool(s, listTool(), func(ctx context.Context, _ *mcp.CallToolRequest, in listInput) (*mcp.CallToolResult, listOutput, error) {
		rs, err := st.list(ctx, in.Pattern)
		if err != nil {
			return nil, listOutput{}, err
		}
		return nil, listOutput{Resources: rs, Count: len(rs)}, nil
	})
	return s
}

// connectServer serves s over in-memory transports and returns a client
// session, closed when the test ends.
func connectServer(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	clientT, serverT := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), serverT, nil)
	if err != nil {
		t.Fatalf("server Connect: %v", err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), clientT, nil)
	if err != nil {
		t.Fatalf("client Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// listToolJSON is the resources_list entry of tools/list, as JSON.
func listToolJSON(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	for _, tool := range res.Tools {
		if tool.Name == toolList {
			data, err := json.Marshal(tool)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
	t.Fatalf("no %s in tools/list", toolList)
	return ""
}

// TestListAsTyped: the plain handler of resources_list advertises the same
// tool and answers every call, good or bad, with the same bytes as the
// SDK's typed path.
func TestListAsTyped(t *testing.T) {
	st, _ := newTestStore(t)
	got := connectServer(t, newServer(st, zerolog.Nop()))
	want := connectServer(t, typedListServer(st))

	if g, w := listToolJSON(t, got), listToolJSON(t, want); g != w {
		t.Errorf("tools/list entry\n got %s\nwant %s", g, w)
	}
	check := func(name string, args any) {
		t.Helper()
		var results [2]string
		for i, cs := range []*mcp.ClientSession{got, want} {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Meta: mcp.Meta{callIDMetaKey: "c1"}, Name: toolList, Arguments: args})
			if err != nil {
				t.Fatalf("%s: CallTool: %v", name, err)
			}
			data, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			results[i] = string(data)
		}
		if results[0] != results[1] {
			t.Errorf("%s:\n got %s\nwant %s", name, results[0], results[1])
		}
	}
	check("empty store", nil)
	mustAdd(t, st, "web", 10)
	mustAdd(t, st, "db <&> \"quoted\" é", -42)
	mustAdd(t, st, "big", 1<<40)
	for _, c := range []struct {
		name string
		args any
	}{
		{"no arguments", nil},
		{"empty arguments", map[string]any{}},
		{"pattern", map[string]any{"pattern": "^w"}},
		{"pattern matching nothing", map[string]any{"pattern": "^zzz$"}},
		{"empty pattern", map[string]any{"pattern": ""}},
		{"bad pattern", map[string]any{"pattern": "("}},
		{"pattern not a string", map[string]any{"pattern": 5}},
		{"null pattern", map[string]any{"pattern": nil}},
		{"unknown argument", map[string]any{"colour": "red"}},
		{"arguments not an object", []any{1}},
		{"arguments a string", "all"},
	} {
		check(c.name, c.args)
	}
}

// TestListOutputSchema: what resources_list answers conforms to the output
// schema it advertises (the typed path checked this on every call).
func TestListOutputSchema(t *testing.T) {
	st, _ := newTestStore(t)
	cs := connectInMemory(t, st)
	mustAdd(t, st, "web", 10)
	mustAdd(t, st, "db", -1)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var schema *jsonschema.Schema
	for _, tool := range res.Tools {
		if tool.Name == toolList {
			data, _ := json.Marshal(tool.OutputSchema)
			if err := json.Unmarshal(data, &schema); err != nil {
				t.Fatalf("output schema %s: %v", data, err)
			}
		}
	}
	if schema == nil {
		t.Fatal("resources_list has no output schema")
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"", "^w", "^none$"} {
		var out any
		decodeResult(t, callTool(t, cs, toolList, map[string]any{"pattern": pattern}, nil), &out)
		if err := resolved.Validate(&out); err != nil {
			t.Errorf("list(%q) = %v: %v", pattern, out, err)
		}
	}
}
