package bridge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentmesh/agentmesh/bridge/agui"
	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

const limitsYAML = `name: limited
llm:
  model: offline
auth:
  stream_key: "0123456789abcdef0123456789abcdef"
  tokens:
    - {name: alice, token: "alice-token-0123456789", roles: [user]}
    - {name: bob, token: "bob-token-0123456789", roles: [user]}
limits:
  requests_per_minute: 3
  ip_requests_per_minute: 5
  trusted_proxies: [10.0.0.0/8]
`

// limitedBridges are two bridges of one mesh with limitsYAML's limits.
func limitedBridges(t testing.TB, yaml string) (*Role, *Role) {
	m := meshtest.New(t)
	cfg, err := config.Parse("agent.yaml", []byte(yaml), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var out []*Role
	for range 2 {
		b, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: cfg, StreamKey: []byte("0123456789abcdef0123456789abcdef")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.auth.Close)
		out = append(out, b)
	}
	return out[0], out[1]
}

func call(b *Role, method, path, token, peer string, body string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
	r.RemoteAddr = peer
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	b.Handler().ServeHTTP(w, r)
	return w
}

// A principal's budget holds across two bridges: 3 requests a minute,
// the 4th refused with 429, Retry-After and a JSON body with code and
// resetAt; another principal, from another address, is not affected;
// /health is never limited.
func TestLimitPrincipalAcrossBridges(t *testing.T) {
	a, b := limitedBridges(t, limitsYAML)
	for i := range 3 {
		br := []*Role{a, b}[i%2]
		if w := call(br, "GET", "/tools", "alice-token-0123456789", "192.0.2.1:1000", ""); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	w := call(b, "GET", "/tools", "alice-token-0123456789", "192.0.2.1:1000", "")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("4th request: %d %s", w.Code, w.Body)
	}
	var body struct{ Error, Code, ResetAt string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	reset, err := time.Parse(time.RFC3339, body.ResetAt)
	ra, _ := strconv.Atoi(w.Header().Get("Retry-After"))
	if body.Code != "rate_limited" {
		t.Errorf("refusal code %q, want rate_limited: %s", body.Code, w.Body)
	}
	if err != nil {
		t.Errorf("refusal resetAt %q: %v", body.ResetAt, err)
	} else if in := time.Until(reset); in <= 0 || in > 21*time.Second {
		t.Errorf("refusal resetAt in %v, want within the next 21s", in)
	}
	if ra < 1 || ra > 21 {
		t.Errorf("refusal Retry-After %q, want 1 to 21 seconds", w.Header().Get("Retry-After"))
	}
	if w := call(a, "GET", "/tools", "bob-token-0123456789", "192.0.2.2:1000", ""); w.Code != http.StatusOK {
		t.Errorf("bob: %d %s", w.Code, w.Body)
	}
	for range 10 {
		if w := call(a, "GET", "/health", "", "192.0.2.1:1000", ""); w.Code == http.StatusTooManyRequests {
			t.Fatal("/health was limited")
		}
	}
}

// limits.window sets the time the budgets count over: 3 requests in an
// hour refuse the 4th with a resetAt 20 minutes (an hour / 3) ahead, and
// the refusal says the window.
func TestLimitWindow(t *testing.T) {
	a, _ := limitedBridges(t, strings.Replace(limitsYAML, "limits:\n", "limits:\n  window: 1h\n", 1))
	for i := range 3 {
		if w := call(a, "GET", "/tools", "alice-token-0123456789", "192.0.2.1:1000", ""); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	w := call(a, "GET", "/tools", "alice-token-0123456789", "192.0.2.1:1000", "")
	var body struct{ Error, ResetAt string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusTooManyRequests {
		t.Fatalf("4th request: %d %s", w.Code, w.Body)
	}
	reset, err := time.Parse(time.RFC3339, body.ResetAt)
	if in := time.Until(reset); err != nil || in < 19*time.Minute || in > 21*time.Minute {
		t.Errorf("resetAt %q, want about 20 minutes ahead", body.ResetAt)
	}
	if !strings.Contains(body.Error, "more than 3 requests of yours in 1h0m0s") {
		t.Errorf("refusal %q does not say the window", body.Error)
	}
}

// A client IP's budget counts every principal from it; behind a trusted
// proxy the client is the X-Forwarded-For address, and a client's own
// X-Forwarded-For, from an untrusted peer, is ignored.
func TestLimitClientIP(t *testing.T) {
	a, b := limitedBridges(t, strings.Replace(limitsYAML, "requests_per_minute: 3", "requests_per_minute: 100", 1))
	for i := range 5 {
		tok := []string{"alice-token-0123456789", "bob-token-0123456789"}[i%2]
		if w := call([]*Role{a, b}[i%2], "GET", "/tools", tok, "10.1.2.3:999", "", "X-Forwarded-For", "198.51.100.7, 10.9.9.9"); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i+1, w.Code)
		}
	}
	if w := call(a, "GET", "/tools", "alice-token-0123456789", "10.1.2.4:999", "", "X-Forwarded-For", "198.51.100.7"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("6th request from 198.51.100.7 through another proxy: %d", w.Code)
	}
	// The proxy's own address, or a forged header from an untrusted peer,
	// is another client.
	if w := call(a, "GET", "/tools", "alice-token-0123456789", "10.1.2.3:999", ""); w.Code != http.StatusOK {
		t.Errorf("the proxy itself: %d", w.Code)
	}
	if w := call(b, "GET", "/tools", "bob-token-0123456789", "203.0.113.9:5", "", "X-Forwarded-For", "198.51.100.7"); w.Code != http.StatusOK {
		t.Errorf("a forged X-Forwarded-For counted: %d", w.Code)
	}
}

// The streaming dialects and A2A get their own error forms.
func TestLimitRefusalForms(t *testing.T) {
	a, _ := limitedBridges(t, strings.Replace(limitsYAML, "requests_per_minute: 3", "requests_per_minute: 1", 1))
	tok := "alice-token-0123456789"
	call(a, "GET", "/tools", tok, "192.0.2.1:1", "")
	tests := []struct {
		name, path string
		hdr        []string
		status     int
		want       []string
	}{
		{"agui", "/agui", nil, 200, []string{`data: {"code":"RATE_LIMIT"`, `"type":"RUN_ERROR"`, `"resetAt":"`}},
		{"ai-sdk", "/api/ai-sdk", nil, 200, []string{`"type":"error"`, `"errorText":"rate limit`, "data: [DONE]"}},
		{"simple", "/api/chat", nil, 200, []string{`"code":"RATE_LIMIT"`, `"resetAt":"`}},
		{"dotted", "/api/conversation", nil, 200, []string{`"code":"RATE_LIMIT"`, `"resetAt":"`, `"retryAfter":`}},
		{"a2a 0.3", "/a2a", nil, 429, []string{`"code":-32029`, `"data":{"code":"rate_limited","resetAt":"`}},
		{"a2a 1.0", "/a2a", []string{"A2A-Version", "1.0"}, 429, []string{`"code":-32029`, `"reason":"RATE_LIMITED"`, `"resetAt":"`}},
		{"rest", "/conversations", nil, 429, []string{`"code":"rate_limited"`, `"resetAt":"`}},
	}
	for _, tt := range tests {
		w := call(a, "POST", tt.path, tok, "192.0.2.1:1", "{}", tt.hdr...)
		if w.Code != tt.status || w.Header().Get("Retry-After") == "" {
			t.Errorf("%s: status %d, Retry-After %q: %s", tt.name, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
		for _, s := range tt.want {
			if !strings.Contains(w.Body.String(), s) {
				t.Errorf("%s: no %s in %s", tt.name, s, w.Body)
			}
		}
	}
}

// Without authentication the limits are off unless configured; on, the
// anonymous principal counts by client IP.
func TestLimitAnonymous(t *testing.T) {
	off, err := config.Parse("agent.yaml", []byte("name: x\nllm:\n  model: offline\n"), func(string) string { return "" })
	if err != nil || off.LimitsOn() {
		t.Fatalf("limits on without auth: %v", err)
	}
	if got := limitKey(auth.Anonymous(), "192.0.2.1"); got != "ip:192.0.2.1" {
		t.Errorf("anonymous counts as %q", got)
	}
	if got := limitKey(nil, "192.0.2.1"); got != "" {
		t.Errorf("no principal counts as %q", got)
	}
	l := &limiter{}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:443"
	if got := l.clientIP(r); got != "2001:db8:1:2::/64" {
		t.Errorf("IPv6 client %q", got)
	}
}

// convOf creates a conversation and sends it a message that no agent takes
// up: the conversation stays active (queued). It returns the status of
// the message's answer.
func convOf(t *testing.T, b *Role, tok string) (string, *httptest.ResponseRecorder) {
	t.Helper()
	id := newConversation(t, b, tok)
	return id, call(b, "POST", "/conversations/"+id+"/messages", tok, "192.0.2.1:1", `{"message":"hello"}`)
}

// newConversation creates an empty conversation on b as tok's principal
// and returns its id.
func newConversation(t *testing.T, b *Role, tok string) string {
	t.Helper()
	w := call(b, "POST", "/conversations", tok, "192.0.2.1:1", "{}")
	if w.Code != http.StatusCreated && w.Code != http.StatusOK {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	var c struct{ Conversation struct{ ID string } }
	if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || c.Conversation.ID == "" {
		t.Fatalf("create: %s", w.Body)
	}
	return c.Conversation.ID
}

// A principal has at most 2 active conversations across bridges (429
// too_many_conversations, with resetAt), and the mesh at most
// max_active_sessions (503 over_capacity with Retry-After: 60); a
// conversation whose turn ended leaves room again.
func TestLimitActiveConversations(t *testing.T) {
	yaml := strings.Replace(limitsYAML, "requests_per_minute: 3", "requests_per_minute: 100", 1)
	yaml = strings.Replace(yaml, "ip_requests_per_minute: 5", "ip_requests_per_minute: 100\n  max_active_sessions: 3", 1)
	yaml += "http:\n  wait_timeout: 50ms\n"
	a, b := limitedBridges(t, yaml)
	alice, bob := "alice-token-0123456789", "bob-token-0123456789"
	first, w := convOf(t, a, alice)
	if w.Code != http.StatusAccepted {
		t.Fatalf("alice's 1st: %d %s", w.Code, w.Body)
	}
	if _, w := convOf(t, b, alice); w.Code != http.StatusAccepted {
		t.Fatalf("alice's 2nd: %d %s", w.Code, w.Body)
	}
	_, w = convOf(t, a, alice)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"code":"too_many_conversations"`) || !strings.Contains(w.Body.String(), `"resetAt"`) {
		t.Fatalf("alice's 3rd: %d %s", w.Code, w.Body)
	}
	if _, w := convOf(t, b, bob); w.Code != http.StatusAccepted {
		t.Fatalf("bob's 1st: %d %s", w.Code, w.Body)
	}
	_, w = convOf(t, a, bob)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "60" || !strings.Contains(w.Body.String(), `"code":"over_capacity"`) {
		t.Fatalf("the mesh's 4th: %d %s %v", w.Code, w.Body, w.Header())
	}
	if strings.Contains(w.Body.String(), "internal error") {
		t.Errorf("503 says internal error: %s", w.Body)
	}
	// Cancelling alice's first queued turn makes it idle: room again.
	if w := call(a, "POST", "/conversations/"+first+"/cancel", alice, "192.0.2.1:1", "{}"); w.Code >= 300 {
		t.Fatalf("cancel: %d %s", w.Code, w.Body)
	}
	if _, w := convOf(t, b, alice); w.Code != http.StatusAccepted {
		t.Errorf("alice after a turn ended: %d %s", w.Code, w.Body)
	}
}

// A principal's streams on one bridge are bounded besides the bridge's
// own bound; the refusal says which.
func TestLimitStreams(t *testing.T) {
	yaml := strings.Replace(limitsYAML, "requests_per_minute: 3", "requests_per_minute: 100\n  streams_per_principal: 1", 1)
	yaml = strings.Replace(yaml, "ip_requests_per_minute: 5", "ip_requests_per_minute: 100", 1)
	a, _ := limitedBridges(t, yaml)
	ctx := core.WithLimitKey(t.Context(), "p:alice", "192.0.2.1")
	release, err := a.core.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.core.OpenStream(ctx)
	if le := core.LimitOf(err); le == nil || le.Err.Status() != http.StatusTooManyRequests || !strings.Contains(le.Error(), "streams_per_principal") {
		t.Fatalf("2nd stream of alice: %v", err)
	}
	if r2, err := a.core.OpenStream(core.WithLimitKey(t.Context(), "p:bob", "192.0.2.1")); err != nil {
		t.Errorf("bob's stream: %v", err)
	} else {
		r2()
	}
	release()
	release() // twice gives back one slot
	if r3, err := a.core.OpenStream(ctx); err != nil {
		t.Errorf("alice after closing: %v", err)
	} else {
		r3()
	}
	w := httptest.NewRecorder()
	core.WriteError(w, core.Refusal(core.ErrTooManyStreams, time.Now(), "too many concurrent streams on this bridge (http.max_streams: 1)"))
	if w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), "internal error") || !strings.Contains(w.Body.String(), "too many concurrent streams") {
		t.Errorf("global refusal: %d %s", w.Code, w.Body)
	}
}

// On the AG-UI socket a run frame spends a request of its caller's budget:
// past it, the socket's error frame carries rate_limited, 429 and resetAt.
func TestLimitSocketRunFrames(t *testing.T) {
	a, _ := limitedBridges(t, strings.Replace(limitsYAML, "requests_per_minute: 3", "requests_per_minute: 2", 1))
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	conn, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http")+agui.SocketPath,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer alice-token-0123456789"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	// The upgrade spent one request; the first run frame the second, the
	// next one is refused.
	var last map[string]any
	for i := range 2 {
		frame := `{"type":"run","threadId":"thread-` + strconv.Itoa(i) + `","runId":"run-` + strconv.Itoa(i) + `","messages":[{"id":"m","role":"user","content":"hi"}]}`
		if err := conn.Write(t.Context(), websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		for {
			_, data, err := conn.Read(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var f map[string]any
			_ = json.Unmarshal(data, &f)
			if f["threadId"] == "thread-"+strconv.Itoa(i) && (f["type"] == "error" || f["type"] == "events") {
				last = f
				break
			}
		}
		if i == 0 && last["code"] == "rate_limited" {
			t.Fatalf("first run frame refused: %v", last)
		}
	}
	if last["type"] != "error" {
		t.Errorf("second run frame type %v, want error: %v", last["type"], last)
	}
	if last["code"] != "rate_limited" {
		t.Errorf("second run frame code %v, want rate_limited", last["code"])
	}
	if last["status"] != float64(429) {
		t.Errorf("second run frame status %v, want 429", last["status"])
	}
	if last["resetAt"] == nil {
		t.Errorf("second run frame without resetAt: %v", last)
	}
}

// A request the guard refuses spends budgets as any request does: bad or
// missing credentials (401) the client IP's, so that guessing tokens on
// GET /auth/me is limited, and a role that may not (403) its principal's.
// Past a budget, the answer is the 429, not the 401 or 403.
func TestLimitRefusedRequestsSpendBudgets(t *testing.T) {
	yaml := strings.Replace(limitsYAML, "    - {name: bob,", "    - {name: vic, token: \"vic-token-0123456789\", roles: [viewer]}\n    - {name: bob,", 1)
	a, b := limitedBridges(t, yaml)
	for i := range 5 {
		tok := []string{"not-a-token-of-this-mesh", ""}[i%2]
		if w := call([]*Role{a, b}[i%2], "GET", "/auth/me", tok, "192.0.2.7:1000", ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("refused request %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	w := call(a, "GET", "/auth/me", "not-a-token-of-this-mesh", "192.0.2.7:1000", "")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "rate_limited") {
		t.Fatalf("6th bad token from one address: %d %s, want 429 rate_limited", w.Code, w.Body)
	}
	// A role that may not: the principal's budget (3 a minute).
	for i := range 3 {
		if w := call(b, "POST", "/conversations", "vic-token-0123456789", "192.0.2.8:1000", "{}"); w.Code != http.StatusForbidden {
			t.Fatalf("viewer's refused request %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	if w := call(a, "GET", "/auth/me", "vic-token-0123456789", "192.0.2.9:1000", ""); w.Code != http.StatusTooManyRequests {
		t.Errorf("the viewer after 3 refused requests: %d %s, want 429", w.Code, w.Body)
	}
}
