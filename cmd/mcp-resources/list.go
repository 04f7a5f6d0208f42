package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// resources_list is the tool a turn calls, so it is served by a plain
// handler (mcp.Server.AddTool) rather than the SDK's typed one
// (mcp.AddTool), which decoded the arguments three times, each with a new
// 32 KiB buffer, and decoded, validated and encoded again the output it had
// just encoded: most of the server's CPU for a call, much of it the
// collector's. The handler does what the typed path did, with the same
// schemas and the same answers, byte for byte (TestListAsTyped):
//
//   - the arguments are validated against the input schema (defaults
//     applied first), and a failure is an isError result "validating
//     \"arguments\": …";
//   - the output is listOutput encoded with its keys sorted (the typed path
//     encoded it from a map), as structuredContent and as one text block.
//
// It skips only the check of its own output against the output schema,
// which TestListOutputSchema makes once.

// listSchemas are resources_list's schemas, inferred from listInput and
// listOutput as mcp.AddTool infers them, and the input schema resolved.
var listSchemas = func() (s struct {
	in, out    *jsonschema.Schema
	inResolved *jsonschema.Resolved
}) {
	var err error
	if s.in, err = jsonschema.For[listInput](&jsonschema.ForOptions{}); err != nil {
		panic(fmt.Sprintf("resources_list input schema: %v", err))
	}
	if s.out, err = jsonschema.For[listOutput](&jsonschema.ForOptions{}); err != nil {
		panic(fmt.Sprintf("resources_list output schema: %v", err))
	}
	if s.inResolved, err = s.in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
		panic(fmt.Sprintf("resources_list input schema: %v", err))
	}
	return s
}()

// withListSchemas sets t's input and output schemas to resources_list's.
func withListSchemas(t *mcp.Tool) *mcp.Tool {
	t.InputSchema, t.OutputSchema = listSchemas.in, listSchemas.out
	return t
}

// list handles resources_list. A tool failure is an isError result.
func (t *tools) list(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	in, err := listArguments(req.Params.Arguments)
	if err != nil {
		return toolError(fmt.Errorf("validating \"arguments\": %w", err)), nil
	}
	rs, err := t.store.list(ctx, in.Pattern)
	if err != nil {
		t.logFailure(toolList, "", err)
		return toolError(err), nil
	}
	out, err := json.Marshal(listWireOf(rs))
	if err != nil {
		return nil, fmt.Errorf("marshaling output: %w", err)
	}
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(out),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(out)}},
	}, nil
}

// listArguments decodes and validates the arguments of resources_list, as
// mcp.AddTool's handler does, with the SDK's decoder (segmentio's) so that
// a refusal reads the same, but without the SDK's stream decoder and its
// buffer.
func listArguments(raw json.RawMessage) (listInput, error) {
	args := map[string]any{}
	if len(raw) > 0 {
		if err := segjson.Unmarshal(raw, &args); err != nil {
			return listInput{}, fmt.Errorf("unmarshaling arguments: %w", err)
		}
	}
	v := any(args)
	if err := listSchemas.inResolved.ApplyDefaults(&v); err != nil {
		return listInput{}, fmt.Errorf("applying schema defaults:\n%w", err)
	}
	if err := listSchemas.inResolved.Validate(&v); err != nil {
		return listInput{}, err
	}
	// The schema allows no other property, and pattern only as a string.
	pattern, _ := args["pattern"].(string)
	return listInput{Pattern: pattern}, nil
}

// toolError is the isError result of err.
func toolError(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}

// listWire is listOutput as the typed path wrote it: keys in sorted order.
type listWire struct {
	Count     int            `json:"count"`
	Resources []resourceWire `json:"resources"`
}

// resourceWire is a resource with its keys in sorted order.
type resourceWire struct {
	CreatedAt string `json:"created_at"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	UpdatedAt string `json:"updated_at"`
	Value     int64  `json:"value"`
}

func listWireOf(rs []resource) listWire {
	w := listWire{Count: len(rs), Resources: make([]resourceWire, len(rs))}
	for i, r := range rs {
		w.Resources[i] = resourceWire{CreatedAt: r.CreatedAt, ID: r.ID, Name: r.Name, UpdatedAt: r.UpdatedAt, Value: r.Value}
	}
	return w
}
