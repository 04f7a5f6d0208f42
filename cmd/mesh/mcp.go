package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

const mcpLong = `Serve a running mesh to an MCP client that starts its servers as
commands (Claude Desktop, Claude Code, VS Code, Cursor …): an MCP server on
stdin and stdout whose tools are the mesh's agents and group chats, each
call a turn of a conversation. It reaches the mesh as the other commands
do (MESH_URL or --url, MESH_TOKEN or --token-file, or the context ` + "`mesh up`" + `
wrote) and relays to the bridge's /mcp: progress while a turn runs, and a
cancelled call cancels the turn. A client that speaks Streamable HTTP can
use <bridge>/mcp directly instead.

In Claude Desktop's claude_desktop_config.json:

  {"mcpServers": {"mesh": {"command": "mesh", "args": ["mcp"],
    "env": {"MESH_URL": "http://127.0.0.1:8080", "MESH_TOKEN": "…"}}}}`

func mcpCommand(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "serve the mesh's agents to an MCP client over stdio",
		Long:  mcpLong,
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return runMCP(cmd.Context(), o) },
	}
	o.httpFlags(cmd)
	return cmd
}

// runMCP relays an MCP client on stdio to the bridge's /mcp: it lists the
// bridge's tools once, serves the same tools, and sends each call on,
// with its progress token, relaying the progress back.
func runMCP(ctx context.Context, o *clientOptions) error {
	bc, err := o.bridge()
	if err != nil {
		return err
	}
	// A progress notification of the bridge goes to the local session whose
	// call carried that token.
	var waiting sync.Map // progress token → *mcp.ServerSession
	remote := mcp.NewClient(&mcp.Implementation{Name: "mesh-mcp", Version: version}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			if ss, ok := waiting.Load(req.Params.ProgressToken); ok {
				_ = ss.(*mcp.ServerSession).NotifyProgress(ctx, req.Params)
			}
		},
	})
	hc := &http.Client{Transport: bearerTransport{token: bc.token}}
	cs, err := remote.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: bc.base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		return fmt.Errorf("no MCP server at %s/mcp: %w (%s)", bc.base, err, whereHint)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the mesh's tools: %w", err)
	}
	instructions := ""
	if init := cs.InitializeResult(); init != nil {
		instructions = init.Instructions
	}
	local := mcp.NewServer(&mcp.Implementation{Name: "agentmesh", Title: "Agent Mesh", Version: version}, &mcp.ServerOptions{Instructions: instructions})
	for _, t := range tools.Tools {
		local.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p := &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments}
			if tok := req.Params.GetProgressToken(); tok != nil {
				p.SetProgressToken(sdkToken(tok))
				waiting.Store(tok, req.Session)
				defer waiting.Delete(tok)
			}
			return cs.CallTool(ctx, p)
		})
	}
	return local.Run(ctx, &mcp.StdioTransport{})
}

// bearerTransport adds the bearer token to every request.
type bearerTransport struct{ token string }

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token == "" {
		return http.DefaultTransport.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}

// sdkToken is a progress token as the SDK takes it to send on: a string, or
// an integer (JSON numbers decode as float64).
func sdkToken(tok any) any {
	if f, ok := tok.(float64); ok {
		if f == math.Trunc(f) {
			return int64(f)
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return tok
}
