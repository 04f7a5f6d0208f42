package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// gatewayClient is the Go SDK's client on /mcp, answering elicitations
// with answer (nil: it declares no elicitation), counting them.
func gatewayClient(t *testing.T, m *meshProc, answer func(*mcp.ElicitRequest) *mcp.ElicitResult, asked *atomic.Int32, headers ...string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if answer != nil {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return answer(req), nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-gateway", Version: "1.0.0"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: m.url("/mcp"), HTTPClient: &http.Client{Transport: headerTransport(headers)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and decodes the structured content.
func callTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, nil, err
	}
	return res, structured(res), nil
}

// pendingFor waits until an approval of tool waits, and returns it.
func (m *meshProc) pendingFor(t *testing.T, tool string, headers ...string) map[string]any {
	t.Helper()
	var ap map[string]any
	meshtest.Eventually(t, 30*time.Second, func() bool {
		for _, a := range list(m.do(http.StatusOK, "GET", "/approvals?status=pending", nil, headers...), "approvals") {
			if str(a, "tool_name") == tool && str(a, "status") == "pending" {
				ap = obj(a)
				return true
			}
		}
		return false
	}, "no pending approval of %s", tool)
	return ap
}

// The hosted tools are tools of /mcp too, <server>.<tool>: a read-only one
// runs at once; a destructive one waits for a person, who decides it as
// any approval (here over REST), and the call completes with its result,
// having run once; the same decision sent again is refused and runs
// nothing.
func TestMCPGatewayRunsHostedToolsAfterAPerson(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	cs := gatewayClient(t, m, nil, nil)
	ctx := t.Context()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var add *mcp.Tool
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Name == "resources.resources_add" {
			add = tool
		}
	}
	if !slices.Contains(names, "resources.resources_list") || add == nil || add.Annotations == nil || add.Annotations.DestructiveHint == nil || !*add.Annotations.DestructiveHint {
		t.Fatalf("tools %v (add %+v): want the hosted tools, resources_add destructive", names, add)
	}

	res, out, err := callTool(ctx, cs, "resources.resources_list", map[string]any{})
	if err != nil || res.IsError || textOf(res) == "" || str(out, "conversation_id") == "" {
		t.Fatalf("read-only call: %v %+v %v", err, res, out)
	}

	type answer struct {
		res *mcp.CallToolResult
		out map[string]any
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, out, err := callTool(ctx, cs, "resources.resources_add", map[string]any{"name": "gw-1", "value": 1})
		done <- answer{res, out, err}
	}()
	ap := m.pendingFor(t, "resources_add")
	if n := m.resourceRows("gw-1"); n != 0 {
		t.Fatalf("rows before the decision: %d", n)
	}
	select {
	case a := <-done:
		t.Fatalf("the destructive call answered before a decision: %+v %v", a.res, a.err)
	case <-time.After(500 * time.Millisecond):
	}
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"answer": "yes"})
	a := <-done
	if a.err != nil || a.res.IsError || str(a.out, "decision") != "approved" {
		t.Fatalf("the approved call: %v %+v %v", a.err, a.res, a.out)
	}
	if n := m.resourceRows("gw-1"); n != 1 {
		t.Errorf("rows after the approved call: %d, want 1", n)
	}
	if status, out := m.try("POST", "/approvals/"+str(ap, "uuid"), map[string]any{"answer": "yes"}); status != http.StatusConflict || str(out, "code") != "approval_decided" {
		t.Errorf("the decision sent again: %d %v, want 409 approval_decided", status, out)
	}
	if n := m.resourceRows("gw-1"); n != 1 {
		t.Errorf("rows after the decision sent again: %d, want 1", n)
	}
}

// A client that can elicit, used by someone who may decide, is asked, with
// the exact arguments; its answer is the decision: approve runs the call
// once, decline refuses it.
func TestMCPGatewayAsksTheClientsUser(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	var asked atomic.Int32
	var shown atomic.Value
	approve := true
	cs := gatewayClient(t, m, func(req *mcp.ElicitRequest) *mcp.ElicitResult {
		shown.Store(req.Params.Message)
		if approve {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}
		}
		return &mcp.ElicitResult{Action: "decline"}
	}, &asked)
	ctx := t.Context()
	res, out, err := callTool(ctx, cs, "resources.resources_add", map[string]any{"name": "gw-2", "value": 2})
	if err != nil || res.IsError || str(out, "decision") != "approved" || asked.Load() != 1 {
		t.Fatalf("approved by elicitation: %v %+v %v, asked %d", err, res, out, asked.Load())
	}
	if msg, _ := shown.Load().(string); !containsAll(msg, "resources_add", `"gw-2"`, `"value": 2`) {
		t.Errorf("the elicitation showed %q: want the tool and its arguments", msg)
	}
	if n := m.resourceRows("gw-2"); n != 1 {
		t.Errorf("rows after the approved call: %d, want 1", n)
	}
	approve = false
	res, out, err = callTool(ctx, cs, "resources.resources_add", map[string]any{"name": "gw-3", "value": 3})
	if err != nil || !res.IsError || str(out, "decision") != "rejected" {
		t.Errorf("declined by elicitation: %v %+v %v", err, res, out)
	}
	if n := m.resourceRows("gw-3"); n != 0 {
		t.Errorf("rows after the declined call: %d, want 0", n)
	}
}

// With authentication on, a user's client is not asked to approve (a user
// may not decide) even when it can elicit: the call waits for an approver,
// and completes once one decides.
func TestMCPGatewayAsksOnlyThoseWhoMayDecide(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: authCLIConfig(t)})
	var asked atomic.Int32
	cs := gatewayClient(t, m, func(*mcp.ElicitRequest) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}
	}, &asked, bearer(aliceToken)...)
	done := make(chan error, 1)
	var out map[string]any
	go func() {
		var err error
		_, out, err = callTool(t.Context(), cs, "resources.resources_add", map[string]any{"name": "gw-4", "value": 4})
		done <- err
	}()
	ap := m.pendingFor(t, "resources_add", bearer(opsToken)...)
	if asked.Load() != 0 {
		t.Errorf("a user's client was asked to approve %d times", asked.Load())
	}
	if n := m.resourceRows("gw-4"); n != 0 {
		t.Fatalf("rows before the approver decided: %d", n)
	}
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"answer": "yes"}, bearer(opsToken)...)
	if err := <-done; err != nil || str(out, "decision") != "approved" {
		t.Errorf("alice's call after ops approved: %v %v", err, out)
	}
	if n := m.resourceRows("gw-4"); n != 1 {
		t.Errorf("rows after the approver decided: %d, want 1", n)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// mcpRaw is a bare Streamable HTTP exchange with /mcp, as a client that is
// not an SDK makes it.
type mcpRaw struct {
	t       *testing.T
	m       *meshProc
	session string
}

func (c *mcpRaw) post(body string) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.m.url("/mcp"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.session == "" {
		c.session = resp.Header.Get("Mcp-Session-Id")
	}
	return resp
}

// sseUntil reads server-sent events from body until one's data holds
// want, and returns the id of the last event read.
func sseUntil(t *testing.T, body io.Reader, want string) (lastID string, found bool) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			lastID = id
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, want) {
			return lastID, true
		}
	}
	return lastID, false
}

// A client whose stream of a call breaks resumes it with Last-Event-ID
// (GET /mcp) and gets the rest, the answer included: the call is not run
// again.
func TestMCPStreamResumesWithLastEventID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: gateConfig(dir)})
	c := &mcpRaw{t: t, m: m}
	resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if c.session == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	resp = c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()

	resp = c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_gatekeeper","arguments":{"message":"list items"},"_meta":{"progressToken":"p"}}}`)
	last, ok := sseUntil(t, resp.Body, `"calling `)
	resp.Body.Close() // the stream breaks in the middle of the call
	if !ok || last == "" {
		t.Fatalf("the call's stream gave no progress with an id (last id %q)", last)
	}
	openGate(t, dir)

	req, _ := http.NewRequest("GET", m.url("/mcp"), nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Last-Event-ID", last)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	resumed, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Body.Close()
	if resumed.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp with Last-Event-ID: %d", resumed.StatusCode)
	}
	if _, ok := sseUntil(t, resumed.Body, `"id":2,"result"`); !ok {
		t.Error("the resumed stream never gave the call's answer")
	}
	data, _ := os.ReadFile(filepath.Join(dir, "calls"))
	if n := strings.Count(string(data), "\n"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// A destructive call no one decides within the call's wait
// (http.wait_timeout) answers with its approval, still pending; once a
// person decides it, approval_wait answers with the call's result. The
// approval of another user is as unknown as none.
func TestMCPGatewayCallOutlastedByItsApprovalIsWaitedOn(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: authCLIConfig(t) + "http:\n  wait_timeout: 2s\n"})
	ctx := t.Context()
	cs := gatewayClient(t, m, nil, nil, bearer(aliceToken)...)
	res, out, err := callTool(ctx, cs, "resources.resources_add", map[string]any{"name": "gw-5", "value": 5})
	uuid := str(out, "approval", "uuid")
	if err != nil || res.IsError || str(out, "decision") != "pending" || uuid == "" || !strings.Contains(textOf(res), "approval_wait") {
		t.Fatalf("the call outlasted by its approval: %v %q %v", err, textOf(res), out)
	}
	kim := gatewayClient(t, m, nil, nil, bearer(kimToken)...)
	if res, _, err := callTool(ctx, kim, "approval_wait", map[string]any{"approval_id": uuid}); err != nil || !res.IsError || !strings.Contains(textOf(res), "not_found") {
		t.Errorf("kim waits on alice's approval: %v %q, want not found", err, textOf(res))
	}
	m.do(http.StatusOK, "POST", "/approvals/"+uuid, map[string]any{"answer": "yes"}, bearer(opsToken)...)
	res, out, err = callTool(ctx, cs, "approval_wait", map[string]any{"approval_id": uuid})
	if err != nil || res.IsError || str(out, "decision") != "approved" || !strings.Contains(textOf(res), "gw-5") {
		t.Errorf("approval_wait after the decision: %v %q %v", err, textOf(res), out)
	}
	if n := m.resourceRows("gw-5"); n != 1 {
		t.Errorf("rows: %d, want 1", n)
	}
}
