package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/memory"
)

// Exit codes of every command: 0 ok, 1 a failure, 2 a usage or
// configuration error (exitConfigError), 3 a replay over its thresholds
// (exitThresholds), 130 a chat left with Ctrl-C.
const (
	exitFailure     = 1
	exitInterrupted = 130
)

// errUsage marks a command line that cannot run: exit code 2.
var errUsage = errors.New("usage")

// usageErr is a usage error that says what is wrong.
func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// errInterrupted ends a chat the user left with a second Ctrl-C.
var errInterrupted = errors.New("interrupted")

// errQuiet is a failure the command already reported on stderr: exit 1,
// nothing more printed.
var errQuiet = errors.New("failed")

// roleHelp is the one-line help of the role commands, which keep their own
// flag sets (mesh up --replicas, mesh agent --agents): cobra passes their
// arguments through untouched.
var roleHelp = map[string]string{
	"up":        "run the embedded NATS server and every role, restarting any that dies",
	"nats":      "run the embedded NATS server alone",
	"agent":     "run the agent role (turns, model, tools); --agents a,b serves only those",
	"group":     "run the group role (group chats: speaker selection, termination)",
	"toolhost":  "run the tool host role (MCP servers)",
	"approver":  "run the approver role (approval decisions)",
	"bridge":    "run the HTTP bridge (REST, AG-UI, web page, docs)",
	"monitor":   "watch heartbeats, find dead and stuck nodes, apply recovery",
	"status":    "print the nodes of the mesh, their roles, state and last heartbeat",
	"provision": "create or update the streams and buckets (as the admin) on an external NATS",
	"creds":     "write the identities every server and role of a cluster shares (--dir, --routes)",
}

const rootLong = `Agent Mesh: LLM agents, MCP tool hosts and human approvers over NATS JetStream.

mesh up --replicas agent=2,toolhost=2 runs several processes of a role.

From the terminal: mesh chat, mesh approve, mesh fork, mesh tail, mesh sessions,
mesh tools, mesh replay. chat, approve and fork talk to the bridge's HTTP API as the holder of $MESH_TOKEN
(or --token-file), so that ownership and "who decided" hold; tail, sessions
and tools read NATS with the admin's credentials (<data_dir>/creds/admin.nk),
like the nats CLI: they are the operator's.

environment: MESH_CONFIG (config/agent.yaml), MESH_DATA_DIR (./data),
MESH_HTTP_ADDR (127.0.0.1:8080), MESH_URL (the bridge, for chat and approve),
MESH_CONTEXT (a context file: url, nats_url, nkey or creds; by default the
context.json mesh up writes in its data directory),
MESH_TOKEN, MESH_NATS_ADDR (127.0.0.1:4222), NATS_URL, NATS_CREDS or NATS_NKEY
({role} in the path is the role), MESH_NATS_AUTH (nkeys, or none for an open
server), MESH_LOG_LEVEL, MESH_LOG_FORMAT, NO_COLOR; API keys GEMINI_API_KEY,
ANTHROPIC_API_KEY, OPENAI_API_KEY. A cluster node or an edge:
MESH_NATS_SERVER_NAME, MESH_NATS_CLUSTER_NAME, MESH_NATS_CLUSTER_LISTEN,
MESH_NATS_ROUTES, MESH_NATS_LEAF_LISTEN, MESH_NATS_LEAF_REMOTES,
MESH_NATS_REPLICAS, MESH_NATS_CREDS_DIR, MESH_NATS_MONITOR_ADDR. In a container:
MESH_HEALTH_ADDR (a role's /health and /ready), MESH_METRICS_ADDR (/metrics),
MESH_HTTP_HOSTS (the host names the bridge answers, comma-separated).`

// newRoot builds the command tree: the roles of `commands`, version, the
// terminal commands and shell completion.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "mesh",
		Short:         "Agent Mesh",
		Long:          rootLong,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", errUsage, err) })
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		root.AddCommand(roleCommand(name, commands[name]))
	}
	root.AddCommand(&cobra.Command{
		Use: "version", Short: "print the version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), versionLine()) },
	})
	root.AddCommand(&cobra.Command{
		// A container's health check, in an image without curl: it needs
		// no configuration.
		Use: "healthcheck <url>", Short: "exit 0 when the URL answers 200 (a container's health check)",
		DisableFlagParsing: true,
		RunE:               func(cmd *cobra.Command, args []string) error { return runHealthcheck(cmd.Context(), args) },
	})
	client := &clientOptions{}
	for _, c := range []*cobra.Command{chatCommand(client), approveCommand(client), forkCommand(client), tailCommand(client), sessionsCommand(client), toolsCommand(client), mcpCommand(client), migrateCommand(client), replayCommand()} {
		root.AddCommand(c)
	}
	return root
}

// roleCommand runs a role the way `mesh <role>` always did: the
// configuration read first, SIGINT and SIGTERM cancel it, its own flags.
func roleCommand(name string, runner func(context.Context, *config.Config, []string) error) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              roleHelp[name],
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, err := config.FromEnvironment()
			if err != nil {
				return err
			}
			if args, err = metricsFlag(cfg, args); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// The heap profiler's samples cost each process a table of
			// buckets and a stack walk every 512 KiB allocated; only the
			// profiles MESH_CPU_PROFILE asks for read them.
			if cfg.ProfileDir == "" {
				runtime.MemProfileRate = 0
			} else {
				f, err := os.Create(filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-%d.pprof", name, os.Getpid())))
				if err == nil && pprof.StartCPUProfile(f) == nil {
					defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
				}
				// And its heap every 5 s, so that the last one shows what a
				// run left it holding.
				go writeHeapProfiles(ctx, filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-%d.heap", name, os.Getpid())))
			}
			idle := memory.Default()
			if name == "up" || name == "nats" {
				idle = memory.ForServer()
			}
			go idle.Run(ctx)
			err = runner(ctx, cfg, args)
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				// Stopped by a signal before it was ready (say, still
				// waiting for NATS): a clean stop, not a failure.
				return nil
			}
			return err
		},
	}
}

// usageArgs makes an argument check's failure a usage error (exit 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return nil
	}
}

// exitCode maps a command's error to the process's exit code.
func exitCode(err error) int {
	var ce *config.Error
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.Is(err, errThresholds):
		return exitThresholds
	case errors.As(err, &ce), errors.Is(err, errConfig), errors.Is(err, errUsage):
		return exitConfigError
	default:
		return exitFailure
	}
}

// writeHeapProfiles writes the heap profile to path every 5 s until ctx
// ends, so that the last one shows what a run left it holding.
func writeHeapProfiles(ctx context.Context, path string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			_ = f.Close()
		}
	}
}
