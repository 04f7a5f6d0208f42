// Package auth is the bridge's HTTP identity: who a request comes from (a
// [Principal]) and what its roles let it do ([Permission]).
//
// An [Authenticator] checks the credentials of a request, in this order:
//
//	Authorization: Bearer <static token>   auth.tokens: the token's name and roles
//	Authorization: Bearer <JWT>            auth.jwt: HS256 secret, or RS256/ES256 keys of a JWKS
//	Authorization: Bearer mst1.…           a stream token (GET requests only)
//	?access_token=mst1.…                   a stream token in the query, for EventSource (GET only)
//
// A stream token is what an EventSource, which cannot send headers, uses:
// POST /auth/stream-token gives one to an authenticated principal, bound to
// its name and roles, valid for auth.stream_token_ttl (60 s), signed with
// HMAC-SHA256 by a key every bridge of the mesh shares (auth.stream_key,
// else <data_dir>/keys/stream.key, see [EnsureStreamKey]), so any replica
// accepts what another issued. It only reads: its principal is
// [Principal.ReadOnly], whatever its roles. Tokens of every kind are never
// logged and never echoed in an error.
//
// A principal carries when its credential stops being accepted
// ([Principal.Expires]), so that a stream or socket it opened ends then.
//
// A JWT whose principal is the name of a static token is refused
// ([ErrPrincipalTaken]): the two would own the same conversations.
//
// Roles grant permissions: viewer [Read]; user [Read] and [Converse];
// approver [Read] and [Decide]; admin everything, [Admin] included (the
// conversations of others). With authentication off every request is the
// [Anonymous] principal, an admin.
//
// The package holds no goroutine but the JWKS refreshes it starts, one at a
// time, which [Authenticator.Close] waits for.
package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/config"
)

// Permission is what a route or an action needs.
type Permission int

// Permissions, from none to all.
const (
	// Open needs nothing: no credentials at all.
	Open Permission = iota
	// Authenticated needs valid credentials, whatever the roles.
	Authenticated
	// Read lists tools, groups and docs, and reads the principal's own
	// conversations and their approvals (viewer, user, approver).
	Read
	// Converse creates conversations, sends to and cancels the
	// principal's own (user).
	Converse
	// Decide reads and decides every approval of the mesh (approver).
	Decide
	// Admin reaches every conversation, whoever owns it (admin).
	Admin
)

var permissionNames = [...]string{"open", "authenticated", "read", "converse", "decide", "admin"}

func (p Permission) String() string {
	if p < 0 || int(p) >= len(permissionNames) {
		return "unknown"
	}
	return permissionNames[p]
}

// Principal is who a request comes from.
type Principal struct {
	// Name identifies the principal: a static token's name, a JWT's
	// principal claim. It owns the conversations the principal creates.
	Name string `json:"name"`
	// Roles are among viewer, user, approver and admin.
	Roles []string `json:"roles"`
	// Via says how the principal was authenticated: token, jwt, stream, or
	// none for [Anonymous].
	Via string `json:"via"`
	// Expires is when the credential that authenticated the principal
	// stops being accepted: a stream token's expiry, a JWT's exp plus the
	// clock skew. Zero for a static token and [Anonymous], which do not
	// expire.
	Expires time.Time `json:"-"`
}

// How a principal was authenticated: [Principal.Via].
const (
	ViaToken  = "token"
	ViaJWT    = "jwt"
	ViaStream = "stream"
	ViaNone   = "none"
)

// Anonymous is the principal of every request when authentication is off:
// an admin, as the mesh was before it had authentication. Each call makes
// one afresh.
func Anonymous() *Principal {
	return &Principal{Name: "anonymous", Roles: []string{config.RoleAdmin}, Via: ViaNone}
}

// IsAnonymous reports whether p is the principal of a request made while
// authentication is off ([Anonymous]): the only one of no credential.
func (p *Principal) IsAnonymous() bool { return p != nil && p.Via == ViaNone }

// ReadOnly reports whether p was authenticated by a stream token: it
// reads and does nothing else, whatever its roles (a URL that leaked
// changes nothing).
func (p *Principal) ReadOnly() bool { return p != nil && p.Via == ViaStream }

// Has reports whether p has role.
func (p *Principal) Has(role string) bool { return p != nil && slices.Contains(p.Roles, role) }

// May reports whether p's roles grant perm.
func (p *Principal) May(perm Permission) bool {
	if p == nil {
		return perm == Open
	}
	if p.Has(config.RoleAdmin) {
		return true
	}
	switch perm {
	case Open, Authenticated:
		return true
	case Read:
		return p.Has(config.RoleViewer) || p.Has(config.RoleUser) || p.Has(config.RoleApprover)
	case Converse:
		return p.Has(config.RoleUser)
	case Decide:
		return p.Has(config.RoleApprover)
	}
	return false
}

// Owns reports whether p may reach a conversation of owner: its owner, or
// an admin. A conversation without owner (made while authentication was
// off) is an admin's only.
func (p *Principal) Owns(owner string) bool {
	if p == nil {
		return false
	}
	return p.May(Admin) || (owner != "" && owner == p.Name)
}

// Errors of [Authenticator.Authenticate]; their text is safe to show the
// client (it never quotes a token).
var (
	ErrNoCredentials  = errors.New("authentication required: send Authorization: Bearer <token>")
	ErrBadCredentials = errors.New("invalid token")
	ErrExpired        = errors.New("token expired")
	// ErrPrincipalTaken (an [ErrBadCredentials]) refuses a JWT whose
	// principal is the name of a static token (auth.tokens), whatever the
	// case: the JWT would own the static token's conversations, and it
	// theirs.
	ErrPrincipalTaken = fmt.Errorf("%w: its principal is the name of a static token of this bridge (auth.tokens), which a JWT cannot act as", ErrBadCredentials)
	// ErrCritical (an [ErrBadCredentials]) refuses a JWT whose header has
	// crit: it names extensions a recipient must understand, and this
	// bridge understands none.
	ErrCritical = fmt.Errorf(`%w: its "crit" header names extensions this bridge does not understand`, ErrBadCredentials)
)

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext is the principal ctx carries, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}

// knownRoles keeps the roles the mesh knows, each once, in the order of
// [config.Roles].
func knownRoles(roles []string) []string {
	out := []string{}
	for _, r := range config.Roles() {
		if slices.Contains(roles, r) {
			out = append(out, r)
		}
	}
	return out
}
