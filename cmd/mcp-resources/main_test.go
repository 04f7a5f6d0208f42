package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// e2eTimeout bounds each end-to-end subtest.
const e2eTimeout = 60 * time.Second

// buildBinary builds this command into a temporary directory.
func buildBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcp-resources")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// lockedBuffer collects a process's stderr and reports when a string shows
// up in it.
type lockedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	waitFor string
	seen    chan struct{} // closed when waitFor has been written
}

func newLockedBuffer(waitFor string) *lockedBuffer {
	return &lockedBuffer{waitFor: waitFor, seen: make(chan struct{})}
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	seenBefore := b.waitFor != "" && strings.Contains(b.buf.String(), b.waitFor)
	b.buf.Write(p)
	if !seenBefore && b.waitFor != "" && strings.Contains(b.buf.String(), b.waitFor) {
		close(b.seen)
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer starts the binary on db and connects a client to it. The
// session is closed when the test ends, and closing it (closing stdin) must
// make the server exit 0. The server's stderr is logged if the test fails.
func startServer(ctx context.Context, t *testing.T, bin, db string) *mcp.ClientSession {
	t.Helper()
	stderr := newLockedBuffer("")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr)
		}
	})
	cmd := exec.Command(bin, "--db", db)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: e2eTimeout}, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close session (server exit): %v", err)
		}
	})
	return cs
}

// call calls a tool, failing the test on a protocol error.
func call(ctx context.Context, t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s, %v): %v", tool, args, err)
	}
	return res
}

func TestEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	newDB := func(t *testing.T) string {
		// A directory that does not exist yet: the server creates it.
		return filepath.Join(t.TempDir(), "data", "resources.db")
	}

	t.Run("tools and annotations", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		cs := startServer(ctx, t, bin, newDB(t))

		got := map[string]*mcp.Tool{}
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatalf("Tools: %v", err)
			}
			got[tool.Name] = tool
		}
		tests := []struct {
			name            string
			wantDescription string
			wantReadOnly    bool
			wantDestructive bool
		}{
			{name: toolList, wantDescription: "List resources, optionally filtered by a name pattern (regular expression)", wantReadOnly: true},
			{name: toolAdd, wantDescription: "Add (create) a new resource with a name and an integer value", wantDestructive: true},
			{name: toolRemove, wantDescription: "Remove (delete) resources by id or by name pattern (regular expression)", wantDestructive: true},
		}
		if len(got) != len(tests) {
			t.Errorf("server lists %d tools, want %d", len(got), len(tests))
		}
		for _, tt := range tests {
			tool := got[tt.name]
			if tool == nil {
				t.Errorf("tool %s not listed", tt.name)
				continue
			}
			if tool.Description != tt.wantDescription {
				t.Errorf("%s description = %q, want %q", tt.name, tool.Description, tt.wantDescription)
			}
			a := tool.Annotations
			if a == nil {
				t.Errorf("%s has no annotations", tt.name)
				continue
			}
			if a.ReadOnlyHint != tt.wantReadOnly {
				t.Errorf("%s readOnlyHint = %v, want %v", tt.name, a.ReadOnlyHint, tt.wantReadOnly)
			}
			// destructiveHint defaults to true when absent.
			if destructive := !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint); destructive != tt.wantDestructive {
				t.Errorf("%s destructive = %v, want %v", tt.name, destructive, tt.wantDestructive)
			}
			if tool.OutputSchema == nil {
				t.Errorf("%s has no output schema", tt.name)
			}
		}
	})

	t.Run("add list remove", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		cs := startServer(ctx, t, bin, newDB(t))

		var added resource
		decodeResult(t, call(ctx, t, cs, toolAdd, map[string]any{"name": "test-1", "value": 10}, nil), &added)
		if added.Name != "test-1" || added.Value != 10 || !idPattern.MatchString(added.ID) {
			t.Errorf("add = %+v, want test-1 = 10 with an id matching %s", added, idPattern)
		}
		if _, err := time.Parse(time.RFC3339, added.CreatedAt); err != nil || !strings.HasSuffix(added.CreatedAt, "Z") {
			t.Errorf("created_at %q is not an ISO 8601 UTC time: %v", added.CreatedAt, err)
		}

		var listed listOutput
		decodeResult(t, call(ctx, t, cs, toolList, nil, nil), &listed)
		if listed.Count != 1 || len(listed.Resources) != 1 || listed.Resources[0] != added {
			t.Errorf("list = %+v, want just %+v", listed, added)
		}

		var removed removal
		decodeResult(t, call(ctx, t, cs, toolRemove, map[string]any{"pattern": "^test-"}, nil), &removed)
		if removed.RemovedCount != 1 || len(removed.RemovedIDs) != 1 || removed.RemovedIDs[0] != added.ID {
			t.Errorf("remove(^test-) = %+v, want just %s", removed, added.ID)
		}

		if got, want := structured(t, call(ctx, t, cs, toolList, nil, nil)), `{"count":0,"resources":[]}`; got != want {
			t.Errorf("list after remove = %s, want %s", got, want)
		}
	})

	t.Run("tool error", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		cs := startServer(ctx, t, bin, newDB(t))

		tests := []struct {
			name     string
			tool     string
			args     map[string]any
			wantText string
		}{
			{name: "value not an integer", tool: toolAdd, args: map[string]any{"name": "x", "value": "ten"}, wantText: "integer"},
			{name: "missing name", tool: toolAdd, args: map[string]any{"value": 1}, wantText: "name"},
			{name: "bad pattern", tool: toolRemove, args: map[string]any{"pattern": "("}, wantText: "invalid pattern"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := call(ctx, t, cs, tt.tool, tt.args, nil)
				if !res.IsError || !strings.Contains(textOf(res), tt.wantText) {
					t.Errorf("result isError %v text %q, want isError true with %q", res.IsError, textOf(res), tt.wantText)
				}
			})
		}
	})

	t.Run("repeated call id", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		db := newDB(t)
		cs := startServer(ctx, t, bin, db)

		meta := mcp.Meta{callIDMetaKey: "mesh-call-1"}
		args := map[string]any{"name": "web", "value": 3}
		first := structured(t, call(ctx, t, cs, toolAdd, args, meta))
		if again := structured(t, call(ctx, t, cs, toolAdd, args, meta)); again != first {
			t.Errorf("repeated add = %s, want the first result %s", again, first)
		}
		if n := countRows(t, db, "resources"); n != 1 {
			t.Errorf("resources has %d rows after a repeated call id, want 1", n)
		}
	})

	t.Run("two servers share a file", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		db := newDB(t)
		sessions := []*mcp.ClientSession{startServer(ctx, t, bin, db), startServer(ctx, t, bin, db)}

		// The same call id sent through both replicas at once runs once.
		results := make([]string, 6)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				res, err := sessions[i%2].CallTool(ctx, &mcp.CallToolParams{
					Meta:      mcp.Meta{callIDMetaKey: "shared-call"},
					Name:      toolAdd,
					Arguments: map[string]any{"name": "web", "value": i},
				})
				if err != nil {
					t.Errorf("CallTool %d: %v", i, err)
					return
				}
				results[i] = textOf(res)
			})
		}
		wg.Wait()
		for i, r := range results {
			if r != results[0] {
				t.Errorf("call %d returned %s, want %s like call 0", i, r, results[0])
			}
		}
		if n := countRows(t, db, "resources"); n != 1 {
			t.Errorf("resources has %d rows, want 1", n)
		}

		// A write through one replica is read through the other.
		structured(t, call(ctx, t, sessions[0], toolAdd, map[string]any{"name": "db", "value": 1}, nil))
		var listed listOutput
		decodeResult(t, call(ctx, t, sessions[1], toolList, nil, nil), &listed)
		if listed.Count != 2 {
			t.Errorf("second replica lists %d resources, want 2", listed.Count)
		}
	})

	t.Run("exit on stdin close", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		var stdout bytes.Buffer
		stderr := newLockedBuffer("")
		cmd := exec.CommandContext(ctx, bin, "--db", newDB(t))
		cmd.Stdin = strings.NewReader("")
		cmd.Stdout, cmd.Stderr = &stdout, stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("server with closed stdin: %v, want exit 0\nstderr:\n%s", err, stderr)
		}
		if stdout.Len() != 0 {
			t.Errorf("stdout = %q, want nothing (logs belong on stderr)", stdout.String())
		}
		if !strings.Contains(stderr.String(), "stdin closed") {
			t.Errorf("stderr = %q, want a log saying stdin closed", stderr)
		}
	})

	t.Run("exit on SIGTERM", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		stderr := newLockedBuffer("serving on stdio")
		cmd := exec.CommandContext(ctx, bin, "--db", newDB(t))
		stdin, err := cmd.StdinPipe() // held open: only the signal stops it
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-stderr.seen: // the signal handler is installed by now
		case <-ctx.Done():
			t.Fatalf("server did not start: %v\nstderr:\n%s", ctx.Err(), stderr)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("server after SIGTERM: %v, want exit 0\nstderr:\n%s", err, stderr)
		}
	})

	t.Run("bad flag", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "--no-such-flag").CombinedOutput()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
			t.Errorf("server with a bad flag: %v, want exit status 1\n%s", err, out)
		}
	})
}

// TestRunHelp checks that -h prints usage and is not an error.
func TestRunHelp(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &stderr); err != nil {
		t.Fatalf("run -h: %v", err)
	}
	for _, want := range []string{"-db", "-log-level"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("usage %q does not mention %s", stderr.String(), want)
		}
	}
}
