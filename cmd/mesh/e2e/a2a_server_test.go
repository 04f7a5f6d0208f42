package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// The tests in this file drive the A2A server of a `mesh up` (bridge/a2a)
// with raw JSON-RPC (the agent card, a send, a destructive send approved
// over REST, a REST conversation read as a task, a task continued with its
// decision), and with the official SDK clients as real peers: a2a-go v0.3.3
// (A2A 0.3), built from its own module in testdata/peers/a2a-go, and
// @a2a-js/sdk 1.x (A2A 1.0) from npm in testdata/peers.

// a2aSrvConfig is the default agent plus the gated items server of
// testmcp_test.go, whose items_list blocks until the gate file exists: a
// task that stays working, to cancel.
func a2aSrvConfig(t *testing.T, dir string) string {
	return defaultConfig(t) + `  - name: items
    command: mesh-test-mcp
    env:
      ` + testMCPEnv + `: "1"
      ` + testGateEnv + `: "` + filepath.Join(dir, "gate") + `"
      ` + testCallsEnv + `: "` + filepath.Join(dir, "calls") + `"
`
}

// a2aSrvCall makes one JSON-RPC call on /a2a (version "" sends no
// A2A-Version header) and returns the answer, which must be JSON-RPC 2.0
// with HTTP 200.
func a2aSrvCall(m *meshProc, version, method string, params any, headers ...string) map[string]any {
	m.t.Helper()
	if version != "" {
		headers = append(headers, "A2A-Version", version)
	}
	status, out := m.try("POST", "/a2a", map[string]any{"jsonrpc": "2.0", "id": "t-1", "method": method, "params": params}, headers...)
	if status != http.StatusOK || str(out, "jsonrpc") != "2.0" || str(out, "id") != "t-1" {
		m.t.Fatalf("%s: status %d, answer %v", method, status, out)
	}
	return out
}

// a2aSrvResult is a2aSrvCall for a call that must succeed.
func a2aSrvResult(m *meshProc, method string, params any, headers ...string) map[string]any {
	m.t.Helper()
	out := a2aSrvCall(m, "", method, params, headers...)
	if out["error"] != nil || obj(out, "result") == nil {
		m.t.Fatalf("%s: %v", method, out)
	}
	return obj(out, "result")
}

func a2aSrvMessage(text, taskID string) map[string]any {
	msg := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}
	if taskID != "" {
		msg["taskId"] = taskID
	}
	return map[string]any{"message": msg}
}

func a2aSrvArtifactText(task map[string]any) string {
	var b strings.Builder
	for _, a := range list(task, "artifacts") {
		for _, p := range list(a, "parts") {
			b.WriteString(str(p, "text"))
		}
	}
	return b.String()
}

// a2aSrvApproval checks an input-required task and returns the approval of
// its status message's data part.
func a2aSrvApproval(t *testing.T, task map[string]any) map[string]any {
	t.Helper()
	if str(task, "status", "state") != "input-required" {
		t.Fatalf("task = %v, want input-required", task)
	}
	parts := list(obj(task, "status", "message"), "parts")
	if len(parts) != 2 || !strings.Contains(str(parts[0], "text"), "Approval required") {
		t.Fatalf("status message parts = %v", parts)
	}
	ap := obj(parts[1], "data", "approval")
	if str(ap, "uuid") == "" || str(ap, "tool_name") != "resources_add" {
		t.Fatalf("approval = %v", ap)
	}
	return ap
}

func TestA2AServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: a2aSrvConfig(t, dir)})
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644) })

	t.Run("agent card", func(t *testing.T) {
		skillsOf := func(card map[string]any) []string {
			var ids []string
			for _, s := range list(card, "skills") {
				ids = append(ids, str(s, "id"))
			}
			return ids
		}
		// The toolhost publishes its tools one by one after the mesh is ready.
		meshtest.Eventually(t, 30*time.Second, func() bool {
			return len(skillsOf(m.do(http.StatusOK, "GET", "/.well-known/agent.json", nil))) == 6
		}, "the card never listed the 6 tools (3 resources, 3 items)")
		for _, path := range []string{"/.well-known/agent.json", "/.well-known/agent-card.json"} {
			card := m.do(http.StatusOK, "GET", path, nil)
			skills := skillsOf(card)
			if got := str(card, "name"); got != "resource-manager" {
				t.Errorf("GET %s: name %q, want resource-manager", path, got)
			}
			if got := str(card, "url"); got != m.url("/a2a") {
				t.Errorf("GET %s: url %q, want %q", path, got, m.url("/a2a"))
			}
			if !slices.Contains(skills, "resources_list") {
				t.Errorf("GET %s: skills %q, want resources_list among them", path, skills)
			}
			if str(card, "description") == "" {
				t.Errorf("GET %s: no description: %v", path, card)
			}
			ifaces := list(card, "supportedInterfaces")
			if len(ifaces) != 2 || str(ifaces[0], "protocolVersion") != "1.0" || str(ifaces[1], "url") != m.url("/a2a") {
				t.Errorf("supportedInterfaces = %v", ifaces)
			}
		}
	})

	t.Run("send", func(t *testing.T) {
		task := a2aSrvResult(m, "message/send", a2aSrvMessage("list all resources", ""))
		if str(task, "kind") != "task" || str(task, "status", "state") != "completed" || a2aSrvArtifactText(task) == "" {
			t.Errorf("task = %v, want completed with an artifact", task)
		}
	})

	t.Run("destructive send, REST approval, get", func(t *testing.T) {
		task := a2aSrvResult(m, "message/send", a2aSrvMessage("add resource a2a-test-item with value 77", ""))
		ap := a2aSrvApproval(t, task)
		if args := obj(ap, "tool_args"); str(args, "name") != "a2a-test-item" || args["value"] != 77.0 {
			t.Errorf("tool_args = %v", args)
		}
		m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
		got := a2aSrvResult(m, "tasks/get", map[string]any{"id": str(task, "id")})
		if str(got, "status", "state") != "completed" || a2aSrvArtifactText(got) == "" {
			t.Errorf("after approval: %v", got)
		}
		if n := m.resourceRows("a2a-test-item"); n != 1 {
			t.Errorf("rows of a2a-test-item = %d, want 1", n)
		}
	})

	t.Run("get a REST conversation", func(t *testing.T) {
		out := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"message": "list all resources"})
		id := str(out, "conversation", "id")
		task := a2aSrvResult(m, "tasks/get", map[string]any{"id": id})
		if str(task, "id") != id || str(task, "status", "state") != "completed" || a2aSrvArtifactText(task) == "" {
			t.Errorf("tasks/get %s = %v", id, task)
		}
	})

	t.Run("continuation approves and rejects", func(t *testing.T) {
		task := a2aSrvResult(m, "message/send", a2aSrvMessage("add resource cont-yes with value 1", ""))
		a2aSrvApproval(t, task)
		done := a2aSrvResult(m, "message/send", a2aSrvMessage("approved", str(task, "id")))
		if str(done, "status", "state") != "completed" || m.resourceRows("cont-yes") != 1 {
			t.Errorf("after approved: %v, rows %d", done, m.resourceRows("cont-yes"))
		}
		task = a2aSrvResult(m, "message/send", a2aSrvMessage("add resource cont-no with value 2", ""))
		a2aSrvApproval(t, task)
		done = a2aSrvResult(m, "message/send", a2aSrvMessage("rejected", str(task, "id")))
		if str(done, "status", "state") != "completed" || !strings.Contains(a2aSrvArtifactText(done), "not approved") || m.resourceRows("cont-no") != 0 {
			t.Errorf("after rejected: %v, rows %d", done, m.resourceRows("cont-no"))
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			name, version, method string
			params                any
			code                  float64
		}{
			{"unknown method", "", "tasks/explode", map[string]any{}, -32601},
			{"unknown task", "", "tasks/get", map[string]any{"id": "nope"}, -32001},
			{"no message", "", "message/send", map[string]any{}, -32602},
			{"cancel a completed task", "", "tasks/cancel", map[string]any{"id": str(a2aSrvResult(m, "message/send", a2aSrvMessage("list all resources", "")), "id")}, -32002},
			{"unknown version", "2.0", "GetTask", map[string]any{"id": "nope"}, -32009},
		} {
			out := a2aSrvCall(m, tt.version, tt.method, tt.params)
			if obj(out, "error")["code"] != tt.code {
				t.Errorf("%s: %v, want code %v", tt.name, out, tt.code)
			}
		}
		status, out := m.try("POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":`)
		if status != http.StatusOK || obj(out, "error")["code"] != -32700.0 {
			t.Errorf("bad JSON: %d %v", status, out)
		}
		status, out = m.try("POST", "/a2a", strings.Repeat(" ", 2<<20))
		if status != http.StatusRequestEntityTooLarge || obj(out, "error")["code"] != -32600.0 {
			t.Errorf("huge body: %d %v", status, out)
		}
	})

	t.Run("a2a-go client", func(t *testing.T) {
		bin := a2aGoPeer(t)
		var res a2aGoResult
		runPeer(t, bin, "all", 3*time.Minute, []string{"A2A_BASE=" + m.url(""), "A2A_TOKEN=Bearer test-token-123", "A2A_SID=a2a-go-peer", "A2A_CANCEL=1"}, &res, nil)
		if res.Error != "" {
			t.Fatalf("a2a-go: %s", res.Error)
		}
		checkGoCard(t, res, m.url("/a2a"))
		if !slices.Contains(res.Card.Skills, "resources_list") {
			t.Errorf("card skills %q, want resources_list among them", res.Card.Skills)
		}
		checkGoSend(t, res.Send)
		if res.Get.ID != res.Send.ID {
			t.Errorf("get: task %q, want the sent %q", res.Get.ID, res.Send.ID)
		}
		if res.Get.State != "completed" {
			t.Errorf("get: state %q, want completed", res.Get.State)
		}
		if res.Get.Artifacts != 1 {
			t.Errorf("get: %d artifacts, want 1", res.Get.Artifacts)
		}
		if res.Get.History < 2 {
			t.Errorf("get: %d messages of history, want 2 at least", res.Get.History)
		}
		if res.Paused.State != "input-required" {
			t.Errorf("paused: state %q, want input-required", res.Paused.State)
		}
		if res.Paused.Approval == "" {
			t.Errorf("paused without an approval: %+v", res.Paused)
		}
		if res.Approved.State != "completed" {
			t.Errorf("approved: state %q, want completed", res.Approved.State)
		}
		if n := m.resourceRows("go-peer"); n != 1 {
			t.Errorf("%d rows of go-peer after the approval, want 1", n)
		}
		checkGoStream(t, res.Stream)
		if want := []string{"task:completed", "status-update:completed:true"}; !slices.Equal(res.Resub.Events, want) {
			t.Errorf("resubscribe events = %v, want %v", res.Resub.Events, want)
		}
		if res.Working.State != "working" || res.Canceled.State != "canceled" || !res.CancelAgainCoded {
			t.Errorf("working %+v, canceled %+v, cancel again %q (not cancelable: %v)", res.Working, res.Canceled, res.CancelAgain, res.CancelAgainCoded)
		}
		if !res.NotFoundCoded {
			t.Errorf("unknown task: %q, want a2a.ErrTaskNotFound", res.NotFound)
		}
		// The caller's trace id is the conversation's.
		conv := m.do(http.StatusOK, "GET", "/conversations/"+res.Send.ID, nil)
		if str(conv, "conversation", "session_id") != "a2a-go-peer" {
			t.Errorf("session_id = %q, want the caller's X-Session-ID", str(conv, "conversation", "session_id"))
		}
	})

	t.Run("a2a-js client", func(t *testing.T) {
		node := nodeWith(t, "@a2a-js/sdk")
		var res a2aJSResult
		runPeer(t, node, "a2a-js-run.mjs", 2*time.Minute, []string{"A2A_BASE=" + m.url(""), "A2A_TOKEN=Bearer test-token-123"}, &res, nil)
		if res.Error != "" {
			t.Fatalf("@a2a-js/sdk: %s", res.Error)
		}
		if res.ProtocolVersion != "1.0" {
			t.Errorf("the client speaks %q, want 1.0", res.ProtocolVersion)
		}
		if res.Send.State != "TASK_STATE_COMPLETED" {
			t.Errorf("send: state %q, want TASK_STATE_COMPLETED", res.Send.State)
		}
		if res.Send.Artifact == "" {
			t.Errorf("send: no artifact: %+v", res.Send)
		}
		if res.Get.ID != res.Send.ID {
			t.Errorf("get: task %q, want the sent %q", res.Get.ID, res.Send.ID)
		}
		if res.Get.History != 1 {
			t.Errorf("get: %d messages of history, want 1", res.Get.History)
		}
		if res.Get.State != "TASK_STATE_COMPLETED" {
			t.Errorf("get: state %q, want TASK_STATE_COMPLETED", res.Get.State)
		}
		if res.Paused.State != "TASK_STATE_INPUT_REQUIRED" {
			t.Errorf("paused: state %q, want TASK_STATE_INPUT_REQUIRED", res.Paused.State)
		}
		if res.Paused.Approval == "" {
			t.Errorf("paused without an approval: %+v", res.Paused)
		}
		if res.Approved.State != "TASK_STATE_COMPLETED" {
			t.Errorf("approved: state %q, want TASK_STATE_COMPLETED", res.Approved.State)
		}
		if n := m.resourceRows("js-peer"); n != 1 {
			t.Errorf("%d rows of js-peer after the approval, want 1", n)
		}
		checkStreamEvents(t, res.Stream.Events, "task:TASK_STATE_SUBMITTED", "statusUpdate:TASK_STATE_COMPLETED", "artifactUpdate")
		if res.Stream.Text == "" {
			t.Errorf("stream without text: %+v", res.Stream)
		}
		if len(res.List.Tasks) != 2 {
			t.Errorf("list: %d tasks, want a page of 2: %+v", len(res.List.Tasks), res.List)
		}
		if res.List.NextPageToken == "" {
			t.Error("list: no next page token, want one")
		}
		if res.List.PageSize != 2 {
			t.Errorf("list: page size %d, want 2", res.List.PageSize)
		}
		if res.List.TotalSize < 4 {
			t.Errorf("list: total size %d, want 4 at least", res.List.TotalSize)
		}
		if res.NotFound != "TaskNotFoundError" {
			t.Errorf("unknown task: %q, want TaskNotFoundError", res.NotFound)
		}
	})
}

// a2aGoPeer builds the a2a-go peer, a module of its own (its gRPC
// dependencies stay out of the mesh's go.mod); without its modules (no
// module cache, no proxy) the peer is missing.
func a2aGoPeer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "a2a-go-peer")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".")
	cmd.Dir = filepath.Join(peersDir, "a2a-go")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		needPeer(t, "the a2a-go peer does not build (`go mod download` in cmd/mesh/e2e/%s/a2a-go fetches its modules): %v\n%s", peersDir, err, out)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// checkGoCard checks the card the a2a-go peer read: the A2A endpoint at
// url, JSON-RPC, A2A 0.3.0, streaming.
func checkGoCard(t *testing.T, res a2aGoResult, url string) {
	t.Helper()
	if res.Card.URL != url {
		t.Errorf("card url %q, want %q", res.Card.URL, url)
	}
	if res.Card.PreferredTransport != "JSONRPC" {
		t.Errorf("card preferred transport %q, want JSONRPC", res.Card.PreferredTransport)
	}
	if res.Card.ProtocolVersion != "0.3.0" {
		t.Errorf("card protocol version %q, want 0.3.0", res.Card.ProtocolVersion)
	}
	if !res.Card.Streaming {
		t.Error("card streaming false, want true")
	}
}

// checkGoSend checks the a2a-go peer's message/send: a completed task
// with an artifact, its context id its own id.
func checkGoSend(t *testing.T, send a2aGoTask) {
	t.Helper()
	if send.State != "completed" {
		t.Errorf("send: state %q, want completed", send.State)
	}
	if send.Artifact == "" {
		t.Errorf("send: no artifact: %+v", send)
	}
	if send.ContextID != send.ID {
		t.Errorf("send: context id %q, want the task's id %q", send.ContextID, send.ID)
	}
}

// checkGoStream checks the a2a-go peer's message/stream: submitted first,
// an artifact update, the final completed status last, the task
// completed with its artifact.
func checkGoStream(t *testing.T, s a2aGoTask) {
	t.Helper()
	checkStreamEvents(t, s.Events, "task:submitted", "status-update:completed:final", "artifact-update")
	if s.State != "completed" {
		t.Errorf("stream: state %q, want completed", s.State)
	}
	if s.Artifact == "" {
		t.Errorf("stream: no artifact: %+v", s)
	}
}

// checkStreamEvents checks the events a client saw on a task's stream:
// three at least, first and last as given, artifact among them.
func checkStreamEvents(t *testing.T, ev []string, first, last, artifact string) {
	t.Helper()
	if len(ev) < 3 {
		t.Errorf("stream events %q, want 3 at least", ev)
		return
	}
	if ev[0] != first {
		t.Errorf("stream's first event %q, want %q", ev[0], first)
	}
	if ev[len(ev)-1] != last {
		t.Errorf("stream's last event %q, want %q", ev[len(ev)-1], last)
	}
	if !slices.Contains(ev, artifact) {
		t.Errorf("stream events %q, want %q among them", ev, artifact)
	}
}

// a2aGoTask and a2aGoResult are what testdata/peers/a2a-go prints.
type a2aGoTask struct {
	ID         string   `json:"id"`
	ContextID  string   `json:"contextId"`
	State      string   `json:"state"`
	Artifact   string   `json:"artifact"`
	Artifacts  int      `json:"artifacts"`
	History    int      `json:"history"`
	StatusText string   `json:"statusText"`
	Approval   string   `json:"approval"`
	Events     []string `json:"events"`
}

type a2aGoResult struct {
	Card struct {
		Name               string   `json:"name"`
		URL                string   `json:"url"`
		PreferredTransport string   `json:"preferredTransport"`
		ProtocolVersion    string   `json:"protocolVersion"`
		Streaming          bool     `json:"streaming"`
		Skills             []string `json:"skills"`
	} `json:"card"`
	Send, Get, Paused, Approved, Stream, Resub, Working, Canceled a2aGoTask
	CancelAgain                                                   string `json:"cancelAgain"`
	CancelAgainCoded                                              bool   `json:"cancelAgainNotCancelable"`
	NotFound                                                      string `json:"notFound"`
	NotFoundCoded                                                 bool   `json:"notFoundIsTaskNotFound"`
	Error                                                         string `json:"error"`
}

// a2aJSResult is what testdata/peers/a2a-js-run.mjs prints.
type a2aJSResult struct {
	ProtocolVersion string `json:"protocolVersion"`
	Send, Get       struct {
		ID        string `json:"id"`
		State     string `json:"state"`
		Artifact  string `json:"artifact"`
		Artifacts int    `json:"artifacts"`
		History   int    `json:"history"`
	}
	Paused, Approved struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Approval string `json:"approval"`
	}
	Stream struct {
		ID     string   `json:"id"`
		Events []string `json:"events"`
		Text   string   `json:"text"`
	} `json:"stream"`
	List struct {
		Tasks         []string `json:"tasks"`
		NextPageToken string   `json:"nextPageToken"`
		PageSize      int      `json:"pageSize"`
		TotalSize     int      `json:"totalSize"`
	} `json:"list"`
	NotFound string `json:"notFound"`
	Error    string `json:"error"`
}
