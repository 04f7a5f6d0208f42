package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentmesh/agentmesh/config"
)

const (
	issuer   = "https://issuer.test"
	audience = "agent-mesh"
)

var streamKey = []byte(strings.Repeat("s", 32))

func request(method, token string) *http.Request {
	r := httptest.NewRequest(method, "/conversations", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claims(sub string, roles any, exp time.Duration, aud string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"sub": sub, "roles": roles, "iss": issuer, "aud": aud, "iat": now.Unix(), "exp": now.Add(exp).Unix()}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PrivateKey) map[string]any {
	raw, _ := k.PublicKey.Bytes() // 0x04 || x || y
	return map[string]any{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:])}
}

func jwks(keys ...map[string]any) []byte {
	data, _ := json.Marshal(map[string]any{"keys": keys})
	return data
}

func TestStaticTokensAndPermissions(t *testing.T) {
	a, err := New(Config{StreamKey: streamKey, Auth: config.Auth{Tokens: []config.Token{
		{Name: "vic", Token: "viewer-token-0123456", Roles: []string{"viewer"}},
		{Name: "ursula", Token: "user-token-01234567", Roles: []string{"user"}},
		{Name: "april", Token: "approver-token-0123", Roles: []string{"approver"}},
		{Name: "root", Token: "admin-token-0123456", Roles: []string{"admin"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[Permission]bool{
		"viewer-token-0123456": {Read: true},
		"user-token-01234567":  {Read: true, Converse: true},
		"approver-token-0123":  {Read: true, Decide: true},
		"admin-token-0123456":  {Read: true, Converse: true, Decide: true, Admin: true},
	}
	for token, perms := range want {
		p, err := a.Authenticate(request("POST", token))
		if err != nil {
			t.Fatalf("%s: %v", token, err)
		}
		for _, perm := range []Permission{Read, Converse, Decide, Admin} {
			if p.May(perm) != perms[perm] {
				t.Errorf("%s may %s = %v, want %v", p.Name, perm, p.May(perm), perms[perm])
			}
		}
	}
	if _, err := a.Authenticate(request("GET", "")); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("no token: %v", err)
	}
	if _, err := a.Authenticate(request("GET", "nope-not-a-token-at-all")); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("bad token: %v", err)
	}
	r := httptest.NewRequest("GET", "/x?access_token=user-token-01234567", nil)
	if _, err := a.Authenticate(r); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a static token in the query must not pass: %v", err)
	}
	user, _ := a.Authenticate(request("GET", "user-token-01234567"))
	if !user.Owns("ursula") || user.Owns("") || user.Owns("root") {
		t.Error("a user owns its conversations only")
	}
	root, _ := a.Authenticate(request("GET", "admin-token-0123456"))
	if !root.Owns("ursula") || !root.Owns("") {
		t.Error("an admin reaches every conversation")
	}
}

func TestOffIsAnonymousAdmin(t *testing.T) {
	a, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(request("POST", "whatever"))
	if err != nil {
		t.Fatalf("off: %v", err)
	}
	if !p.IsAnonymous() {
		t.Fatalf("off: principal %+v, want anonymous", p)
	}
	if !p.May(Admin) {
		t.Fatalf("off: anonymous %+v may not administer, want every right", p)
	}
	if a.Enabled() {
		t.Fatal("off: Enabled() = true, want false")
	}
}

func TestStreamTokens(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	cfg := Config{StreamKey: streamKey, Now: clock, Auth: config.Auth{StreamTokenTTL: config.Duration(time.Minute), Tokens: []config.Token{{Name: "u", Token: "user-token-01234567", Roles: []string{"user"}}}}}
	a, _ := New(cfg)
	other := cfg
	other.StreamKey = []byte(strings.Repeat("o", 32))
	b, _ := New(other)
	replica, _ := New(cfg) // another bridge with the shared key

	tok, exp := a.StreamToken(&Principal{Name: "u", Roles: []string{"user"}})
	if exp.Sub(now) > time.Minute || exp.Sub(now) < 59*time.Second {
		t.Errorf("expires in %v", exp.Sub(now))
	}
	q := httptest.NewRequest("GET", "/conversations/x/events?after=3&access_token="+tok, nil)
	p, err := replica.Authenticate(q)
	if err != nil {
		t.Fatalf("a replica with the shared key: %v", err)
	}
	if p.Name != "u" {
		t.Fatalf("a replica with the shared key: principal %q, want u", p.Name)
	}
	if !p.May(Converse) {
		t.Fatalf("a replica with the shared key: %+v may not converse", p)
	}
	if p.Via != "stream" {
		t.Fatalf("a replica with the shared key: via %q, want stream", p.Via)
	}
	if !p.ReadOnly() || !p.Expires.Equal(exp) {
		t.Errorf("a stream token's principal: read-only %v, expires %v; want read-only, expiring with the token at %v", p.ReadOnly(), p.Expires, exp)
	}
	if static, _ := a.Authenticate(request("GET", "user-token-01234567")); static.ReadOnly() || !static.Expires.IsZero() {
		t.Errorf("a static token's principal: read-only %v, expires %v; want neither", static.ReadOnly(), static.Expires)
	}
	// A stream token never outlives the credential it was asked with.
	if _, short := a.StreamToken(&Principal{Name: "j", Roles: []string{"user"}, Via: ViaJWT, Expires: now.Add(10 * time.Second)}); short.After(now.Add(10 * time.Second)) {
		t.Errorf("a stream token of a JWT valid 10 s more expires in %v", short.Sub(now))
	}
	if _, err := b.Authenticate(q); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("another key: %v", err)
	}
	if _, err := a.Authenticate(request("POST", tok)); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a stream token on a POST: %v", err)
	}
	forged := tok[:len(tok)-2] + "AA"
	if _, err := a.Authenticate(request("GET", forged)); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("forged: %v", err)
	}
	now = now.Add(61 * time.Second)
	if _, err := a.Authenticate(q); !errors.Is(err, ErrExpired) {
		t.Errorf("after its ttl: %v", err)
	}
	StripQueryToken(q)
	if strings.Contains(q.URL.String(), "access_token") || strings.Contains(q.RequestURI, "mst1") || q.URL.Query().Get("after") != "3" {
		t.Errorf("stripped: %s %s", q.URL, q.RequestURI)
	}
}

func TestJWTHS256(t *testing.T) {
	secret := strings.Repeat("h", 32)
	a, err := New(Config{StreamKey: streamKey, Auth: config.Auth{JWT: &config.JWT{HS256Secret: config.Secret(secret), Issuer: issuer, Audience: audience, PrincipalClaim: "sub", RolesClaim: "roles"}}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		token string
		want  error
		roles []string
	}{
		{"valid", sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("alice", []string{"user", "chef"}, time.Hour, audience)), nil, []string{"user"}},
		{"roles as a string", sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("alice", "viewer approver", time.Hour, audience)), nil, []string{"viewer", "approver"}},
		{"expired", sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("alice", []string{"user"}, -time.Hour, audience)), ErrExpired, nil},
		{"wrong audience", sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("alice", []string{"user"}, time.Hour, "other")), ErrBadCredentials, nil},
		{"wrong secret", sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), "", claims("alice", []string{"user"}, time.Hour, audience)), ErrBadCredentials, nil},
		{"no exp", sign(t, jwt.SigningMethodHS256, []byte(secret), "", jwt.MapClaims{"sub": "a", "iss": issuer, "aud": audience}), ErrBadCredentials, nil},
		{"alg none", func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims("a", []string{"admin"}, time.Hour, audience)).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}(), ErrBadCredentials, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(request("GET", tc.token))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == nil && (p.Name != "alice" || strings.Join(p.Roles, ",") != strings.Join(tc.roles, ",")) {
				t.Errorf("principal %+v, want alice with %v", p, tc.roles)
			}
			// Accepted until exp plus the clock skew: so long may what it opens last.
			if want := time.Now().Add(time.Hour + config.DefaultClockSkew); tc.want == nil && (p.Expires.Before(want.Add(-5*time.Second)) || p.Expires.After(want)) {
				t.Errorf("the principal of a JWT of an hour expires at %v, want about %v", p.Expires, want)
			}
		})
	}
}

// A JWT whose header has crit is refused: it names extensions the
// recipient must understand, and the bridge understands none (an empty
// list, or one that names a standard parameter, is malformed too).
func TestJWTCritHeaderRefused(t *testing.T) {
	secret := strings.Repeat("h", 32)
	a, err := New(Config{StreamKey: streamKey, Auth: config.Auth{JWT: &config.JWT{HS256Secret: config.Secret(secret), Issuer: issuer, Audience: audience, PrincipalClaim: "sub", RolesClaim: "roles"}}})
	if err != nil {
		t.Fatal(err)
	}
	withHeader := func(h map[string]any) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("alice", []string{"user"}, time.Hour, audience))
		for k, v := range h {
			tok.Header[k] = v
		}
		s, err := tok.SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		header map[string]any
		want   error
	}{
		{"no crit", nil, nil},
		{"an unknown extension", map[string]any{"crit": []string{"https://example.test/ext"}, "https://example.test/ext": true}, ErrCritical},
		{"an empty list", map[string]any{"crit": []string{}}, ErrCritical},
		{"a standard parameter", map[string]any{"crit": []string{"alg"}}, ErrCritical},
		{"not a list", map[string]any{"crit": "exp"}, ErrCritical},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(request("GET", withHeader(tc.header)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want != nil && (!errors.Is(err, ErrBadCredentials) || Challenge(err) != `Bearer realm="agent-mesh", error="invalid_token"`) {
				t.Errorf("refusal %v is not an invalid token (challenge %s)", err, Challenge(err))
			}
			if tc.want == nil && p.Name != "alice" {
				t.Errorf("principal %+v", p)
			}
		})
	}
}

// A JWT cannot be the principal of a static token: the two would own the
// same conversations. Its principal is refused, whatever the case; other
// principals pass, and expire with their token (exp plus the clock skew).
func TestJWTPrincipalOfAStaticTokenRefused(t *testing.T) {
	secret := strings.Repeat("h", 32)
	a, err := New(Config{StreamKey: streamKey, Auth: config.Auth{
		Tokens: []config.Token{{Name: "alice", Token: "alice-token-0123456789", Roles: []string{"user"}}},
		JWT:    &config.JWT{HS256Secret: config.Secret(secret), Issuer: issuer, Audience: audience, PrincipalClaim: "sub", RolesClaim: "roles", ClockSkew: config.Duration(5 * time.Second)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"alice", "Alice"} {
		tok := sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims(sub, []string{"admin"}, time.Hour, audience))
		p, err := a.Authenticate(request("GET", tok))
		if !errors.Is(err, ErrPrincipalTaken) || !errors.Is(err, ErrBadCredentials) {
			t.Errorf("a JWT of %s: %+v %v, want %v", sub, p, err, ErrPrincipalTaken)
		}
	}
	if p, err := a.Authenticate(request("GET", "alice-token-0123456789")); err != nil || p.Name != "alice" || p.Via != ViaToken {
		t.Errorf("alice's static token: %+v %v", p, err)
	}
	c := claims("bob", []string{"user"}, time.Hour, audience)
	p, err := a.Authenticate(request("GET", sign(t, jwt.SigningMethodHS256, []byte(secret), "", c)))
	if err != nil || p.Name != "bob" || p.Via != ViaJWT {
		t.Fatalf("a JWT of bob: %+v %v", p, err)
	}
	if want := time.Unix(c["exp"].(int64), 0).Add(5 * time.Second); !p.Expires.Equal(want) || p.ReadOnly() {
		t.Errorf("bob's JWT: expires %v, read-only %v; want %v (exp plus the skew), not read-only", p.Expires, p.ReadOnly(), want)
	}
}

// A checked JWT is remembered, not checked again on every request, but
// never past its expiry nor for more than verifiedTTL (so the cache adds at
// most a minute to the JWKS refresh before a removed key stops its tokens).
func TestJWTVerifiedCache(t *testing.T) {
	secret := strings.Repeat("h", 32)
	now := time.Now()
	clock := func() time.Time { return now }
	a, err := New(Config{StreamKey: streamKey, Now: clock, Auth: config.Auth{JWT: &config.JWT{HS256Secret: config.Secret(secret), Issuer: issuer, Audience: audience, PrincipalClaim: "sub", RolesClaim: "roles"}}})
	if err != nil {
		t.Fatal(err)
	}
	long := sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("alice", []string{"user"}, time.Hour, audience))
	short := sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("bob", []string{"user"}, 30*time.Second, audience))
	for _, tok := range []string{long, short, long} {
		if _, err := a.Authenticate(request("GET", tok)); err != nil {
			t.Fatal(err)
		}
	}
	until := func(tok string) time.Duration { return a.jwt.verified[sha256.Sum256([]byte(tok))].until.Sub(now) }
	if n := len(a.jwt.verified); n != 2 {
		t.Fatalf("%d tokens remembered, want 2", n)
	}
	if got := until(long); got != verifiedTTL {
		t.Fatalf("the long token is remembered for %v, want %v", got, verifiedTTL)
	}
	if got := until(short); got > 30*time.Second || got < 28*time.Second {
		t.Fatalf("the short token is remembered for %v, want its 30 s left", got)
	}
	// Past its expiry and the clock skew, the short one is checked again
	// and refused.
	now = now.Add(30*time.Second + config.DefaultClockSkew + time.Second)
	if _, err := a.Authenticate(request("GET", short)); !errors.Is(err, ErrExpired) {
		t.Errorf("a remembered token past its expiry: %v, want expired", err)
	}
	if _, err := a.Authenticate(request("GET", long)); err != nil {
		t.Errorf("a token checked again after the minute: %v", err)
	}
}

func TestJWTWithJWKSFileAndURL(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set := jwks(rsaJWK("r1", &rk.PublicKey), ecJWK("e1", ek))
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, set, 0o600); err != nil {
		t.Fatal(err)
	}
	var served atomic.Value
	served.Store(set)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write(served.Load().([]byte))
	}))
	defer srv.Close()
	for _, src := range []struct{ name, file, url string }{{"file", file, ""}, {"url", "", srv.URL}} {
		t.Run(src.name, func(t *testing.T) {
			a, err := New(Config{StreamKey: streamKey, Auth: config.Auth{JWT: &config.JWT{JWKSFile: src.file, JWKSURL: src.url, Issuer: issuer, Audience: audience, PrincipalClaim: "sub", RolesClaim: "roles"}}})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			for _, tok := range []string{
				sign(t, jwt.SigningMethodRS256, rk, "r1", claims("rsa-user", []string{"user"}, time.Hour, audience)),
				sign(t, jwt.SigningMethodES256, ek, "e1", claims("ec-user", []string{"user"}, time.Hour, audience)),
				sign(t, jwt.SigningMethodES256, ek, "", claims("ec-user", []string{"user"}, time.Hour, audience)), // the only ES256 key
			} {
				if p, err := a.Authenticate(request("GET", tok)); err != nil || !p.May(Converse) {
					t.Errorf("%s: %+v %v", tok[:20], p, err)
				}
			}
			other, _ := rsa.GenerateKey(rand.Reader, 2048)
			if _, err := a.Authenticate(request("GET", sign(t, jwt.SigningMethodRS256, other, "r1", claims("x", []string{"admin"}, time.Hour, audience)))); !errors.Is(err, ErrBadCredentials) {
				t.Errorf("a key not in the set: %v", err)
			}
			if _, err := a.Authenticate(request("GET", sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("h", 32)), "", claims("x", []string{"admin"}, time.Hour, audience)))); !errors.Is(err, ErrBadCredentials) {
				t.Errorf("HS256 against a JWKS: %v", err)
			}
		})
	}
	// A rotated key: a new kid makes the URL's set be read again.
	a, _ := New(Config{StreamKey: streamKey, Auth: config.Auth{JWT: &config.JWT{JWKSURL: srv.URL, Issuer: issuer, Audience: audience, PrincipalClaim: "sub", RolesClaim: "roles"}}})
	defer a.Close()
	rk2, _ := rsa.GenerateKey(rand.Reader, 2048)
	served.Store(jwks(rsaJWK("r2", &rk2.PublicKey)))
	a.jwt.keys.triedAt = time.Time{} // as if the last read was long ago
	before := hits.Load()
	if _, err := a.Authenticate(request("GET", sign(t, jwt.SigningMethodRS256, rk2, "r2", claims("new", []string{"viewer"}, time.Hour, audience)))); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if hits.Load() != before+1 {
		t.Errorf("JWKS fetched %d times for the new kid, want 1", hits.Load()-before)
	}
}

func TestEnsureStreamKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "stream.key")
	k1, err := EnsureStreamKey(path)
	if err != nil || len(k1) < 32 {
		t.Fatalf("%v %d", err, len(k1))
	}
	k2, err := EnsureStreamKey(path)
	if err != nil || string(k1) != string(k2) {
		t.Fatal("a second bridge reads the same key")
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(filepath.Dir(path))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("modes %v %v", fi.Mode(), di.Mode())
	}
}
