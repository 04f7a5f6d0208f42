package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge"
	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/models"
	"github.com/agentmesh/agentmesh/nodes/agent"
	"github.com/agentmesh/agentmesh/nodes/approver"
	"github.com/agentmesh/agentmesh/nodes/group"
	"github.com/agentmesh/agentmesh/nodes/toolhost"
)

// runAgent runs the agents of the configuration (the top-level agent and
// the group members it defines), or those named by --agents, each with its
// own work queue, in this process.
func runAgent(ctx context.Context, cfg *config.Config, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	only := fs.String("agents", "", "serve only these agents of the configuration, e.g. writer,critic")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	var agents []*config.Config
	for _, a := range cfg.Agents() {
		if a.IsEnabled() {
			agents = append(agents, a)
		}
	}
	if *only != "" {
		agents = nil
		for _, name := range strings.Split(*only, ",") {
			a := cfg.AgentNamed(strings.TrimSpace(name))
			switch {
			case a == nil:
				return fmt.Errorf("%w: --agents: %q is not an agent of %s", errConfig, name, cfg.Path)
			case !a.IsEnabled():
				return fmt.Errorf("%w: --agents: %q has enabled: false in %s", errConfig, name, cfg.Path)
			}
			agents = append(agents, a)
		}
	}
	if len(agents) == 0 {
		return fmt.Errorf("%w: no agent to serve: %s disables its agent (enabled: false) and defines no other", errConfig, cfg.Path)
	}
	// The keys of the models the agents call; a group's selector model is
	// the group role's.
	if err := cfg.CheckModelKeys(cfg.AgentModels()); err != nil {
		return err
	}
	n, err := startNode(ctx, cfg, mesh.RoleAgent)
	if err != nil {
		return err
	}
	defer n.close()
	llmOpts := llm.Options{Log: n.log.With().Str("component", "llm").Logger()}
	var roles []*agent.Role
	var names []string
	for _, acfg := range agents {
		provider, err := models.FromConfigWith(acfg, acfg.LLM.Model, llmOpts)
		if err != nil {
			return fmt.Errorf("%w: llm.model of agent %s: %w", errConfig, acfg.Name, err)
		}
		a, err := agent.New(agent.Config{
			Node: n.roleNode(), Resources: n.res, Agent: acfg, Provider: provider,
			Providers:  func(model string) (llm.Provider, error) { return models.FromConfigWith(acfg, model, llmOpts) },
			StuckAfter: cfg.Monitor.StuckAfter.Std(),
		})
		if err != nil {
			// Given a validated configuration, only the tree's models can fail.
			return fmt.Errorf("%w: %w", errConfig, err)
		}
		roles, names = append(roles, a), append(names, acfg.Name)
	}
	n.setHealth(func(ctx context.Context) error {
		for _, a := range roles {
			if err := a.Health(ctx); err != nil {
				return err
			}
		}
		return nil
	}, func() map[string]string {
		out := map[string]string{}
		for _, a := range roles {
			maps.Copy(out, a.Breakers())
		}
		return out
	})
	n.beat.SetServes(names)
	n.beat.SetAgents(func() []mesh.AgentInfo {
		out := make([]mesh.AgentInfo, 0, len(roles))
		for _, a := range roles {
			out = append(out, a.Info())
		}
		return out
	})
	return runAll(ctx, roles)
}

// runAll runs every agent until ctx ends; the first to fail stops them all.
func runAll(ctx context.Context, roles []*agent.Role) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(roles))
	for _, a := range roles {
		go func() {
			err := a.Run(ctx)
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range roles {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runGroup runs the group role: the chats of the configuration's groups.
func runGroup(ctx context.Context, cfg *config.Config, _ []string) error {
	// The keys of the selector models of the llm strategy: the members'
	// models are the agents'.
	if err := cfg.CheckModelKeys(cfg.SelectorModels()); err != nil {
		return err
	}
	n, err := startNode(ctx, cfg, mesh.RoleGroup)
	if err != nil {
		return err
	}
	defer n.close()
	llmOpts := llm.Options{Log: n.log.With().Str("component", "llm").Logger()}
	g, err := group.New(group.Config{
		Node: n.roleNode(), Resources: n.res, Groups: cfg.Groups,
		Providers:    func(model string) (llm.Provider, error) { return models.FromConfigWith(cfg, model, llmOpts) },
		DefaultModel: cfg.LLM.Model, Workers: cfg.Mesh.Workers, AckWait: cfg.Mesh.AckWait.Std(), MaxDeliver: cfg.Mesh.MaxDeliver,
		CheckInterval: cfg.Monitor.Interval.Std(), HistoryBytes: int(cfg.Sessions.MaxBytes),
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	n.setHealth(g.Health, nil)
	n.beat.SetServes(g.Names())
	return g.Run(ctx)
}

// toolhostGCPercent is the toolhost's GOGC when the environment sets none.
// The MCP SDK decodes each JSON value with a new 32 KiB buffer (four for
// a tools/call's answer) against a small live heap, so at the default GOGC
// of 100 the collector would run every few dozen calls and take much of
// the process's CPU; a larger GOGC lets the heap grow a few MiB instead,
// which a toolhost can spare (BenchmarkTurnCPU measures a turn's CPU).
const toolhostGCPercent = 400

func runToolhost(ctx context.Context, cfg *config.Config, _ []string) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(toolhostGCPercent)
	}
	if err := cfg.CheckTools(); err != nil {
		return err
	}
	n, err := startNode(ctx, cfg, mesh.RoleToolhost)
	if err != nil {
		return err
	}
	defer n.close()
	h, err := toolhost.New(toolhost.Config{
		Node: n.roleNode(), Tools: n.res.Tools, Calls: n.res.Calls, Nodes: n.res.Nodes,
		ApproverKeys: cfg.Approvals.PublicKeys, Approvals: n.res.Approvals,
		Servers: cfg.MCPServers, Version: version, SearchDirs: []string{ownDir()}, Environ: os.Environ(),
		MinBackoff: cfg.Mesh.RestartBackoff.Std(),
	})
	if err != nil {
		return err
	}
	return h.Run(ctx)
}

// runApprover runs the approver with the signing key of
// approvals.signing_key (MESH_APPROVER_KEY), made there when missing.
func runApprover(ctx context.Context, cfg *config.Config, _ []string) error {
	key, created, err := identity.EnsureSigningKey(cfg.Approvals.SigningKey)
	if err != nil {
		return fmt.Errorf("%w: approvals.signing_key: %w", errConfig, err)
	}
	n, err := startNode(ctx, cfg, mesh.RoleApprover)
	if err != nil {
		return err
	}
	defer n.close()
	if created {
		n.log.Warn().Str("path", cfg.Approvals.SigningKey).Str("key", identity.PublicKey(key)).Msg("created a signing key: tool hosts with approvals.public_keys must list it")
	}
	a, err := approver.New(approver.Config{
		Node: n.roleNode(), Approvals: n.res.Approvals, Version: version,
		Signer: key, Trusted: cfg.Approvals.PublicKeys, Tools: n.res.Tools, Agents: &cfg.Definition,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// streamKey is the key the bridges sign stream tokens with, when HTTP
// authentication is on: auth.stream_key, else <data_dir>/keys/stream.key,
// created when missing (mode 0600), so that the bridges of one data
// directory agree; bridges on several machines share auth.stream_key.
func streamKey(cfg *config.Config) ([]byte, error) {
	if !cfg.Auth.Enabled() {
		return nil, nil
	}
	if k := cfg.Auth.StreamKey.Reveal(); k != "" {
		return []byte(k), nil
	}
	key, err := auth.EnsureStreamKey(cfg.DataPath("keys", "stream.key"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	return key, nil
}

func runBridge(ctx context.Context, cfg *config.Config, _ []string) error {
	n, err := startNode(ctx, cfg, mesh.RoleBridge)
	if err != nil {
		return err
	}
	defer n.close()
	key, err := streamKey(cfg)
	if err != nil {
		return err
	}
	b, err := bridge.New(bridge.Config{Node: n.roleNode(), Resources: n.res, Agent: cfg, Version: version, StreamKey: key})
	if err != nil {
		return err
	}
	return b.Run(ctx)
}

// zerologFields sets zerolog's package-wide field settings once.
var zerologFields sync.Once

// newLogger is the process's logger: log.level, log.format and
// log.outputs; an output file that cannot be opened is a configuration
// error.
func newLogger(cfg *config.Config) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(cfg.Log.Level)
	if err != nil || cfg.Log.Level == "" {
		level = zerolog.InfoLevel
	}
	zerologFields.Do(func() {
		zerolog.DurationFieldUnit = time.Millisecond
		zerolog.ErrorFieldName = "err"
	})
	outputs := cfg.Log.Outputs
	if len(outputs) == 0 {
		outputs = []string{config.LogStderr}
	}
	writers := make([]io.Writer, 0, len(outputs))
	for _, o := range outputs {
		var f *os.File
		switch o {
		case config.LogStderr:
			f = os.Stderr
		case config.LogStdout:
			f = os.Stdout
		default:
			// The process's log file stays open for its life; lines from
			// several processes sharing it are appended whole (O_APPEND).
			if f, err = os.OpenFile(o, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
				return zerolog.Nop(), fmt.Errorf("%w: log.outputs: %w", errConfig, err)
			}
			writers = append(writers, f)
			continue
		}
		format := cfg.Log.Format
		if format == "" {
			format = "json"
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "console"
			}
		}
		if format == "console" {
			writers = append(writers, zerolog.ConsoleWriter{Out: f, TimeFormat: "15:04:05.000"})
		} else {
			writers = append(writers, f)
		}
	}
	out := writers[0]
	if len(writers) > 1 {
		out = zerolog.MultiLevelWriter(writers...)
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger(), nil
}
