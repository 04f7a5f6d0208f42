// Package bridge is the HTTP face of the mesh: REST conversations (package
// rest), interactive documentation (package docs), AG-UI streams (package
// agui), A2A JSON-RPC and the agent card (package a2a) and the web chat
// page (package web). It holds nothing the mesh needs: every request becomes
// work, decisions or reads on NATS, so any number of bridges can serve one
// mesh.
//
// [Role.Run] listens until its context is cancelled, then stops taking
// requests, lets those in flight finish (up to ShutdownTimeout) and returns.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/ops"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// Config configures a bridge.
type Config struct {
	// Node is the process's connections, names and logger, handed to the
	// core (core.Config.Node): NC and JS are required; NodeID names this
	// process in logs and signs the turns it queues.
	role.Node
	Resources *store.Resources
	// Agent is the mesh's configuration: the agents' Definition (names,
	// prompts, groups, sub-agents) and the Process settings the bridge
	// serves with (HTTP, auth, limits, files, sessions).
	Agent *config.Config
	// Addr is the listen address. Empty means Agent.HTTPAddr.
	Addr string
	// Listener, when set, is used instead of listening on Addr.
	Listener net.Listener
	// ShutdownTimeout bounds the drain of requests in flight. Zero means 30s.
	ShutdownTimeout time.Duration
	// Version is reported by /health.
	Version string
	// StreamKey signs stream tokens; every bridge of the mesh needs the
	// same (auth.stream_key, else auth.EnsureStreamKey of
	// <data_dir>/keys/stream.key). Required when Agent.Auth is on.
	StreamKey []byte
	// HTTPClient fetches a JWKS URL. Nil means a client with a 10s timeout.
	HTTPClient *http.Client
}

// Role is the bridge role.
type Role struct {
	cfg     Config
	core    *core.Core
	limits  *limiter
	ops     *ops.Service
	auth    *auth.Authenticator
	handler http.Handler
	mux     *http.ServeMux
	log     zerolog.Logger
}

// New validates cfg and builds the routes.
func New(cfg Config) (*Role, error) {
	if cfg.Agent == nil {
		return nil, errors.New("bridge: Agent config is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = cfg.Agent.HTTPAddr
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if err := cfg.Agent.CheckAuth(); err != nil {
		return nil, err
	}
	authn, err := auth.New(auth.Config{Auth: cfg.Agent.Auth, StreamKey: cfg.StreamKey, HTTPClient: cfg.HTTPClient, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	lim, err := newLimiter(cfg)
	if err != nil {
		authn.Close()
		return nil, fmt.Errorf("bridge: %w", err)
	}
	admit, streamLimit, take := lim.coreHooks()
	screen, err := newScreen(cfg.Agent.Safety, cfg.HTTPClient, log)
	if err != nil {
		authn.Close()
		return nil, fmt.Errorf("bridge: %w", err)
	}
	var spend *limits.Spend
	if mesh.Budgets(cfg.Agent.Budgets).Daily() {
		if cfg.Resources == nil || cfg.Resources.Usage == nil {
			authn.Close()
			return nil, errors.New("bridge: a daily budget needs the mesh_usage bucket, which is not bound: provision the mesh again (mesh provision, or mesh up)")
		}
		spend = limits.NewSpend(cfg.JS, cfg.Resources.Usage)
	}
	c, err := core.New(core.Config{
		Node: cfg.Node, Resources: cfg.Resources, Agent: cfg.Agent.Name, Prompt: cfg.Agent.Prompt, Agents: agentDefs(cfg.Agent), Groups: cfg.Agent.Groups,
		FollowerBuffer: cfg.Agent.HTTP.StreamBuffer, MaxStreams: cfg.Agent.HTTP.MaxStreams, NoToolServers: len(cfg.Agent.MCPServers) == 0,
		QueueCheckAfter: cfg.Agent.HTTP.QueueCheckAfter.Std(), HistoryBytes: int(cfg.Agent.Sessions.MaxBytes), Auth: authn.Enabled(),
		SessionTTL: cfg.Agent.Sessions.ExpireAfter(), ExpiredKept: cfg.Agent.Sessions.KeptExpired(),
		Admit: admit, StreamLimit: streamLimit, Take: take, Files: cfg.Agent.Files, Screen: screen,
		MaxActiveSessions: lim.capacity(), Budgets: mesh.Budgets(cfg.Agent.Budgets), Spend: spend,
	})
	if err != nil {
		authn.Close()
		return nil, fmt.Errorf("bridge: %w", err)
	}
	o, err := ops.New(ops.Config{Core: c, Resources: cfg.Resources, Interval: cfg.Agent.Monitor.Interval.Std(), Missed: cfg.Agent.Monitor.Missed, Logger: log})
	if err != nil {
		authn.Close()
		return nil, fmt.Errorf("bridge: %w", err)
	}
	mux := http.NewServeMux()
	if lim != nil {
		lim.core = c
	}
	b := &Role{cfg: cfg, core: c, limits: lim, ops: o, auth: authn, mux: mux, log: log}
	// The dialects of its event streams (sse.Writer.Observe).
	telemetry.Bridge([]string{"events", "agui", "simple", "dotted", "ops", "a2a", "conversations"})
	register(mux, b, cfg, c)
	b.handler = b.middleware(b.edge(mux, b.guard(mux, lim.handler(mux, mux))))
	return b, nil
}

// Handler serves the bridge's routes; [Role.Run] serves it too.
func (b *Role) Handler() http.Handler { return b.handler }

// Run serves HTTP until ctx is cancelled.
func (b *Role) Run(ctx context.Context) error {
	defer b.auth.Close()
	ln := b.cfg.Listener
	addr := b.cfg.Addr
	if ln != nil {
		addr = ln.Addr().String()
	}
	if err := b.checkExposure(addr); err != nil {
		return err
	}
	if err := b.core.Start(ctx); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	defer b.core.Stop()
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	opsDone := make(chan error, 1)
	go func() { opsDone <- b.ops.Run(opsCtx) }()
	defer func() { stopOps(); <-opsDone }()
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", b.cfg.Addr)
		if err != nil {
			return fmt.Errorf("bridge: listen %s: %w", b.cfg.Addr, err)
		}
	}
	srv := &http.Server{
		Handler:     b.handler,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	serverTimeouts(srv, &b.cfg.Agent.HTTP)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	b.log.Info().Str("addr", ln.Addr().String()).Msg("bridge listening")
	select {
	case err := <-errc:
		return fmt.Errorf("bridge: serve: %w", err)
	case <-ctx.Done():
	}
	// Readiness fails first, so balancers stop sending before the server stops.
	b.core.SetDraining()
	shutCtx, cancel := context.WithTimeout(context.Background(), b.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		_ = srv.Close()
	}
	// WebSockets were handed over by the server: they close themselves
	// when draining begins, with a frame that says why.
	b.core.WaitHeld(shutCtx)
	<-errc
	b.log.Info().Msg("bridge stopped")
	return nil
}

// middleware logs every request with its trace id, counts it by route
// (mesh_http_*), traces it (a caller's traceparent is continued) and turns
// panics into 500s.
func (b *Role) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		_, route := b.mux.Handler(r)
		ctx, span := telemetry.StartKind(telemetry.HTTPExtract(r.Context(), r.Header), httpSpanName(r.Method, route), trace.SpanKindServer,
			httpAttributes(r, route)...)
		ctx, note := core.WithLogNote(ctx)
		r = r.WithContext(ctx)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				// The value as text: an error would encode as {}.
				b.log.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Str("path", clipLog(r.URL.Path)).Msg("handler panic")
				if !sw.wrote {
					core.WriteError(sw, mesh.ErrInternal.With("the bridge hit an unexpected error; its log has the details"))
				}
			}
			ev := b.log.Info()
			switch {
			case sw.status == http.StatusServiceUnavailable:
				ev = b.log.Warn() // not ready yet, or shedding load
			case sw.status >= 500:
				ev = b.log.Error()
			}
			// The conversation's own sid, else the one the caller sent.
			session, sid := note.Conversation()
			if sid == "" {
				sid = r.Header.Get(mesh.HeaderSessionID)
			}
			if sid != "" {
				ev = ev.Str("sid", clipLog(sid))
			}
			if session != "" {
				ev = ev.Str("session", session)
			}
			if sw.principal != "" {
				ev = ev.Str("principal", sw.principal)
			}
			if id := telemetry.TraceID(ctx); id != "" && span.IsRecording() {
				ev = ev.Str("trace_id", id)
			}
			telemetry.HTTPRequest(ctx, route, sw.status, time.Since(start))
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
			if sw.status >= 500 {
				telemetry.Fail(span, http.StatusText(sw.status))
			}
			span.End()
			ev.Str("method", clipLog(r.Method)).Str("path", clipLog(r.URL.Path)).Int("status", sw.status).Dur("latency", time.Since(start)).Msg("http")
		}()
		next.ServeHTTP(sw, r)
	})
}

// httpSpanName is a server span's name as the OpenTelemetry HTTP
// conventions say, "{method} {route}"; a route of the mux names its method
// ("POST /agui"), or none ("/docs/").
func httpSpanName(method, route string) string {
	_, path := splitRoute(route)
	if path == "" {
		return method
	}
	return method + " " + path
}

// splitRoute splits a mux pattern into its method and path.
func splitRoute(route string) (method, path string) {
	if m, p, ok := strings.Cut(route, " "); ok {
		return m, p
	}
	return "", route
}

// httpAttributes are a server span's attributes (the HTTP conventions):
// http.route is the route's path, without the method.
func httpAttributes(r *http.Request, route string) []attribute.KeyValue {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
		attribute.String("url.scheme", scheme), attribute.String("network.protocol.version", fmt.Sprintf("%d.%d", r.ProtoMajor, r.ProtoMinor)),
	}
	if _, path := splitRoute(route); path != "" {
		attrs = append(attrs, attribute.String("http.route", path))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, attribute.String("user_agent.original", clipLog(ua)))
	}
	return attrs
}

// maxLogPath bounds the request path a log line quotes: room for any
// path with a valid id (mesh.MaxIDLen), not for what a client sent.
const maxLogPath = 192

// clipLog cuts what a client sent for a log line.
func clipLog(s string) string {
	if len(s) > maxLogPath {
		return s[:maxLogPath] + "…"
	}
	return s
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	// principal is who the guard authenticated, for the log line.
	principal string
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

// Flush lets streaming handlers flush through the middleware.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// agentDefs are the agents the configuration defines, for the directory.
func agentDefs(cfg *config.Config) []core.AgentDef {
	var out []core.AgentDef
	for _, a := range cfg.Agents() {
		out = append(out, core.AgentDef{Name: a.Name, Description: a.Description, Prompt: a.Prompt, Capabilities: a.Capabilities, Disabled: !a.IsEnabled()})
	}
	return out
}
