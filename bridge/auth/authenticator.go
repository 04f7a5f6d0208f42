package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
)

// Config configures an [Authenticator].
type Config struct {
	// Auth is agent.yaml's auth section; without tokens and jwt,
	// authentication is off.
	Auth config.Auth
	// StreamKey signs stream tokens (at least 32 bytes). Empty with
	// authentication on is an error; with it off a random key is made.
	StreamKey []byte
	// HTTPClient fetches a JWKS URL. Nil means a client with a 10s timeout.
	HTTPClient *http.Client
	// Now is the clock. Nil means time.Now.
	Now    func() time.Time
	Logger zerolog.Logger
}

// Authenticator checks the credentials of requests.
type Authenticator struct {
	enabled bool
	tokens  map[[sha256.Size]byte]*Principal // by the hash of the token
	// names are the principals of the static tokens, in lower case: no
	// JWT may take one.
	names map[string]bool
	jwt   *jwtVerifier
	key   []byte
	ttl   time.Duration
	now   func() time.Time
}

// New builds an authenticator; a JWKS file that cannot be read is an
// error, a JWKS URL that does not answer yet is tried again on use.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{enabled: cfg.Auth.Enabled(), tokens: map[[sha256.Size]byte]*Principal{}, names: map[string]bool{}, now: cfg.Now, ttl: cfg.Auth.StreamTokenTTL.Or(config.DefaultStreamTokenTTL)}
	if a.now == nil {
		a.now = time.Now
	}
	a.key = cfg.StreamKey
	if len(a.key) == 0 && !a.enabled {
		a.key = make([]byte, 32)
		_, _ = rand.Read(a.key)
	}
	if a.enabled && len(a.key) < 32 {
		return nil, errors.New("auth: the stream key must be at least 32 bytes")
	}
	for _, t := range cfg.Auth.Tokens {
		a.tokens[sha256.Sum256([]byte(t.Token.Reveal()))] = &Principal{Name: t.Name, Roles: knownRoles(t.Roles), Via: ViaToken}
		a.names[strings.ToLower(t.Name)] = true
	}
	if cfg.Auth.JWT != nil {
		v, err := newJWTVerifier(*cfg.Auth.JWT, cfg.HTTPClient, a.now, cfg.Logger)
		if err != nil {
			return nil, err
		}
		a.jwt = v
	}
	return a, nil
}

// Enabled reports whether authentication is on.
func (a *Authenticator) Enabled() bool { return a.enabled }

// JWT reports whether JSON Web Tokens are accepted.
func (a *Authenticator) JWT() bool { return a.jwt != nil }

// Close waits for a JWKS refresh under way. It is idempotent.
func (a *Authenticator) Close() {
	if a.jwt != nil {
		a.jwt.close()
	}
}

// QueryParam is the query parameter of a stream token (RFC 6750 §2.3).
const QueryParam = "access_token"

// Authenticate returns the principal of r: [Anonymous] when authentication
// is off, else the one its credentials name. A request without credentials
// is [ErrNoCredentials]; bad ones [ErrBadCredentials] (or one that wraps
// it: [ErrPrincipalTaken], [ErrCritical]) or [ErrExpired].
func (a *Authenticator) Authenticate(r *http.Request) (*Principal, error) {
	if !a.enabled {
		return Anonymous(), nil
	}
	token, fromQuery := bearer(r)
	if token == "" {
		return nil, ErrNoCredentials
	}
	if p, ok := a.tokens[sha256.Sum256([]byte(token))]; ok && !fromQuery {
		return p, nil
	}
	if strings.HasPrefix(token, streamPrefix) {
		// A stream token reads only: a URL that leaked changes nothing.
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return nil, ErrBadCredentials
		}
		return a.verifyStream(token)
	}
	if fromQuery || a.jwt == nil || strings.Count(token, ".") != 2 {
		return nil, ErrBadCredentials
	}
	p, err := a.jwt.verify(r.Context(), token)
	if err == nil && a.names[strings.ToLower(p.Name)] {
		return nil, ErrPrincipalTaken
	}
	return p, err
}

// bearer is the request's bearer token, from the Authorization header or,
// on GET, the access_token query parameter.
func bearer(r *http.Request) (token string, fromQuery bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", false
		}
		return strings.TrimSpace(tok), false
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if v := r.URL.Query().Get(QueryParam); v != "" {
			return v, true
		}
	}
	return "", false
}

// StripQueryToken removes a stream token from r's URL, so that nothing
// downstream sees or logs it.
func StripQueryToken(r *http.Request) {
	if !strings.Contains(r.URL.RawQuery, QueryParam) {
		return
	}
	q := r.URL.Query()
	q.Del(QueryParam)
	r.URL.RawQuery = q.Encode()
	r.RequestURI = r.URL.RequestURI()
}

// streamPrefix starts every stream token (version 1).
const streamPrefix = "mst1."

type streamClaims struct {
	Name  string   `json:"n"`
	Roles []string `json:"r"`
	Exp   int64    `json:"x"`
}

// StreamToken issues a stream token for p, valid until the time returned:
// auth.stream_token_ttl from now, and never past p's own credential.
func (a *Authenticator) StreamToken(p *Principal) (string, time.Time) {
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	if !p.Expires.IsZero() && p.Expires.Before(exp) {
		exp = p.Expires.Truncate(time.Second)
	}
	payload, _ := json.Marshal(streamClaims{Name: p.Name, Roles: p.Roles, Exp: exp.Unix()})
	body := streamPrefix + base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(a.mac(body)), exp
}

func (a *Authenticator) mac(body string) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

func (a *Authenticator) verifyStream(token string) (*Principal, error) {
	body, sig, ok := strings.Cut(token[len(streamPrefix):], ".")
	if !ok {
		return nil, ErrBadCredentials
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.mac(streamPrefix+body)) {
		return nil, ErrBadCredentials
	}
	data, err := base64.RawURLEncoding.DecodeString(body)
	var c streamClaims
	if err != nil || json.Unmarshal(data, &c) != nil || c.Name == "" {
		return nil, ErrBadCredentials
	}
	if a.now().Unix() >= c.Exp {
		return nil, ErrExpired
	}
	return &Principal{Name: c.Name, Roles: knownRoles(c.Roles), Via: ViaStream, Expires: time.Unix(c.Exp, 0)}, nil
}

// Challenge is the WWW-Authenticate value of a 401 for err (RFC 6750 §3).
func Challenge(err error) string {
	switch {
	case errors.Is(err, ErrNoCredentials):
		return `Bearer realm="agent-mesh"`
	case errors.Is(err, ErrExpired):
		return `Bearer realm="agent-mesh", error="invalid_token", error_description="the token expired"`
	}
	return `Bearer realm="agent-mesh", error="invalid_token"`
}

// Describe says what a 403 refused, for the client.
func Describe(p *Principal, perm Permission) string {
	roles := "no role"
	if len(p.Roles) > 0 {
		roles = "roles " + strings.Join(p.Roles, ", ")
	}
	need := map[Permission]string{Read: "viewer, user or approver", Converse: "user", Decide: "approver", Admin: "admin"}[perm]
	return fmt.Sprintf("%s has %s; this needs the %s role", p.Name, roles, need)
}
