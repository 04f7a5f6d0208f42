package main

import (
	"context"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/heartbeat"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/nodes/agent/llm"
)

// upRoles are the roles `mesh up` supervises, in start order.
var upRoles = []string{mesh.RoleToolhost, mesh.RoleApprover, mesh.RoleAgent, mesh.RoleBridge}

// runUp starts the embedded server (unless NATS_URL names one) and supervises
// one process of every role.
func runUp(ctx context.Context, cfg *config.Config, _ []string) error {
	if err := cfg.CheckKeys(); err != nil {
		return err
	}
	// Fail here, not in a restart loop, when a model cannot be served.
	for field, model := range cfg.Models() {
		if _, err := llm.FromConfig(cfg, model); err != nil {
			return fmt.Errorf("%w: %s: %w", errConfig, field, err)
		}
	}
	log := newLogger(cfg).With().Str("role", "up").Logger()
	url := cfg.NATS.URL
	if cfg.EmbeddedNATS() {
		srv, err := startEmbedded(cfg, log)
		if err != nil {
			return err
		}
		defer srv.Shutdown()
		url = srv.ClientURL()
	}
	// Provision once here so the roles find everything in place.
	n, err := startNode(ctx, withURL(cfg, url), "up")
	if err != nil {
		return err
	}
	n.close()

	var procs []heartbeat.Process
	for _, role := range upRoles {
		procs = append(procs, heartbeat.Process{Name: role, Args: []string{role}, Env: []string{config.EnvNATSURL + "=" + url}})
	}
	sup, err := heartbeat.NewSupervisor(heartbeat.SupervisorConfig{Processes: procs, MinBackoff: cfg.Mesh.RestartBackoff.Std(), Logger: log})
	if err != nil {
		return err
	}
	log.Info().Str("nats", url).Str("http", cfg.HTTPAddr).Str("data_dir", cfg.DataDir).Msg("mesh up")
	return sup.Run(ctx)
}

func withURL(cfg *config.Config, url string) *config.Config {
	c := *cfg
	c.NATS.URL = url
	return &c
}

// runNATS runs the embedded server alone until ctx ends.
func runNATS(ctx context.Context, cfg *config.Config, _ []string) error {
	log := newLogger(cfg).With().Str("role", mesh.RoleNATS).Logger()
	srv, err := startEmbedded(cfg, log)
	if err != nil {
		return err
	}
	log.Info().Str("url", srv.ClientURL()).Msg("nats ready")
	<-ctx.Done()
	srv.Shutdown()
	return nil
}

func startEmbedded(cfg *config.Config, log zerolog.Logger) (*mesh.Server, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	return mesh.StartServer(mesh.ServerConfig{
		Listen: cfg.NATS.Listen, StoreDir: cfg.DataPath("jetstream"), MaxPayload: cfg.NATS.MaxPayload,
		Logger: log.With().Str("component", "nats-server").Logger().Level(zerolog.WarnLevel),
	})
}
