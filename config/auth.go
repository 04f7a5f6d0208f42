package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Auth is HTTP authentication at the bridge: static bearer tokens, JWTs,
// or both. Absent (no tokens, no jwt) means authentication is off: every
// request is served as an anonymous admin, which the bridge allows only on
// a loopback address (see [Config.CheckExposure]).
type Auth struct {
	// Tokens are static bearer tokens, each naming a principal and its
	// roles.
	Tokens []Token `yaml:"tokens"`
	// JWT accepts JSON Web Tokens signed with an HS256 secret or with the
	// RS256/ES256 keys of a JWKS.
	JWT *JWT `yaml:"jwt"`
	// StreamKey signs the short-lived stream tokens of EventSource clients
	// (POST /auth/stream-token); every bridge of a mesh must share it. At
	// least 32 characters; may be ${ENV}. Empty means the key file
	// <data_dir>/keys/stream.key, which `mesh up` and `mesh bridge` create
	// when missing (mode 0600).
	StreamKey Secret `yaml:"stream_key"`
	// StreamTokenTTL is how long a stream token is valid. Zero means 60s.
	StreamTokenTTL Duration `yaml:"stream_token_ttl"`
}

// Token is one static bearer token.
type Token struct {
	// Name is the principal the token authenticates: the owner of the
	// conversations it creates, the "by" of the approvals it decides.
	Name string `yaml:"name"`
	// Token is the secret itself, at least 16 characters, or ${ENV} to
	// read it from the environment variable ENV.
	Token Secret `yaml:"token"`
	// Roles are among viewer, user, approver and admin.
	Roles []string `yaml:"roles"`
}

// JWT configures the JSON Web Tokens the bridge accepts. Exactly one key
// source: HS256Secret, JWKSFile or JWKSURL.
type JWT struct {
	// HS256Secret verifies HS256 tokens: at least 32 characters; may be
	// ${ENV}.
	HS256Secret Secret `yaml:"hs256_secret"`
	// JWKSFile and JWKSURL hold the RS256 and ES256 public keys (a JSON Web
	// Key Set), read again every JWKSRefresh, and at once for a key id not
	// seen yet (at most every 30s).
	JWKSFile string `yaml:"jwks_file"`
	JWKSURL  string `yaml:"jwks_url"`
	// JWKSRefresh: zero means 10m.
	JWKSRefresh Duration `yaml:"jwks_refresh"`
	// Issuer and Audience are required: a token whose iss or aud differs
	// is refused.
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	// PrincipalClaim names the principal. Empty means "sub".
	PrincipalClaim string `yaml:"principal_claim"`
	// RolesClaim carries the roles: an array of strings or one string of
	// names separated by spaces or commas. Empty means "roles".
	RolesClaim string `yaml:"roles_claim"`
	// ClockSkew is the leeway on exp, nbf and iat. Zero means 30s.
	ClockSkew Duration `yaml:"clock_skew"`
}

// Roles of HTTP principals.
const (
	RoleViewer   = "viewer"
	RoleUser     = "user"
	RoleApprover = "approver"
	RoleAdmin    = "admin"
)

// Roles lists every role, least first.
func Roles() []string { return []string{RoleViewer, RoleUser, RoleApprover, RoleAdmin} }

// Defaults of the auth section.
const (
	DefaultStreamTokenTTL = 60 * time.Second
	DefaultJWKSRefresh    = 10 * time.Minute
	DefaultClockSkew      = 30 * time.Second
	DefaultPrincipalClaim = "sub"
	DefaultRolesClaim     = "roles"
)

// Enabled reports whether HTTP authentication is on.
func (a Auth) Enabled() bool { return len(a.Tokens) > 0 || a.JWT != nil }

// envRefRE is a value that names an environment variable: ${NAME}.
var envRefRE = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// expandSecret replaces a value that is exactly ${NAME} by the variable's
// value; any other value is taken as written (a token may hold '$').
func expandSecret(s Secret, getenv func(string) string) (Secret, string) {
	m := envRefRE.FindStringSubmatch(string(s))
	if m == nil {
		return s, ""
	}
	return Secret(getenv(m[1])), m[1]
}

// applyAuthEnv expands the ${ENV} secrets of the auth section, and records
// the variables they name ([Uses].Auth). Only the bridge needs them: a
// variable that is empty is reported by [Config.CheckAuth], which the
// bridge calls, and not by Load, so that the other roles start without the
// bridge's secrets.
func (c *Config) applyAuthEnv(getenv func(string) string) {
	a := &c.Auth
	c.authVars = map[string]bool{}
	expand := func(field string, v *Secret) {
		val, name := expandSecret(*v, getenv)
		if name != "" {
			c.authVars[name] = true
		}
		if name != "" && val == "" {
			c.unset[field] = name
		}
		*v = val
	}
	for i := range a.Tokens {
		expand(fmt.Sprintf("auth.tokens[%d].token", i), &a.Tokens[i].Token)
	}
	expand("auth.stream_key", &a.StreamKey)
	if a.JWT != nil {
		expand("auth.jwt.hs256_secret", &a.JWT.HS256Secret)
	}
}

// CheckAuth checks the secrets of the auth section, as the bridge needs
// them: every ${ENV} set, tokens of at least 16 characters, each its
// own, secrets long enough. Errors name the field and the variable, never
// a value.
func (c *Config) CheckAuth() error {
	fail := func(field, want string) error { return &Error{File: c.Path, Field: field, Want: want} }
	for _, field := range slices.Sorted(maps.Keys(c.unset)) {
		if strings.HasPrefix(field, "auth.") {
			return fail(field, fmt.Sprintf("names the environment variable %s, which is empty or unset", c.unset[field]))
		}
	}
	a := c.Auth
	secrets := map[string]bool{}
	for i, t := range a.Tokens {
		f := fmt.Sprintf("auth.tokens[%d].token", i)
		switch v := t.Token.Reveal(); {
		case len(v) < 16:
			return fail(f, "must be at least 16 characters (or ${ENV} naming a variable that holds one)")
		case secrets[v]:
			return fail(f, "is the token of another entry: each principal needs its own")
		case strings.ContainsAny(v, " \t\r\n"):
			return fail(f, "must not contain spaces or line breaks")
		}
		secrets[t.Token.Reveal()] = true
	}
	if a.StreamKey != "" && len(a.StreamKey.Reveal()) < 32 {
		return fail("auth.stream_key", "must be at least 32 characters")
	}
	if j := a.JWT; j != nil && j.HS256Secret != "" && len(j.HS256Secret.Reveal()) < 32 {
		return fail("auth.jwt.hs256_secret", "must be at least 32 characters")
	}
	return nil
}

func (c *Config) applyAuthDefaults() {
	a := &c.Auth
	if a.StreamTokenTTL == 0 {
		a.StreamTokenTTL = Duration(DefaultStreamTokenTTL)
	}
	if j := a.JWT; j != nil {
		if j.PrincipalClaim == "" {
			j.PrincipalClaim = DefaultPrincipalClaim
		}
		if j.RolesClaim == "" {
			j.RolesClaim = DefaultRolesClaim
		}
		if j.ClockSkew == 0 {
			j.ClockSkew = Duration(DefaultClockSkew)
		}
		if j.JWKSRefresh == 0 {
			j.JWKSRefresh = Duration(DefaultJWKSRefresh)
		}
	}
}

// principalRE is a principal name: what a token's name may be.
var principalRE = regexp.MustCompile(`^[A-Za-z0-9@._:+-]{1,128}$`)

// checkAuth checks the auth section.
func (c *Config) checkAuth() *fieldErr {
	a := c.Auth
	names := map[string]bool{}
	for i, t := range a.Tokens {
		f := fmt.Sprintf("auth.tokens[%d]", i)
		switch {
		case !principalRE.MatchString(t.Name):
			return &fieldErr{f + ".name", "is required: the principal's name, 1 to 128 letters, digits or @._:+-"}
		case names[t.Name]:
			return &fieldErr{f + ".name", fmt.Sprintf("%q is used twice", t.Name)}
		case t.Token == "" && c.unset[f+".token"] == "":
			return &fieldErr{f + ".token", "is required: the token, or ${ENV} naming a variable that holds it"}
		}
		if err := checkRoles(f+".roles", t.Roles); err != nil {
			return err
		}
		names[t.Name] = true
	}
	if a.StreamTokenTTL < 0 || a.StreamTokenTTL.Std() > time.Hour {
		return &fieldErr{"auth.stream_token_ttl", "must be between 1s and 1h"}
	}
	if j := a.JWT; j != nil {
		if err := checkJWT(j, c.unset["auth.jwt.hs256_secret"] != ""); err != nil {
			return err
		}
	}
	return nil
}

func checkRoles(field string, roles []string) *fieldErr {
	if len(roles) == 0 {
		return &fieldErr{field, "needs at least one of viewer, user, approver, admin"}
	}
	for _, r := range roles {
		if !slices.Contains(Roles(), r) {
			return &fieldErr{field, fmt.Sprintf("%q is not one of viewer, user, approver, admin", r)}
		}
	}
	return nil
}

func checkJWT(j *JWT, hsUnset bool) *fieldErr {
	sources := 0
	for _, set := range []bool{j.HS256Secret != "" || hsUnset, j.JWKSFile != "", j.JWKSURL != ""} {
		if set {
			sources++
		}
	}
	switch {
	case sources != 1:
		return &fieldErr{"auth.jwt", "needs exactly one of hs256_secret, jwks_file and jwks_url"}
	case j.Issuer == "":
		return &fieldErr{"auth.jwt.issuer", "is required: the iss every accepted token carries"}
	case j.Audience == "":
		return &fieldErr{"auth.jwt.audience", "is required: the aud every accepted token carries (this mesh's name for itself)"}
	case j.ClockSkew < 0 || j.ClockSkew.Std() > 10*time.Minute:
		return &fieldErr{"auth.jwt.clock_skew", "must be between 0 and 10m"}
	case j.JWKSRefresh < 0:
		return &fieldErr{"auth.jwt.jwks_refresh", "must not be negative"}
	}
	if j.JWKSURL != "" {
		if u, err := url.Parse(j.JWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &fieldErr{"auth.jwt.jwks_url", fmt.Sprintf("%q is not an http(s) URL", j.JWKSURL)}
		}
	}
	return nil
}

// CheckExposure refuses a bridge that would serve every request as an
// admin beyond this machine: without auth, the HTTP address must be a
// loopback one unless http.insecure says otherwise on purpose, since a
// mesh without authentication is meant for local use. The error names
// the address and the two ways out; its exit code is 2.
func (c *Config) CheckExposure() error { return c.ExposureError(c.HTTPAddr) }

// ExposureError is [Config.CheckExposure] for a bridge listening on addr.
func (c *Config) ExposureError(addr string) error {
	if c.Auth.Enabled() || c.HTTP.Insecure || Loopback(addr) {
		return nil
	}
	return &Error{File: c.Path, Field: "host/port (" + EnvHTTPAddr + ")", Want: fmt.Sprintf(
		"%s is not a loopback address and HTTP authentication is off: anyone who reaches it would own the mesh; "+
			"configure auth (tokens or jwt), bind 127.0.0.1, or set http.insecure: true to serve it unauthenticated on purpose", addr)}
}

// Loopback reports whether a host:port address listens on loopback only:
// localhost, 127.0.0.0/8 or ::1. An empty host or 0.0.0.0 listens
// everywhere; any other name may resolve anywhere.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
