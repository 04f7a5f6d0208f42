package bridge

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/a2a"
	"github.com/agentmesh/agentmesh/bridge/agui"
	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/docs"
	"github.com/agentmesh/agentmesh/bridge/mcpserver"
	"github.com/agentmesh/agentmesh/bridge/ops"
	"github.com/agentmesh/agentmesh/bridge/replays"
	"github.com/agentmesh/agentmesh/bridge/rest"
	"github.com/agentmesh/agentmesh/bridge/web"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// access is what each route needs, by the pattern it is registered with.
// A route missing here needs the admin role (and TestEveryRouteHasARule
// fails); ownership of conversations is checked further in, by the core.
var access = map[string]auth.Permission{
	"GET /health":                              auth.Open,
	"GET /ready":                               auth.Open,
	"GET /{$}":                                 auth.Open, // the page: it asks for a token itself
	"GET /web/{name}":                          auth.Open,
	"GET " + wire.CardPath:                     auth.Open, // the card says how to authenticate
	"GET " + wire.LegacyCardPath:               auth.Open,
	"GET /groups/{name}" + wire.CardPath:       auth.Open,
	"GET /groups/{name}" + wire.LegacyCardPath: auth.Open,
	"GET /agents/{name}" + wire.CardPath:       auth.Open,
	"GET /agents/{name}" + wire.LegacyCardPath: auth.Open,
	"/": auth.Open, // no such route: 404

	"GET /auth/me":            auth.Authenticated,
	"POST /auth/stream-token": auth.Authenticated,

	"GET /docs":                      auth.Read,
	"GET " + OpenAPIPath:             auth.Read,
	"GET /tools":                     auth.Read,
	"GET /groups":                    auth.Read,
	"GET /agents":                    auth.Read,
	"GET /agents/{name}":             auth.Read,
	"GET /conversations":             auth.Read, // the caller's own
	"GET /conversations/{id}":        auth.Read,
	"GET /conversations/{id}/events": auth.Read,
	// A file of a conversation: its owner's (or an admin's), as the
	// conversation is; anyone else gets 404.
	"GET /conversations/{id}/files/{file}": auth.Read,
	"GET /approvals":                       auth.Read, // of the caller's conversations; all for approvers
	"GET /approvals/{uuid}":                auth.Read,
	// A2A reads (tasks/get, ListTasks, resubscribe) need read; a message
	// that starts a turn and tasks/cancel converse, one that decides an
	// approval decide: the a2a package asks per method.
	"POST " + a2a.Path:               auth.Read,
	"POST /groups/{name}" + a2a.Path: auth.Read,
	"POST /agents/{name}" + a2a.Path: auth.Read,

	"POST /conversations":               auth.Converse,
	"POST /conversations/{id}/messages": auth.Converse,
	"POST /conversations/{id}/cancel":   auth.Converse,
	// The user actions on answers: the conversation's owner (the core
	// checks), as sending a message.
	"POST /conversations/{id}/regenerate":                    auth.Converse,
	"POST /conversations/{id}/messages/{messageId}/feedback": auth.Converse,
	// A branch is a new conversation of the caller, of one it may read
	// (the core checks); its family, as reading the conversation.
	"POST /conversations/{id}/fork":    auth.Converse,
	"GET /conversations/{id}/branches": auth.Read,
	// Its owner or an admin (the core checks); ?purge=true admins only.
	"DELETE /conversations/{id}": auth.Converse,
	"POST /agui":                 auth.Converse, // a resume also needs Decide (core.Decide)
	"POST /api/conversation":     auth.Converse,
	"POST /api/chat":             auth.Converse,
	"POST " + agui.AISDKPath:     auth.Converse,
	// A socket converses: its frames start runs and follow threads (the
	// caller's own); a resume in a frame also needs Decide (core.Decide).
	// Opened with a stream token, it only follows (core.Writes).
	"GET " + agui.SocketPath: auth.Converse,

	// MCP: listing the tools reads; a call converses (the core checks, as
	// for a message). A session belongs to the principal that opened it.
	"POST " + mcpserver.Path: auth.Read,
	"GET " + mcpserver.Path:  auth.Read,
	// Says how to authenticate: open, as the agent card is.
	"GET " + mcpserver.MetadataPath: auth.Open,
	"DELETE " + mcpserver.Path:      auth.Read,

	"POST /approvals/{uuid}": auth.Decide,

	// The operations API (bridge/ops): the inbox holds every approval of
	// the mesh, its arguments and who asked, so approvers and admins only;
	// the mesh view holds processes, counts and rates, no conversation.
	"GET /ops/approvals":        auth.Decide,
	"GET /ops/approvals/events": auth.Decide,
	"GET /ops/mesh":             auth.Read,
	"GET /ops/mesh/events":      auth.Read,
	"GET /ops/stats":            auth.Read,

	// The reports of replays (bridge/replays): what recorded conversations
	// said and did, whoever owned them, so admins only.
	"GET " + replays.ListPath:   auth.Admin,
	"GET " + replays.ReportPath: auth.Admin,

	// Prometheus metrics of the bridge process: counts by route, agent,
	// tool and outcome, nothing of a conversation.
	"GET /metrics": auth.Read,
}

// rpcRoutes answer refusals as JSON-RPC errors.
var rpcRoutes = []string{"POST " + a2a.Path, "POST /groups/{name}" + a2a.Path, "POST /agents/{name}" + a2a.Path}

// Route is one route of the bridge and what it needs.
type Route struct {
	Pattern string
	Need    auth.Permission
	// Known is false for a route without a rule in the table (it needs
	// admin).
	Known bool
}

// recorder is a mux that remembers the patterns registered on it.
type recorder struct {
	mux      *http.ServeMux
	patterns []string
}

func (r *recorder) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	r.patterns = append(r.patterns, pattern)
	if r.mux != nil {
		r.mux.HandleFunc(pattern, h)
	}
}

// register mounts every surface's routes on mux.
// b is nil when only the patterns are wanted.
func register(mux core.Mux, b *Role, cfg Config, c *core.Core) {
	bearer, format := false, ""
	if b != nil && b.auth.Enabled() {
		bearer = true
		if b.auth.JWT() {
			format = "JWT"
		}
	}
	subAgents := cfg.Agent.SubAgents()
	rest.Register(mux, rest.Config{
		Core: c, MaxBodyBytes: cfg.Agent.HTTP.MaxBodyBytes, WaitTimeout: cfg.Agent.HTTP.WaitTimeout.Std(),
		Version: cfg.Version, SubAgents: subAgents, Logger: cfg.Logger,
	})
	acfg := agui.Config{
		Core: c, MaxBodyBytes: cfg.Agent.HTTP.MaxBodyBytes,
		PingAfter: cfg.Agent.HTTP.PingAfter.Std(), PingEvery: cfg.Agent.HTTP.PingEvery.Std(), Logger: cfg.Logger,
		DottedOneMessage: cfg.Agent.HTTP.DottedOneMessage,
	}
	agui.Register(mux, acfg)
	hc := &cfg.Agent.HTTP
	agui.RegisterSocket(mux, acfg, agui.SocketConfig{OriginAllowed: func(o string) bool { return originAdmitted(o, hc) },
		Heartbeat: hc.WebSocket.Heartbeat.Std(), MaxThreads: hc.WebSocket.MaxThreads, FrameTimeout: hc.WebSocket.FrameTimeout.Std()})
	a2a.Register(mux, a2a.Config{
		Core: c, Name: cfg.Agent.Name, Description: cfg.Agent.Description, Version: cfg.Version,
		PublicURL: cfg.Agent.HTTP.PublicURL, SubAgents: subAgents,
		MaxBodyBytes: cfg.Agent.HTTP.MaxBodyBytes, WaitTimeout: cfg.Agent.HTTP.WaitTimeout.Std(),
		Bearer: bearer, BearerFormat: format, Logger: cfg.Logger,
	})
	var issuers []string
	if a := cfg.Agent.Auth.JWT; a != nil && a.Issuer != "" {
		issuers = []string{a.Issuer}
	}
	mcpserver.Register(mux, mcpserver.Config{Core: c, Version: cfg.Version, Logger: cfg.Logger,
		PublicURL: cfg.Agent.HTTP.PublicURL, AuthorizationServers: issuers, ApprovalWait: cfg.Agent.HTTP.WaitTimeout.Std(),
		Tools: cfg.Agent.HTTP.MCPTools})
	var o *ops.Service // nil when only the patterns are wanted
	if b != nil {
		o = b.ops
	}
	o.Register(mux)
	var reports *store.ReplayStore
	if cfg.Resources != nil && cfg.Resources.Replays != nil {
		reports = store.NewReplayStore(cfg.Resources.Replays)
	}
	replays.Register(mux, replays.Config{Store: reports})
	docs.Register(mux)
	mux.HandleFunc("GET "+OpenAPIPath, openAPIHandler(cfg))
	web.Register(mux) // GET / and /web/…; the catch-all below answers every other path
	mux.HandleFunc("GET /metrics", telemetry.Handler().ServeHTTP)
	mux.HandleFunc("GET /auth/me", b.me)
	mux.HandleFunc("POST /auth/stream-token", b.streamToken)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		core.WriteError(w, mesh.NewError("route_not_found", http.StatusNotFound, "no route "+mesh.Clip(r.Method)+" "+mesh.Clip(r.URL.Path)+"; see GET /docs"))
	})
}

// Routes lists every route the bridge serves with the permission it needs,
// in the order they are registered.
func Routes(cfg Config) []Route {
	rec := &recorder{}
	register(rec, nil, cfg, nil)
	out := make([]Route, 0, len(rec.patterns))
	for _, p := range rec.patterns {
		need, ok := access[p]
		if !ok {
			need = auth.Admin
		}
		out = append(out, Route{Pattern: p, Need: need, Known: ok})
	}
	return out
}

// guard authenticates every request and lets through those whose
// principal the route's rule admits, with the principal in the request's
// context, to next; a route with no rule needs admin. A stream token in
// the query is removed before anything else sees the URL. A request it
// refuses spends the limits' budgets as one it lets through does (see
// limiter.refused).
func (b *Role) guard(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		need, known := access[pattern]
		if !known && pattern != "" {
			b.log.Error().Str("route", pattern).Msg("a route without an access rule: admins only")
			need = auth.Admin
		}
		p, err := b.auth.Authenticate(r)
		auth.StripQueryToken(r)
		if sw, ok := w.(*statusWriter); ok && p != nil {
			sw.principal = p.Name
		}
		rpc := slices.Contains(rpcRoutes, pattern)
		switch {
		case need == auth.Open:
			if err != nil {
				p = nil // bad credentials on an open route: served as no one
			}
		case err != nil:
			if le := b.limits.refused(r, nil); le != nil {
				writeRefusal(w, r, pattern, le)
				return
			}
			challenge := auth.Challenge(err)
			if strings.HasSuffix(pattern, " "+mcpserver.Path) {
				// An MCP client finds how to authenticate there.
				challenge += `, resource_metadata="` + mcpserver.BaseURL(r, b.cfg.Agent.HTTP.PublicURL) + mcpserver.MetadataPath + `"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			refuse(w, http.StatusUnauthorized, "unauthorized", err.Error(), rpc)
			return
		case !p.May(need):
			if le := b.limits.refused(r, p); le != nil {
				writeRefusal(w, r, pattern, le)
				return
			}
			refuse(w, http.StatusForbidden, "forbidden", auth.Describe(p, need), rpc)
			return
		}
		if p != nil {
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers 401 or 403: the bridge's JSON error, or on the A2A
// endpoints a JSON-RPC error (-32600, id null: the body was not read).
func refuse(w http.ResponseWriter, status int, kind, msg string, rpc bool) {
	if !rpc {
		core.WriteError(w, mesh.NewError(kind, status, msg))
		return
	}
	core.WriteJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": json.RawMessage("null"),
		"error": wire.Error{Code: wire.CodeInvalidRequest, Message: msg}})
}

// checkExposure refuses to serve unauthenticated beyond loopback (exit
// code 2) unless http.insecure says so, and says in the log that
// authentication is off whenever it is, since a bridge without it serves
// every caller as the admin.
func (b *Role) checkExposure(addr string) error {
	if b.auth.Enabled() {
		return nil
	}
	if err := b.cfg.Agent.ExposureError(addr); err != nil {
		return err
	}
	if !config.Loopback(addr) {
		b.log.Error().Str("addr", addr).Msg("HTTP AUTHENTICATION IS OFF on a non-loopback address (http.insecure): anyone who reaches it is an admin of the mesh; configure auth")
		return nil
	}
	b.log.Warn().Str("addr", addr).Msg("HTTP authentication is off: every request is served as an admin, on loopback only; configure auth (tokens or jwt) to open the bridge to others")
	return nil
}
