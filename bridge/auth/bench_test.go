package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentmesh/agentmesh/config"
)

// BenchmarkAuthenticate is what authentication adds to one request, by kind
// of credentials: a static token, a stream token, and JWTs (HS256, RS256
// and ES256 keys from a JWKS file).
func BenchmarkAuthenticate(b *testing.B) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	file := filepath.Join(b.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwks(rsaJWK("r1", &rk.PublicKey), ecJWK("e1", ek)), 0o600); err != nil {
		b.Fatal(err)
	}
	secret := strings.Repeat("h", 32)
	tokens := []config.Token{{Name: "u", Token: "user-token-01234567", Roles: []string{"user"}}}
	hs, _ := New(Config{StreamKey: streamKey, Auth: config.Auth{Tokens: tokens, JWT: &config.JWT{HS256Secret: config.Secret(secret), Issuer: issuer, Audience: audience, PrincipalClaim: "sub", RolesClaim: "roles"}}})
	ks, _ := New(Config{StreamKey: streamKey, Auth: config.Auth{Tokens: tokens, JWT: &config.JWT{JWKSFile: file, Issuer: issuer, Audience: audience, PrincipalClaim: "sub", RolesClaim: "roles"}}})
	defer ks.Close()
	st, _ := hs.StreamToken(&Principal{Name: "u", Roles: []string{"user"}})
	cases := []struct {
		name  string
		a     *Authenticator
		token string
	}{
		{"static", hs, "user-token-01234567"},
		{"stream", hs, st},
		{"jwt-hs256", hs, sign(b, jwt.SigningMethodHS256, []byte(secret), "", claims("u", []string{"user"}, time.Hour, audience))},
		{"jwt-rs256", ks, sign(b, jwt.SigningMethodRS256, rk, "r1", claims("u", []string{"user"}, time.Hour, audience))},
		{"jwt-es256", ks, sign(b, jwt.SigningMethodES256, ek, "e1", claims("u", []string{"user"}, time.Hour, audience))},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := request("GET", c.token)
			for b.Loop() {
				if _, err := c.a.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
