package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// limitsConfig is the default configuration with tokens and small limits:
// 8 requests a minute per principal, 3 active conversations in the mesh,
// 2 streams per bridge and 1 per principal.
func limitsConfig(t testing.TB) string {
	cfg := defaultConfig(t) + "auth:\n  tokens:\n"
	for _, name := range limitUsers {
		cfg += "    - {name: " + name + ", token: " + limitToken(name) + ", roles: [user]}\n"
	}
	cfg += "    - {name: ops, token: " + limitToken("ops") + ", roles: [approver]}\n"
	return cfg + `limits:
  requests_per_minute: 8
  max_active_sessions: 3
  streams_per_principal: 1
http:
  max_streams: 2
`
}

var limitUsers = []string{"alice", "bob", "carol", "dave", "erin", "frank"}

func limitToken(name string) string { return name + "-limits-token-0123456789" }

func limitAuth(name string) []string { return []string{"Authorization", "Bearer " + limitToken(name)} }

// rawPost sends body to url as name, with a raw HTTP client, and returns
// the status, headers and body.
func rawPost(t *testing.T, url, name, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+limitToken(name))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data)
}

// Two bridge processes behind one NATS: a principal's budget holds across
// both (8 requests a minute, the 9th refused on either with 429,
// Retry-After, the 7.5 s a token takes rounded up, and a JSON body with
// code and resetAt), and the streaming dialects and A2A answer a refusal
// in their own forms.
func TestLimitsAcrossTwoBridges(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: limitsConfig(t), logLevel: "info"})
	second := &meshProc{t: t, httpAddr: freeAddr(t)}
	runRole(t, m, "bridge", "MESH_HTTP_ADDR="+second.httpAddr, "MESH_NODE_ID=second-bridge")
	meshtest.Eventually(t, 60*time.Second, func() bool { s, _ := second.try("GET", "/ready", nil); return s == http.StatusOK }, "the second bridge is not ready")

	bridges := []*meshProc{m, second}
	for i := range 8 {
		if status, out := bridges[i%2].try("GET", "/tools", nil, limitAuth("alice")...); status != http.StatusOK {
			t.Fatalf("alice's request %d: %d %v", i+1, status, out)
		}
	}
	for _, b := range bridges {
		status, hdr, body := rawPost(t, b.url("/conversations"), "alice", "{}")
		ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
		if status != http.StatusTooManyRequests {
			t.Fatalf("alice's 9th request: status %d, want 429: %s", status, body)
		}
		if ra < 1 || ra > 9 {
			t.Fatalf("alice's 9th request: Retry-After %q, want 1 to 9 seconds", hdr.Get("Retry-After"))
		}
		if !strings.Contains(body, `"code":"rate_limited"`) {
			t.Fatalf("alice's 9th request: %s, want code rate_limited", body)
		}
		reset := between(body, `"resetAt":"`, `"`)
		at, err := time.Parse(time.RFC3339, reset)
		if err != nil || time.Until(at) < -time.Second || time.Until(at) > 10*time.Second {
			t.Errorf("resetAt %q (%v), Retry-After %d", reset, err, ra)
		}
	}
	// Bob, whose budget is untouched, is served.
	if status, _ := second.try("GET", "/tools", nil, limitAuth("bob")...); status != http.StatusOK {
		t.Errorf("bob: %d", status)
	}

	forms := []struct {
		name, path, body string
		hdr              []string
		status           int
		want             []string
	}{
		{"AG-UI", "/agui", `{"threadId":"t","runId":"r","messages":[]}`, []string{"Accept", "text/event-stream"}, 200,
			[]string{`"type":"RUN_ERROR"`, `"code":"RATE_LIMIT"`, `"resetAt":"`}},
		{"AI SDK", "/api/ai-sdk", `{"messages":[]}`, nil, 200, []string{`"type":"error"`, `"errorText":"rate limit`, "data: [DONE]"}},
		{"simple chat", "/api/chat", `{"message":"hi"}`, nil, 200, []string{`"type":"error"`, `"code":"RATE_LIMIT"`, `"resetAt":"`}},
		{"A2A 0.3", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, nil, 429,
			[]string{`"code":-32029`, `"resetAt":"`, `"code":"rate_limited"`}},
		{"A2A 1.0", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, []string{"A2A-Version", "1.0"}, 429,
			[]string{`"code":-32029`, `"reason":"RATE_LIMITED"`, `"resetAt":"`}},
	}
	for i, f := range forms {
		status, hdr, body := rawPost(t, bridges[i%2].url(f.path), "alice", f.body, f.hdr...)
		if status != f.status || hdr.Get("Retry-After") == "" {
			t.Errorf("%s: status %d, Retry-After %q: %s", f.name, status, hdr.Get("Retry-After"), body)
		}
		for _, w := range f.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %s in %s", f.name, w, body)
			}
		}
	}
	_, metrics := m.try("GET", "/metrics", nil, limitAuth("bob")...)
	if raw, _ := metrics["_raw"].(string); !strings.Contains(raw, `mesh_limit_refusals_total{limit="rate_principal"}`) {
		t.Errorf("no refusal counted in the first bridge's metrics")
	}
}

// limits.max_active_sessions holds across two bridges: with 3
// conversations waiting for approvals (bob's two, carol's one), bob's
// third is refused by his own limit (429 too_many_conversations) and
// carol's second by the mesh's (503 over_capacity, Retry-After: 60); one
// decided approval makes room. Streams: a principal's second stream on a
// bridge is 429, and a stream past http.max_streams 503 saying so.
func TestLimitsCapacity(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: limitsConfig(t), logLevel: "info"})
	second := &meshProc{t: t, httpAddr: freeAddr(t)}
	runRole(t, m, "bridge", "MESH_HTTP_ADDR="+second.httpAddr, "MESH_NODE_ID=second-bridge")
	meshtest.Eventually(t, 60*time.Second, func() bool { s, _ := second.try("GET", "/ready", nil); return s == http.StatusOK }, "the second bridge is not ready")

	pause := func(b *meshProc, who, name string) (int, map[string]any) {
		out := b.do(http.StatusCreated, "POST", "/conversations", nil, limitAuth(who)...)
		conv := str(out, "conversation", "id")
		return b.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "add resource " + name + " with value 7"}, limitAuth(who)...)
	}
	var approvals []string
	for i, p := range []struct {
		b         *meshProc
		who, name string
	}{{m, "bob", "b1"}, {second, "bob", "b2"}, {m, "carol", "c1"}} {
		status, out := pause(p.b, p.who, p.name)
		if status != http.StatusOK || str(out, "conversation", "status") != "waiting_approval" {
			t.Fatalf("conversation %d: %d %v", i+1, status, out)
		}
		approvals = append(approvals, str(out, "result", "approval", "uuid"))
	}
	status, out := pause(second, "bob", "b3")
	if status != http.StatusTooManyRequests || str(out, "code") != "too_many_conversations" || str(out, "resetAt") == "" {
		t.Fatalf("bob's third: %d %v", status, out)
	}
	conv := str(m.do(http.StatusCreated, "POST", "/conversations", nil, limitAuth("carol")...), "conversation", "id")
	code, hdr, body := rawPost(t, second.url("/conversations/"+conv+"/messages"), "carol", `{"message":"add resource c2 with value 7"}`)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("the mesh's 4th active conversation: status %d, want 503: %s", code, body)
	}
	if got := hdr.Get("Retry-After"); got != "60" {
		t.Fatalf("the mesh's 4th active conversation: Retry-After %q, want 60", got)
	}
	if !checkHolds(t, "the mesh's 4th active conversation", body, []string{`"code":"over_capacity"`, `"resetAt":"`}, "internal error") {
		t.FailNow()
	}
	_, metrics := second.try("GET", "/metrics", nil, limitAuth("erin")...)
	if raw, _ := metrics["_raw"].(string); !strings.Contains(raw, `mesh_session_rejections_total{reason="max_active_sessions"} 1`) {
		t.Errorf("no session rejection in the second bridge's metrics")
	}
	// Carol's first, rejected, ends its turn: room for her second.
	m.do(http.StatusOK, "POST", "/approvals/"+approvals[2], map[string]any{"approved": false}, limitAuth("ops")...)
	if status, out := second.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "add resource c2 with value 7"}, limitAuth("carol")...); status != http.StatusOK ||
		str(out, "conversation", "status") != "waiting_approval" {
		t.Errorf("carol's second after her first ended: %d %v", status, out)
	}

	// Streams: dave's second on one bridge is his limit; frank's, past the
	// bridge's two, the bridge's.
	open := func(who string) (int, string, func()) {
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "GET", m.url("/ops/mesh/events"), nil)
		req.Header.Set("Authorization", "Bearer "+limitToken(who))
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			_, _ = bufio.NewReader(resp.Body).ReadString('\n')
			return resp.StatusCode, "", func() { cancel(); resp.Body.Close() }
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return resp.StatusCode, string(data), func() {}
	}
	s1, _, close1 := open("dave")
	defer close1()
	if s1 != http.StatusOK {
		t.Fatalf("dave's first stream: %d", s1)
	}
	if s, body, _ := open("dave"); s != http.StatusTooManyRequests || !strings.Contains(body, "streams_per_principal") {
		t.Errorf("dave's second stream: %d %s", s, body)
	}
	s2, _, close2 := open("erin")
	defer close2()
	if s2 != http.StatusOK {
		t.Fatalf("erin's stream: %d", s2)
	}
	s, body, _ := open("frank")
	if s != http.StatusServiceUnavailable {
		t.Errorf("frank's stream past http.max_streams: status %d, want 503", s)
	}
	checkHolds(t, "frank's stream past http.max_streams", body, []string{"too many concurrent streams", `"code":"too_many_streams"`}, "internal error")
}

// between is the text of s between the first from and the next to.
func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, to)
	return v
}
