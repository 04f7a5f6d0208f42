package toolhost

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// The test binary doubles as the MCP server of the tests: run with
// envServer=stdio, it serves testServer over stdin/stdout and exits.
const (
	envServer  = "TOOLHOST_TEST_SERVER"
	envCounter = "TOOLHOST_TEST_COUNTER"
	// envHost makes the test binary a toolhost on the NATS server at its
	// value, hosting testServer as server "orphan" until it is killed.
	envHost = "TOOLHOST_TEST_HOST"
	// envLinger makes the stdio server keep running after its input ends.
	envLinger = "TOOLHOST_TEST_LINGER"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envHost); url != "" {
		os.Exit(runTestHost(url))
	}
	if os.Getenv(envServer) == "stdio" {
		fmt.Fprintln(os.Stderr, "test server: up")
		err := testServer(os.Getenv(envCounter), true).Run(context.Background(), &mcp.StdioTransport{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		if os.Getenv(envLinger) != "" {
			select {} // like a server that ignores the end of its input
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type textIn struct {
	Text string `json:"text,omitempty"`
}

type slowIn struct {
	Ms int `json:"ms"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type noIn struct{}

type stateIn struct {
	State any `json:"state"`
}

var yes, no = true, false

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// counterMu serializes counter updates of the in-process HTTP server.
var counterMu sync.Mutex

// count adds one to the number in file, so that tests can count the real
// executions of a tool, across restarts of the server.
func count(file string) int {
	counterMu.Lock()
	defer counterMu.Unlock()
	n := readCount(file) + 1
	if err := os.WriteFile(file, []byte(strconv.Itoa(n)), 0o600); err != nil {
		panic(err)
	}
	return n
}

func readCount(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// testServer has tools of every kind: echo, pid, whoami, fail and slow are
// read-only; count has no annotations (so it is destructive); add is not
// read-only but says it is not destructive; remember (read-only) returns
// its argument state as the state patch of its result's _meta; crash
// (stdio only) exits.
func testServer(counter string, stdio bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "toolhost-test", Version: "1.0.0"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text.", Annotations: ro},
		func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "traceparent", Annotations: ro},
		func(_ context.Context, req *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			tp, _ := req.Params.Meta["traceparent"].(string)
			return text(tp), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Annotations: ro},
		func(_ context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Annotations: ro},
		func(_ context.Context, req *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			if req.Extra == nil || req.Extra.Header == nil {
				return text(""), nil, nil
			}
			return text(req.Extra.Header.Get("Authorization")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Annotations: ro},
		func(_ context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			r := text("boom")
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			}
			return text("slept"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Counts its executions."},
		func(_ context.Context, req *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			n := count(counter)
			return text(fmt.Sprintf("count %d call_id %v", n, req.Params.Meta[mesh.MetaCallID])), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &yes}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(in.A + in.B)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "remember", Description: "Sets the conversation's state.", Annotations: ro},
		func(_ context.Context, _ *mcp.CallToolRequest, in stateIn) (*mcp.CallToolResult, any, error) {
			r := text("remembered")
			r.Meta = mcp.Meta{mesh.StateMetaKey: in.State}
			return r, nil, nil
		})
	if stdio {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server."},
			func(_ context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
				os.Exit(3)
				return nil, nil, nil
			})
	}
	return s
}

// runTestHost runs a toolhost in this process until it is killed.
func runTestHost(url string) int {
	nc, err := nats.Connect(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test host:", err)
		return 1
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test host:", err)
		return 1
	}
	h, err := New(Config{Node: role.Node{NC: nc, JS: js, NodeID: "orphan-host"}, Servers: []config.MCPServer{{
		Name:    "orphan",
		Command: os.Args[0],
		Env:     map[string]string{envHost: "", envServer: "stdio", envCounter: os.DevNull, envLinger: "1"},
	}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test host:", err)
		return 1
	}
	if err := h.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "test host:", err)
		return 1
	}
	return 0
}
