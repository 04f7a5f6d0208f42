package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/nodes/agent"
	"github.com/agentmesh/agentmesh/nodes/agent/llm"
	"github.com/agentmesh/agentmesh/nodes/approver"
	"github.com/agentmesh/agentmesh/nodes/toolhost"
)

// node is what every role starts with: an id, a logger, a connection and the
// provisioned streams and buckets.
type node struct {
	id  string
	log zerolog.Logger
	nc  *nats.Conn
	js  jetstream.JetStream
	res *mesh.Resources
}

func natsURL(cfg *config.Config) string {
	if cfg.NATS.URL != "" {
		return cfg.NATS.URL
	}
	return "nats://" + cfg.NATS.Listen
}

func provisionConfig(cfg *config.Config) mesh.ProvisionConfig {
	return mesh.ProvisionConfig{
		EventsMaxAge:   cfg.Mesh.EventsMaxAge.Std(),
		SessionHistory: cfg.Sessions.History,
		SessionTTL:     cfg.Sessions.TTL.Std(),
	}
}

func startNode(ctx context.Context, cfg *config.Config, role string) (*node, error) {
	id := newNodeID(role)
	log := newLogger(cfg).With().Str("role", role).Str("node", id).Logger()
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return nil, err
	}
	nc, err := mesh.Connect(natsURL(cfg), "mesh-"+id, log)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	res, err := mesh.ProvisionRetry(ctx, js, ns, provisionConfig(cfg), func(err error) {
		log.Warn().Err(err).Str("url", natsURL(cfg)).Msg("waiting for NATS")
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &node{id: id, log: log, nc: nc, js: js, res: res}, nil
}

// close drains the connection so the last acks and publishes go out.
func (n *node) close() {
	if err := n.nc.Drain(); err != nil {
		n.nc.Close()
	}
	for i := 0; i < 100 && !n.nc.IsClosed(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

func runAgent(ctx context.Context, cfg *config.Config, _ []string) error {
	if err := cfg.CheckKeys(); err != nil {
		return err
	}
	n, err := startNode(ctx, cfg, mesh.RoleAgent)
	if err != nil {
		return err
	}
	provider, err := llm.FromConfigWith(cfg, cfg.LLM.Model, llm.Options{Log: n.log.With().Str("component", "llm").Logger()})
	if err != nil {
		n.close()
		return fmt.Errorf("%w: llm.model: %w", errConfig, err)
	}
	defer n.close()
	a, err := agent.New(agent.Config{NC: n.nc, JS: n.js, Resources: n.res, Agent: cfg, Provider: provider, NodeID: n.id, Logger: n.log})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

func runToolhost(ctx context.Context, cfg *config.Config, _ []string) error {
	n, err := startNode(ctx, cfg, mesh.RoleToolhost)
	if err != nil {
		return err
	}
	defer n.close()
	h, err := toolhost.New(toolhost.Config{
		NC: n.nc, JS: n.js, NS: n.res.NS, Tools: n.res.Tools, Calls: n.res.Calls,
		Servers: cfg.MCPServers, NodeID: n.id, Version: version, SearchDirs: []string{ownDir()},
		MinBackoff: cfg.Mesh.RestartBackoff.Std(), Logger: n.log,
	})
	if err != nil {
		return err
	}
	return h.Run(ctx)
}

func runApprover(ctx context.Context, cfg *config.Config, _ []string) error {
	n, err := startNode(ctx, cfg, mesh.RoleApprover)
	if err != nil {
		return err
	}
	defer n.close()
	a, err := approver.New(approver.Config{NC: n.nc, JS: n.js, NS: n.res.NS, Approvals: n.res.Approvals, NodeID: n.id, Version: version, Logger: n.log})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

func runBridge(ctx context.Context, cfg *config.Config, _ []string) error {
	n, err := startNode(ctx, cfg, mesh.RoleBridge)
	if err != nil {
		return err
	}
	defer n.close()
	b, err := bridge.New(bridge.Config{NC: n.nc, JS: n.js, Resources: n.res, Agent: cfg, Version: version, NodeID: n.id, Logger: n.log})
	if err != nil {
		return err
	}
	return b.Run(ctx)
}

func newLogger(cfg *config.Config) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.Log.Level)
	if err != nil || cfg.Log.Level == "" {
		level = zerolog.InfoLevel
	}
	zerolog.DurationFieldUnit = time.Millisecond
	zerolog.ErrorFieldName = "err"
	format := cfg.Log.Format
	if format == "" {
		format = "json"
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			format = "console"
		}
	}
	var l zerolog.Logger
	if format == "console" {
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.Level(level).With().Timestamp().Logger()
}

// newNodeID names a process: <host>-<pid>, unique enough on one mesh and
// readable in `nats kv ls mesh_nodes`.
func newNodeID(role string) string {
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
	return fmt.Sprintf("%s-%s-%d", role, host, os.Getpid())
}
