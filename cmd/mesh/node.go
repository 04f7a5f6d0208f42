package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/heartbeat"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// node is what every role starts with: an id, a logger, a connection, the
// provisioned streams and buckets, and a heartbeat.
type node struct {
	id   string
	role string
	log  zerolog.Logger
	nc   *nats.Conn
	// responder is the connection the role answers requests on (its
	// services, liveness probes), with its responder identity: nc itself
	// when that identity is the role's own (an open server).
	responder *nats.Conn
	js        jetstream.JetStream
	res       *store.Resources
	beat      *heartbeat.Beat

	stopBeat context.CancelFunc
	beatDone chan struct{}
	// stopObs stops the metrics listener and flushes the traces.
	stopObs func()
	// stopAsked is when the role's context ended (a signal), in unix
	// nanoseconds; 0 while it runs. unwatchStop forgets the context.
	stopAsked   atomic.Int64
	unwatchStop func() bool

	mu       sync.Mutex
	health   func(context.Context) error
	breakers func() map[string]string
}

func natsURL(cfg *config.Config) string {
	if cfg.NATS.URL != "" {
		return cfg.NATS.URL
	}
	return "nats://" + cfg.NATS.Listen
}

func provisionConfig(cfg *config.Config) store.ProvisionConfig {
	return store.ProvisionConfig{
		EventsMaxAge:   cfg.Mesh.EventsMaxAge.Std(),
		SessionHistory: cfg.Sessions.History,
		SessionTTL:     cfg.Sessions.ExpireAfter(),
		ExpiredKept:    cfg.Sessions.KeptExpired(),
		FilesMaxAge:    cfg.Files.KeepFor(cfg.Sessions.ExpireAfter()),
		Replicas:       cfg.NATS.Replicas,
	}
}

// startNode connects, provisions and starts the heartbeat of a role. The
// heartbeat reports "starting" until the role's health check first passes.
func startNode(ctx context.Context, cfg *config.Config, role string) (*node, error) {
	id := cfg.NodeID
	if id == "" {
		id = newNodeID(role)
	}
	// The process's one logger names its role and node, once: the roles add
	// their own keys (agent, session …) to it, never these two again.
	base, err := newLogger(cfg)
	if err != nil {
		return nil, err
	}
	log := base.With().Str("role", role).Str("node", id).Logger()
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return nil, err
	}
	nc, ident, err := connectAs(cfg, ns, role, "mesh-"+id, log)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	js = store.Failover(js, cfg.NATS.FailoverBound())
	onRetry := func(err error) {
		log.Warn().Err(err).Str("url", natsURL(cfg)).Msg("waiting for NATS")
	}
	var res *store.Resources
	if ident.provisions() {
		res, err = store.ProvisionRetry(ctx, js, ns, provisionConfig(cfg), onRetry)
	} else {
		// A role's identity may not create streams: bind what the role
		// uses, and wait for `mesh up` or `mesh nats` to provision it.
		perms, _ := identity.PermissionsOf(ns, role)
		buckets := perms.Buckets
		if !mesh.Budgets(cfg.Budgets).Daily() {
			// Only the daily budgets use mesh_usage: without one, a role
			// does not wait for a mesh provisioned before the bucket was.
			buckets = slices.DeleteFunc(slices.Clone(buckets), func(b string) bool { return b == mesh.BucketUsage })
		}
		res, err = store.BindRetry(ctx, js, ns, store.Uses{Buckets: buckets, Streams: perms.Streams, Objects: perms.Objects}, onRetry)
	}
	if errors.Is(err, nats.ErrConnectionClosed) && nc.LastError() != nil {
		err = fmt.Errorf("%w: %w", err, nc.LastError()) // e.g. an authorization violation
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	responder, err := connectResponder(cfg, ns, role, id, ident, nc, log)
	if err != nil {
		nc.Close()
		return nil, err
	}
	n := &node{id: id, role: role, log: log, nc: nc, responder: responder, js: js, res: res}
	metricsAddr, stopObs, err := startTelemetry(ctx, cfg, role, id, n.breakerStates, log)
	if err != nil {
		n.closeConns()
		return nil, err
	}
	n.stopObs = stopObs
	beat, err := heartbeat.NewBeat(heartbeat.BeatConfig{
		Node: n.roleNode(), Nodes: res.Nodes, Role: role, Version: version, Commit: commit, Metrics: metricsAddr,
		Interval: cfg.Monitor.Interval.Std(), Health: n.check, Breakers: n.breakerStates,
		OnRestart: func(reason string) {
			// A monitor found this process a zombie: exit, so that its
			// supervisor starts a fresh one; its work is redelivered.
			log.Error().Str("reason", reason).Msg("exiting for a restart")
			os.Exit(1)
		},
	})
	if err != nil {
		stopObs()
		n.closeConns()
		return nil, err
	}
	n.beat = beat
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.stopBeat, n.beatDone = cancel, make(chan struct{})
	go func() {
		defer close(n.beatDone)
		_ = beat.Run(bctx)
	}()
	go n.markReady(bctx)
	if cfg.HealthAddr != "" {
		if err := n.serveHealth(bctx, cfg.HealthAddr); err != nil {
			n.close()
			return nil, err
		}
	}
	n.unwatchStop = context.AfterFunc(ctx, func() { n.stopAsked.Store(time.Now().UnixNano()) })
	return n, nil
}

// roleNode is what this process gives each role it runs, and its
// heartbeat: its connections, names, id and logger.
func (n *node) roleNode() role.Node {
	return role.Node{NC: n.nc, Responder: n.responder, JS: n.js, NS: n.res.NS, NodeID: n.id, Logger: n.log}
}

// connectResponder opens the connection role answers requests on, with
// its responder identity, and makes sure the server lets it serve: a role
// that may not would run deaf to its callers and its probes. It returns nc
// when the responder identity is the role's own.
func connectResponder(cfg *config.Config, ns mesh.Namespace, role, id string, own natsIdentity, nc *nats.Conn, log zerolog.Logger) (*nats.Conn, error) {
	rid := responderIdentityOf(cfg, role)
	rc := nc
	if rid.creds != own.creds || rid.nkey != own.nkey {
		var err error
		if rc, _, err = connectWith(cfg, ns, rid, "mesh-"+id+"-responder", log); err != nil {
			return nil, fmt.Errorf("responder: %w", err)
		}
	}
	probe, err := ns.Probe(id)
	if err != nil {
		return nil, err
	}
	// The server answers a subscription it refuses with an error before
	// the flush's PONG: the error is known when Flush returns.
	sub, err := rc.SubscribeSync(probe)
	if err == nil {
		err = rc.FlushTimeout(10 * time.Second)
		_ = sub.Unsubscribe()
	}
	if err == nil {
		if last := rc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
			err = last
		}
	}
	if err != nil {
		if rc != nc {
			rc.Close()
		}
		who := "identity " + rid.role
		if rid.none() {
			who = "a connection without an identity"
		}
		return nil, fmt.Errorf("%w: the %s answers requests with %s, which may not serve them (%w): give it its responder identity (`mesh creds` writes %s.nk; nats.responder_nkey or nats.responder_creds name it)",
			errConfig, role, who, err, identity.Responder(role))
	}
	return rc, nil
}

// check is the node's liveness: connected, and the role's own check.
func (n *node) check(ctx context.Context) error {
	for _, c := range []*nats.Conn{n.nc, n.responder} {
		if !c.IsConnected() {
			return fmt.Errorf("not connected to NATS (%s)", strings.ToLower(c.Status().String()))
		}
	}
	n.mu.Lock()
	h := n.health
	n.mu.Unlock()
	if h != nil {
		return h(ctx)
	}
	return nil
}

// setHealth gives the node its role's liveness check and circuit breakers.
func (n *node) setHealth(h func(context.Context) error, breakers func() map[string]string) {
	n.mu.Lock()
	n.health, n.breakers = h, breakers
	n.mu.Unlock()
}

func (n *node) breakerStates() map[string]string {
	n.mu.Lock()
	b := n.breakers
	n.mu.Unlock()
	if b == nil {
		return nil
	}
	return b()
}

// markReady reports "ready" once the node's check passes.
func (n *node) markReady(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := n.check(cctx)
		cancel()
		if err == nil {
			n.beat.SetState(mesh.NodeReady, "")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// close says goodbye (a last "draining" beat, the key removed) and drains the
// connection so the last acks and publishes go out.
func (n *node) close() {
	n.stopBeat()
	<-n.beatDone
	// The responder first: its answers go out before the connection
	// whose work they answer.
	for _, c := range n.conns() {
		if err := c.Drain(); err != nil {
			c.Close()
		}
		for i := 0; i < 100 && !c.IsClosed(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	n.unwatchStop()
	// Set before the telemetry stops: the last OTLP push carries it, a
	// scrape could not (the listener goes with the process).
	if at := n.stopAsked.Load(); at != 0 {
		d := time.Since(time.Unix(0, at))
		telemetry.ShutdownTook(d)
		n.log.Info().Float64("shutdown_seconds", d.Seconds()).Msg("stopped: drained and closed")
	}
	n.stopObs()
}

// conns are the node's connections: the responder's (when it has one of
// its own), then the role's.
func (n *node) conns() []*nats.Conn {
	if n.responder != nil && n.responder != n.nc {
		return []*nats.Conn{n.responder, n.nc}
	}
	return []*nats.Conn{n.nc}
}

// closeConns closes the node's connections at once (a start that failed).
func (n *node) closeConns() {
	for _, c := range n.conns() {
		c.Close()
	}
}

// newNodeID names a process: <role>-<host>-<pid>, unique enough on one mesh
// and readable in `nats kv ls mesh_nodes`.
func newNodeID(role string) string {
	return fmt.Sprintf("%s-%s-%d", role, hostToken(), os.Getpid())
}

// hostToken is the host name as a subject token.
func hostToken() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, host)
	if len(host) > 24 {
		host = host[:24]
	}
	if host == "" {
		host = "node"
	}
	return host
}
