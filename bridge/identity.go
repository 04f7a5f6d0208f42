package bridge

import (
	"net/http"
	"time"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
)

// me serves GET /auth/me: whether authentication is on, who the caller is
// and what it may do with the credential it sent (a stream token only
// reads, whatever its principal's roles). The web page asks it first: 401
// means sign in.
func (b *Role) me(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	may := map[string]bool{}
	for _, perm := range []auth.Permission{auth.Read, auth.Converse, auth.Decide, auth.Admin} {
		may[perm.String()] = p.May(perm) && (perm == auth.Read || !p.ReadOnly())
	}
	core.WriteJSON(w, http.StatusOK, map[string]any{"auth": b.auth.Enabled(), "principal": p, "may": may})
}

// streamToken serves POST /auth/stream-token: a token for the query of an
// EventSource (?access_token=…), bound to the caller, valid for
// auth.stream_token_ttl (never past the caller's own credential), accepted
// by every bridge of the mesh; it only reads (GET, and a socket that
// follows).
func (b *Role) streamToken(w http.ResponseWriter, r *http.Request) {
	tok, exp := b.auth.StreamToken(auth.FromContext(r.Context()))
	w.Header().Set("Cache-Control", "no-store")
	core.WriteJSON(w, http.StatusOK, map[string]any{
		"token": tok, "expires_at": exp.UTC().Format(time.RFC3339), "expires_in": int(time.Until(exp).Seconds()),
		"param": auth.QueryParam,
	})
}
