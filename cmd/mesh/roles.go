package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/nodes/agent"
	"github.com/agentmesh/agentmesh/nodes/agent/llm"
	"github.com/agentmesh/agentmesh/nodes/approver"
	"github.com/agentmesh/agentmesh/nodes/toolhost"
)

func runAgent(ctx context.Context, cfg *config.Config, _ []string) error {
	if err := cfg.CheckKeys(); err != nil {
		return err
	}
	n, err := startNode(ctx, cfg, mesh.RoleAgent)
	if err != nil {
		return err
	}
	llmOpts := llm.Options{Log: n.log.With().Str("component", "llm").Logger()}
	provider, err := llm.FromConfigWith(cfg, cfg.LLM.Model, llmOpts)
	if err != nil {
		n.close()
		return fmt.Errorf("%w: llm.model: %w", errConfig, err)
	}
	defer n.close()
	a, err := agent.New(agent.Config{
		NC: n.nc, JS: n.js, Resources: n.res, Agent: cfg, Provider: provider, NodeID: n.id,
		Providers:  func(model string) (llm.Provider, error) { return llm.FromConfigWith(cfg, model, llmOpts) },
		StuckAfter: cfg.Monitor.StuckAfter.Std(), Logger: n.log,
	})
	if err != nil {
		// Given a validated configuration, only the tree's models can fail.
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	n.setHealth(a.Health, a.Breakers)
	return a.Run(ctx)
}

func runToolhost(ctx context.Context, cfg *config.Config, _ []string) error {
	n, err := startNode(ctx, cfg, mesh.RoleToolhost)
	if err != nil {
		return err
	}
	defer n.close()
	h, err := toolhost.New(toolhost.Config{
		NC: n.nc, JS: n.js, NS: n.res.NS, Tools: n.res.Tools, Calls: n.res.Calls, Nodes: n.res.Nodes,
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
