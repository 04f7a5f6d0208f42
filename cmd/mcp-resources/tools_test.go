package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// connectInMemory serves st over in-memory transports and returns a client
// session, closed when the test ends.
func connectInMemory(t *testing.T, st *store) *mcp.ClientSession {
	t.Helper()
	return connectServer(t, newServer(st, zerolog.Nop()))
}

// callTool calls a tool and fails the test on a protocol error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Meta: meta, Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s, %v): protocol error %v, want a result", name, args, err)
	}
	return res
}

// textOf joins the text blocks of a result.
func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured returns the result's structuredContent as JSON, after checking
// that the call succeeded and that the text block holds the same JSON.
func structured(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error %q, want success", textOf(res))
	}
	got, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("marshal structuredContent: %v", err)
	}
	var fromText, fromStructured any
	if err := json.Unmarshal([]byte(textOf(res)), &fromText); err != nil {
		t.Fatalf("text content %q is not JSON: %v", textOf(res), err)
	}
	if err := json.Unmarshal(got, &fromStructured); err != nil {
		t.Fatalf("structuredContent %s: %v", got, err)
	}
	if !reflect.DeepEqual(fromText, fromStructured) {
		t.Errorf("text content %s differs from structuredContent %s", textOf(res), got)
	}
	return string(got)
}

// decodeResult decodes the result's structuredContent into v.
func decodeResult(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(structured(t, res)), v); err != nil {
		t.Fatalf("decode structuredContent: %v", err)
	}
}

func TestToolErrors(t *testing.T) {
	st, path := newTestStore(t)
	if _, _, err := st.add(t.Context(), "used-by-add", "seed", 1); err != nil {
		t.Fatalf("seed: %v", err)
	}
	cs := connectInMemory(t, st)

	tests := []struct {
		name     string
		tool     string
		args     map[string]any
		meta     mcp.Meta
		wantText string
	}{
		{name: "add without name", tool: toolAdd, args: map[string]any{"value": 1}, wantText: "name"},
		{name: "add without value", tool: toolAdd, args: map[string]any{"name": "x"}, wantText: "value"},
		{name: "add blank name", tool: toolAdd, args: map[string]any{"name": "  ", "value": 1}, wantText: ErrEmptyName.Error()},
		{name: "add fractional value", tool: toolAdd, args: map[string]any{"name": "x", "value": 1.5}, wantText: "integer"},
		{name: "add string value", tool: toolAdd, args: map[string]any{"name": "x", "value": "ten"}, wantText: "integer"},
		{name: "add unknown argument", tool: toolAdd, args: map[string]any{"name": "x", "value": 1, "colour": "red"}, wantText: "colour"},
		{name: "add call id not a string", tool: toolAdd, args: map[string]any{"name": "x", "value": 1}, meta: mcp.Meta{callIDMetaKey: 42}, wantText: callIDMetaKey},
		{name: "add empty call id", tool: toolAdd, args: map[string]any{"name": "x", "value": 1}, meta: mcp.Meta{callIDMetaKey: ""}, wantText: callIDMetaKey},
		{name: "list bad pattern", tool: toolList, args: map[string]any{"pattern": "("}, wantText: "invalid pattern"},
		{name: "remove without selector", tool: toolRemove, args: map[string]any{}, wantText: ErrNoSelector.Error()},
		{name: "remove bad pattern", tool: toolRemove, args: map[string]any{"pattern": "[a-"}, wantText: "invalid pattern"},
		{name: "remove with an add's call id", tool: toolRemove, args: map[string]any{"pattern": "."}, meta: mcp.Meta{callIDMetaKey: "used-by-add"}, wantText: ErrCallIDReused.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callTool(t, cs, tt.tool, tt.args, tt.meta)
			if !res.IsError {
				t.Fatalf("result %q: isError false, want true", textOf(res))
			}
			if got := textOf(res); !strings.Contains(got, tt.wantText) {
				t.Errorf("error text %q does not contain %q", got, tt.wantText)
			}
		})
	}
	if n := countRows(t, path, "resources"); n != 1 {
		t.Errorf("resources has %d rows after failed calls, want only the seed", n)
	}
}

func TestToolResults(t *testing.T) {
	st, _ := newTestStore(t)
	cs := connectInMemory(t, st)

	if got, want := structured(t, callTool(t, cs, toolList, nil, nil)), `{"count":0,"resources":[]}`; got != want {
		t.Errorf("list on empty store = %s, want %s", got, want)
	}
	if got, want := structured(t, callTool(t, cs, toolRemove, map[string]any{"pattern": "x"}, nil)), `{"removed_count":0,"removed_ids":[]}`; got != want {
		t.Errorf("remove matching nothing = %s, want %s", got, want)
	}

	var added resource
	decodeResult(t, callTool(t, cs, toolAdd, map[string]any{"name": "web", "value": 10}, nil), &added)
	if want := (resource{ID: added.ID, Name: "web", Value: 10, CreatedAt: wantStamp, UpdatedAt: wantStamp}); added != want || !idPattern.MatchString(added.ID) {
		t.Errorf("add = %+v, want %+v with an id matching %s", added, want, idPattern)
	}

	var listed listOutput
	decodeResult(t, callTool(t, cs, toolList, map[string]any{"pattern": "^w"}, nil), &listed)
	if want := (listOutput{Resources: []resource{added}, Count: 1}); !reflect.DeepEqual(listed, want) {
		t.Errorf("list(^w) = %+v, want %+v", listed, want)
	}

	var removed removal
	decodeResult(t, callTool(t, cs, toolRemove, map[string]any{"id": added.ID}, nil), &removed)
	if want := (removal{RemovedCount: 1, RemovedIDs: []string{added.ID}}); !reflect.DeepEqual(removed, want) {
		t.Errorf("remove(id) = %+v, want %+v", removed, want)
	}
}

func TestToolCallIDReplay(t *testing.T) {
	tests := []struct {
		name string
		tool string
		args map[string]any
	}{
		{name: "add", tool: toolAdd, args: map[string]any{"name": "web", "value": 1}},
		{name: "remove", tool: toolRemove, args: map[string]any{"pattern": "^seed$"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, path := newTestStore(t)
			mustAdd(t, st, "seed", 0)
			cs := connectInMemory(t, st)
			meta := mcp.Meta{callIDMetaKey: "call-" + tt.name}

			first := callTool(t, cs, tt.tool, tt.args, meta)
			firstJSON := structured(t, first)
			if first.Meta[replayedMetaKey] != nil {
				t.Errorf("first call _meta = %v, want no %q", first.Meta, replayedMetaKey)
			}
			mustAdd(t, st, "seed", 0) // would be removed by a second run of remove

			again := callTool(t, cs, tt.tool, tt.args, meta)
			if got := structured(t, again); got != firstJSON {
				t.Errorf("repeated call = %s, want the first result %s", got, firstJSON)
			}
			if again.Meta[replayedMetaKey] != true {
				t.Errorf("repeated call _meta = %v, want %q: true", again.Meta, replayedMetaKey)
			}
			want := 1 // remove: only the second seed is left
			if tt.tool == toolAdd {
				want = 3 // add: both seeds and one web
			}
			if n := countRows(t, path, "resources"); n != want {
				t.Errorf("resources has %d rows, want %d", n, want)
			}
			if n := countRows(t, path, "calls"); n != 1 {
				t.Errorf("calls has %d rows, want 1", n)
			}
		})
	}
}

func TestListIgnoresCallID(t *testing.T) {
	st, path := newTestStore(t)
	cs := connectInMemory(t, st)
	for range 2 {
		structured(t, callTool(t, cs, toolList, nil, mcp.Meta{callIDMetaKey: "list-1"}))
	}
	if n := countRows(t, path, "calls"); n != 0 {
		t.Errorf("calls has %d rows after lists, want 0", n)
	}
}
