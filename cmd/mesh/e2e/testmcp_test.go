package e2e

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/mesh"
)

// The test binary doubles as an MCP server when testMCPEnv is set, so tests
// can have tools whose timing they control and whose calls they count:
//   - items_list (read-only) and items_touch (not read-only, so the
//     toolhost runs it once per call id) block until the file named by
//     testGateEnv exists, and append a line to testCallsEnv per call;
//   - items_count (read-only) answers at once and appends a line to
//     testCountCallsEnv per call;
//   - with testClockEnv set, also clock_in (not destructive), whose result
//     carries an isClockedIn state patch in _meta (agentmesh/state).
const (
	testMCPEnv        = "MESH_TEST_MCP"
	testClockEnv      = "MESH_TEST_CLOCK"
	testGateEnv       = "MESH_TEST_GATE"
	testCallsEnv      = "MESH_TEST_CALLS"
	testCountCallsEnv = "MESH_TEST_COUNT_CALLS"
)

// countCall appends a line to the file named by env.
func countCall(env string) {
	if f, err := os.OpenFile(os.Getenv(env), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano))
		_ = f.Close()
	}
}

// gated counts a call in testCallsEnv, then waits for the gate.
func gated(ctx context.Context) error {
	countCall(testCallsEnv)
	for {
		if _, err := os.Stat(os.Getenv(testGateEnv)); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type itemsInput struct {
	Pattern string `json:"pattern,omitempty" jsonschema:"optional name filter"`
}

type itemsOutput struct {
	Items []string `json:"items"`
	Count int      `json:"count"`
}

func runTestMCPServer() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-items", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "items_list",
		Description: "List items",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ itemsInput) (*mcp.CallToolResult, itemsOutput, error) {
		if err := gated(ctx); err != nil {
			return nil, itemsOutput{}, err
		}
		return nil, itemsOutput{Items: []string{"alpha", "beta"}, Count: 2}, nil
	})
	no := false
	mcp.AddTool(s, &mcp.Tool{
		Name:        "items_touch",
		Description: "List the items, marking each as seen",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ itemsInput) (*mcp.CallToolResult, itemsOutput, error) {
		if err := gated(ctx); err != nil {
			return nil, itemsOutput{}, err
		}
		return nil, itemsOutput{Items: []string{"alpha", "beta"}, Count: 2}, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "items_count",
		Description: "Count the items",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(context.Context, *mcp.CallToolRequest, itemsInput) (*mcp.CallToolResult, itemsOutput, error) {
		countCall(testCountCallsEnv)
		return nil, itemsOutput{Count: 2}, nil
	})
	if os.Getenv(testClockEnv) != "" {
		mcp.AddTool(s, &mcp.Tool{
			Name:        "clock_in",
			Description: "Clock in: start the work shift, setting isClockedIn in the conversation state",
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &no},
		}, func(context.Context, *mcp.CallToolRequest, itemsInput) (*mcp.CallToolResult, any, error) {
			now := time.Now().UTC().Format(time.RFC3339)
			return &mcp.CallToolResult{
				Content: []mcp.Content{&mcp.TextContent{Text: "Clocked in at " + now + "."}},
				Meta:    mcp.Meta{mesh.StateMetaKey: map[string]any{"isClockedIn": true, "lastClockIn": now, "lastClockOut": nil}},
			}, nil, nil
		})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
