package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/a2a/a2atest"
)

// TestHTTPAuthJWTKeySources: JWTs verified with an HS256 secret (from the
// environment) and with RS256 and ES256 keys of a JWKS file: a valid token
// names its principal, an expired one, one for another audience and one
// signed by another key are 401.
func TestHTTPAuthJWTKeySources(t *testing.T) {
	t.Parallel()
	keys := newJWTKeys(t)
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, keys.jwks(), 0o600); err != nil {
		t.Fatal(err)
	}
	other := newJWTKeys(t)
	other.hs = []byte(strings.Repeat("another-secret!!", 3))
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	other.rsa = otherRSA
	for _, src := range []struct {
		name, jwt string
		env       []string
		algs      []string
	}{
		{"hs256", "    hs256_secret: ${JWT_SECRET}\n", []string{"JWT_SECRET=" + string(keys.hs)}, []string{"HS256"}},
		{"jwks-file", "    jwks_file: " + jwksFile + "\n", nil, []string{"RS256", "ES256"}},
	} {
		t.Run(src.name, func(t *testing.T) {
			cfg := defaultConfig(t) + "\nauth:\n  jwt:\n" + src.jwt + "    issuer: " + jwtIssuer + "\n    audience: " + jwtAudience + "\n    roles_claim: roles\n"
			m := &authMesh{meshProc: startMesh(t, meshOpts{config: cfg, env: src.env}), tokens: map[string]string{}}
			for _, alg := range src.algs {
				m.tokens["good"] = keys.token(t, alg, "jay", []string{"viewer"}, time.Hour, jwtAudience)
				m.tokens["expired"] = keys.token(t, alg, "jay", []string{"viewer"}, -time.Hour, jwtAudience)
				m.tokens["wrong-aud"] = keys.token(t, alg, "jay", []string{"viewer"}, time.Hour, "not-this-mesh")
				m.tokens["other-key"] = other.token(t, alg, "jay", []string{"admin"}, time.Hour, jwtAudience)
				if st, me := m.call(t, "good", "GET", "/auth/me", nil); st != 200 || str(me, "principal", "name") != "jay" || str(me, "principal", "via") != "jwt" {
					t.Errorf("%s: a valid token: %d %v", alg, st, me)
				}
				if st, _ := m.call(t, "good", "POST", "/conversations", map[string]any{}); st != http.StatusForbidden {
					t.Errorf("%s: a viewer creates a conversation: %d, want 403", alg, st)
				}
				for _, caller := range []string{"expired", "wrong-aud", "other-key"} {
					st, hdr, _ := m.probe(t, caller, "GET", "/tools", nil)
					if st != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
						t.Errorf("%s %s: %d %q, want 401 invalid_token", alg, caller, st, hdr.Get("WWW-Authenticate"))
					}
				}
			}
		})
	}
}

// TestHTTPBindSafeDefaults: a mesh without auth on loopback starts and says
// authentication is off; on a non-loopback address it refuses to start
// (exit code 2, a message naming the ways out), unless http.insecure says
// so, and then it starts with a loud warning.
func TestHTTPBindSafeDefaults(t *testing.T) {
	t.Parallel()
	local := startMesh(t, meshOpts{logLevel: "info"})
	if !strings.Contains(local.logs(), "HTTP authentication is off") {
		t.Error("a mesh without auth does not say authentication is off")
	}

	_, port, _ := net.SplitHostPort(freeAddr(t))
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, []byte(defaultConfig(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "mesh"), "up")
	cmd.Env = append(os.Environ(), "MESH_CONFIG="+cfgPath, "MESH_DATA_DIR="+filepath.Join(dir, "data"),
		"MESH_HTTP_ADDR=0.0.0.0:"+port, "MESH_NATS_ADDR="+freeAddr(t), "MESH_LOG_FORMAT=json", "NATS_URL=", "MESH_NATS_AUTH=",
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("mesh up on 0.0.0.0 without auth: %v, want exit code 2; output:\n%s", err, out)
	}
	for _, want := range []string{"0.0.0.0:" + port, "not a loopback address", "auth", "http.insecure: true"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "jetstream")); err == nil {
		t.Error("the refused mesh started its NATS server before refusing")
	}

	// On purpose: it starts, warns loudly, and serves every request as an admin.
	insecure := defaultConfig(t) + "\nhttp:\n  insecure: true\n"
	m := startMesh(t, meshOpts{config: insecure, logLevel: "info", noWait: true, env: []string{"MESH_HTTP_ADDR=0.0.0.0:" + port}})
	m.httpAddr = "127.0.0.1:" + port // where the test reaches it
	m.waitReady()
	if !strings.Contains(m.logs(), "HTTP AUTHENTICATION IS OFF on a non-loopback address") {
		t.Error("an insecure mesh does not warn loudly")
	}
	if st, me := m.try("GET", "/auth/me", nil); st != 200 || me["auth"] != false || str(me, "principal", "name") != "anonymous" {
		t.Errorf("GET /auth/me without auth: %d %v, want the anonymous admin", st, me)
	}
}

// TestA2ADelegationWithHTTPAuth: with authentication on, the caller's
// bearer token (a token of the mesh's configuration) still rides on the
// turn to the agent, which forwards it to the sub-agent; without a token
// the request is refused (401) and nothing reaches the sub-agent.
func TestA2ADelegationWithHTTPAuth(t *testing.T) {
	t.Parallel()
	sub := a2atest.Start(t, a2atest.Options{Name: "resource-agent", Description: "Manages resources"})
	cfg := a2aClientConfig(sub.URL) + fmt.Sprintf("auth:\n  tokens:\n    - {name: carol, token: %s, roles: [user]}\n", bobToken)
	m := startMesh(t, meshOpts{config: cfg})
	created := m.do(http.StatusCreated, "POST", "/conversations", nil, "Authorization", "Bearer "+bobToken, "X-Session-ID", "c0ffee02")
	conv := str(created, "conversation", "id")
	out := m.do(http.StatusOK, "POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"}, "Authorization", "Bearer "+bobToken)
	sends := sub.Sends()
	if len(sends) != 1 || sends[0].Authorization != "Bearer "+bobToken || sends[0].SessionID != "c0ffee02" {
		t.Fatalf("sub-agent received %+v; want the caller's token and session id", sends)
	}
	if resp := str(out, "result", "response"); !strings.Contains(resp, "done: list all resources") {
		t.Errorf("response %q does not carry the sub-agent's answer", resp)
	}
	if st, _ := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"}); st != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", st)
	}
	if n := len(sub.Sends()); n != 1 {
		t.Errorf("the sub-agent received %d sends, want 1", n)
	}
	if strings.Contains(m.logs(), bobToken) {
		t.Error("the token appears in the mesh's logs")
	}
}

// TestProxyApprovalChainWithHTTPAuth: two meshes with authentication on,
// sharing their principals (carol a user, dave an approver). Carol's turn
// on A delegates to B with her token, so B's task is hers; B's task pauses,
// A shows a proxy approval; dave approves it on A, and A's agent forwards
// the decision to B with dave's token: B lets an approver decide the task
// it waits for, records dave, and the call runs once on B.
func TestProxyApprovalChainWithHTTPAuth(t *testing.T) {
	t.Parallel()
	const carol, dave = "carol-user-token-0123456", "dave-approver-token-0123"
	tokens := fmt.Sprintf("auth:\n  tokens:\n    - {name: carol, token: %s, roles: [user]}\n    - {name: dave, token: %s, roles: [approver]}\n", carol, dave)
	b := startMesh(t, meshOpts{config: defaultConfig(t) + "\n" + tokens})
	a := startMesh(t, meshOpts{config: a2aClientConfig("http://"+b.httpAddr) + tokens})
	conv := str(a.do(http.StatusCreated, "POST", "/conversations", nil, "Authorization", "Bearer "+carol), "conversation", "id")
	out := a.do(http.StatusOK, "POST", "/conversations/"+conv+"/messages", map[string]any{"message": "add resource chain-auth with value 5"}, "Authorization", "Bearer "+carol)
	ap := obj(out, "result", "approval")
	task := str(ap, "remote_task_id")
	if task == "" {
		t.Fatalf("A: %v; want a proxy approval", obj(out, "result"))
	}
	bt := b.do(http.StatusOK, "GET", "/conversations/"+task, nil, "Authorization", "Bearer "+carol)
	if str(bt, "conversation", "owner") != "carol" || str(bt, "conversation", "status") != "waiting_approval" {
		t.Fatalf("B's task: owner %q, status %q; want carol's, waiting", str(bt, "conversation", "owner"), str(bt, "conversation", "status"))
	}
	if st, _ := b.try("GET", "/conversations/"+task, nil, "Authorization", "Bearer "+dave); st != http.StatusNotFound {
		t.Errorf("dave reads carol's task on B: %d, want 404", st)
	}
	if st, _ := a.try("POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true}, "Authorization", "Bearer "+carol); st != http.StatusForbidden {
		t.Errorf("carol decides on A: %d, want 403", st)
	}
	done := a.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true}, "Authorization", "Bearer "+dave)
	if resp := str(done, "result", "response"); !strings.Contains(resp, "chain-auth") {
		t.Errorf("A's answer %q does not show the created resource", resp)
	}
	if n := b.resourceRows("chain-auth"); n != 1 {
		t.Errorf("rows on B = %d, want 1", n)
	}
	aps := b.do(http.StatusOK, "GET", "/approvals", nil, "Authorization", "Bearer "+dave)
	var by []string
	for _, x := range list(aps, "approvals") {
		if str(x, "conversation_id") == task {
			by = append(by, str(x, "decision", "by"))
		}
	}
	if len(by) == 0 || by[len(by)-1] != "dave" {
		t.Errorf("B's approvals of the task were decided by %v, want dave", by)
	}
}
