package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
)

// What a credential may do, and for how long, against the real binary with
// clients that are not the mesh's: a raw WebSocket, net/http requests
// written by hand, JWTs signed here.

const (
	scopeRoot = "root-token-scope-e2e-0123456"
	scopeDana = "dana-token-scope-e2e-0123456"
)

// scopeMesh is the default agent with authentication on: root an admin and
// dana a user (static tokens), JWTs signed with an HS256 secret and 1 s of
// clock skew, stream tokens of 4 s, and 60 requests a minute per client
// address.
func scopeMesh(t *testing.T) (*authMesh, *jwtKeys) {
	t.Helper()
	keys := newJWTKeys(t)
	cfg := defaultConfig(t) + fmt.Sprintf(`
auth:
  stream_token_ttl: 4s
  tokens:
    - {name: root, token: %s, roles: [admin]}
    - {name: dana, token: %s, roles: [user]}
  jwt:
    hs256_secret: ${JWT_SECRET}
    issuer: %s
    audience: %s
    clock_skew: 1s
limits:
  ip_requests_per_minute: 60
`, scopeRoot, scopeDana, jwtIssuer, jwtAudience)
	m := startMesh(t, meshOpts{config: cfg, env: []string{"JWT_SECRET=" + string(keys.hs)}, logLevel: "info"})
	return &authMesh{meshProc: m, keys: keys, tokens: map[string]string{"root": scopeRoot, "dana": scopeDana}}, keys
}

// TestHTTPCredentialScope: a stream token only reads, wherever it is
// accepted: on the AG-UI WebSocket, even an admin's, its run, resume,
// cancel and feedback frames are refused with an error frame (nothing is
// created, nothing decided) and the socket still follows; a socket or an
// event stream ends when the credential that opened it expires (a stream
// token, a JWT), with a close frame or an error event that says so. A JWT
// cannot be a static token's principal, nor carry a crit header; a resume
// refused for want of the approver role creates no thread; and refused
// credentials spend the client's request budget like any request.
func TestHTTPCredentialScope(t *testing.T) {
	t.Parallel()
	m, keys := scopeMesh(t)
	t.Run("stream token socket reads only", func(t *testing.T) { testStreamTokenSocket(t, m) })
	t.Run("event streams end with their stream token", func(t *testing.T) { testStreamsEndWithStreamToken(t, m) })
	t.Run("socket and streams end with their JWT", func(t *testing.T) { testStreamsEndWithJWT(t, m, keys) })
	t.Run("JWT of a static token's principal", func(t *testing.T) { testJWTOfStaticPrincipal(t, m, keys) })
	t.Run("JWT with crit", func(t *testing.T) { testJWTCrit(t, m, keys) })
	t.Run("refused resume creates no thread", func(t *testing.T) { testRefusedResume(t, m) })
	// Last: it spends the address's budget.
	t.Run("refused credentials are rate limited", func(t *testing.T) { testRefusedCredentialsLimited(t, m) })
}

// streamToken is a stream token of caller's.
func streamToken(t *testing.T, m *authMesh, caller string) string {
	t.Helper()
	status, out := m.call(t, caller, "POST", "/auth/stream-token", nil)
	if status != http.StatusOK || str(out, "token") == "" {
		t.Fatalf("POST /auth/stream-token as %s: %d %v", caller, status, out)
	}
	return str(out, "token")
}

// wsConn is a raw client of /agui/ws.
type wsConn struct {
	t    *testing.T
	conn *websocket.Conn
}

func dialWS(t *testing.T, m *authMesh, query string, hdr http.Header) *wsConn {
	t.Helper()
	conn, resp, err := websocket.Dial(t.Context(), "ws://"+m.httpAddr+"/agui/ws"+query, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("dial /agui/ws: %v (%v)", err, resp)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	c := &wsConn{t: t, conn: conn}
	if f, err := c.next(10 * time.Second); err != nil || str(f, "type") != "connection_open" {
		t.Fatalf("first frame %v (%v), want connection_open", f, err)
	}
	return c
}

func (c *wsConn) send(frame string) {
	c.t.Helper()
	if err := c.conn.Write(c.t.Context(), websocket.MessageText, []byte(frame)); err != nil {
		c.t.Fatalf("write %s: %v", frame, err)
	}
}

// next reads a frame within d; err is the reason the socket closed.
func (c *wsConn) next(d time.Duration) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(c.t.Context(), d)
	defer cancel()
	_, data, err := c.conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		c.t.Fatalf("frame %s: %v", data, err)
	}
	return f, nil
}

// closed reads frames until the server closes the socket, within d, and
// returns its close frame.
func (c *wsConn) closed(d time.Duration) websocket.CloseError {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, err := c.next(time.Until(deadline))
		var ce websocket.CloseError
		switch {
		case errors.As(err, &ce):
			return ce
		case err != nil:
			c.t.Fatalf("the socket did not close within %v with a close frame: %v", d, err)
		}
	}
}

func testStreamTokenSocket(t *testing.T, m *authMesh) {
	// root's conversation, paused for an approval.
	status, out := m.call(t, "root", "POST", "/conversations", map[string]any{"message": "add resource scope-ro with value 1"})
	conv, uuid := str(out, "conversation", "id"), str(out, "result", "approval", "uuid")
	if status != http.StatusCreated || uuid == "" {
		t.Fatalf("root's conversation: %d %v; want one waiting for an approval", status, out)
	}
	token := streamToken(t, m, "root")
	issued := time.Now()
	ws := dialWS(t, m, "?access_token="+token, nil)
	thread := fmt.Sprintf("scope-ro-%d", time.Now().UnixNano())
	for name, frame := range map[string]string{
		"run": `{"threadId":"` + thread + `","runId":"` + thread + `-r","messages":[{"id":"m1","role":"user","content":"list all resources"}],"tools":[],"context":[],"forwardedProps":{}}`,
		"resume": `{"threadId":"` + conv + `","runId":"` + thread + `-resume","messages":[],"tools":[],"context":[],"forwardedProps":{},` +
			`"resume":[{"interruptId":"` + uuid + `","status":"resolved","payload":{"approved":true}}]}`,
		"cancel":   `{"type":"cancel","threadId":"` + conv + `"}`,
		"feedback": `{"type":"feedback","threadId":"` + conv + `","messageId":"` + conv + `-system","rating":"dislike"}`,
	} {
		ws.send(frame)
		f, err := ws.next(15 * time.Second)
		if err != nil {
			t.Fatalf("%s frame: the socket: %v", name, err)
		}
		what := "a " + name + " frame on a socket of an admin's stream token"
		checkStrs(t, what, f, map[string]string{"type": "error", "code": "read_only"})
		if f["status"] != float64(http.StatusForbidden) {
			t.Errorf("%s: status %v, want 403", what, f["status"])
		}
		checkHolds(t, what+": message", str(f, "message"), []string{"stream token"})
	}
	// The socket still reads: a follow of the conversation sends its events.
	ws.send(`{"type":"follow","threadId":"` + conv + `","after":0}`)
	if f, err := ws.next(15 * time.Second); err != nil || f["type"] != "events" || f["threadId"] != conv {
		t.Errorf("a follow after the refusals: %v %v, want the conversation's events", f, err)
	}
	if st, _ := m.call(t, "root", "GET", "/conversations/"+thread, nil); st != http.StatusNotFound {
		t.Errorf("the thread of the refused run: %d, want 404", st)
	}
	if _, ap := m.call(t, "root", "GET", "/approvals/"+uuid, nil); str(ap, "approval", "status") != "pending" {
		t.Errorf("the approval after the refused resume: %v, want pending", ap)
	}
	if n := m.resourceRows("scope-ro"); n != 0 {
		t.Errorf("rows of scope-ro = %d: the refused resume ran the call", n)
	}
	// The socket ends with its token (4 s).
	ce := ws.closed(20 * time.Second)
	if ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "token expired") {
		t.Errorf("the socket closed with %d %q, want 1008 token expired", ce.Code, ce.Reason)
	}
	if d := time.Since(issued); d > 10*time.Second {
		t.Errorf("the socket closed %v after its token of 4 s was issued", d)
	}
}

// sseEnd reads an event stream until the server ends it, within d, and
// returns its data lines; ended is false when the stream was still open.
func sseEnd(t *testing.T, req *http.Request, d time.Duration) (data []string, ended bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), d)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, line)
		}
	}
	return data, sc.Err() == nil && ctx.Err() == nil
}

func testStreamsEndWithStreamToken(t *testing.T, m *authMesh) {
	status, out := m.call(t, "dana", "POST", "/conversations", nil)
	conv := str(out, "conversation", "id")
	if status != http.StatusCreated {
		t.Fatalf("dana's conversation: %d %v", status, out)
	}
	for _, path := range []string{"/conversations/" + conv + "/events", "/ops/mesh/events"} {
		req, _ := http.NewRequest("GET", m.url(path+"?access_token="+streamToken(t, m, "dana")), nil)
		start := time.Now()
		data, ended := sseEnd(t, req, 20*time.Second)
		if !ended {
			t.Errorf("GET %s with a stream token of 4 s: still open after %v", path, time.Since(start).Round(time.Second))
			continue
		}
		if strings.HasPrefix(path, "/conversations") {
			if len(data) == 0 || !strings.Contains(data[len(data)-1], `"RUN_ERROR"`) || !strings.Contains(data[len(data)-1], `"TOKEN_EXPIRED"`) {
				t.Errorf("GET %s ended without a RUN_ERROR TOKEN_EXPIRED: %q", path, data)
			}
		}
	}
}

func testStreamsEndWithJWT(t *testing.T, m *authMesh, keys *jwtKeys) {
	// Valid 3 s (exp is in whole seconds), accepted 1 s more (the skew).
	tok := keys.token(t, "HS256", "jules", []string{"user"}, 3*time.Second, jwtAudience)
	start := time.Now()
	ws := dialWS(t, m, "", http.Header{"Authorization": {"Bearer " + tok}})
	req, _ := http.NewRequest("GET", m.url("/ops/mesh/events"), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if _, ended := sseEnd(t, req, 20*time.Second); !ended {
		t.Errorf("GET /ops/mesh/events with a JWT of 3 s: still open after %v", time.Since(start).Round(time.Second))
	}
	ce := ws.closed(20 * time.Second)
	if ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "token expired") {
		t.Errorf("a socket of a JWT closed with %d %q, want 1008 token expired", ce.Code, ce.Reason)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the socket of a JWT of 3 s closed after %v", d)
	}
}

func testJWTOfStaticPrincipal(t *testing.T, m *authMesh, keys *jwtKeys) {
	for _, sub := range []string{"root", "Root", "dana"} {
		m.tokens["jwt-"+sub] = keys.token(t, "HS256", sub, []string{"user"}, time.Hour, jwtAudience)
		status, hdr, body := m.probe(t, "jwt-"+sub, "GET", "/auth/me", nil)
		if status != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) || !strings.Contains(string(body), "static token") {
			t.Errorf("a JWT whose subject is %s (a static token's principal): %d %q %s, want 401 invalid_token naming the static token", sub, status, hdr.Get("WWW-Authenticate"), body)
		}
	}
	m.tokens["jwt-jules"] = keys.token(t, "HS256", "jules", []string{"user"}, time.Hour, jwtAudience)
	if status, me := m.call(t, "jwt-jules", "GET", "/auth/me", nil); status != http.StatusOK || str(me, "principal", "name") != "jules" {
		t.Errorf("a JWT of jules: %d %v", status, me)
	}
}

func testJWTCrit(t *testing.T, m *authMesh, keys *jwtKeys) {
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "jules", "roles": []string{"admin"}, "iss": jwtIssuer, "aud": jwtAudience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	tok.Header["crit"] = []string{"https://example.test/must-understand"}
	tok.Header["https://example.test/must-understand"] = true
	s, err := tok.SignedString(keys.hs)
	if err != nil {
		t.Fatal(err)
	}
	m.tokens["crit"] = s
	status, hdr, body := m.probe(t, "crit", "GET", "/auth/me", nil)
	if status != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) || !strings.Contains(string(body), "crit") {
		t.Errorf("a JWT with a crit header: %d %q %s, want 401 invalid_token about crit", status, hdr.Get("WWW-Authenticate"), body)
	}
}

func testRefusedResume(t *testing.T, m *authMesh) {
	thread := fmt.Sprintf("scope-resume-%d", time.Now().UnixNano())
	body := map[string]any{"threadId": thread, "runId": thread + "-r", "messages": []any{}, "tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{},
		"resume": []any{map[string]any{"interruptId": "00000000-0000-4000-8000-000000000000", "status": "resolved", "payload": map[string]any{"approved": true}}}}
	if status, out := m.call(t, "dana", "POST", "/agui", body); status != http.StatusForbidden {
		t.Errorf("a user's resume: %d %v, want 403", status, out)
	}
	if status, out := m.call(t, "root", "GET", "/conversations/"+thread, nil); status != http.StatusNotFound {
		t.Errorf("the thread the refused resume named: %d %v, want 404 (never created)", status, out)
	}
}

func testRefusedCredentialsLimited(t *testing.T, m *authMesh) {
	m.tokens["bad"] = "not-a-token-of-this-mesh-42"
	for i := range 150 {
		status, hdr, body := m.probe(t, "bad", "GET", "/auth/me", nil)
		switch status {
		case http.StatusUnauthorized:
			continue
		case http.StatusTooManyRequests:
			if hdr.Get("Retry-After") == "" || !strings.Contains(string(body), "rate_limited") {
				t.Errorf("the refusal: %q %s", hdr.Get("Retry-After"), body)
			}
			t.Logf("bad token %d refused 429", i+1)
			return
		default:
			t.Fatalf("bad token %d: %d %s", i+1, status, body)
		}
	}
	t.Error("150 bad tokens from one address in a row, none limited (limits.ip_requests_per_minute: 60)")
}
