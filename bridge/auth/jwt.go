package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
)

// jwtVerifier checks JWTs: the signature (HS256 with the secret, RS256 or
// ES256 with a key of the JWKS), exp (required), nbf and iat with the
// clock skew, iss and aud; then reads the principal and its roles.
type jwtVerifier struct {
	cfg    config.JWT
	parser *jwt.Parser
	secret []byte
	keys   *keySet
	now    func() time.Time
	// verified remembers tokens whose signature was checked: a client
	// sends the same JWT on every request, and an RS256 or ES256 check
	// costs a few hundred microseconds on a busy core.
	mu       sync.Mutex
	verified map[[sha256.Size]byte]verifiedJWT
}

// verifiedJWT is a checked token's principal, served until the token
// expires or for verifiedTTL at most, so that a key taken out of the JWKS
// stops its tokens within that time.
type verifiedJWT struct {
	p     *Principal
	until time.Time
}

const (
	verifiedTTL = time.Minute
	// maxVerified bounds the cache; past it, it starts again empty.
	maxVerified = 10000
)

func newJWTVerifier(cfg config.JWT, client *http.Client, now func() time.Time, log zerolog.Logger) (*jwtVerifier, error) {
	methods := []string{"RS256", "ES256"}
	if cfg.HS256Secret != "" {
		methods = []string{"HS256"}
	}
	v := &jwtVerifier{cfg: cfg, parser: jwt.NewParser(
		jwt.WithValidMethods(methods), jwt.WithIssuer(cfg.Issuer), jwt.WithAudience(cfg.Audience),
		jwt.WithLeeway(cfg.ClockSkew.Or(config.DefaultClockSkew)), jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(now),
	), now: now, verified: map[[sha256.Size]byte]verifiedJWT{}}
	if cfg.HS256Secret != "" {
		v.secret = []byte(cfg.HS256Secret.Reveal())
		return v, nil
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	v.keys = &keySet{file: cfg.JWKSFile, url: cfg.JWKSURL, client: client, refresh: cfg.JWKSRefresh.Or(config.DefaultJWKSRefresh), now: now, log: log}
	if err := v.keys.load(context.Background()); err != nil {
		if cfg.JWKSFile != "" {
			return nil, fmt.Errorf("auth: %w", err)
		}
		log.Warn().Err(err).Msg("the JWKS URL did not answer; it is tried again as tokens arrive")
	}
	return v, nil
}

func (v *jwtVerifier) close() {
	if v.keys != nil {
		v.keys.wg.Wait()
	}
}

func (v *jwtVerifier) verify(ctx context.Context, token string) (*Principal, error) {
	sum := sha256.Sum256([]byte(token))
	now := v.now()
	v.mu.Lock()
	c, ok := v.verified[sum]
	v.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.p, nil
	}
	p, exp, err := v.check(ctx, token)
	if err != nil {
		return nil, err
	}
	until := now.Add(verifiedTTL)
	if exp.Before(until) {
		until = exp
	}
	v.mu.Lock()
	if len(v.verified) >= maxVerified {
		clear(v.verified)
	}
	v.verified[sum] = verifiedJWT{p: p, until: until}
	v.mu.Unlock()
	return p, nil
}

// check verifies token and returns its principal and expiry.
func (v *jwtVerifier) check(ctx context.Context, token string) (*Principal, time.Time, error) {
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		// The library does not read crit: a token that names extensions
		// its recipient must understand is refused here, before its key
		// is looked up (this bridge understands none; an empty list, or
		// one naming standard parameters, is malformed anyway).
		if _, ok := t.Header["crit"]; ok {
			return nil, ErrCritical
		}
		if v.secret != nil {
			return v.secret, nil
		}
		kid, _ := t.Header["kid"].(string)
		return v.keys.key(ctx, kid, t.Method.Alg())
	})
	switch {
	case errors.Is(err, ErrCritical):
		return nil, time.Time{}, ErrCritical
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, time.Time{}, ErrExpired
	case err != nil:
		return nil, time.Time{}, ErrBadCredentials
	}
	name, _ := claim(claims, v.cfg.PrincipalClaim).(string)
	if name == "" || len(name) > 256 {
		return nil, time.Time{}, ErrBadCredentials
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return nil, time.Time{}, ErrBadCredentials // required by the parser: not reached
	}
	// The token is accepted until exp plus the clock skew: so long may
	// what it opened (a stream, a socket) last.
	p := &Principal{Name: name, Roles: knownRoles(rolesOf(claim(claims, v.cfg.RolesClaim))), Via: ViaJWT,
		Expires: exp.Add(v.cfg.ClockSkew.Or(config.DefaultClockSkew))}
	return p, exp.Time, nil
}

// claim is the claim named name; a dotted name that is not a claim walks
// nested objects (realm_access.roles).
func claim(c jwt.MapClaims, name string) any {
	if v, ok := c[name]; ok {
		return v
	}
	var cur any = map[string]any(c)
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// rolesOf reads a roles claim: an array of strings, or one string of names
// separated by spaces or commas.
func rolesOf(v any) []string {
	var out []string
	switch r := v.(type) {
	case string:
		out = strings.FieldsFunc(r, func(c rune) bool { return c == ' ' || c == ',' })
	case []any:
		for _, x := range r {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// keySet is a JWKS, cached: read again every refresh (in the background,
// the old keys serving meanwhile), and at once for a key id it does not
// know, at most every unknownEvery.
type keySet struct {
	file, url string
	client    *http.Client
	refresh   time.Duration
	now       func() time.Time
	log       zerolog.Logger

	mu        sync.Mutex
	keys      []jwk // parsed
	loadedAt  time.Time
	triedAt   time.Time
	reloading bool
	wg        sync.WaitGroup
}

// unknownEvery bounds the reloads a stream of unknown key ids causes.
const unknownEvery = 30 * time.Second

type jwk struct {
	kid string
	alg string // RS256 or ES256
	key any
}

func (s *keySet) key(ctx context.Context, kid, alg string) (any, error) {
	s.mu.Lock()
	if !s.loadedAt.IsZero() && s.now().Sub(s.loadedAt) > s.refresh && !s.reloading {
		s.reloading = true
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.load(ctx); err != nil {
				s.log.Warn().Err(err).Msg("JWKS refresh; the keys read before go on serving")
			}
			s.mu.Lock()
			s.reloading = false
			s.mu.Unlock()
		}()
	}
	k, found := s.find(kid, alg)
	wait := unknownEvery
	if s.loadedAt.IsZero() {
		wait = 5 * time.Second
	}
	retry := !found && s.now().Sub(s.triedAt) > wait
	s.mu.Unlock()
	if found {
		return k, nil
	}
	if retry {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s.load(ctx); err != nil {
			s.log.Warn().Err(err).Msg("JWKS reload for an unknown key id")
		}
		s.mu.Lock()
		k, found = s.find(kid, alg)
		s.mu.Unlock()
		if found {
			return k, nil
		}
	}
	return nil, errors.New("no key of the JWKS matches the token")
}

// find is the key for kid and alg: the one with that id, or without an id
// the only key of that algorithm. Called with mu held.
func (s *keySet) find(kid, alg string) (any, bool) {
	var match []any
	for _, k := range s.keys {
		if k.alg == alg && (kid == "" || k.kid == kid) {
			match = append(match, k.key)
		}
	}
	if len(match) == 1 || (kid != "" && len(match) > 0) {
		return match[0], true
	}
	return nil, false
}

// load reads the JWKS and replaces the keys when it parses.
func (s *keySet) load(ctx context.Context) error {
	s.mu.Lock()
	s.triedAt = s.now()
	s.mu.Unlock()
	var data []byte
	var err error
	if s.file != "" {
		data, err = os.ReadFile(s.file)
	} else {
		data, err = s.fetch(ctx)
	}
	if err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return fmt.Errorf("jwks %s%s: %w", s.file, s.url, err)
	}
	s.mu.Lock()
	s.keys, s.loadedAt = keys, s.now()
	s.mu.Unlock()
	return nil
}

func (s *keySet) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", s.url, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

// parseJWKS reads the RS256 and ES256 signing keys of a JSON Web Key Set
// (RFC 7517); keys of other types, curves or uses are skipped. A set with
// no usable key is an error.
func parseJWKS(data []byte) ([]jwk, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			Alg string `json:"alg"`
			N   string `json:"n"`
			E   string `json:"e"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	var out []jwk
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch {
		case k.Kty == "RSA" && (k.Alg == "" || k.Alg == "RS256"):
			n, err1 := base64.RawURLEncoding.DecodeString(k.N)
			e, err2 := base64.RawURLEncoding.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
				continue
			}
			pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
			if pub.N.BitLen() < 2048 {
				continue
			}
			out = append(out, jwk{kid: k.Kid, alg: "RS256", key: pub})
		case k.Kty == "EC" && k.Crv == "P-256" && (k.Alg == "" || k.Alg == "ES256"):
			x, err1 := base64.RawURLEncoding.DecodeString(k.X)
			y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
			if err1 != nil || err2 != nil || len(x) > 32 || len(y) > 32 {
				continue
			}
			point := make([]byte, 65)
			point[0] = 4
			copy(point[1+32-len(x):33], x)
			copy(point[33+32-len(y):], y)
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
			if err != nil {
				continue
			}
			out = append(out, jwk{kid: k.Kid, alg: "ES256", key: pub})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no RS256 or ES256 signing key")
	}
	return out, nil
}
