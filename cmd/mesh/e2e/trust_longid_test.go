package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// longIDRequest is a request that names an id the bridge must refuse at
// its edge, and what the answer must be: an HTTP status (400 or 404), or,
// on the A2A endpoint, a JSON-RPC error code.
type longIDRequest struct {
	name, method, path, body string
	headers                  []string
	status                   int // 0: a JSON-RPC answer
	rpcCodes                 []int
}

// longIDRequests name id on every route and JSON-RPC method that takes
// one: REST paths and bodies, SSE, AG-UI thread, run and interrupt ids, the
// dialects' conversation ids, A2A task and context ids. conv is an
// existing conversation (for the Idempotency-Key).
func longIDRequests(id, conv string) []longIDRequest {
	rpc := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	msg := func(extra string) string {
		return `{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hi"}]` + extra + `}}`
	}
	agui := func(thread, run, resume string) string {
		return `{"threadId":"` + thread + `","runId":"` + run + `","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}` + resume + `}`
	}
	notTask := []int{-32001}
	return []longIDRequest{
		{name: "decide", method: "POST", path: "/approvals/" + id, body: `{"approved":true}`, status: 404},
		{name: "approval", method: "GET", path: "/approvals/" + id, status: 404},
		{name: "conversation", method: "GET", path: "/conversations/" + id, status: 404},
		{name: "message", method: "POST", path: "/conversations/" + id + "/messages", body: `{"message":"hello"}`, status: 404},
		{name: "message, Idempotency-Key", method: "POST", path: "/conversations/" + id + "/messages", body: `{"message":"hello"}`, headers: []string{"Idempotency-Key", "k-1"}, status: 404},
		{name: "long Idempotency-Key", method: "POST", path: "/conversations/" + conv + "/messages", body: `{"message":"hello"}`, headers: []string{"Idempotency-Key", id}, status: 400},
		{name: "cancel", method: "POST", path: "/conversations/" + id + "/cancel", body: `{}`, status: 404},
		{name: "SSE events", method: "GET", path: "/conversations/" + id + "/events", status: 404},
		{name: "group chat", method: "POST", path: "/conversations", body: `{"group":"` + id + `"}`, status: 404},
		{name: "AG-UI threadId", method: "POST", path: "/agui", body: agui(id, "r-1", ""), status: 400},
		{name: "AG-UI runId", method: "POST", path: "/agui", body: agui("t-longid", id, ""), status: 400},
		{name: "AG-UI interruptId", method: "POST", path: "/agui", body: agui("t-longid", "r-2", `,"resume":[{"interruptId":"`+id+`","status":"resolved","payload":{"approved":true}}]`), status: 404},
		{name: "/api/chat conversationId", method: "POST", path: "/api/chat", body: `{"message":"hi","conversationId":"` + id + `"}`, status: 400},
		{name: "/api/conversation sessionId", method: "POST", path: "/api/conversation", body: `{"message":"hi","sessionId":"` + id + `"}`, status: 400},
		{name: "tasks/get", method: "POST", path: "/a2a", body: rpc("tasks/get", `{"id":"`+id+`"}`), rpcCodes: notTask},
		{name: "tasks/cancel", method: "POST", path: "/a2a", body: rpc("tasks/cancel", `{"id":"`+id+`"}`), rpcCodes: notTask},
		{name: "tasks/resubscribe", method: "POST", path: "/a2a", body: rpc("tasks/resubscribe", `{"id":"`+id+`"}`), rpcCodes: notTask},
		{name: "message/send taskId", method: "POST", path: "/a2a", body: rpc("message/send", msg(`,"taskId":"`+id+`"`)), rpcCodes: notTask},
		{name: "message/send contextId", method: "POST", path: "/a2a", body: rpc("message/send", msg(`,"contextId":"`+id+`"`)), rpcCodes: []int{-32602}},
		{name: "message/stream contextId", method: "POST", path: "/a2a", body: rpc("message/stream", msg(`,"contextId":"`+id+`"`)), rpcCodes: []int{-32602}},
		{name: "push config", method: "POST", path: "/a2a", body: rpc("tasks/pushNotificationConfig/get", `{"id":"`+id+`"}`), rpcCodes: []int{-32003}},
		{name: "GetTask (1.0)", method: "POST", path: "/a2a", body: rpc("GetTask", `{"id":"`+id+`"}`), headers: []string{"A2A-Version", "1.0"}, rpcCodes: notTask},
		{name: "group A2A", method: "POST", path: "/groups/" + id + "/a2a", body: rpc("tasks/get", `{"id":"x"}`), status: 404},
	}
}

// Requests whose ids are 4,015 characters long (subjects and keys past the
// NATS server's 4 KiB line limit), or hold a character no id may, are
// refused by the bridge before they touch NATS: 400 or 404 (a JSON-RPC
// error on /a2a), quoting at most a short prefix of the id. After them, in
// a row, the mesh is healthy: no role lost its NATS connection, none was
// restarted, no degradation, and a turn runs.
func TestLongIDsLeaveTheMeshHealthy(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	pids := map[string]int{}
	for _, role := range []string{"bridge", "agent", "toolhost", "approver"} {
		pids[role] = m.childPID(role)
	}
	conv := m.newConversation()
	long := strings.Repeat("a", 4015)
	requests := longIDRequests(long, conv)
	for _, bad := range []string{"a.b", "a*b", "a>", "a%20b"} {
		for _, r := range longIDRequests(bad, conv) {
			if r.name == "conversation" || r.name == "AG-UI threadId" || r.name == "tasks/get" {
				r.name += " " + bad
				requests = append(requests, r)
			}
		}
	}
	if len(requests) < 20 {
		t.Fatalf("only %d requests", len(requests))
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, r := range requests {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, r.method, m.url(r.path), strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(r.headers); i += 2 {
			req.Header.Set(r.headers[i], r.headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			cancel()
			t.Errorf("%s: no answer: %v", r.name, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		cancel()
		switch {
		case r.status != 0 && resp.StatusCode != r.status:
			t.Errorf("%s: status %d, want %d: %.300s", r.name, resp.StatusCode, r.status, body)
		case r.status == 0 && !hasRPCCode(body, r.rpcCodes):
			t.Errorf("%s: status %d, want a JSON-RPC error %v: %.300s", r.name, resp.StatusCode, r.rpcCodes, body)
		}
		if strings.Contains(string(body), strings.Repeat("a", 64)) || len(body) > 2048 {
			t.Errorf("%s: the answer (%d bytes) echoes the id: %.300s", r.name, len(body), body)
		}
	}

	meshtest.Eventually(t, 30*time.Second, func() bool {
		status, _ := m.try("GET", "/ready", nil)
		return status == http.StatusOK
	}, "the mesh is not ready after the long ids")
	_, health := m.try("GET", "/health", nil)
	if str(health, "status") != "healthy" || health["degradation"] != nil {
		t.Errorf("health after the long ids: %v", health)
	}
	for role, pid := range pids {
		if now := m.childPID(role); now != pid {
			t.Errorf("the %s was restarted (pid %d, now %d)", role, pid, now)
		}
	}
	logs := m.logs()
	for _, bad := range []string{"nats connection closed", `"node_down"`, "restarting", "did not send a subject longer than the server takes", "refused a protocol line longer than its limit", "nats disconnected"} {
		if strings.Contains(logs, bad) {
			t.Errorf("the log says %q", bad)
		}
	}
	if strings.Contains(logs, strings.Repeat("a", 256)) {
		t.Error("the log quotes a long id whole")
	}
	m.send(conv, "list all resources")
}

// hasRPCCode reports whether body (a JSON answer, or an SSE event holding
// one) is a JSON-RPC error with one of codes.
func hasRPCCode(body []byte, codes []int) bool {
	for _, c := range codes {
		if strings.Contains(string(body), fmt.Sprintf(`"code":%d`, c)) {
			return true
		}
	}
	return false
}
