// Command mesh runs Agent Mesh. One binary, one subcommand per role:
//
//	mesh up         the embedded NATS server and one process of every role, supervised
//	mesh nats       the embedded NATS server alone
//	mesh agent      take turns from the work queue and run them
//	mesh toolhost   host the MCP servers and serve their tools
//	mesh approver   take decisions on approvals
//	mesh bridge     HTTP: REST, AG-UI streams, A2A, the web chat page
//	mesh monitor    heartbeats, failure detection and recovery (also inside mesh up)
//	mesh status     the nodes of the mesh and their state
//	mesh provision  create or update the streams and buckets, as the admin
//	mesh creds      write the identities a cluster shares (seeds, route secret, nats-server auth)
//	mesh version    print the version
//
// Every role reads config/agent.yaml (or $MESH_CONFIG) and connects to
// $NATS_URL, or to the embedded server at $MESH_NATS_ADDR. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/agentmesh/agentmesh/config"
)

// errConfig marks errors that restarting cannot fix: `mesh up` does not
// restart a role that exits with them.
var errConfig = errors.New("configuration")

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

const usage = `usage: mesh <command>

commands:
  up         run the embedded NATS server and every role, restarting any that dies
  nats       run the embedded NATS server alone
  agent      run the agent role (turns, model, tools); --agents a,b serves only those
  group      run the group role (group chats: speaker selection, termination)
  toolhost   run the tool host role (MCP servers)
  approver   run the approver role (approval decisions)
  bridge     run the HTTP bridge (REST, AG-UI, web page, docs)
  monitor    watch heartbeats, find dead and stuck nodes, apply recovery
  status     print the nodes of the mesh, their roles, state and last heartbeat
  provision  create or update the streams and buckets (as the admin) on an external NATS
  creds      write the identities every server and role of a cluster shares (--dir, --routes)
  version    print the version
  healthcheck <url>  exit 0 when the URL answers 200 (a container's health check)

mesh up --replicas agent=2,toolhost=2 runs several processes of a role.

environment: MESH_CONFIG (config/agent.yaml), MESH_DATA_DIR (./data),
MESH_HTTP_ADDR (127.0.0.1:8080), MESH_NATS_ADDR (127.0.0.1:4222), NATS_URL,
NATS_CREDS or NATS_NKEY ({role} in the path is the role), MESH_NATS_AUTH
(nkeys, or none for an open server), MESH_LOG_LEVEL, MESH_LOG_FORMAT; API
keys GEMINI_API_KEY, ANTHROPIC_API_KEY, OPENAI_API_KEY. A cluster node or an
edge: MESH_NATS_SERVER_NAME, MESH_NATS_CLUSTER_NAME, MESH_NATS_CLUSTER_LISTEN,
MESH_NATS_ROUTES, MESH_NATS_LEAF_LISTEN, MESH_NATS_LEAF_REMOTES,
MESH_NATS_REPLICAS, MESH_NATS_CREDS_DIR, MESH_NATS_MONITOR_ADDR. In a container:
MESH_HEALTH_ADDR (a role's /health and /ready).
`

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	cmd := args[0]
	switch cmd {
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	case "version", "--version":
		fmt.Println("mesh", version)
		return 0
	case "healthcheck":
		// A container's health check, in an image without curl: it needs
		// no configuration.
		if err := runHealthcheck(context.Background(), args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "mesh healthcheck: %v\n", err)
			return 1
		}
		return 0
	}
	runner, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(os.Stderr, "mesh: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	cfg, err := config.FromEnvironment()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mesh %s: %v\n", cmd, err)
		return exitConfigError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.ProfileDir != "" {
		f, err := os.Create(filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-%d.pprof", cmd, os.Getpid())))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
	}
	if err := runner(ctx, cfg, args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "mesh %s: %v\n", cmd, err)
		var ce *config.Error
		if errors.As(err, &ce) || errors.Is(err, errConfig) {
			return exitConfigError
		}
		return 1
	}
	return 0
}

var commands = map[string]func(context.Context, *config.Config, []string) error{
	"up":        runUp,
	"nats":      runNATS,
	"agent":     runAgent,
	"group":     runGroup,
	"toolhost":  runToolhost,
	"approver":  runApprover,
	"bridge":    runBridge,
	"monitor":   runMonitor,
	"status":    runStatus,
	"provision": runProvision,
	"creds":     runCreds,
}

// ownDir is the directory of the mesh binary: commands of MCP servers that
// are not on PATH are looked for there (make build puts them side by side).
func ownDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Dir(exe)
}
