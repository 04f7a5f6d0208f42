package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/agui"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// TestEveryRouteHasARule: a route registered without a rule in the access
// table fails here (and needs admin at run time).
func TestEveryRouteHasARule(t *testing.T) {
	routes := Routes(Config{Agent: &config.Config{Definition: config.Definition{Name: "a"}}})
	if len(routes) < 20 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	seen := map[string]bool{}
	for _, r := range routes {
		if !r.Known {
			t.Errorf("route %q has no access rule in access.go", r.Pattern)
		}
		seen[r.Pattern] = true
	}
	for p := range access {
		if !seen[p] {
			t.Errorf("access rule %q names no route", p)
		}
	}
}

const scopeYAML = `name: scoped
llm:
  model: offline
auth:
  stream_key: "0123456789abcdef0123456789abcdef"
  stream_token_ttl: 2s
  tokens:
    - {name: alice, token: "alice-token-0123456789", roles: [user]}
    - {name: root, token: "root-token-0123456789", roles: [admin]}
`

// scopedBridge is a bridge with authentication on (alice a user, root an
// admin; stream tokens valid 2 s) on an httptest server.
func scopedBridge(t *testing.T) (*Role, *httptest.Server) {
	t.Helper()
	b, _ := limitedBridges(t, scopeYAML)
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	return b, srv
}

// A socket opened with a stream token only reads, even one of an admin:
// its run, resume, cancel and feedback frames get an error frame
// read_only (403) and change nothing, and it still takes reads (a follow
// reaches the core). It closes, 1008 "token expired", when its token does.
func TestStreamTokenSocketOnlyReads(t *testing.T) {
	b, srv := scopedBridge(t)
	w := call(b, "POST", "/auth/stream-token", "root-token-0123456789", "192.0.2.1:1000", "")
	var st struct{ Token string }
	if err := json.Unmarshal(w.Body.Bytes(), &st); w.Code != http.StatusOK || err != nil {
		t.Fatalf("stream token: %d %s", w.Code, w.Body)
	}
	// Who am I, with it: an admin who may read, and nothing else.
	me := call(b, "GET", "/auth/me?access_token="+st.Token, "", "192.0.2.1:1000", "")
	var got struct{ May map[string]bool }
	if err := json.Unmarshal(me.Body.Bytes(), &got); me.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /auth/me with a stream token: %d %s", me.Code, me.Body)
	}
	if want := map[string]bool{"read": true, "converse": false, "decide": false, "admin": false}; !maps.Equal(got.May, want) {
		t.Errorf("GET /auth/me with an admin's stream token: may %v, want %v", got.May, want)
	}
	opened := time.Now()
	conn, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http")+agui.SocketPath+"?access_token="+st.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	read := func() map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var f map[string]any
		_ = json.Unmarshal(data, &f)
		return f
	}
	if f := read(); f["type"] != agui.FrameConnectionOpen {
		t.Fatalf("first frame %v, want connection_open", f)
	}
	for name, frame := range map[string]string{
		"run":      `{"type":"run","threadId":"ro-thread","runId":"ro-run","messages":[{"id":"m","role":"user","content":"hi"}]}`,
		"resume":   `{"threadId":"ro-thread","runId":"ro-run-2","messages":[],"resume":[{"interruptId":"00000000-0000-4000-8000-000000000000","status":"resolved","payload":{"approved":true}}]}`,
		"cancel":   `{"type":"cancel","threadId":"ro-thread"}`,
		"feedback": `{"type":"feedback","threadId":"ro-thread","messageId":"m","rating":"like"}`,
	} {
		if err := conn.Write(t.Context(), websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		f := read()
		if f["type"] != "error" {
			t.Errorf("a %s frame on a stream token's socket: answer type %v, want error: %v", name, f["type"], f)
		}
		if f["code"] != core.ErrReadOnly.Kind() {
			t.Errorf("a %s frame on a stream token's socket: code %v, want %s", name, f["code"], core.ErrReadOnly.Kind())
		}
		if f["status"] != float64(http.StatusForbidden) {
			t.Errorf("a %s frame on a stream token's socket: status %v, want %d", name, f["status"], http.StatusForbidden)
		}
		if msg := fmt.Sprint(f["message"]); !strings.Contains(msg, "stream token") {
			t.Errorf("a %s frame on a stream token's socket: message %q, want it to name the stream token", name, msg)
		}
	}
	if _, err := b.core.Sessions.Head(t.Context(), "ro-thread"); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Errorf("the thread a refused frame named: %v, want not found", err)
	}
	if err := conn.Write(t.Context(), websocket.MessageText, []byte(`{"type":"follow","threadId":"nowhere"}`)); err != nil {
		t.Fatal(err)
	}
	if f := read(); f["code"] != mesh.ErrSessionNotFound.Kind() {
		t.Errorf("a follow on the socket after the refusals: %v, want %s (a read that reached the core)", f, mesh.ErrSessionNotFound.Kind())
	}
	// The server says goodbye with a frame, then a close frame.
	if f := read(); f["type"] != agui.FrameConnectionClose || f["reason"] != agui.CloseTokenExpired || f["connectionId"] == "" {
		t.Errorf("the socket's last frame %v, want connection_close with reason %q", f, agui.CloseTokenExpired)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, _, err = conn.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != agui.CloseTokenExpired {
		t.Fatalf("the socket after its token's 2 s: %v, want a close frame 1008 %q", err, agui.CloseTokenExpired)
	}
	if d := time.Since(opened); d > 4*time.Second {
		t.Errorf("the socket closed %v after its token was issued, for a token of 2 s", d)
	}
}

// A resume by a caller that may not decide is refused before anything is
// created: the thread it names does not come to exist.
func TestResumeRefusedCreatesNoThread(t *testing.T) {
	b, _ := scopedBridge(t)
	body := `{"threadId":"resume-thread","runId":"resume-run","messages":[],"resume":[{"interruptId":"00000000-0000-4000-8000-000000000000","status":"resolved","payload":{"approved":true}}]}`
	w := call(b, "POST", "/agui", "alice-token-0123456789", "192.0.2.1:1000", body)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "approver") {
		t.Errorf("a user's resume: %d %s, want 403 naming the approver role", w.Code, w.Body)
	}
	if _, err := b.core.Sessions.Head(t.Context(), "resume-thread"); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Errorf("the thread of the refused resume: %v, want not found", err)
	}
}

// logLines is a zerolog writer the test reads while the bridge writes.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// http.websocket's settings reach the sockets (their connection_open
// says so), and the bridge's log lines of a socket carry its connection
// id: here the one that says its token expired.
func TestSocketSettingsAndConnectionIDInTheLog(t *testing.T) {
	m := meshtest.New(t)
	yaml := scopeYAML + "http:\n  websocket:\n    heartbeat: 3s\n    max_threads: 3\n"
	cfg, err := config.Parse("agent.yaml", []byte(yaml), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	lines := &logLines{}
	b, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, Logger: zerolog.New(lines)}, Resources: m.Resources, Agent: cfg,
		StreamKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.auth.Close)
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	w := call(b, "POST", "/auth/stream-token", "alice-token-0123456789", "192.0.2.1:1000", "")
	var st struct{ Token string }
	if err := json.Unmarshal(w.Body.Bytes(), &st); w.Code != http.StatusOK || err != nil {
		t.Fatalf("stream token: %d %s", w.Code, w.Body)
	}
	conn, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http")+agui.SocketPath+"?access_token="+st.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	_, data, err := conn.Read(t.Context())
	var open struct {
		Type, ConnectionID      string
		HeartbeatMs, MaxThreads int
	}
	if err != nil || json.Unmarshal(data, &open) != nil || open.Type != agui.FrameConnectionOpen {
		t.Fatalf("first frame %s (%v), want connection_open", data, err)
	}
	if open.HeartbeatMs != 3000 || open.MaxThreads != 3 {
		t.Errorf("connection_open %s, want heartbeatMs 3000 and maxThreads 3 from http.websocket", data)
	}
	// The token lives 2 s: the socket closes, and says so in the log.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		if _, _, err := conn.Read(ctx); err != nil {
			break
		}
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		for _, line := range strings.Split(lines.String(), "\n") {
			if strings.Contains(line, "token of the socket expired") && strings.Contains(line, `"connection":"`+open.ConnectionID+`"`) {
				return true
			}
		}
		return false
	}, "no log line of the socket's expiry with its connection id")
}
