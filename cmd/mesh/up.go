package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/llm/models"
	"github.com/agentmesh/agentmesh/mesh/memory"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/agentmesh/agentmesh/nodes/monitor"
)

// upRoles are the roles `mesh up` supervises, in start order.
var upRoles = []string{mesh.RoleToolhost, mesh.RoleApprover, mesh.RoleAgent, mesh.RoleGroup, mesh.RoleBridge}

// runUp starts the embedded server (unless NATS_URL names one), supervises
// the processes of every role (one each, or mesh.replicas / --replicas), and
// runs the monitor, which restarts what it finds dead or stuck.
func runUp(ctx context.Context, cfg *config.Config, args []string) error {
	// This process and each role it starts share the host's cores.
	procs := upProcs(runtime.GOMAXPROCS(0), os.Getenv)
	if procs > 0 {
		runtime.GOMAXPROCS(procs)
	}
	replicas, err := parseReplicas(cfg.Mesh.Replicas, args)
	if err != nil {
		return err
	}
	telemetry.Supervised(upRoles)
	if len(cfg.Groups) == 0 {
		replicas[mesh.RoleGroup] = 0 // no group chats to run
	}
	if err := cfg.CheckKeys(); err != nil {
		return err
	}
	// A bridge that would serve everyone as an admin beyond loopback
	// refuses to start: say so before anything runs.
	if err := cfg.CheckExposure(); err != nil {
		return err
	}
	if err := cfg.CheckAuth(); err != nil {
		return err
	}
	if err := cfg.CheckTools(); err != nil {
		return err
	}
	if _, err := streamKey(cfg); err != nil {
		return err
	}
	// Fail here, not in a restart loop, when a model cannot be served.
	for field, model := range cfg.Models() {
		if _, err := models.FromConfig(cfg, model); err != nil {
			return fmt.Errorf("%w: %s: %w", errConfig, field, err)
		}
	}
	base, err := newLogger(cfg)
	if err != nil {
		return err
	}
	log := base.With().Str("role", "up").Logger()
	roleEnv, err := approvalKeys(cfg, log)
	if err != nil {
		return err
	}
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return err
	}
	url := cfg.NATS.URL
	if cfg.EmbeddedNATS() {
		srv, err := startEmbedded(ctx, cfg, ns, log)
		if err != nil {
			return err
		}
		defer srv.Shutdown()
		url = srv.ClientURL()
	}
	// The streams and buckets are provisioned with the admin identity
	// before the roles start: a role's own identity may only bind them.
	if cfg.EmbeddedNATS() || !identityOf(cfg, identity.RoleAdmin).none() {
		if err := provisionAsAdmin(ctx, withURL(cfg, url), ns, log); err != nil {
			return err
		}
	}
	// The terminal commands find this mesh from MESH_DATA_DIR alone.
	if err := writeContext(cfg, url); err != nil {
		log.Warn().Err(err).Msg("write the mesh context for the terminal commands")
	}
	// The monitor lives in this process, so that it can kill a stuck child
	// by its pid.
	monCfg := withURL(cfg, url)
	monCfg.NodeID = upNodePrefix(cfg) + "-monitor"
	n, err := startNode(ctx, monCfg, mesh.RoleMonitor)
	if err != nil {
		return err
	}
	defer n.close()

	sup, err := newSupervisor(supervisorConfig{
		Processes: upProcesses(cfg, url, replicas, roleEnv, procs, os.Environ()), MinBackoff: cfg.Mesh.RestartBackoff.Std(), Logger: log,
	})
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	mon, err := monitor.New(monitorConfig(cfg, n, func(info mesh.NodeInfo, reason string) {
		if info.Host == host {
			sup.kill(info.PID, reason)
		}
	}))
	if err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	log.Info().Str("nats", url).Str("http", cfg.HTTPAddr).Str("data_dir", cfg.DataDir).Interface("replicas", replicas).Msg("mesh up")
	logCLIHint(cfg, ns, url, log)
	monDone := make(chan error, 1)
	go func() { monDone <- mon.Run(ctx) }()
	err = sup.run(ctx)
	<-monDone
	return err
}

// approvalKeys makes sure the approver has a signing key (creating it at
// approvals.signing_key, by default <data_dir>/keys/approver.nk, mode
// 0600), and returns the environment that wires it: the approvers get its
// path, the tool hosts its public key (with the configured ones), so that
// they trust it from their first call on.
func approvalKeys(cfg *config.Config, log zerolog.Logger) (map[string][]string, error) {
	path, err := filepath.Abs(cfg.Approvals.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("approvals.signing_key: %w", err)
	}
	kp, created, err := identity.EnsureSigningKey(path)
	if err != nil {
		return nil, fmt.Errorf("%w: approvals.signing_key: %w", errConfig, err)
	}
	pub := identity.PublicKey(kp)
	log.Info().Str("path", path).Str("key", pub).Bool("created", created).Msg("approver signing key")
	keys := append(slices.Clone(cfg.Approvals.PublicKeys), pub)
	return map[string][]string{
		mesh.RoleApprover: {config.EnvApproverKey + "=" + path},
		mesh.RoleToolhost: {config.EnvApproverPublicKeys + "=" + strings.Join(keys, ",")},
	}, nil
}

// upProcesses are the children of `mesh up`: replicas of every role, each
// with an environment built for its role: what of environ (the
// supervisor's own) the parts of the configuration it uses need
// (roleUses), a stable node id (<host>-<role>-<n>), so that a restarted
// process comes back as the same node, its role's NATS identity, and the
// role's own variables from roleEnv; GOMAXPROCS procs, unless zero
// (upProcs). A variable set here wins over environ's.
func upProcesses(cfg *config.Config, url string, replicas map[string]int, roleEnv map[string][]string, procs int, environ []string) []process {
	var children []process
	// A role that runs no process (no groups configured) keeps its metrics
	// port all the same, so that the roles after it keep theirs: the
	// shipped scrape configuration names them.
	port := 0
	for _, role := range upRoles {
		if replicas[role] == 0 {
			port++
		}
		for i := 1; i <= replicas[role]; i++ {
			port++
			name := role
			if replicas[role] > 1 {
				name = fmt.Sprintf("%s-%d", role, i)
			}
			env := append(cfg.Env(roleUses(cfg, role), environ),
				config.EnvNATSURL+"="+url,
				config.EnvNodeID+"="+fmt.Sprintf("%s-%s-%d", upNodePrefix(cfg), role, i),
			)
			if addr := childMetricsAddr(cfg.Metrics.Listen, port); addr != "" {
				env = append(env, config.EnvMetricsAddr+"="+addr)
			}
			env = append(env, childIdentityEnv(cfg, role)...)
			if procs > 0 {
				env = append(env, "GOMAXPROCS="+strconv.Itoa(procs))
			}
			children = append(children, process{Name: name, Args: []string{role}, Env: append(env, roleEnv[role]...)})
		}
	}
	return children
}

// upProcs is the GOMAXPROCS of `mesh up` and of every role it starts:
// half of the host's (hostProcs, at least 1), or zero when getenv (the
// environment the children inherit) sets GOMAXPROCS, an operator's own
// setting winning. The roles share the host's cores, and with more Ps
// than it can use a process's idle Ps spin for work and hand its
// goroutines from thread to thread on every wakeup, which costs a turn CPU
// and latency without adding throughput (BenchmarkTurnCPU measures both).
func upProcs(hostProcs int, getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return 0
	}
	return max(1, hostProcs/2)
}

// upNodePrefix starts the node ids of `mesh up`'s processes: the host,
// and the server's name when nats.server_name sets one, so that two meshes
// on one host sharing a cluster (an edge beside its center) keep apart.
func upNodePrefix(cfg *config.Config) string {
	if cfg.NATS.ServerName != "" {
		return hostToken() + "-" + cfg.NATS.ServerName
	}
	return hostToken()
}

// parseReplicas merges mesh.replicas with a --replicas agent=2,toolhost=2
// flag; every role runs at least one process unless set to 0.
func parseReplicas(fromConfig map[string]int, args []string) (map[string]int, error) {
	out := map[string]int{}
	for _, role := range upRoles {
		out[role] = 1
	}
	for role, n := range fromConfig {
		out[role] = n
	}
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	spec := fs.String("replicas", "", "processes per role, e.g. agent=2,toolhost=2")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	if *spec == "" {
		return out, nil
	}
	for _, item := range strings.Split(*spec, ",") {
		role, count, ok := strings.Cut(strings.TrimSpace(item), "=")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || n < 0 || n > 64 || !slices.Contains(upRoles, role) {
			return nil, fmt.Errorf("%w: --replicas %q: use role=count with roles %s and counts 0-64", errConfig, item, strings.Join(upRoles, ", "))
		}
		out[role] = n
	}
	return out, nil
}

// monitorConfig builds the monitor's configuration from cfg.
func monitorConfig(cfg *config.Config, n *node, restart func(mesh.NodeInfo, string)) monitor.Config {
	strategies := map[string]monitor.Strategy{}
	for role, s := range cfg.Monitor.Strategies {
		strategies[role] = monitor.Strategy(s)
	}
	return monitor.Config{
		Node: n.roleNode(), Nodes: n.res.Nodes,
		Interval: cfg.Monitor.Interval.Std(), Missed: cfg.Monitor.Missed,
		ProbeEvery: cfg.Monitor.ProbeEvery.Std(), ProbeTimeout: cfg.Monitor.ProbeTimeout.Std(), ProbeFailures: cfg.Monitor.ProbeFailures,
		Strategies: strategies, Restart: restart,
		DegradeAfter: cfg.Monitor.DegradeAfter, DegradeWindow: cfg.Monitor.DegradeWindow.Std(),
		RecoverBelow: cfg.Monitor.RecoverBelow, RecoverAfter: cfg.Monitor.RecoverAfter.Std(),
	}
}

// runMonitor runs the monitor alone. Without a supervisor at hand it asks a
// stuck node to exit, and relies on whatever runs the node to start it again.
func runMonitor(ctx context.Context, cfg *config.Config, _ []string) error {
	n, err := startNode(ctx, cfg, mesh.RoleMonitor)
	if err != nil {
		return err
	}
	defer n.close()
	mon, err := monitor.New(monitorConfig(cfg, n, nil))
	if err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	return mon.Run(ctx)
}

func withURL(cfg *config.Config, url string) *config.Config {
	c := *cfg
	c.NATS.URL = url
	return &c
}

// runNATS runs the embedded server alone until ctx ends. It provisions the
// mesh with the admin identity, so that roles started by hand find what
// they bind; they find their identities under <data_dir>/creds.
func runNATS(ctx context.Context, cfg *config.Config, _ []string) error {
	base, err := newLogger(cfg)
	if err != nil {
		return err
	}
	log := base.With().Str("role", mesh.RoleNATS).Logger()
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return err
	}
	srv, err := startEmbedded(ctx, cfg, ns, log)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	if err := provisionAsAdmin(ctx, withURL(cfg, srv.ClientURL()), ns, log); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	log.Info().Str("url", srv.ClientURL()).Msg("nats ready")
	logCLIHint(cfg, ns, srv.ClientURL(), log)
	<-ctx.Done()
	return nil
}

// startEmbedded starts the embedded server: with every role's identity and
// permissions (generated under <data_dir>/creds when missing), unless
// nats.auth is none; with TLS when nats.tls is set. The process's memory
// limit follows nats.max_memory_mb until ctx ends (memory.Limit).
func startEmbedded(ctx context.Context, cfg *config.Config, ns mesh.Namespace, log zerolog.Logger) (*natsserver.Server, error) {
	// A new data directory holds conversations, keys and identities: its
	// owner's only, and so is the store, which nats-server would make
	// 0750. One that exists keeps the mode it was given.
	for _, dir := range []string{cfg.DataDir, cfg.DataPath("jetstream")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	users, err := embeddedUsers(cfg, ns)
	if err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	if files := identity.TLSFiles(cfg.NATS.TLS); !files.Empty() {
		if tlsCfg, err = files.Server(); err != nil {
			return nil, fmt.Errorf("%w: %w", errConfig, err)
		}
	}
	cluster, leaf, err := topology(cfg)
	if err != nil {
		return nil, err
	}
	srv, err := natsserver.Start(natsserver.Config{
		Listen: cfg.NATS.Listen, StoreDir: cfg.DataPath("jetstream"), MaxPayload: cfg.NATS.MaxPayload,
		Name: cfg.NATS.ServerName, MaxMemory: cfg.NATS.MaxMemory(),
		Users: users, TLS: tlsCfg, Cluster: cluster, LeafNodes: leaf,
		MonitorListen: cfg.NATS.MonitorListen,
		Logger:        log.With().Str("component", "nats-server").Logger().Level(zerolog.WarnLevel),
	})
	if err != nil {
		return nil, err
	}
	go memory.ServerLimit(cfg.NATS.MaxMemory()).Run(ctx)
	if users == nil {
		log.Warn().Str("listen", cfg.NATS.Listen).Msg("nats.auth is none: the NATS server is open, whoever reaches it can read and change everything")
	}
	return srv, nil
}

// logCLIHint says how to use the admin identity with the nats CLI.
func logCLIHint(cfg *config.Config, ns mesh.Namespace, url string, log zerolog.Logger) {
	log.Info().Str("nats_cli", cliHint(cfg, url)+" sub '"+ns.EventsAll()+"'").Msg("the nats CLI, as the mesh's admin")
}
