package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// mcpClient connects the official Go SDK's client to the mesh's /mcp,
// collecting the progress notifications it gets.
type mcpClient struct {
	cs       *mcp.ClientSession
	mu       sync.Mutex
	progress []string
}

func connectMCP(t *testing.T, m *meshProc, headers ...string) *mcpClient {
	t.Helper()
	c := &mcpClient{}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params.Message)
			c.mu.Unlock()
		},
	})
	hc := &http.Client{Transport: headerTransport(headers)}
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: m.url("/mcp"), HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	c.cs = cs
	return c
}

// headerTransport adds name, value pairs to every request.
type headerTransport []string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for i := 0; i+1 < len(h); i += 2 {
		r.Header.Set(h[i], h[i+1])
	}
	return http.DefaultTransport.RoundTrip(r)
}

// ask calls an agent's or group's tool and decodes its structured content.
func (c *mcpClient) ask(ctx context.Context, t *testing.T, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any, error) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	p.SetProgressToken("p-" + tool)
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return res, structured(res), nil
}

// structured is a result's structured content as JSON decodes it.
func structured(res *mcp.CallToolResult) map[string]any {
	var out map[string]any
	data, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(data, &out)
	return out
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The official Go SDK's client uses the mesh as an MCP server: the agents
// and group chats are its tools; a call converses with an agent (two calls
// of one conversation, which REST then shows as the caller's), reports the
// turn's events as progress, and a destructive action comes back waiting
// for an approval, which a person decides as for any conversation.
func TestMCPClientConversesWithTheMeshAgents(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: groupConfig(t, teamGroup)})
	c := connectMCP(t, m)
	ctx := t.Context()
	tools, err := c.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "agent_resource-manager") || !slices.Contains(names, "group_team") {
		t.Fatalf("tools %v: want agent_resource-manager and group_team", names)
	}

	res, out, err := c.ask(ctx, t, "agent_resource-manager", map[string]any{"message": "list all resources"})
	if err != nil || res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	conv := str(out, "conversation_id")
	calls := list(out, "tool_calls")
	if conv == "" || str(out, "status") != "active" || len(calls) != 1 || str(calls[0], "name") != "resources_list" || textOf(res) == "" {
		t.Errorf("first answer %q, structured %v: want a conversation, its resources_list call and a reply", textOf(res), out)
	}
	// The client hands notifications to its handler on its own: they may
	// land just after the answer.
	var progress []string
	meshtest.Eventually(t, 5*time.Second, func() bool {
		c.mu.Lock()
		progress = slices.Clone(c.progress)
		c.mu.Unlock()
		return slices.Contains(progress, "calling resources_list") && slices.Contains(progress, "done")
	}, "the progress never held the tool call and the end")

	_, again, err := c.ask(ctx, t, "agent_resource-manager", map[string]any{"message": "list all resources", "conversation_id": conv})
	if err != nil || str(again, "conversation_id") != conv {
		t.Fatalf("second call: %v %v, want conversation %s", err, again, conv)
	}
	rest := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
	if users := messagesOf(rest, "user"); len(users) != 2 {
		t.Errorf("REST shows %d user messages of the MCP conversation, want 2", len(users))
	}

	// A call naming another agent's conversation is refused, and says why.
	res, _, err = c.ask(ctx, t, "group_team", map[string]any{"message": "hi", "conversation_id": conv})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "agent_resource-manager") {
		t.Errorf("group tool on an agent's conversation: %v %q, want an error naming the agent's tool", err, textOf(res))
	}

	// A destructive action waits for a person; deciding it finishes the turn.
	res, pending, err := c.ask(ctx, t, "agent_resource-manager", map[string]any{"message": "create a server mcp-test with value 3", "conversation_id": conv})
	if err != nil || pending["waiting_approval"] != true || str(pending, "approval", "uuid") == "" || !strings.Contains(textOf(res), "approve") {
		t.Fatalf("destructive call: %v %q %v, want it waiting for an approval", err, textOf(res), pending)
	}
	if n := m.resourceRows("mcp-test"); n != 0 {
		t.Fatalf("rows before the decision: %d", n)
	}
	m.do(http.StatusOK, "POST", "/approvals/"+str(pending, "approval", "uuid"), map[string]any{"answer": "yes"})
	if n := m.resourceRows("mcp-test"); n != 1 {
		t.Errorf("rows after the decision: %d, want 1", n)
	}
}

// A client that cancels its call (notifications/cancelled) cancels the
// turn: the tool it was in is not waited for, and the conversation takes
// the next message.
func TestMCPClientCancelsATurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: gateConfig(dir)})
	c := connectMCP(t, m)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.ask(ctx, t, "agent_gatekeeper", map[string]any{"message": "list items"})
		errc <- err
	}()
	meshtest.Eventually(t, 30*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "calls"))
		return len(data) > 0
	}, "the tool call never started")
	var conv string
	for _, s := range list(m.do(http.StatusOK, "GET", "/conversations", nil), "conversations") {
		conv = str(s, "id")
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("the cancelled call answered without an error")
	}
	meshtest.Eventually(t, 30*time.Second, func() bool {
		h := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
		return str(h, "status") != "running" && str(h, "status") != "queued"
	}, "the turn of the cancelled call did not stop")
	last := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation", "last_run")
	if str(last, "outcome") != "cancelled" {
		t.Errorf("the turn's last run %v, want cancelled", last)
	}
}

// With authentication on, /mcp is as guarded as every route: no token is a
// 401 whose challenge points at the OAuth Protected Resource Metadata; a
// conversation started over MCP is its caller's, which another user
// can neither continue over MCP nor read over REST; and an MCP session is
// its opener's: another principal naming it gets 404, as for no session.
func TestMCPServerKeepsEachCallerToItsOwn(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: authCLIConfig(t)})
	req, _ := http.NewRequest("POST", m.url("/mcp"), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	challenge := resp.Header.Get("WWW-Authenticate")
	metadata := m.url("/.well-known/oauth-protected-resource/mcp")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, `resource_metadata="`+metadata+`"`) {
		t.Errorf("/mcp without a token: %d, WWW-Authenticate %q; want 401 pointing at %s", resp.StatusCode, challenge, metadata)
	}
	// The metadata is open, and names the resource.
	meta := m.do(http.StatusOK, "GET", "/.well-known/oauth-protected-resource/mcp", nil)
	if str(meta, "resource") != m.url("/mcp") {
		t.Errorf("resource metadata %v, want resource %s", meta, m.url("/mcp"))
	}

	alice := connectMCP(t, m, bearer(aliceToken)...)
	_, out, err := alice.ask(t.Context(), t, "agent_resource-manager", map[string]any{"message": "list all resources"})
	conv := str(out, "conversation_id")
	if err != nil || conv == "" {
		t.Fatalf("alice's call: %v %v", err, out)
	}
	if status, _ := m.try("GET", "/conversations/"+conv, nil, bearer(kimToken)...); status != http.StatusNotFound {
		t.Errorf("kim reads alice's MCP conversation over REST: %d, want 404", status)
	}
	kim := connectMCP(t, m, bearer(kimToken)...)
	res, _, err := kim.ask(t.Context(), t, "agent_resource-manager", map[string]any{"message": "list all resources", "conversation_id": conv})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "not_found") {
		t.Errorf("kim continues alice's conversation: %v %q, want not_found", err, textOf(res))
	}

	// Alice's session, named by kim: not found.
	req, _ = http.NewRequest("POST", m.url("/mcp"), strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", alice.cs.ID())
	req.Header.Set("Authorization", "Bearer "+kimToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("kim's request in alice's MCP session: %d, want 404", resp.StatusCode)
	}
	// Alice's own session still works.
	if _, err := alice.cs.ListTools(t.Context(), nil); err != nil {
		t.Errorf("alice's session after kim's try: %v", err)
	}
}

// `mesh mcp` is the mesh for an MCP client that starts its servers as
// commands: the Go SDK's client runs it over stdio, with a user's token in
// MESH_TOKEN, lists the mesh's tools, converses with an agent and gets the
// turn's progress through it; the conversation is that user's.
func TestMeshMCPServesTheMeshOverStdio(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: authCLIConfig(t)})
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-stdio", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
	})
	cmd := exec.Command(filepath.Join(binDir, "mesh"), "mcp")
	cmd.Env = m.cliEnv("MESH_URL="+m.url(""), "MESH_TOKEN="+aliceToken)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("mesh mcp: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) == 0 || tools.Tools[0].Name != "agent_resource-manager" {
		t.Fatalf("tools over stdio: %v %+v", err, tools)
	}
	p := &mcp.CallToolParams{Name: "agent_resource-manager", Arguments: map[string]any{"message": "list all resources"}}
	p.SetProgressToken(7)
	res, err := cs.CallTool(t.Context(), p)
	if err != nil || res.IsError || textOf(res) == "" {
		t.Fatalf("call over stdio: %v %+v\n%s", err, res, stderr.String())
	}
	conv := str(structured(res), "conversation_id")
	if status, _ := m.try("GET", "/conversations/"+conv, nil, bearer(aliceToken)...); status != http.StatusOK {
		t.Errorf("alice reads the conversation mesh mcp started: %d", status)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(progress, "calling resources_list")
	}, "the progress over stdio never held the tool call")
}

// mcpClientResult is what mcp-client.mjs prints.
type mcpClientResult struct {
	Tools                 []string
	First, Second, Cancel struct {
		Text       string         `json:"text"`
		Structured map[string]any `json:"structured"`
		IsError    bool           `json:"isError"`
		Error      string         `json:"error"`
		Progress   []string       `json:"progress"`
	}
}

// The official MCP TypeScript SDK's client (npm) does what the Go one
// does: lists the tools, converses with an agent over two calls of one
// conversation with progress, and cancels a turn by aborting its call.
func TestMCPTypeScriptClientUsesTheMesh(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@modelcontextprotocol/sdk")
	m := startMesh(t, meshOpts{})
	var res mcpClientResult
	runPeer(t, node, "mcp-client.mjs", 2*time.Minute, []string{"MESH_URL=" + m.url("")}, &res, nil)
	if !slices.Contains(res.Tools, "agent_resource-manager") {
		t.Errorf("tools %v", res.Tools)
	}
	conv := str(res.First.Structured, "conversation_id")
	if res.First.Error != "" || res.First.IsError || conv == "" || !slices.Contains(res.First.Progress, "calling resources_list") {
		t.Errorf("first call: %+v", res.First)
	}
	if res.Second.Error != "" || str(res.Second.Structured, "conversation_id") != conv {
		t.Errorf("second call: %+v, want conversation %s", res.Second, conv)
	}

	dir := t.TempDir()
	g := startMesh(t, meshOpts{config: gateConfig(dir)})
	runPeer(t, node, "mcp-client.mjs", 2*time.Minute, []string{"MESH_URL=" + g.url(""), "GATE=1"}, &res, nil)
	if res.Cancel.Error == "" {
		t.Errorf("the aborted call answered: %+v", res.Cancel)
	}
	var cancelled string
	meshtest.Eventually(t, 30*time.Second, func() bool {
		for _, s := range list(g.do(http.StatusOK, "GET", "/conversations", nil), "conversations") {
			c := obj(g.do(http.StatusOK, "GET", "/conversations/"+str(s, "id"), nil), "conversation")
			cancelled = str(c, "last_run", "outcome")
		}
		return cancelled == "cancelled"
	}, "the turn of the aborted call was not cancelled (last run %q)", cancelled)
}

// The MCP Inspector's CLI mode (npm) lists and calls the mesh's tools, over
// Streamable HTTP at /mcp and over stdio through `mesh mcp`.
func TestMCPInspectorCLIUsesTheMesh(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@modelcontextprotocol/inspector")
	m := startMesh(t, meshOpts{})
	inspector := filepath.Join(peersDir, "node_modules", "@modelcontextprotocol", "inspector")
	var pkg struct {
		Bin map[string]string `json:"bin"`
	}
	data, err := os.ReadFile(filepath.Join(inspector, "package.json"))
	if err != nil || json.Unmarshal(data, &pkg) != nil || pkg.Bin["mcp-inspector"] == "" {
		t.Fatalf("the inspector's package.json: %v %v", err, pkg.Bin)
	}
	catalog := filepath.Join(t.TempDir(), "mcp.json")
	run := func(target []string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append(append([]string{filepath.Join(inspector, pkg.Bin["mcp-inspector"]), "--cli"}, target...), args...)...)
		cmd.Env = append(m.cliEnv("MESH_URL="+m.url("")), "MCP_CATALOG_PATH="+catalog, "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("inspector %v %v: %v\n%s", target, args, err, out)
		}
		return string(out)
	}
	for name, target := range map[string][]string{
		"http": {m.url("/mcp"), "--transport", "http"},
		// The inspector gives a stdio server only the environment it is told.
		"stdio": {"-e", "MESH_URL=" + m.url(""), filepath.Join(binDir, "mesh"), "mcp"},
	} {
		if out := run(target, "--method", "tools/list"); !strings.Contains(out, "agent_resource-manager") {
			t.Errorf("%s: tools/list printed:\n%s", name, out)
		}
		out := run(target, "--method", "tools/call", "--tool-name", "agent_resource-manager", "--tool-arg", "message=list all resources")
		if !strings.Contains(out, "conversation_id") || !strings.Contains(out, "resources_list") {
			t.Errorf("%s: tools/call printed:\n%s", name, out)
		}
	}
}
