package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// rpc sends one A2A JSON-RPC request as caller (version "" for 0.3, "1.0")
// and returns the HTTP status and the response; a stream's first event is
// returned as the response.
func (m *authMesh) rpc(t testing.TB, caller, version, method string, params any) (int, map[string]any) {
	t.Helper()
	body := map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
	data, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", m.url("/a2a"), strings.NewReader(string(data)))
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	if tok := m.tokens[caller]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				_ = json.Unmarshal([]byte(rest), &out)
				break
			}
		}
	} else {
		_ = json.NewDecoder(resp.Body).Decode(&out)
	}
	return resp.StatusCode, out
}

func rpcCode(out map[string]any) int {
	c, _ := obj(out, "error")["code"].(float64)
	return int(c)
}

func a2aText(text string, extra map[string]any) map[string]any {
	msg := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}
	for k, v := range extra {
		msg[k] = v
	}
	return map[string]any{"message": msg}
}

// testOwnership: ursula's conversations (REST, an AG-UI thread, an A2A
// task, the approval she waits for) are not found for bob, another user,
// on every surface; ursula and the admin reach them.
func testOwnership(t *testing.T, m *authMesh, convA, approval string) {
	rest := str(m.created(t, "user", "list all resources"), "conversation", "id")
	thread := fmt.Sprintf("thread-of-ursula-%d", time.Now().UnixNano())
	status, _, _ := m.probe(t, "user", "POST", "/agui", map[string]any{"threadId": thread, "runId": thread + "-r1",
		"messages": []any{map[string]any{"id": "m1", "role": "user", "content": "list all resources"}}, "tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{}})
	if status != http.StatusOK {
		t.Fatalf("ursula's AG-UI run: %d", status)
	}
	status, sent := m.rpc(t, "user", "", "message/send", a2aText("list all resources", nil))
	task := str(sent, "result", "id")
	if status != http.StatusOK || task == "" {
		t.Fatalf("ursula's A2A task: %d %v", status, sent)
	}
	meshtest.Eventually(t, 30*time.Second, func() bool {
		st, c := m.call(t, "user", "GET", "/conversations/"+thread, nil)
		return st == 200 && str(c, "conversation", "status") == "active"
	}, "ursula's AG-UI thread did not settle")
	_, before := m.call(t, "user", "GET", "/conversations/"+thread, nil)
	messagesBefore := len(list(before, "conversation", "messages"))

	for _, id := range []string{rest, thread, task, convA} {
		for _, req := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/conversations/" + id, nil},
			{"GET", "/conversations/" + id + "/events", nil},
			{"POST", "/conversations/" + id + "/messages", map[string]any{"message": "list all resources"}},
			{"POST", "/conversations/" + id + "/cancel", nil},
			{"POST", "/agui", map[string]any{"threadId": id, "runId": fmt.Sprintf("bob-%d", time.Now().UnixNano()),
				"messages": []any{map[string]any{"id": "b1", "role": "user", "content": "list all resources"}}, "tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{}}},
			{"POST", "/api/chat", map[string]any{"message": "list all resources", "conversationId": id}},
			{"POST", "/api/conversation", map[string]any{"message": "list all resources", "sessionId": id}},
		} {
			if st, _, body := m.probe(t, "bob", req.method, req.path, req.body); st != http.StatusNotFound {
				t.Errorf("bob: %s %s: %d, want 404; %.200s", req.method, req.path, st, body)
			}
		}
		// SSE with a stream token of bob's in the query, as an EventSource.
		_, tok := m.call(t, "bob", "POST", "/auth/stream-token", nil)
		if st, _, _ := m.probe(t, "none", "GET", "/conversations/"+id+"/events?access_token="+str(tok, "token"), nil); st != http.StatusNotFound {
			t.Errorf("bob's stream token on %s's events: %d, want 404", id, st)
		}
		// A2A, both versions: an unknown task (-32001), and no context joined.
		for _, c := range []struct {
			version, method string
			params          any
		}{
			{"", "tasks/get", map[string]any{"id": id}},
			{"", "tasks/cancel", map[string]any{"id": id}},
			{"", "tasks/resubscribe", map[string]any{"id": id}},
			{"", "message/send", a2aText("list all resources", map[string]any{"taskId": id})},
			{"", "message/send", a2aText("list all resources", map[string]any{"contextId": id})},
			{"", "message/stream", a2aText("list all resources", map[string]any{"contextId": id})},
			{"1.0", "GetTask", map[string]any{"id": id}},
			{"1.0", "CancelTask", map[string]any{"id": id}},
		} {
			if st, out := m.rpc(t, "bob", c.version, c.method, c.params); st != http.StatusOK || rpcCode(out) != -32001 {
				t.Errorf("bob: A2A %s %s on %s: %d %v, want task not found (-32001)", c.version, c.method, id, st, out)
			}
		}
	}
	// A viewer reads over A2A, and may not start a turn or cancel.
	for _, c := range []struct {
		method string
		params any
	}{
		{"message/send", a2aText("list all resources", nil)},
		{"message/stream", a2aText("list all resources", nil)},
		{"tasks/cancel", map[string]any{"id": task}},
	} {
		if st, out := m.rpc(t, "viewer", "", c.method, c.params); st != http.StatusForbidden || obj(out, "error") == nil {
			t.Errorf("viewer: A2A %s: %d %v, want 403 with a JSON-RPC error", c.method, st, out)
		}
	}
	// Lists leave them out.
	_, convs := m.call(t, "bob", "GET", "/conversations", nil)
	_, tasks := m.rpc(t, "bob", "1.0", "ListTasks", map[string]any{})
	listed := fmt.Sprint(convs) + fmt.Sprint(tasks)
	for _, id := range []string{rest, thread, task, convA} {
		if strings.Contains(listed, id) {
			t.Errorf("bob's lists show ursula's %s", id)
		}
	}
	if st, _ := m.call(t, "bob", "GET", "/approvals/"+approval, nil); st != http.StatusNotFound {
		t.Errorf("bob reads ursula's approval: %d, want 404", st)
	}
	if _, aps := m.call(t, "bob", "GET", "/approvals", nil); strings.Contains(fmt.Sprint(aps), approval) {
		t.Error("bob's approval list shows ursula's approval")
	}
	// Nothing of bob's got in.
	_, after := m.call(t, "user", "GET", "/conversations/"+thread, nil)
	if n := len(list(after, "conversation", "messages")); n != messagesBefore {
		t.Errorf("ursula's thread has %d messages after bob's attempts, want %d", n, messagesBefore)
	}
	// Ursula and the admin reach them.
	_, mine := m.rpc(t, "user", "1.0", "ListTasks", map[string]any{})
	_, myConvs := m.call(t, "user", "GET", "/conversations", nil)
	for _, id := range []string{rest, thread, task, convA} {
		for _, caller := range []string{"user", "admin"} {
			if st, _ := m.call(t, caller, "GET", "/conversations/"+id, nil); st != http.StatusOK {
				t.Errorf("%s: GET /conversations/%s: %d, want 200", caller, id, st)
			}
		}
		if !strings.Contains(fmt.Sprint(myConvs), id) {
			t.Errorf("ursula's list misses %s", id)
		}
	}
	if !strings.Contains(fmt.Sprint(mine), task) {
		t.Errorf("ursula's ListTasks misses her task %s: %v", task, mine)
	}
	if st, c := m.call(t, "user", "GET", "/conversations/"+rest, nil); st != 200 || str(c, "conversation", "owner") != "ursula" {
		t.Errorf("conversation %s: owner %q, want ursula", rest, str(c, "conversation", "owner"))
	}
}

// testApprovalBy: the user who waits for an approval cannot decide it (REST,
// AG-UI resume, A2A); an approver can, and the record, its signed
// statement, the approval_decided event and the conversation name the
// approver, whatever the body claims.
func testApprovalBy(t *testing.T, m *authMesh, conv, approval string) {
	if st, out := m.call(t, "user", "POST", "/approvals/"+approval, map[string]any{"approved": true}); st != http.StatusForbidden {
		t.Errorf("the user decides over REST: %d %v, want 403", st, out)
	}
	resume := map[string]any{"threadId": conv, "runId": fmt.Sprintf("resume-%d", time.Now().UnixNano()), "messages": []any{},
		"tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{},
		"resume": []any{map[string]any{"interruptId": approval, "status": "resolved", "payload": map[string]any{"approved": true}}}}
	if st, _, body := m.probe(t, "user", "POST", "/agui", resume); st != http.StatusForbidden {
		t.Errorf("the user decides with an AG-UI resume: %d %.200s, want 403", st, body)
	}
	if st, out := m.rpc(t, "user", "", "message/send", a2aText("approved", map[string]any{"taskId": conv})); st != http.StatusForbidden || obj(out, "error") == nil {
		t.Errorf("the user decides over A2A: %d %v, want 403 with a JSON-RPC error", st, out)
	}
	if st, a := m.call(t, "admin", "GET", "/approvals/"+approval, nil); st != 200 || str(a, "approval", "status") != "pending" {
		t.Fatalf("after the refusals the approval is %v, want pending", a)
	}

	// Follow the conversation's events as its owner, from now.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, tok := m.call(t, "user", "POST", "/auth/stream-token", nil)
	req, _ := http.NewRequestWithContext(ctx, "GET", m.url("/conversations/"+conv+"/events?access_token="+str(tok, "token")), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events with a stream token: %v %v", resp, err)
	}
	defer resp.Body.Close()

	st, out := m.call(t, "approver", "POST", "/approvals/"+approval, map[string]any{"approved": true, "by": "mallory"})
	if st != http.StatusOK {
		t.Fatalf("the approver decides: %d %v", st, out)
	}
	if by := str(out, "approval", "decision", "by"); by != "april" {
		t.Errorf("decision.by in the answer = %q, want april (not the body's mallory)", by)
	}
	_, rec := m.call(t, "admin", "GET", "/approvals/"+approval, nil)
	if str(rec, "approval", "decision", "by") != "april" || str(rec, "approval", "decision", "statement", "by") != "april" {
		t.Errorf("the approval record names %q, its statement %q; want april", str(rec, "approval", "decision", "by"), str(rec, "approval", "decision", "statement", "by"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	found := false
	for !found && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if json.Unmarshal([]byte(data), &ev) == nil && ev["name"] == "approval_decided" && str(ev, "value", "uuid") == approval {
			found = true
			if by := str(ev, "value", "decision", "by"); by != "april" {
				t.Errorf("approval_decided names %q, want april", by)
			}
		}
	}
	if !found {
		t.Error("no approval_decided event on the conversation's stream")
	}
	meshtest.Eventually(t, 30*time.Second, func() bool {
		_, c := m.call(t, "user", "GET", "/conversations/"+conv, nil)
		for _, r := range messagesOf(obj(c, "conversation"), "tool") {
			if str(r, "tool_name") == "resources_add" && str(r, "decided_by") == "april" {
				return true
			}
		}
		return false
	}, "the conversation's resources_add result does not say who decided (decided_by april)")
}
