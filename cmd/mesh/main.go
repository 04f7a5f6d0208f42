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
// and, for people at a terminal (see cli.go and docs/cli.md):
//
//	mesh chat       chat with the agent or a group: streamed answers, approvals, Ctrl-C cancels
//	mesh approve    list, show and decide pending approvals
//	mesh tail       follow the events of a conversation, or of all
//	mesh sessions   list, show and remove conversations
//	mesh tools      list the tool catalog, call a read-only tool
//	mesh migrate    show, then bring over, what an older release left
//	mesh replay     run recorded conversations against another agent configuration, report what changed
//	mesh completion shell completion for bash and zsh
//
// Every role reads config/agent.yaml (or $MESH_CONFIG) and connects to
// $NATS_URL, or to the embedded server at $MESH_NATS_ADDR. See docs/cli.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// errConfig marks errors that restarting cannot fix: `mesh up` does not
// restart a role that exits with them.
var errConfig = errors.New("configuration")

// version is the release (mesh.Release); a build that is not one may set
// it with -ldflags "-X main.version=…". commit is the source it was built
// from, set by make with -ldflags "-X main.commit=…" (git describe).
var (
	version = mesh.Release
	commit  = "unknown"
)

// versionLine is what `mesh version` prints.
func versionLine() string {
	return fmt.Sprintf("mesh %s (commit %s, stored format %d)", version, commit, mesh.StoreFormat)
}

func main() { os.Exit(run(os.Args[1:])) }

// run executes the command line args and returns the exit code: 0 ok, 1 a
// failure, 2 a usage or configuration error (130: a chat left with Ctrl-C).
func run(args []string) int {
	root := newRoot()
	if len(args) == 0 {
		root.SetOut(os.Stderr)
		_ = root.Usage()
		return exitConfigError
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if cmd == root && !errors.Is(err, errUsage) {
		err = fmt.Errorf("%w: %w", errUsage, err) // an unknown command
	}
	if !errors.Is(err, errQuiet) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cmd.CommandPath(), err)
	}
	return exitCode(err)
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
