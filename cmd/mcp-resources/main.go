// Command mcp-resources is the sample MCP tool server of Agent Mesh: named
// integer resources kept in SQLite, served over stdio with the official Go
// SDK (github.com/modelcontextprotocol/go-sdk/mcp).
//
// # Usage
//
//	mcp-resources [--db ./resources.db] [--log-level info]
//
// --db is the SQLite file; its directory is created if missing. Two processes
// (two toolhost replicas) may share one file: it is opened in WAL mode, each
// statement waits up to 5s for another's lock, and every write runs in a
// BEGIN IMMEDIATE transaction. --log-level is a zerolog level.
//
// The garbage collector runs at GOGC 400 unless GOGC is set (see
// gcPercent); once quiet after a burst, the server gives its memory back
// as the mesh's roles do (package mesh/memory).
//
// With MESH_CPU_PROFILE set to a directory (as for the mesh's roles), the
// server writes a CPU profile of its run there, mcp-resources-<pid>.pprof.
//
// Stdout carries the protocol (one JSON-RPC message per line); logs go to
// stderr only. The server stops, exiting 0, when stdin is closed or on
// SIGTERM or SIGINT.
//
// # Tools
//
//	resources_list    {pattern?}       read-only
//	  -> {"resources": [{id, name, value, created_at, updated_at}...], "count": n}
//	resources_add     {name, value}    destructive
//	  -> {id, name, value, created_at, updated_at}
//	resources_remove  {id?, pattern?}  destructive
//	  -> {"removed_count": n, "removed_ids": [...]}
//
// A pattern is an RE2 regular expression matched anywhere in the name
// (^name$ matches one name exactly). resources_list orders by name and
// returns "resources": [] when nothing matches. resources_remove needs id or
// pattern; given both, it removes the resource with that id only if its name
// matches. Ids are "res_" and 12 random hex digits.
//
// Each result is sent both as structuredContent and as a JSON text block. A
// tool's own failure (blank name, value not an integer, bad pattern, no id
// or pattern) is an isError result whose text says what was wrong, never a
// protocol error.
//
// # Storage
//
//	resources (id TEXT PRIMARY KEY, name TEXT NOT NULL, value INTEGER NOT NULL,
//	           created_at TEXT NOT NULL, updated_at TEXT NOT NULL)
//	calls     (call_id TEXT PRIMARY KEY, tool TEXT NOT NULL,
//	           result TEXT NOT NULL, created_at TEXT NOT NULL)
//
// Timestamps are ISO 8601 in UTC ("2006-01-02T15:04:05.000Z").
//
// # Exactly-once calls
//
// The mesh puts a string under "agentmesh/call_id" in the _meta of every
// tools/call request, and sends the same id again when it retries a call
// whose outcome it did not see (a crashed or timed-out toolhost). For
// resources_add and resources_remove the server records the id, the tool
// name and the JSON result in calls, in the same transaction as the insert
// or delete: either both commit or neither does. A call whose id is already
// recorded returns the recorded result without touching resources, with
// "agentmesh/replayed": true in the result's _meta. An id recorded for the
// other tool gives an isError result. resources_list ignores the id, and a
// call without one is simply run. Because the check and the write share one
// BEGIN IMMEDIATE transaction, two servers on one file given the same id
// still run the call once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/agentmesh/agentmesh/mesh/memory"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// gcPercent is the collector's GOGC when the environment sets none. The
// SDK decodes each JSON value with a new 32 KiB buffer (seven of them for
// a tools/call of the current protocol), against a live heap of a few MiB:
// at the default GOGC of 100 the collector and its sweeping would take much
// of the server's CPU. A larger GOGC trades a few MiB of resident memory
// for less CPU per call (BenchmarkStdioList measures both).
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	profile := os.Getenv("MESH_CPU_PROFILE")
	if profile == "" {
		runtime.MemProfileRate = 0 // nothing reads the heap's samples
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	go memory.Default().Run(ctx)
	stopProfile := startProfile(profile)
	err := run(ctx, os.Args[1:], os.Stderr)
	stopProfile()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp-resources:", err)
		os.Exit(1)
	}
}

// startProfile starts a CPU profile into dir (none when dir is empty or the
// file cannot be made) and returns the function that ends it.
func startProfile(dir string) func() {
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("mcp-resources-%d.pprof", os.Getpid())))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

// run parses args, opens the database and serves MCP on stdin/stdout until
// stdin is closed or ctx is cancelled; both end it with nil.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp-resources", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbPath := fs.String("db", "./resources.db", "SQLite database `file`; its directory is created if missing")
	logLevel := fs.String("log-level", "info", "log `level` (debug, info, warn, error, disabled)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := zerolog.New(stderr).Level(level).With().Timestamp().Str("node", "mcp-resources").Logger()

	if err := os.MkdirAll(filepath.Dir(*dbPath), 0o755); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}
	st, err := openStore(ctx, storeConfig{Path: *dbPath})
	if err != nil {
		return err
	}
	defer st.Close()

	log.Info().Str("db", *dbPath).Msg("serving on stdio")
	err = newServer(st, log).Run(ctx, &mcp.StdioTransport{})
	switch {
	case ctx.Err() != nil:
		log.Info().Msg("stopped by signal")
		return nil
	case err == nil, errors.Is(err, io.EOF):
		log.Info().Msg("stdin closed")
		return nil
	default:
		return fmt.Errorf("serve: %w", err)
	}
}
