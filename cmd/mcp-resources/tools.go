package main

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// Tool names.
const (
	toolList   = "resources_list"
	toolAdd    = "resources_add"
	toolRemove = "resources_remove"
)

// Keys of _meta.
const (
	// callIDMetaKey, in a tools/call request, identifies the call; the mesh
	// sends the same id when it sends a call again.
	callIDMetaKey = "agentmesh/call_id"
	// replayedMetaKey, in a result, is true when the result is the recorded
	// one of an earlier call with the same call id.
	replayedMetaKey = "agentmesh/replayed"
)

// serverVersion is reported in the initialize result.
const serverVersion = "1.0.0"

// listInput is the arguments of resources_list.
type listInput struct {
	Pattern string `json:"pattern,omitempty" jsonschema:"regular expression (RE2 syntax) matched anywhere in the resource name; use ^name$ for an exact name; omit to list all resources"`
}

// listOutput is the result of resources_list.
type listOutput struct {
	Resources []resource `json:"resources" jsonschema:"matching resources ordered by name"`
	Count     int        `json:"count" jsonschema:"number of resources returned"`
}

// addInput is the arguments of resources_add.
type addInput struct {
	Name  string `json:"name" jsonschema:"name of the new resource"`
	Value int64  `json:"value" jsonschema:"integer value of the new resource"`
}

// removeInput is the arguments of resources_remove.
type removeInput struct {
	ID      string `json:"id,omitempty" jsonschema:"id of the resource to remove, as returned by resources_list or resources_add"`
	Pattern string `json:"pattern,omitempty" jsonschema:"regular expression (RE2 syntax) matched anywhere in the name; every matching resource is removed; use ^name$ for an exact name; given with id, the resource is removed only if its name matches"`
}

// tools serves the three tools from a store.
type tools struct {
	store *store
	log   zerolog.Logger
}

// listTool is resources_list's entry without its schemas.
func listTool() *mcp.Tool {
	closed := false
	return &mcp.Tool{
		Name:        toolList,
		Title:       "List resources",
		Description: "List resources, optionally filtered by a name pattern (regular expression)",
		Annotations: &mcp.ToolAnnotations{
			Title:          "List resources",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  &closed,
		},
	}
}

// newServer returns an MCP server offering the resources tools backed by st.
func newServer(st *store, log zerolog.Logger) *mcp.Server {
	t := &tools{store: st, log: log}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-resources", Title: "Resources", Version: serverVersion}, &mcp.ServerOptions{
		Instructions: "Manages named integer resources stored in SQLite: list them, add one, remove by id or name pattern.",
	})
	s.AddTool(withListSchemas(listTool()), t.list)
	closed, destructive := false, true
	mcp.AddTool(s, &mcp.Tool{
		Name:        toolAdd,
		Title:       "Add resource",
		Description: "Add (create) a new resource with a name and an integer value",
		Annotations: &mcp.ToolAnnotations{
			Title:           "Add resource",
			ReadOnlyHint:    false,
			DestructiveHint: &destructive,
			OpenWorldHint:   &closed,
		},
	}, t.add)
	mcp.AddTool(s, &mcp.Tool{
		Name:        toolRemove,
		Title:       "Remove resources",
		Description: "Remove (delete) resources by id or by name pattern (regular expression)",
		Annotations: &mcp.ToolAnnotations{
			Title:           "Remove resources",
			ReadOnlyHint:    false,
			DestructiveHint: &destructive,
			OpenWorldHint:   &closed,
		},
	}, t.remove)
	return s
}

// add handles resources_add.
func (t *tools) add(ctx context.Context, req *mcp.CallToolRequest, in addInput) (*mcp.CallToolResult, resource, error) {
	callID, err := callIDOf(req)
	if err != nil {
		return nil, resource{}, err
	}
	r, replayed, err := t.store.add(ctx, callID, in.Name, in.Value)
	if err != nil {
		t.logFailure(toolAdd, callID, err)
		return nil, resource{}, err
	}
	t.log.Info().Str("tool", toolAdd).Str("call_id", callID).Str("id", r.ID).Bool("replayed", replayed).Msg("added")
	return resultMeta(replayed), r, nil
}

// remove handles resources_remove.
func (t *tools) remove(ctx context.Context, req *mcp.CallToolRequest, in removeInput) (*mcp.CallToolResult, removal, error) {
	callID, err := callIDOf(req)
	if err != nil {
		return nil, removal{}, err
	}
	rm, replayed, err := t.store.remove(ctx, callID, in.ID, in.Pattern)
	if err != nil {
		t.logFailure(toolRemove, callID, err)
		return nil, removal{}, err
	}
	t.log.Info().Str("tool", toolRemove).Str("call_id", callID).Strs("ids", rm.RemovedIDs).Bool("replayed", replayed).Msg("removed")
	return resultMeta(replayed), rm, nil
}

// logFailure logs errors that are not the caller's mistake; the caller's
// mistakes are only reported to it.
func (t *tools) logFailure(tool, callID string, err error) {
	for _, e := range []error{ErrEmptyName, ErrBadPattern, ErrNoSelector, ErrBadCallID, ErrCallIDReused} {
		if errors.Is(err, e) {
			return
		}
	}
	t.log.Error().Str("tool", tool).Str("call_id", callID).Err(err).Msg("tool failed")
}

// callIDOf returns the call id in the request's _meta, or "" when absent.
func callIDOf(req *mcp.CallToolRequest) (string, error) {
	if req == nil || req.Params == nil {
		return "", nil
	}
	v, ok := req.Params.Meta[callIDMetaKey]
	if !ok || v == nil {
		return "", nil
	}
	id, ok := v.(string)
	if !ok || id == "" {
		return "", ErrBadCallID
	}
	return id, nil
}

// resultMeta returns a result carrying only _meta (the SDK fills in the
// content from the typed output), or nil when there is nothing to say.
func resultMeta(replayed bool) *mcp.CallToolResult {
	if !replayed {
		return nil
	}
	return &mcp.CallToolResult{Meta: mcp.Meta{replayedMetaKey: true}}
}
