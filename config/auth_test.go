package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

const authYAML = minimal + `auth:
  tokens:
    - name: alice
      token: ${ALICE_TOKEN}
      roles: [user]
    - name: root
      token: literal-token-0123456789
      roles: [admin, approver]
  jwt:
    hs256_secret: ${JWT_SECRET}
    issuer: https://issuer.example
    audience: agent-mesh
`

func TestAuthFromFileAndEnvironment(t *testing.T) {
	c, err := Parse("agent.yaml", []byte(authYAML), env("ALICE_TOKEN", "alice-secret-token-42", "JWT_SECRET", strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Auth
	if !a.Enabled() {
		t.Fatal("auth not enabled with two tokens configured")
	}
	if len(a.Tokens) != 2 {
		t.Fatalf("got %d tokens, want 2: %+v", len(a.Tokens), a.Tokens)
	}
	if got := a.Tokens[0].Token.Reveal(); got != "alice-secret-token-42" {
		t.Fatalf("token 0 = %q, want the value of ALICE_TOKEN", got)
	}
	if got := a.Tokens[1].Token.Reveal(); got != "literal-token-0123456789" {
		t.Fatalf("token 1 = %q, want the literal from the file", got)
	}
	if a.JWT.HS256Secret.Reveal() != strings.Repeat("k", 32) {
		t.Error("jwt hs256 secret is not the value of JWT_SECRET")
	}
	if a.JWT.PrincipalClaim != "sub" {
		t.Errorf("jwt principal claim = %q, want the default sub", a.JWT.PrincipalClaim)
	}
	if a.JWT.RolesClaim != "roles" {
		t.Errorf("jwt roles claim = %q, want the default roles", a.JWT.RolesClaim)
	}
	if got := a.JWT.ClockSkew.Std(); got != 30*time.Second {
		t.Errorf("jwt clock skew = %v, want the default 30s", got)
	}
	if got := a.StreamTokenTTL.Std(); got != time.Minute {
		t.Errorf("stream token ttl = %v, want the default 1m", got)
	}
	// Secrets never print.
	if s := fmt.Sprintf("%v %+v %#v", a, a.Tokens, a.JWT); strings.Contains(s, "alice-secret") || strings.Contains(s, "kkkk") || strings.Contains(s, "literal-token") {
		t.Errorf("a secret printed: %s", s)
	}
	if err := c.CheckAuth(); err != nil {
		t.Errorf("CheckAuth: %v", err)
	}
	off, err := Parse("agent.yaml", []byte(minimal), env())
	if err != nil || off.Auth.Enabled() {
		t.Fatalf("no auth section: enabled %v, err %v", off.Auth.Enabled(), err)
	}
	// A role other than the bridge loads the file without the bridge's
	// secrets; the bridge's CheckAuth names the variable.
	noEnv, err := Parse("agent.yaml", []byte(authYAML), env())
	if err != nil {
		t.Fatalf("without the variables: %v", err)
	}
	if err := noEnv.CheckAuth(); err == nil || !strings.Contains(err.Error(), "ALICE_TOKEN") && !strings.Contains(err.Error(), "JWT_SECRET") {
		t.Errorf("CheckAuth without the variables: %v", err)
	}
}

func TestAuthErrorsNameTheField(t *testing.T) {
	tok := func(name, token, roles string) string {
		return minimal + fmt.Sprintf("auth:\n  tokens:\n    - name: %s\n      token: %s\n      roles: %s\n", name, token, roles)
	}
	jwt := func(body string) string { return minimal + "auth:\n  jwt:\n" + body }
	cases := []struct {
		name, yaml, field string
		env               []string
	}{
		{"empty env", tok("a", "${NOPE}", "[user]"), "auth.tokens[0].token", nil},
		{"short token", tok("a", "short", "[user]"), "auth.tokens[0].token", nil},
		{"no name", tok(`""`, "0123456789abcdef0", "[user]"), "auth.tokens[0].name", nil},
		{"bad role", tok("a", "0123456789abcdef0", "[root]"), "auth.tokens[0].roles", nil},
		{"no role", tok("a", "0123456789abcdef0", "[]"), "auth.tokens[0].roles", nil},
		{"two sources", jwt("    hs256_secret: " + strings.Repeat("s", 32) + "\n    jwks_url: https://x/jwks\n    issuer: i\n    audience: a\n"), "auth.jwt", nil},
		{"short secret", jwt("    hs256_secret: short\n    issuer: i\n    audience: a\n"), "auth.jwt.hs256_secret", nil},
		{"no audience", jwt("    jwks_file: k.json\n    issuer: i\n"), "auth.jwt.audience", nil},
		{"no issuer", jwt("    jwks_file: k.json\n    audience: a\n"), "auth.jwt.issuer", nil},
		{"bad url", jwt("    jwks_url: ftp://x\n    issuer: i\n    audience: a\n"), "auth.jwt.jwks_url", nil},
		{"short stream key", minimal + "auth:\n  stream_key: abc\n", "auth.stream_key", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("agent.yaml", []byte(tc.yaml), env(tc.env...))
			if err == nil {
				err = c.CheckAuth() // the secrets: what only the bridge needs
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("err = %v, want a config error on %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "0123456789abcdef0") {
				t.Errorf("the error quotes a token: %v", err)
			}
		})
	}
}

func TestCheckExposure(t *testing.T) {
	cases := []struct {
		name, yaml, addr string
		refused          bool
	}{
		{"loopback v4", minimal, "127.0.0.1:8080", false},
		{"loopback v6", minimal, "[::1]:8080", false},
		{"localhost", minimal, "localhost:8080", false},
		{"everywhere", minimal, "0.0.0.0:8080", true},
		{"empty host", minimal, ":8080", true},
		{"a name", minimal, "mesh.example:8080", true},
		{"insecure on purpose", minimal + "http:\n  insecure: true\n", "0.0.0.0:8080", false},
		{"auth on", minimal + "auth:\n  tokens:\n    - {name: a, token: 0123456789abcdef0, roles: [admin]}\n", "0.0.0.0:8080", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("agent.yaml", []byte(tc.yaml), env(EnvHTTPAddr, tc.addr))
			if err != nil {
				t.Fatal(err)
			}
			err = c.CheckExposure()
			var ce *Error
			if got := errors.As(err, &ce); got != tc.refused {
				t.Fatalf("CheckExposure(%s) = %v, want refused %v", tc.addr, err, tc.refused)
			}
			if tc.refused && (!strings.Contains(err.Error(), "http.insecure") || !strings.Contains(err.Error(), tc.addr)) {
				t.Errorf("the refusal does not name the address and the ways out: %v", err)
			}
		})
	}
}
