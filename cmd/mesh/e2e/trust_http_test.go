package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/golang-jwt/jwt/v5"

	meshbridge "github.com/agentmesh/agentmesh/bridge"
	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/config"
)

// HTTP authentication against the real binary, with clients that are not
// the mesh's: net/http requests written by hand, JWTs signed here with keys
// made here, a JWKS served here.

const (
	jwtIssuer   = "https://issuer.e2e.test"
	jwtAudience = "agent-mesh-e2e"
)

// jwtKeys are the signing keys of a test's issuer.
type jwtKeys struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	hs  []byte
}

func newJWTKeys(t testing.TB) *jwtKeys {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jwtKeys{rsa: rk, ec: ek, hs: []byte(strings.Repeat("e2e-hs256-secret", 3))}
}

// jwks is the public half of k as a JSON Web Key Set: kid r1 (RS256) and
// e1 (ES256).
func (k *jwtKeys) jwks() []byte {
	b64 := base64.RawURLEncoding.EncodeToString
	raw, _ := k.ec.PublicKey.Bytes()
	data, _ := json.Marshal(map[string]any{"keys": []map[string]any{
		{"kty": "RSA", "kid": "r1", "use": "sig", "alg": "RS256", "n": b64(k.rsa.N.Bytes()), "e": b64(big.NewInt(int64(k.rsa.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:])},
	}})
	return data
}

// token signs a JWT for sub with roles, valid for ttl (negative: expired),
// for audience aud, with alg RS256, ES256 or HS256.
func (k *jwtKeys) token(t testing.TB, alg, sub string, roles []string, ttl time.Duration, aud string) string {
	t.Helper()
	now := time.Now()
	claims := jwt.MapClaims{"sub": sub, "roles": roles, "iss": jwtIssuer, "aud": aud, "iat": now.Add(-time.Minute).Unix(), "exp": now.Add(ttl).Unix()}
	var tok *jwt.Token
	var key any
	switch alg {
	case "RS256":
		tok, key = jwt.NewWithClaims(jwt.SigningMethodRS256, claims), k.rsa
		tok.Header["kid"] = "r1"
	case "ES256":
		tok, key = jwt.NewWithClaims(jwt.SigningMethodES256, claims), k.ec
		tok.Header["kid"] = "e1"
	default:
		tok, key = jwt.NewWithClaims(jwt.SigningMethodHS256, claims), k.hs
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Static tokens of authConfig.
const (
	viewerToken = "viewer-token-e2e-0123456789"
	bobToken    = "bob-user-token-e2e-0123456"
	adminToken  = "admin-token-e2e-0123456789"
)

// authConfig is the default agent with static tokens (vic the viewer, bob
// a user, root the admin) and JWTs whose keys the JWKS at jwksURL holds.
func authConfig(t testing.TB, jwksURL string) string {
	return defaultConfig(t) + fmt.Sprintf(`
auth:
  tokens:
    - {name: vic, token: %s, roles: [viewer]}
    - {name: bob, token: "${BOB_TOKEN}", roles: [user]}
    - {name: root, token: %s, roles: [admin]}
  jwt:
    jwks_url: %s
    issuer: %s
    audience: %s
`, viewerToken, adminToken, jwksURL, jwtIssuer, jwtAudience)
}

// authMesh is a mesh with authentication on, and the credentials of every
// kind of caller of the route table.
type authMesh struct {
	*meshProc
	keys *jwtKeys
	// tokens by caller: none, bad, expired, wrong-aud, viewer, user
	// (ursula, a JWT ES256), approver (april, a JWT RS256), admin; bob is
	// a second user (a static token).
	tokens map[string]string
}

// callers are the columns of the route table.
var callers = []string{"none", "bad", "expired", "wrong-aud", "viewer", "user", "approver", "admin"}

func startAuthMesh(t *testing.T) *authMesh {
	t.Helper()
	keys := newJWTKeys(t)
	set := keys.jwks()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	}))
	t.Cleanup(srv.Close)
	m := startMesh(t, meshOpts{config: authConfig(t, srv.URL), env: []string{"BOB_TOKEN=" + bobToken}, noWait: true})
	am := &authMesh{meshProc: m, keys: keys, tokens: map[string]string{
		"none":      "",
		"bad":       "not-a-token-of-this-mesh-42",
		"expired":   keys.token(t, "ES256", "ursula", []string{"user"}, -10*time.Minute, jwtAudience),
		"wrong-aud": keys.token(t, "RS256", "ursula", []string{"admin"}, time.Hour, "another-service"),
		"viewer":    viewerToken,
		"user":      keys.token(t, "ES256", "ursula", []string{"user"}, time.Hour, jwtAudience),
		"approver":  keys.token(t, "RS256", "april", []string{"approver"}, time.Hour, jwtAudience),
		"admin":     adminToken,
		"bob":       bobToken,
	}}
	m.waitReady() // /ready is open
	return am
}

// probe sends a request as caller and returns the status, the headers and
// the body: whole, or for an event stream the first bytes (the stream is
// then closed).
func (m *authMesh) probe(t testing.TB, caller, method, path string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, m.url(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := m.tokens[caller]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s as %s: %v", method, path, caller, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		buf := make([]byte, 512)
		n, _ := io.ReadAtLeast(resp.Body, buf, 1)
		return resp.StatusCode, resp.Header, buf[:n]
	}
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

// call is probe decoding a JSON answer.
func (m *authMesh) call(t testing.TB, caller, method, path string, body any) (int, map[string]any) {
	t.Helper()
	status, _, data := m.probe(t, caller, method, path, body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	if out == nil {
		out = map[string]any{"_raw": string(data)}
	}
	return status, out
}

// grants is the documented role table: what each role may, besides what
// every authenticated caller may.
var grants = map[string][]auth.Permission{
	"viewer":   {auth.Read},
	"user":     {auth.Read, auth.Converse},
	"approver": {auth.Read, auth.Decide},
	"admin":    {auth.Read, auth.Converse, auth.Decide, auth.Admin},
}

// routeRow is one row of the route table: a request that exercises the
// route, what it needs, and what an admitted caller gets.
type routeRow struct {
	method, path string
	body         any
	need         auth.Permission
	ok           int
	// others is the status of admitted callers who do not own what the
	// request names (the viewer's and the approver's).
	others map[string]int
}

// TestHTTPAuth runs one mesh with static tokens and JWTs (RS256 and ES256
// keys from a JWKS URL served by the test) and checks, with hand-made
// requests: every route of the real router × {no token, bad token, expired
// JWT, wrong audience, viewer, user, approver, admin} gives the documented
// status; a second user gets 404 for the first user's conversations over
// REST, SSE, AG-UI, the dialects and A2A; an approval is decided by
// approvers only, and names the approver in the record, the statement,
// the approval_decided event and the conversation; the public agent card
// advertises the bearer scheme (0.3 and 1.0).
func TestHTTPAuth(t *testing.T) {
	t.Parallel()
	m := startAuthMesh(t)
	// ursula's conversations: A waits for an approval, B is idle.
	convA := m.created(t, "user", "add resource owned-a with value 1")
	if waiting, _ := obj(convA, "result")["waiting_approval"].(bool); !waiting {
		t.Fatalf("conversation A did not pause for approval: %v", convA)
	}
	idA, approval := str(convA, "conversation", "id"), str(convA, "result", "approval", "uuid")
	idB := str(m.created(t, "user", "list all resources"), "conversation", "id")
	if approval == "" || idB == "" {
		t.Fatalf("setup: approval %q, conversation B %q", approval, idB)
	}
	t.Run("routes", func(t *testing.T) { testRouteTable(t, m, idB, approval) })
	t.Run("card", func(t *testing.T) { testCardSecurity(t, m) })
	t.Run("ownership", func(t *testing.T) { testOwnership(t, m, idA, approval) })
	t.Run("approval-by", func(t *testing.T) { testApprovalBy(t, m, idA, approval) })
	t.Run("actions", func(t *testing.T) { testActionsOwnership(t, m, idB) })
	t.Run("forks", func(t *testing.T) { testForkOwnership(t, m, idB) })
	if strings.Contains(m.logs(), m.tokens["user"]) || strings.Contains(m.logs(), bobToken) || strings.Contains(m.logs(), "mst1.") {
		t.Error("a token appears in the mesh's logs")
	}
}

// created posts a new conversation with a first message as caller.
func (m *authMesh) created(t *testing.T, caller, message string) map[string]any {
	t.Helper()
	status, out := m.call(t, caller, "POST", "/conversations", map[string]any{"message": message})
	if status != http.StatusCreated {
		t.Fatalf("POST /conversations as %s: %d %v", caller, status, out)
	}
	return out
}

// routeRows are the documented statuses, by route pattern: conv is the
// user's idle conversation, approval the approval of another of hers,
// file the path of a file of a third.
func routeRows(conv, approval, file string) map[string]func() routeRow {
	n := 0
	next := func() string { n++; return fmt.Sprintf("route-table-%d-%d", time.Now().UnixNano(), n) }
	notMine := map[string]int{"viewer": http.StatusNotFound, "approver": http.StatusNotFound}
	return map[string]func() routeRow{
		"GET /health":     func() routeRow { return routeRow{method: "GET", path: "/health", need: auth.Open, ok: 200} },
		"GET /ready":      func() routeRow { return routeRow{method: "GET", path: "/ready", need: auth.Open, ok: 200} },
		"GET /{$}":        func() routeRow { return routeRow{method: "GET", path: "/", need: auth.Open, ok: 200} },
		"GET /web/{name}": func() routeRow { return routeRow{method: "GET", path: "/web/app.js", need: auth.Open, ok: 200} },
		"GET /.well-known/agent-card.json": func() routeRow {
			return routeRow{method: "GET", path: "/.well-known/agent-card.json", need: auth.Open, ok: 200}
		},
		"GET /.well-known/agent.json": func() routeRow {
			return routeRow{method: "GET", path: "/.well-known/agent.json", need: auth.Open, ok: 200}
		},
		"GET /groups/{name}/.well-known/agent-card.json": func() routeRow {
			return routeRow{method: "GET", path: "/groups/nope/.well-known/agent-card.json", need: auth.Open, ok: 404}
		},
		"GET /groups/{name}/.well-known/agent.json": func() routeRow {
			return routeRow{method: "GET", path: "/groups/nope/.well-known/agent.json", need: auth.Open, ok: 404}
		},
		"/":            func() routeRow { return routeRow{method: "GET", path: "/no/such/route", need: auth.Open, ok: 404} },
		"GET /auth/me": func() routeRow { return routeRow{method: "GET", path: "/auth/me", need: auth.Authenticated, ok: 200} },
		"POST /auth/stream-token": func() routeRow {
			return routeRow{method: "POST", path: "/auth/stream-token", need: auth.Authenticated, ok: 200}
		},
		"GET /docs":          func() routeRow { return routeRow{method: "GET", path: "/docs", need: auth.Read, ok: 200} },
		"GET /tools":         func() routeRow { return routeRow{method: "GET", path: "/tools", need: auth.Read, ok: 200} },
		"GET /groups":        func() routeRow { return routeRow{method: "GET", path: "/groups", need: auth.Read, ok: 200} },
		"GET /agents":        func() routeRow { return routeRow{method: "GET", path: "/agents", need: auth.Read, ok: 200} },
		"GET /agents/{name}": func() routeRow { return routeRow{method: "GET", path: "/agents/nope", need: auth.Read, ok: 404} },
		"GET /openapi.json":  func() routeRow { return routeRow{method: "GET", path: "/openapi.json", need: auth.Read, ok: 200} },
		"GET /agents/{name}/.well-known/agent-card.json": func() routeRow {
			return routeRow{method: "GET", path: "/agents/nope/.well-known/agent-card.json", need: auth.Open, ok: 404}
		},
		"GET /agents/{name}/.well-known/agent.json": func() routeRow {
			return routeRow{method: "GET", path: "/agents/nope/.well-known/agent.json", need: auth.Open, ok: 404}
		},
		"POST /agents/{name}/a2a": func() routeRow {
			return routeRow{method: "POST", path: "/agents/nope/a2a", body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"id": conv}}, need: auth.Read, ok: 404}
		},
		"GET /conversations": func() routeRow { return routeRow{method: "GET", path: "/conversations", need: auth.Read, ok: 200} },
		"GET /conversations/{id}": func() routeRow {
			return routeRow{method: "GET", path: "/conversations/" + conv, need: auth.Read, ok: 200, others: notMine}
		},
		"GET /conversations/{id}/events": func() routeRow {
			return routeRow{method: "GET", path: "/conversations/" + conv + "/events", need: auth.Read, ok: 200, others: notMine}
		},
		"GET /conversations/{id}/files/{file}": func() routeRow {
			return routeRow{method: "GET", path: file, need: auth.Read, ok: 200, others: notMine}
		},
		"GET /approvals": func() routeRow { return routeRow{method: "GET", path: "/approvals", need: auth.Read, ok: 200} },
		"GET /approvals/{uuid}": func() routeRow {
			// The approval of ursula's conversation: hers, and every approver's.
			return routeRow{method: "GET", path: "/approvals/" + approval, need: auth.Read, ok: 200, others: map[string]int{"viewer": 404}}
		},
		"POST /conversations": func() routeRow {
			return routeRow{method: "POST", path: "/conversations", body: map[string]any{}, need: auth.Converse, ok: 201}
		},
		"POST /conversations/{id}/messages": func() routeRow {
			return routeRow{method: "POST", path: "/conversations/" + conv + "/messages", body: map[string]any{"message": "list all resources"}, need: auth.Converse, ok: 200}
		},
		"POST /conversations/{id}/regenerate": func() routeRow {
			return routeRow{method: "POST", path: "/conversations/" + conv + "/regenerate", body: map[string]any{}, need: auth.Converse, ok: 200}
		},
		"POST /conversations/{id}/messages/{messageId}/feedback": func() routeRow {
			// A message that does not exist: past the guard, 404.
			return routeRow{method: "POST", path: "/conversations/" + conv + "/messages/no-such-message/feedback", body: map[string]any{"rating": "like"}, need: auth.Converse, ok: 404}
		},
		"POST /conversations/{id}/fork": func() routeRow {
			// A message that does not exist: past the guard, 400.
			return routeRow{method: "POST", path: "/conversations/" + conv + "/fork", body: map[string]any{"after": "no-such-message"}, need: auth.Converse, ok: 400}
		},
		"GET /conversations/{id}/branches": func() routeRow {
			return routeRow{method: "GET", path: "/conversations/" + conv + "/branches", need: auth.Read, ok: 200, others: notMine}
		},
		"POST /conversations/{id}/cancel": func() routeRow {
			return routeRow{method: "POST", path: "/conversations/" + conv + "/cancel", need: auth.Converse, ok: 202}
		},
		"DELETE /conversations/{id}": func() routeRow {
			// A conversation that does not exist: the guard's answer is what
			// is checked (TestLifecycleDelete deletes real ones).
			return routeRow{method: "DELETE", path: "/conversations/" + next(), need: auth.Converse, ok: 404}
		},
		"POST /agui": func() routeRow {
			return routeRow{method: "POST", path: "/agui", need: auth.Converse, ok: 200, body: map[string]any{
				"threadId": next(), "runId": next(), "messages": []any{map[string]any{"id": "m1", "role": "user", "content": "list all resources"}},
				"tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{}}}
		},
		"POST /api/conversation": func() routeRow {
			return routeRow{method: "POST", path: "/api/conversation", body: map[string]any{"message": "list all resources"}, need: auth.Converse, ok: 200}
		},
		"POST /api/chat": func() routeRow {
			return routeRow{method: "POST", path: "/api/chat", body: map[string]any{"message": "list all resources"}, need: auth.Converse, ok: 200}
		},
		"POST /api/ai-sdk": func() routeRow {
			return routeRow{method: "POST", path: "/api/ai-sdk", need: auth.Converse, ok: 200, body: map[string]any{
				"messages": []any{map[string]any{"id": "m1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "list all resources"}}}}}}
		},
		"GET /agui/ws": func() routeRow {
			// A GET that asks for no upgrade: past the guard, the socket
			// answers 426 Upgrade Required.
			return routeRow{method: "GET", path: "/agui/ws", need: auth.Converse, ok: http.StatusUpgradeRequired}
		},
		"POST /a2a": func() routeRow {
			return routeRow{method: "POST", path: "/a2a", body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"id": conv}}, need: auth.Read, ok: 200}
		},
		"POST /groups/{name}/a2a": func() routeRow {
			return routeRow{method: "POST", path: "/groups/nope/a2a", body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"id": conv}}, need: auth.Read, ok: 404}
		},
		"GET /ops/approvals": func() routeRow { return routeRow{method: "GET", path: "/ops/approvals", need: auth.Decide, ok: 200} },
		"GET /ops/approvals/events": func() routeRow {
			return routeRow{method: "GET", path: "/ops/approvals/events", need: auth.Decide, ok: 200}
		},
		"GET /replays": func() routeRow { return routeRow{method: "GET", path: "/replays", need: auth.Admin, ok: 200} },
		"GET /replays/{id}": func() routeRow {
			return routeRow{method: "GET", path: "/replays/no-such-replay", need: auth.Admin, ok: 404}
		},
		"GET /ops/mesh":        func() routeRow { return routeRow{method: "GET", path: "/ops/mesh", need: auth.Read, ok: 200} },
		"GET /ops/mesh/events": func() routeRow { return routeRow{method: "GET", path: "/ops/mesh/events", need: auth.Read, ok: 200} },
		"GET /ops/stats":       func() routeRow { return routeRow{method: "GET", path: "/ops/stats", need: auth.Read, ok: 200} },
		"GET /metrics":         func() routeRow { return routeRow{method: "GET", path: "/metrics", need: auth.Read, ok: 200} },
		// MCP: past the guard, the SDK refuses what lacks its Accept header
		// (or, for DELETE, a session): 400.
		"POST /mcp": func() routeRow {
			return routeRow{method: "POST", path: "/mcp", body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, need: auth.Read, ok: 400}
		},
		"GET /mcp":    func() routeRow { return routeRow{method: "GET", path: "/mcp", need: auth.Read, ok: 400} },
		"DELETE /mcp": func() routeRow { return routeRow{method: "DELETE", path: "/mcp", need: auth.Read, ok: 400} },
		"GET /.well-known/oauth-protected-resource/mcp": func() routeRow {
			return routeRow{method: "GET", path: "/.well-known/oauth-protected-resource/mcp", need: auth.Open, ok: 200}
		},
		"POST /approvals/{uuid}": func() routeRow {
			// An approval that does not exist: the guard's answer is what is
			// checked, and no decision is taken.
			return routeRow{method: "POST", path: "/approvals/00000000-0000-4000-8000-000000000000", body: map[string]any{"approved": false}, need: auth.Decide, ok: 404}
		},
	}
}

func testRouteTable(t *testing.T, m *authMesh, conv, approval string) {
	// A conversation of the user's with a file (a 1×1 GIF).
	status, out := m.call(t, "user", "POST", "/conversations", map[string]any{"message": "list all resources",
		"files": []any{map[string]any{"name": "dot.gif", "media_type": "image/gif", "data": "R0lGODlhAQABAAAAACH5BAEAAAAALAAAAAABAAEAAAIBAAA="}}})
	if status != http.StatusCreated {
		t.Fatalf("POST /conversations with a file: %d %v", status, out)
	}
	withFile := obj(out, "conversation")
	users := messagesOf(withFile, "user")
	if len(users) != 1 || len(list(users[0], "files")) != 1 {
		t.Fatalf("the conversation with a file: %v", withFile)
	}
	file := "/conversations/" + str(withFile, "id") + "/files/" + str(obj(list(users[0], "files")[0]), "id")
	rows := routeRows(conv, approval, file)
	cfg, err := config.Parse("agent.yaml", []byte(defaultConfig(t)), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	// The real router's routes: a route without a row fails here.
	for _, route := range meshbridge.Routes(meshbridge.Config{Agent: cfg}) {
		mk, ok := rows[route.Pattern]
		if !ok {
			t.Errorf("route %q has no row in the table of documented statuses", route.Pattern)
			continue
		}
		if row := mk(); row.need != route.Need {
			t.Errorf("route %q needs %s in the bridge, %s in the documentation", route.Pattern, route.Need, row.need)
		}
		for _, caller := range callers {
			row := mk()
			want := row.ok
			switch {
			case row.need == auth.Open:
			case caller == "none" || caller == "bad" || caller == "expired" || caller == "wrong-aud":
				want = http.StatusUnauthorized
			case row.need != auth.Authenticated && !slicesContains(grants[caller], row.need):
				want = http.StatusForbidden
			case row.others[caller] != 0:
				want = row.others[caller]
			}
			status, hdr, body := m.probe(t, caller, row.method, row.path, row.body)
			if status != want {
				t.Errorf("%s %s as %s: status %d, want %d; body %.200s", row.method, row.path, caller, status, want, body)
				continue
			}
			checkRefusal(t, route.Pattern, caller, status, hdr, body)
		}
	}
}

// testCardSecurity: the public agent card advertises the bearer scheme in
// 0.3's form (which a2a-go, a peer, decodes) and 1.0's, and lists its
// skills only to an authenticated caller.
func testCardSecurity(t *testing.T, m *authMesh) {
	_, _, data := m.probe(t, "none", "GET", "/.well-known/agent-card.json", nil)
	var card map[string]any
	if err := json.Unmarshal(data, &card); err != nil {
		t.Fatal(err)
	}
	scheme := obj(card, "securitySchemes", "bearer")
	// 0.3's http bearer and 1.0's httpAuthSecurityScheme.
	checkStrs(t, "securitySchemes.bearer", scheme, map[string]string{"type": "http", "scheme": "bearer", "bearerFormat": "JWT"})
	checkStrs(t, "securitySchemes.bearer.httpAuthSecurityScheme", obj(scheme, "httpAuthSecurityScheme"), map[string]string{"scheme": "Bearer"})
	if fmt.Sprint(card["security"]) != "[map[bearer:[]]]" || obj(list(card, "securityRequirements")[0], "schemes", "bearer") == nil {
		t.Errorf("security %v, securityRequirements %v", card["security"], card["securityRequirements"])
	}
	var peer a2a.AgentCard
	if err := json.Unmarshal(data, &peer); err != nil {
		t.Fatalf("a2a-go cannot read the card: %v", err)
	}
	if s, ok := peer.SecuritySchemes["bearer"].(a2a.HTTPAuthSecurityScheme); !ok || !strings.EqualFold(s.Scheme, "bearer") || len(peer.Security) != 1 {
		t.Errorf("a2a-go reads the card's security as %#v, %v", peer.SecuritySchemes, peer.Security)
	}
	if n := len(list(card, "skills")); n != 0 {
		t.Errorf("an anonymous caller sees %d skills, want none", n)
	}
	_, _, data = m.probe(t, "viewer", "GET", "/.well-known/agent-card.json", nil)
	_ = json.Unmarshal(data, &card)
	if n := len(list(card, "skills")); n == 0 {
		t.Error("an authenticated caller sees no skills")
	}
}

// checkRefusal checks the form of a 401 or 403: WWW-Authenticate: Bearer
// on a 401 (invalid_token for a token that was sent), and a JSON-RPC error
// on the A2A endpoints, the bridge's JSON error elsewhere.
func checkRefusal(t *testing.T, pattern, caller string, status int, hdr http.Header, body []byte) {
	t.Helper()
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return
	}
	if status == http.StatusUnauthorized {
		ch := hdr.Get("WWW-Authenticate")
		if !strings.HasPrefix(ch, "Bearer ") || (caller != "none") != strings.Contains(ch, `error="invalid_token"`) {
			t.Errorf("%s as %s: WWW-Authenticate %q", pattern, caller, ch)
		}
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Errorf("%s as %s: a %d that is not JSON: %s", pattern, caller, status, body)
		return
	}
	if strings.HasSuffix(pattern, "/a2a") {
		if out["jsonrpc"] != "2.0" || obj(out, "error") == nil || out["id"] != nil {
			t.Errorf("%s as %s: %d body %v, want a JSON-RPC error", pattern, caller, status, out)
		}
		return
	}
	if want := map[int]string{401: "unauthorized", 403: "forbidden"}[status]; out["code"] != want {
		t.Errorf("%s as %s: body %v, want code %s", pattern, caller, out, want)
	}
}

func slicesContains(ps []auth.Permission, p auth.Permission) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}
