package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as an MCP server when testMCPEnv is set, so tests
// can have a tool whose timing they control: items_list blocks until the file
// named by testGateEnv exists, and appends a line to testCallsEnv per call.
const (
	testMCPEnv   = "MESH_TEST_MCP"
	testGateEnv  = "MESH_TEST_GATE"
	testCallsEnv = "MESH_TEST_CALLS"
)

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
		if f, err := os.OpenFile(os.Getenv(testCallsEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano))
			_ = f.Close()
		}
		for {
			if _, err := os.Stat(os.Getenv(testGateEnv)); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return nil, itemsOutput{}, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		return nil, itemsOutput{Items: []string{"alpha", "beta"}, Count: 2}, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
