// Package bridge is the HTTP face of the mesh: REST conversations (package
// rest), interactive documentation (package docs), AG-UI streams (package
// agui), A2A JSON-RPC and the agent card (package a2a) and the web chat
// page (package web). It holds nothing the mesh needs: every request becomes
// work, decisions or reads on NATS, so any number of bridges can serve one
// mesh.
//
// [Bridge.Run] listens until its context is cancelled, then stops taking
// requests, lets those in flight finish (up to ShutdownTimeout) and returns.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/a2a"
	"github.com/agentmesh/agentmesh/bridge/agui"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/docs"
	"github.com/agentmesh/agentmesh/bridge/rest"
	"github.com/agentmesh/agentmesh/bridge/web"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// Config configures a bridge.
type Config struct {
	NC        *nats.Conn
	JS        jetstream.JetStream
	Resources *mesh.Resources
	// Agent is the mesh's configuration: agent name, prompt, HTTP settings.
	Agent *config.Config
	// Addr is the listen address. Empty means Agent.HTTPAddr.
	Addr string
	// Listener, when set, is used instead of listening on Addr.
	Listener net.Listener
	// ShutdownTimeout bounds the drain of requests in flight. Zero means 30s.
	ShutdownTimeout time.Duration
	// Version is reported by /health.
	Version string
	// NodeID names this process in logs.
	NodeID string
	Logger zerolog.Logger
}

// Bridge is the bridge role.
type Bridge struct {
	cfg     Config
	core    *core.Core
	handler http.Handler
	log     zerolog.Logger
}

// New validates cfg and builds the routes.
func New(cfg Config) (*Bridge, error) {
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
	c, err := core.New(core.Config{
		NC: cfg.NC, JS: cfg.JS, Resources: cfg.Resources, Agent: cfg.Agent.Name, Prompt: cfg.Agent.Prompt, Groups: cfg.Agent.Groups,
		FollowerBuffer: cfg.Agent.HTTP.StreamBuffer, MaxStreams: cfg.Agent.HTTP.MaxStreams, NoToolServers: len(cfg.Agent.MCPServers) == 0,
		QueueCheckAfter: cfg.Agent.HTTP.QueueCheckAfter.Std(), NodeID: cfg.NodeID, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	subAgents := cfg.Agent.SubAgents()
	mux := http.NewServeMux()
	rest.Register(mux, rest.Config{
		Core: c, MaxBodyBytes: cfg.Agent.HTTP.MaxBodyBytes, WaitTimeout: cfg.Agent.HTTP.WaitTimeout.Std(),
		Version: cfg.Version, SubAgents: subAgents, Logger: log,
	})
	agui.Register(mux, agui.Config{
		Core: c, MaxBodyBytes: cfg.Agent.HTTP.MaxBodyBytes,
		PingAfter: cfg.Agent.HTTP.PingAfter.Std(), PingEvery: cfg.Agent.HTTP.PingEvery.Std(), Logger: log,
	})
	a2a.Register(mux, a2a.Config{
		Core: c, Name: cfg.Agent.Name, Description: cfg.Agent.Description, Version: cfg.Version,
		PublicURL: cfg.Agent.HTTP.PublicURL, SubAgents: subAgents,
		MaxBodyBytes: cfg.Agent.HTTP.MaxBodyBytes, WaitTimeout: cfg.Agent.HTTP.WaitTimeout.Std(),
		Logger: log,
	})
	docs.Register(mux)
	web.Register(mux) // GET / and /web/…; the catch-all below answers every other path
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		core.WriteError(w, &mesh.Error{Kind: "route_not_found", Status: http.StatusNotFound, Message: fmt.Sprintf("no route %s %s; see GET /docs", r.Method, r.URL.Path)})
	})
	b := &Bridge{cfg: cfg, core: c, log: log}
	b.handler = b.middleware(mux)
	return b, nil
}

// Handler serves the bridge's routes; [Bridge.Run] serves it too.
func (b *Bridge) Handler() http.Handler { return b.handler }

// Run serves HTTP until ctx is cancelled.
func (b *Bridge) Run(ctx context.Context) error {
	if err := b.core.Start(ctx); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	defer b.core.Stop()
	ln := b.cfg.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", b.cfg.Addr)
		if err != nil {
			return fmt.Errorf("bridge: listen %s: %w", b.cfg.Addr, err)
		}
	}
	srv := &http.Server{
		Handler:           b.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
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
	<-errc
	b.log.Info().Msg("bridge stopped")
	return nil
}

// middleware logs every request with its trace id and turns panics into 500s.
func (b *Bridge) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				b.log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Str("path", r.URL.Path).Msg("handler panic")
				if !sw.wrote {
					core.WriteError(sw, mesh.ErrInternal.With("internal error"))
				}
			}
			ev := b.log.Info()
			switch {
			case sw.status == http.StatusServiceUnavailable:
				ev = b.log.Warn() // not ready yet, or shedding load
			case sw.status >= 500:
				ev = b.log.Error()
			}
			if sid := r.Header.Get(mesh.HeaderSessionID); sid != "" {
				ev = ev.Str("sid", sid)
			}
			ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.status).Dur("latency", time.Since(start)).Msg("http")
		}()
		next.ServeHTTP(sw, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
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
