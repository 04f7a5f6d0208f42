package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// These tests drive the real `mesh` binary (`mesh up`, every role a
// separate process, the sample MCP server over stdio) through its REST API,
// as a client would.

// newConversation creates a conversation and returns its id.
func (m *meshProc) newConversation() string {
	m.t.Helper()
	out := m.do(http.StatusCreated, "POST", "/conversations", nil)
	id := str(out, "conversation", "id")
	if id == "" {
		m.t.Fatalf("no conversation id in %v", out)
	}
	return id
}

// send posts a message and returns the answer (status 200 expected).
func (m *meshProc) send(conv, text string, headers ...string) map[string]any {
	m.t.Helper()
	return m.do(http.StatusOK, "POST", "/conversations/"+conv+"/messages", map[string]any{"message": text}, headers...)
}

// firstTurn opens a conversation and sends it text, the usual start of a
// test that needs the mesh to have answered once. It fails the test
// unless the turn answered: the conversation active, no approval waited
// for, the run a success. It returns the conversation's id and the answer
// (its result and conversation).
func (m *meshProc) firstTurn(text string, headers ...string) (conv string, out map[string]any) {
	m.t.Helper()
	conv = m.newConversation()
	out = m.send(conv, text, headers...)
	res := obj(out, "result")
	if got := str(out, "conversation", "status"); got != "active" {
		m.t.Fatalf("%q: status %s, want active (result %v)", text, got, res)
	}
	if res["waiting_approval"] != false {
		m.t.Fatalf("%q: waiting_approval = %v, want false (result %v)", text, res["waiting_approval"], res)
	}
	if got := str(res, "outcome"); got != "success" {
		m.t.Fatalf("%q: outcome %q, want success: error_code %q, %s", text, got, str(res, "error_code"), str(res, "error"))
	}
	return conv, out
}

// toolCalls lists the tool calls a conversation's messages hold, in order.
func toolCalls(conv map[string]any) []map[string]any {
	var out []map[string]any
	for _, msg := range list(conv, "messages") {
		for _, c := range list(msg, "tool_calls") {
			out = append(out, obj(c))
		}
	}
	return out
}

func messagesOf(conv map[string]any, role string) []map[string]any {
	var out []map[string]any
	for _, msg := range list(conv, "messages") {
		if str(msg, "role") == role {
			out = append(out, obj(msg))
		}
	}
	return out
}

func TestStartupHealthAndTools(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	// A mesh with every node up and no breaker open is healthy.
	health := m.do(http.StatusOK, "GET", "/health", nil)
	if str(health, "status") != "healthy" || obj(health, "nodes")["agent"] != 1.0 || health["failed_nodes"] != 0.0 {
		t.Errorf("health = %v, want healthy with one agent and no failed node", health)
	}
	tools := m.do(http.StatusOK, "GET", "/tools", nil)
	want := map[string]bool{"resources_list": false, "resources_add": true, "resources_remove": true}
	seen := 0
	for _, tool := range list(tools, "tools") {
		name := str(tool, "name")
		destructive, ok := obj(tool)["destructiveHint"].(bool)
		if wantD, known := want[name]; known {
			seen++
			if !ok || destructive != wantD {
				t.Errorf("tool %s destructiveHint = %v (present %v), want %v", name, destructive, ok, wantD)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("tools = %v, want the three resources tools", tools)
	}
	if subs, ok := tools["sub_agents"].([]any); !ok || len(subs) != 0 {
		t.Errorf("sub_agents = %v, want an empty list", tools["sub_agents"])
	}
	docs, err := http.Get(m.url("/docs"))
	if err != nil || docs.StatusCode != http.StatusOK || !strings.HasPrefix(docs.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /docs: %v %v", err, docs)
	}
}

func TestCreateConversation(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	empty := m.do(http.StatusCreated, "POST", "/conversations", nil)
	conv := obj(empty, "conversation")
	msgs := list(conv, "messages")
	if str(conv, "status") != "active" || len(msgs) != 1 || str(msgs[0], "role") != "system" {
		t.Fatalf("empty conversation = %v, want active with the system prompt only", conv)
	}
	if sid := str(conv, "session_id"); len(sid) != 8 {
		t.Errorf("session_id = %q, want 8 hex characters", sid)
	}

	withMsg := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"message": "list resources", "metadata": map[string]any{"source": "mobile", "draft": 2.0}})
	conv = obj(withMsg, "conversation")
	// The user message keeps the client's metadata, as given; a next one
	// (with an idempotency key) its own; too much is refused.
	if users := messagesOf(conv, "user"); len(users) != 1 || !reflect.DeepEqual(obj(users[0], "metadata"), map[string]any{"source": "mobile", "draft": 2.0}) {
		t.Errorf("user message = %v, want the metadata sent with it", users)
	}
	id := str(conv, "id")
	status, again := m.try("POST", "/conversations/"+id+"/messages", map[string]any{"message": "list resources", "metadata": map[string]any{"source": "web"}}, "Idempotency-Key", "k-1")
	if users := messagesOf(obj(again, "conversation"), "user"); status != http.StatusOK || len(users) != 2 || str(users[1], "metadata", "source") != "web" {
		t.Errorf("second message: %d, user messages %v, want the second with metadata source web", status, users)
	}
	if status, body := m.try("POST", "/conversations/"+id+"/messages", map[string]any{"message": "x", "metadata": map[string]any{"big": strings.Repeat("x", 5000)}}); status != http.StatusBadRequest || !strings.Contains(str(body, "error"), "metadata") {
		t.Errorf("metadata of 5000 bytes: %d %v, want 400 naming metadata", status, body)
	}
	roles := []string{}
	for _, msg := range list(conv, "messages") {
		roles = append(roles, str(msg, "role"))
	}
	got := strings.Join(roles, ",")
	if !strings.HasPrefix(got, "system,user,assistant,tool,assistant") {
		t.Errorf("roles = %s, want system, user, the tool call, its result, the answer", got)
	}
	if tools := messagesOf(conv, "tool"); len(tools) != 1 || !strings.Contains(str(tools[0], "content"), `"count"`) {
		t.Errorf("tool result = %v, want the resources_list result", tools)
	}
}

func TestListRunsWithoutApproval(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv := m.newConversation()
	out := m.send(conv, "list all resources")
	res := obj(out, "result")
	if res["waiting_approval"] != false {
		t.Errorf("waiting_approval = %v, want false", res["waiting_approval"])
	}
	if !strings.Contains(str(res, "response"), "resources") {
		t.Errorf("response %q does not report the resources", str(res, "response"))
	}
	c := obj(out, "conversation")
	if str(c, "status") != "active" {
		t.Errorf("status = %s, want active", str(c, "status"))
	}
	calls := toolCalls(c)
	if len(calls) != 1 || str(calls[0], "name") != "resources_list" {
		t.Fatalf("tool calls = %v, want one resources_list", calls)
	}
	results := messagesOf(c, "tool")
	if len(results) != 1 || str(results[0], "tool_call_id") != str(calls[0], "id") {
		t.Errorf("tool results = %v, want the result of %s", results, str(calls[0], "id"))
	}
}

// addPending sends a destructive request and returns the approval.
func (m *meshProc) addPending(conv, text string) map[string]any {
	m.t.Helper()
	out := m.send(conv, text)
	res := obj(out, "result")
	if res["waiting_approval"] != true {
		m.t.Fatalf("%q: waiting_approval = %v, want true (%v)", text, res["waiting_approval"], res)
	}
	if str(out, "conversation", "status") != "waiting_approval" {
		m.t.Fatalf("%q: status = %s, want waiting_approval", text, str(out, "conversation", "status"))
	}
	ap := obj(res, "approval")
	if str(ap, "uuid") == "" {
		m.t.Fatalf("%q: no approval uuid in %v", text, res)
	}
	return ap
}

func TestDestructiveToolWithApproval(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv := m.newConversation()
	ap := m.addPending(conv, "create a server my-test with value 42")
	if str(ap, "tool_name") != "resources_add" || obj(ap, "tool_args")["name"] != "my-test" || obj(ap, "tool_args")["value"] != 42.0 {
		t.Fatalf("approval = %v, want resources_add name=my-test value=42", ap)
	}
	if n := m.resourceRows("my-test"); n != 0 {
		t.Fatalf("rows before approval = %d, want 0", n)
	}
	out := m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"answer": "yes"})
	if str(out, "conversation", "status") != "active" {
		t.Errorf("status after approval = %s, want active", str(out, "conversation", "status"))
	}
	if resp := str(out, "result", "response"); !strings.Contains(resp, "my-test") {
		t.Errorf("response %q does not show the created resource", resp)
	}
	if n := m.resourceRows("my-test"); n != 1 {
		t.Errorf("rows after approval = %d, want 1", n)
	}
}

func TestApprovalSurvivesKillOfWholeMesh(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv := m.newConversation()
	ap := m.addPending(conv, "add resource survivor with value 7")

	m.killTree()
	m.restart()

	got := m.do(http.StatusOK, "GET", "/conversations/"+conv, nil)
	if str(got, "conversation", "pending_approval", "uuid") != str(ap, "uuid") {
		t.Fatalf("after restart pending approval = %v, want %s", obj(got, "conversation", "pending_approval"), str(ap, "uuid"))
	}
	out := m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
	if str(out, "conversation", "status") != "active" {
		t.Errorf("status = %s, want active", str(out, "conversation", "status"))
	}
	if n := m.resourceRows("survivor"); n != 1 {
		t.Fatalf("rows named survivor = %d, want 1", n)
	}
	list := m.send(conv, "list resources")
	if !strings.Contains(str(list, "result", "response"), "survivor") || !strings.Contains(str(list, "result", "response"), "7") {
		t.Errorf("listing after approval = %q, want survivor with value 7 (the original arguments)", str(list, "result", "response"))
	}
}

func TestNaturalLanguageVariations(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	tests := []struct {
		text     string
		tool     string
		wantArgs map[string]any
	}{
		{"list", "resources_list", map[string]any{}},
		{"show me all resources", "resources_list", map[string]any{}},
		{"create a server test-1 with value 10", "resources_add", map[string]any{"name": "test-1", "value": 10.0}},
		{"add resource test-2 value 20", "resources_add", map[string]any{"name": "test-2", "value": 20.0}},
		{"remove test-1", "resources_remove", map[string]any{"pattern": "^test-1$"}},
		{"delete resource test-2", "resources_remove", map[string]any{"pattern": "^test-2$"}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			conv := m.newConversation()
			out := m.send(conv, tt.text)
			calls := toolCalls(obj(out, "conversation"))
			if len(calls) == 0 {
				t.Fatalf("no tool call for %q; answer %q", tt.text, str(out, "result", "response"))
			}
			if got := str(calls[0], "name"); got != tt.tool {
				t.Errorf("tool = %s, want %s", got, tt.tool)
			}
			gotArgs, _ := json.Marshal(obj(calls[0], "arguments"))
			wantArgs, _ := json.Marshal(tt.wantArgs)
			if string(gotArgs) != string(wantArgs) {
				t.Errorf("arguments = %s, want %s", gotArgs, wantArgs)
			}
			if ap := obj(out, "result", "approval"); ap != nil {
				m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
			}
		})
	}
	if n := m.resourceRows("test-1") + m.resourceRows("test-2"); n != 0 {
		t.Errorf("rows of test-1 and test-2 after their removal = %d, want 0", n)
	}
}

func TestApprovalRejection(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv := m.newConversation()
	ap := m.addPending(conv, "add resource never with value 1")
	out := m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"answer": "no"})
	if str(out, "conversation", "status") != "active" {
		t.Errorf("status = %s, want active", str(out, "conversation", "status"))
	}
	if resp := str(out, "result", "response"); !strings.Contains(strings.ToLower(resp), "cancel") {
		t.Errorf("response %q does not say the operation was cancelled", resp)
	}
	if n := m.resourceRows("never"); n != 0 {
		t.Errorf("rows = %d, want 0: a rejected call ran", n)
	}
	// The conversation goes on.
	m.send(conv, "list resources")
}

func TestThreeApprovalFormats(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	formats := []map[string]any{{"approved": true}, {"action": "approve"}, {"answer": "yes"}}
	var pending []map[string]any
	for i := range formats {
		conv := m.newConversation()
		pending = append(pending, m.addPending(conv, "add resource fmt-"+string(rune('a'+i))+" with value 5"))
	}
	for i, body := range formats {
		out := m.do(http.StatusOK, "POST", "/approvals/"+str(pending[i], "uuid"), body)
		if str(out, "approval", "status") != "approved" {
			t.Errorf("format %v: approval status %s", body, str(out, "approval", "status"))
		}
		if n := m.resourceRows("fmt-" + string(rune('a'+i))); n != 1 {
			t.Errorf("format %v: rows = %d, want 1", body, n)
		}
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: defaultConfig(t) + "\nhttp:\n  max_body_bytes: 2048\n"})
	conv := m.newConversation()

	t.Run("unknown conversation", func(t *testing.T) {
		out := m.do(http.StatusNotFound, "GET", "/conversations/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", nil)
		if str(out, "code") != "session_not_found" || str(out, "error") == "" {
			t.Errorf("body = %v", out)
		}
		m.do(http.StatusNotFound, "POST", "/conversations/nope/messages", map[string]any{"message": "hi"})
	})
	t.Run("unknown approval", func(t *testing.T) {
		out := m.do(http.StatusNotFound, "POST", "/approvals/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", map[string]any{"approved": true})
		if str(out, "code") != "approval_not_found" {
			t.Errorf("body = %v", out)
		}
		m.do(http.StatusNotFound, "GET", "/approvals/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", nil)
	})
	t.Run("malformed JSON", func(t *testing.T) {
		out := m.do(http.StatusBadRequest, "POST", "/conversations/"+conv+"/messages", `{"message": "hi"`)
		if !strings.Contains(str(out, "error"), "malformed JSON") {
			t.Errorf("body = %v", out)
		}
	})
	t.Run("wrong field type", func(t *testing.T) {
		out := m.do(http.StatusBadRequest, "POST", "/conversations/"+conv+"/messages", `{"message": 42}`)
		if !strings.Contains(str(out, "error"), `"message" must be a string`) {
			t.Errorf("body = %v", out)
		}
	})
	t.Run("missing field", func(t *testing.T) {
		out := m.do(http.StatusBadRequest, "POST", "/conversations/"+conv+"/messages", `{}`)
		if !strings.Contains(str(out, "error"), `"message" is required`) {
			t.Errorf("body = %v", out)
		}
	})
	t.Run("bad decision", func(t *testing.T) {
		out := m.do(http.StatusBadRequest, "POST", "/approvals/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", `{"answer": "maybe"}`)
		if !strings.Contains(str(out, "error"), "maybe") {
			t.Errorf("body = %v", out)
		}
	})
	t.Run("oversize body", func(t *testing.T) {
		big := `{"message": "` + strings.Repeat("x", 4096) + `"}`
		out := m.do(http.StatusRequestEntityTooLarge, "POST", "/conversations/"+conv+"/messages", big)
		if !strings.Contains(str(out, "error"), "2048") {
			t.Errorf("body = %v", out)
		}
	})
	t.Run("message while waiting for approval", func(t *testing.T) {
		ap := m.addPending(conv, "add resource blocked with value 3")
		out := m.do(http.StatusConflict, "POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list"})
		if str(out, "code") != "waiting_approval" || str(out, "approval", "uuid") != str(ap, "uuid") {
			t.Errorf("body = %v, want the pending approval %s", out, str(ap, "uuid"))
		}
	})
	// Nothing was lost: the conversation still waits for its approval.
	got := m.do(http.StatusOK, "GET", "/conversations/"+conv, nil)
	if str(got, "conversation", "status") != "waiting_approval" {
		t.Errorf("status = %s, want waiting_approval", str(got, "conversation", "status"))
	}
}

func TestDecidingTwiceRunsTheToolOnce(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv := m.newConversation()
	ap := m.addPending(conv, "add resource once with value 9")
	id := str(ap, "uuid")

	// Two decisions race; exactly one wins.
	type answer struct {
		status int
		body   map[string]any
	}
	answers := make(chan answer, 2)
	for _, body := range []map[string]any{{"approved": true}, {"action": "approve"}} {
		go func() {
			s, b := m.try("POST", "/approvals/"+id, body)
			answers <- answer{s, b}
		}()
	}
	got := map[int]int{}
	for range 2 {
		a := <-answers
		got[a.status]++
		if a.status == http.StatusConflict && str(a.body, "approval", "status") != "approved" {
			t.Errorf("409 body = %v, want the approval as decided", a.body)
		}
	}
	if got[http.StatusOK] != 1 || got[http.StatusConflict] != 1 {
		t.Fatalf("statuses = %v, want one 200 and one 409", got)
	}
	// A late third decision, even a rejection, changes nothing.
	m.do(http.StatusConflict, "POST", "/approvals/"+id, map[string]any{"answer": "no"})
	if n := m.resourceRows("once"); n != 1 {
		t.Errorf("rows = %d, want exactly 1", n)
	}
}

// gateConfig is a mesh whose only tool blocks until the test opens a gate.
func gateConfig(dir string) string {
	return `name: gatekeeper
llm:
  model: offline
mesh:
  ack_wait: 2s
  restart_backoff: 100ms
mcp_servers:
  - name: items
    command: mesh-test-mcp
    env:
      ` + testMCPEnv + `: "1"
      ` + testGateEnv + `: "` + filepath.Join(dir, "gate") + `"
      ` + testCallsEnv + `: "` + filepath.Join(dir, "calls") + `"
`
}

func TestAgentKilledMidTurnRedelivers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: gateConfig(dir)})
	conv := m.newConversation()

	wait := m.sendLater(conv, "list items")
	// The tool is running, so the turn is in the middle of its tool call.
	meshtest.Eventually(t, 30*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "calls"))
		return len(data) > 0
	}, "the tool call never started")
	agentPID := m.childPID("agent")
	if err := killPID(agentPID); err != nil {
		t.Fatal(err)
	}
	openGate(t, dir)
	// mesh up restarts the agent and the turn is redelivered to it.
	meshtest.Eventually(t, 30*time.Second, func() bool { return m.childPID("agent") != agentPID }, "agent not restarted")
	body := wait(60*time.Second, "the turn did not complete after the agent was killed")
	c := obj(body, "conversation")
	if str(c, "status") != "active" || !strings.Contains(str(body, "result", "response"), "alpha") {
		t.Fatalf("answer = %v, want the completed turn listing alpha", body)
	}
	// Each message exactly once: the user's, the call, its result, the reply.
	roles := []string{}
	ids := map[string]bool{}
	for _, msg := range list(c, "messages") {
		roles = append(roles, str(msg, "role"))
		if ids[str(msg, "id")] {
			t.Errorf("message %s twice", str(msg, "id"))
		}
		ids[str(msg, "id")] = true
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,assistant" {
		t.Errorf("roles = %s, want system,user,assistant,tool,assistant", got)
	}
}

func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

func TestIdempotencyKeyRunsAMessageOnce(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv := m.newConversation()
	first := m.send(conv, "list all resources", "Idempotency-Key", "k-1")
	again := m.send(conv, "list all resources", "Idempotency-Key", "k-1")
	if str(again, "result", "run_id") != str(first, "result", "run_id") || str(again, "result", "response") != str(first, "result", "response") {
		t.Errorf("a retry with the same key answered %v, want the first answer %v", obj(again, "result"), obj(first, "result"))
	}
	if n := len(messagesOf(obj(again, "conversation"), "user")); n != 1 {
		t.Errorf("user messages = %d, want 1", n)
	}
	// A destructive turn retried while it waits for its approval reports the
	// same approval instead of a conflict.
	ap := obj(m.send(conv, "add resource idem with value 1", "Idempotency-Key", "k-2"), "result", "approval")
	retry := m.send(conv, "add resource idem with value 1", "Idempotency-Key", "k-2")
	if str(retry, "result", "approval", "uuid") != str(ap, "uuid") {
		t.Errorf("retry of a paused turn = %v, want approval %s", obj(retry, "result"), str(ap, "uuid"))
	}
	// Another key is another message.
	m.do(http.StatusConflict, "POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list"}, "Idempotency-Key", "k-3")
}
