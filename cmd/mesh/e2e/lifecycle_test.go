package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// Tokens of lifecycleConfig: ursula and bob are users, april an approver,
// root the admin.
const (
	lcUser     = "ursula-lifecycle-token-0123456789"
	lcBob      = "bob-lifecycle-token-0123456789"
	lcApprover = "april-lifecycle-token-0123456789"
	lcAdmin    = "root-lifecycle-token-0123456789"
)

func lifecycleConfig(t testing.TB, extra string) string {
	return defaultConfig(t) + `
auth:
  tokens:
    - {name: ursula, token: ` + lcUser + `, roles: [user]}
    - {name: bob, token: ` + lcBob + `, roles: [user]}
    - {name: april, token: ` + lcApprover + `, roles: [approver]}
    - {name: root, token: ` + lcAdmin + `, roles: [admin]}
` + extra
}

// rawRequest sends one HTTP/1.1 request written by hand on a TCP
// connection, as curl would, and returns the status code and body.
func rawRequest(t *testing.T, addr, method, path, token string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: */*\r\nConnection: close\r\n\r\n", method, path, addr, token)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// streamFor opens a stream (GET, or POST of body) and returns its status and
// what it sent within d.
func (m *meshProc) streamFor(method, path string, body any, d time.Duration, headers ...string) (int, string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = strings.NewReader(string(data))
	}
	req, _ := http.NewRequestWithContext(ctx, method, m.url(path), rd)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body) // until d ends it, or the body does
	return resp.StatusCode, string(data)
}

// gone checks a 410 JSON error of code.
func gone(t *testing.T, what string, status int, body map[string]any, code string) {
	t.Helper()
	if status != http.StatusGone || str(body, "code") != code {
		t.Errorf("%s: %d %v, want 410 %s", what, status, body, code)
	}
}

// Deleting a conversation: its pending approval is rejected (the tool
// never runs), every surface answers 410 deleted (REST, AG-UI and its
// dialects, the WebSocket, A2A), others still do not find it, its events
// stay readable until an admin purges them, and a user may not purge.
func TestLifecycleDelete(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: lifecycleConfig(t, "")})
	u, bob, admin := bearer(lcUser), bearer(lcBob), bearer(lcAdmin)
	created := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"message": "add resource doomed with value 1"}, u...)
	conv := str(created, "conversation", "id")
	ap := str(created, "result", "approval", "uuid")
	if ap == "" || str(created, "conversation", "status") != "waiting_approval" {
		t.Fatalf("no pending approval: %v", created)
	}
	other := str(m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"message": "list all resources"}, u...), "conversation", "id")

	if status, body := m.try("DELETE", "/conversations/"+conv, nil, bob...); status != http.StatusNotFound {
		t.Errorf("bob deleting ursula's: %d %v, want 404", status, body)
	}
	if status, body := rawRequest(t, m.httpAddr, "DELETE", "/conversations/"+conv+"?purge=true", lcUser); status != http.StatusForbidden || !strings.Contains(body, `"forbidden"`) {
		t.Errorf("ursula purging: %d %s, want 403 forbidden", status, body)
	}
	del := m.do(http.StatusOK, "DELETE", "/conversations/"+conv, nil, u...)
	ok := checkStrs(t, "the deleted conversation", obj(del, "conversation"), map[string]string{"status": "deleted", "deleted_by": "ursula"})
	if got := fmt.Sprint(del["rejected_approvals"]); got != "["+ap+"]" {
		t.Errorf("delete rejected approvals %s, want [%s]", got, ap)
		ok = false
	}
	if del["purged"] != false {
		t.Errorf("delete answered purged %v, want false", del["purged"])
		ok = false
	}
	if !ok {
		t.Fatalf("delete answered %v", del)
	}
	// The approval is rejected by the normal decision, with the reason.
	got := m.do(http.StatusOK, "GET", "/approvals/"+ap, nil, u...)
	if str(got, "approval", "status") != "rejected" || str(got, "approval", "decision", "reason") != "conversation deleted" || str(got, "approval", "decision", "statement", "decision") != "rejected" {
		t.Errorf("the approval after the deletion: %v", got)
	}
	// Approving it now changes nothing: decided already.
	if status, _ := m.try("POST", "/approvals/"+ap, map[string]any{"approved": true}, bearer(lcApprover)...); status != http.StatusConflict {
		t.Errorf("approving a rejected approval: %d, want 409", status)
	}

	status, body := m.try("GET", "/conversations/"+conv, nil, u...)
	gone(t, "GET", status, body, "deleted")
	if status, _ := m.try("GET", "/conversations/"+conv, nil, bob...); status != http.StatusNotFound {
		t.Errorf("bob reading ursula's deleted conversation: %d, want 404", status)
	}
	status, body = m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"}, u...)
	gone(t, "POST messages", status, body, "deleted")
	status, body = m.try("POST", "/agui", map[string]any{"threadId": conv, "runId": "r-after-delete", "messages": []any{map[string]any{"id": "m1", "role": "user", "content": "list all resources"}},
		"tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{}}, u...)
	gone(t, "AG-UI", status, body, "deleted")
	status, body = m.try("POST", "/api/chat", map[string]any{"conversationId": conv, "message": "list all resources"}, u...)
	gone(t, "simple dialect", status, body, "deleted")
	status, body = m.try("POST", "/api/conversation", map[string]any{"sessionId": conv, "message": "list all resources"}, u...)
	gone(t, "dotted dialect", status, body, "deleted")
	status, body = m.try("POST", "/api/ai-sdk", map[string]any{"id": conv, "messages": []any{map[string]any{"id": "m1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "list all resources"}}}}}, u...)
	gone(t, "AI SDK", status, body, "deleted")
	checkSocketGone(t, m, conv)
	for _, call := range []struct{ method, params string }{
		{"message/send", `{"message":{"kind":"message","messageId":"m-del","role":"user","taskId":"` + conv + `","parts":[{"kind":"text","text":"list all resources"}]}}`},
		{"tasks/get", `{"id":"` + conv + `"}`},
	} {
		status, body := m.try("POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"`+call.method+`","params":`+call.params+`}`, u...)
		if code, _ := obj(body, "error")["code"].(float64); status != http.StatusGone || code != -32050 {
			t.Errorf("A2A %s: %d %v, want 410 with error -32050", call.method, status, body)
		}
	}
	// The events stay, for ursula.
	if status, events := m.streamFor("GET", "/conversations/"+conv+"/events", nil, 3*time.Second, u...); status != http.StatusOK || !strings.Contains(events, "RUN_STARTED") || !strings.Contains(events, "approval_requested") {
		t.Errorf("events of the deleted conversation: %d %.300s", status, events)
	}
	// Listed as deleted, counted so.
	list := m.do(http.StatusOK, "GET", "/conversations?status=deleted", nil, u...)
	if l := list["conversations"].([]any); len(l) != 1 || str(l[0], "id") != conv || obj(list, "summary")["deleted"] != 1.0 {
		t.Errorf("deleted listing: %v", list)
	}
	if h := m.do(http.StatusOK, "GET", "/health", nil); obj(h, "sessions")["deleted"] != 1.0 {
		t.Errorf("/health sessions: %v", h["sessions"])
	}
	// An admin purges: its events go, and it is not found any more.
	purged := m.do(http.StatusOK, "DELETE", "/conversations/"+conv+"?purge=true", nil, admin...)
	if purged["purged"] != true {
		t.Errorf("purge answered %v", purged)
	}
	if status, body := m.try("GET", "/conversations/"+conv, nil, u...); status != http.StatusNotFound {
		t.Errorf("GET after purge: %d %v, want 404", status, body)
	}
	if status, _ := m.streamFor("GET", "/conversations/"+conv+"/events", nil, 3*time.Second, admin...); status != http.StatusNotFound {
		t.Errorf("events after purge: %d, want 404", status)
	}
	nc := m.adminNATS(t)
	if n := storedEvents(t, nc, conv); n != 0 {
		t.Errorf("%d events of the purged conversation left in the stream", n)
	}
	if n := storedEvents(t, nc, other); n == 0 {
		t.Error("the purge took another conversation's events")
	}
	// The tool never ran.
	time.Sleep(time.Second)
	if n := m.resourceRows("doomed"); n != 0 {
		t.Errorf("the rejected tool ran: %d rows named doomed", n)
	}
}

// checkSocketGone: a run on the AG-UI WebSocket for a deleted thread gets
// an error frame, deleted, status 410.
func checkSocketGone(t *testing.T, m *meshProc, conv string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+m.httpAddr+"/agui/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + lcUser}}})
	if err != nil {
		t.Fatalf("dial the socket: %v", err)
	}
	defer c.CloseNow()
	frame := `{"type":"run","threadId":"` + conv + `","runId":"r-ws-after-delete","messages":[{"id":"m1","role":"user","content":"list all resources"}],"tools":[],"context":[],"forwardedProps":{}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	if _, open, err := c.Read(ctx); err != nil || !strings.Contains(string(open), `"connection_open"`) {
		t.Fatalf("first frame %s (%v), want connection_open", open, err)
	}
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read a frame: %v", err)
	}
	var f map[string]any
	_ = json.Unmarshal(data, &f)
	if str(f, "type") != "error" || str(f, "code") != "deleted" || f["status"] != 410.0 {
		t.Errorf("socket frame %s, want an error frame deleted 410", data)
	}
}

// storedEvents counts the events of conversation conv in the events stream.
func storedEvents(t *testing.T, nc *nats.Conn, conv string) int {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return storedOn(t, js, "MESH_EVENTS", "mesh.evt."+conv+".>")
}

// pendingAs is addPending as the caller of headers.
func (m *meshProc) pendingAs(conv, text string, headers ...string) {
	m.t.Helper()
	out := m.send(conv, text, headers...)
	if obj(out, "result")["waiting_approval"] != true {
		m.t.Fatalf("%q: no approval: %v", text, out)
	}
}

// Deleting a conversation whose turn runs stops the turn: the client
// waiting for it gets 410, the run ends, and the tool's late answer
// changes nothing.
func TestLifecycleDeleteStopsARunningTurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: gateConfig(dir)})
	conv := m.newConversation()
	wait := m.sendLater(conv, "list items")
	meshtest.Eventually(t, 30*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "calls"))
		return len(data) > 0
	}, "the tool call never started")
	del := m.do(http.StatusOK, "DELETE", "/conversations/"+conv, nil)
	if str(del, "cancelled_run") == "" {
		t.Errorf("delete answered %v, want the running turn cancelled", del)
	}
	body := wait(15*time.Second, "the waiting client got no answer after the deletion")
	if str(body, "code") != "deleted" {
		t.Errorf("the waiting client got %v, want 410 deleted", body)
	}
	openGate(t, dir)
	// The run ends (its followers stop) and the tombstone stays one.
	meshtest.Eventually(t, 30*time.Second, func() bool {
		_, events := m.streamFor("GET", "/conversations/"+conv+"/events", nil, 2*time.Second)
		return strings.Contains(events, "RUN_ERROR") || strings.Contains(events, "RUN_FINISHED")
	}, "the deleted conversation's run never ended")
	time.Sleep(time.Second)
	status, out := m.try("GET", "/conversations/"+conv, nil)
	gone(t, "GET after the run ended", status, out, "deleted")
}

// Expiry with a short TTL: an idle conversation answers 410 expired, then
// 404 once cleaned up; one in use, and one waiting for an approval, stay.
func TestLifecycleExpiry(t *testing.T) {
	t.Parallel()
	// The marker that says a key expired ages out with the bucket's max
	// age: expired_kept is at most the TTL, so the 410s are seen for 6 s.
	m := startMesh(t, meshOpts{config: defaultConfig(t) + "\nsessions:\n  ttl: 6s\n  expired_kept: 6s\n"})
	busy := m.newConversation()
	waiting := m.newConversation()
	m.addPending(waiting, "add resource patient with value 3")
	idle := m.newConversation()
	js := meshJS(t, m)
	logged := func(conv string) int { return storedOn(t, js, "MESH_MESSAGES", "mesh.msg."+conv) }
	if logged(idle) == 0 {
		t.Fatal("the idle conversation has no message in MESH_MESSAGES to expire")
	}
	// The busy one is used all along; the idle one expires.
	meshtest.Eventually(t, 30*time.Second, func() bool {
		m.send(busy, "list all resources")
		time.Sleep(300 * time.Millisecond)
		status, _ := m.try("GET", "/conversations/"+idle, nil)
		return status == http.StatusGone
	}, "the idle conversation never expires")
	status, body := m.try("GET", "/conversations/"+idle, nil)
	gone(t, "GET of the idle conversation", status, body, "expired")
	status, body = m.try("POST", "/conversations/"+idle+"/messages", map[string]any{"message": "list all resources"})
	gone(t, "POST to the idle conversation", status, body, "expired")
	m.do(http.StatusOK, "GET", "/conversations/"+busy, nil)
	if got := m.do(http.StatusOK, "GET", "/conversations/"+waiting, nil); str(got, "conversation", "status") != "waiting_approval" {
		t.Errorf("the waiting conversation: %v", got)
	}
	list := m.do(http.StatusOK, "GET", "/conversations?status=expired", nil)
	if l, _ := list["conversations"].([]any); len(l) != 1 || str(l[0], "id") != idle {
		t.Errorf("expired listing: %v", list)
	}
	if h := m.do(http.StatusOK, "GET", "/health", nil); obj(h, "sessions")["expired"] != 1.0 {
		t.Errorf("/health sessions: %v", h["sessions"])
	}
	// expired_kept after it expired, it is not found; its messages went
	// with it. The busy one, still in use, keeps its own.
	meshtest.Eventually(t, 45*time.Second, func() bool {
		m.send(busy, "list all resources")
		time.Sleep(300 * time.Millisecond)
		status, _ := m.try("GET", "/conversations/"+idle, nil)
		return status == http.StatusNotFound && logged(idle) == 0
	}, "the expired conversation (or its messages in MESH_MESSAGES) is never cleaned up")
	if logged(busy) == 0 {
		t.Error("the busy conversation lost its messages")
	}
	m.do(http.StatusOK, "GET", "/conversations/"+busy, nil)
	m.do(http.StatusOK, "GET", "/conversations/"+waiting, nil)
}

// Paging GET /conversations and GET /approvals: a cursor walks every
// conversation once, newest first; status and owner filter; the owner
// filter is the admin's.
func TestLifecyclePagination(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: lifecycleConfig(t, "")})
	u, bob, admin := bearer(lcUser), bearer(lcBob), bearer(lcAdmin)
	var mine []string
	for i := range 23 {
		h := u
		if i%4 == 0 {
			h = bob
		}
		id := str(m.do(http.StatusCreated, "POST", "/conversations", nil, h...), "conversation", "id")
		if i%4 != 0 {
			mine = append([]string{id}, mine...) // newest first
		}
	}
	walk := func(path string, h []string) []string {
		var ids []string
		cursor := ""
		for range 100 {
			p := path
			if cursor != "" {
				p += "&cursor=" + cursor
			}
			out := m.do(http.StatusOK, "GET", p, nil, h...)
			for _, c := range list(out, "conversations") {
				ids = append(ids, str(c, "id"))
			}
			cursor = str(out, "next_cursor")
			if cursor == "" {
				return ids
			}
		}
		t.Fatal("the walk does not end")
		return nil
	}
	if got := walk("/conversations?limit=4", u); fmt.Sprint(got) != fmt.Sprint(mine) {
		t.Errorf("ursula's walk:\n%v\nwant\n%v", got, mine)
	}
	if got := walk("/conversations?limit=5", admin); len(got) != 23 {
		t.Errorf("the admin's walk: %d conversations, want 23", len(got))
	}
	if got := walk("/conversations?limit=3&owner=bob", admin); len(got) != 6 {
		t.Errorf("the admin's walk of bob's: %d, want 6", len(got))
	}
	if got := walk("/conversations?limit=50&status=active", u); len(got) != len(mine) {
		t.Errorf("ursula's active: %d, want %d", len(got), len(mine))
	}
	if got := walk("/conversations?status=running", u); len(got) != 0 {
		t.Errorf("ursula's running: %v", got)
	}
	if status, _ := m.try("GET", "/conversations?owner=bob", nil, u...); status != http.StatusForbidden {
		t.Errorf("ursula's owner filter: %d, want 403", status)
	}
	for _, bad := range []string{"limit=0", "limit=501", "limit=x", "cursor=nope", "status=nope"} {
		if status, _ := m.try("GET", "/conversations?"+bad, nil, u...); status != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", bad, status)
		}
	}
	// Approvals page alike: ursula's two, the approver's page of one.
	for _, name := range []string{"first", "second"} {
		conv := str(m.do(http.StatusCreated, "POST", "/conversations", nil, u...), "conversation", "id")
		m.pendingAs(conv, "add resource "+name+" with value 1", u...)
	}
	out := m.do(http.StatusOK, "GET", "/approvals?limit=1&status=pending", nil, bearer(lcApprover)...)
	if len(list(out, "approvals")) != 1 || str(out, "next_cursor") == "" {
		t.Errorf("the approver's first page: %v", out)
	}
	next := m.do(http.StatusOK, "GET", "/approvals?limit=1&status=pending&cursor="+str(out, "next_cursor"), nil, bearer(lcApprover)...)
	if l := list(next, "approvals"); len(l) != 1 || str(l[0], "uuid") == str(list(out, "approvals")[0], "uuid") {
		t.Errorf("the approver's second page: %v", next)
	}
	if l := list(m.do(http.StatusOK, "GET", "/approvals", nil, bob...), "approvals"); len(l) != 0 {
		t.Errorf("bob sees %d approvals of ursula's", len(l))
	}
}
