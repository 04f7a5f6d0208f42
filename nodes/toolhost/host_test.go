package toolhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
)

const testNode = "th-test"

// logBuffer collects the host's logs, to check what they say (and don't).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// running is a host under test.
type running struct {
	*meshtest.Mesh
	logs *logBuffer
	stop func() error
	// approver signs the approvals call attaches; the host trusts its key.
	approver nkeys.KeyPair
}

// testApprover is a signing key for approvals, as the approver has.
func testApprover(t *testing.T) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// approve is the approver's signed approval of one call.
func approve(t *testing.T, kp nkeys.KeyPair, callID, server, tool string, args map[string]any) *mesh.ApprovalStatement {
	t.Helper()
	hash, err := mesh.ArgsHash(args)
	if err != nil {
		t.Fatal(err)
	}
	st := &mesh.ApprovalStatement{ApprovalID: mesh.NewID(), CallID: callID, Server: server, Tool: tool, ArgsHash: hash,
		Decision: mesh.ApprovalApproved, By: "tester", At: time.Now().UTC().Format(time.RFC3339Nano)}
	if err := st.Sign(kp); err != nil {
		t.Fatal(err)
	}
	return st
}

// startHost runs a host for servers on a fresh mesh; edit adjusts the
// config. The host stops when the test ends, if the test did not stop it.
func startHost(t *testing.T, edit func(*Config), servers ...config.MCPServer) *running {
	t.Helper()
	return startHostOn(t, meshtest.New(t), edit, nil, servers...)
}

// startHostOn is startHost on mesh m, with before run on it first.
func startHostOn(t *testing.T, m *meshtest.Mesh, edit func(*Config), before func(*meshtest.Mesh), servers ...config.MCPServer) *running {
	t.Helper()
	if before != nil {
		before(m)
	}
	logs := &logBuffer{}
	kp := testApprover(t)
	cfg := Config{
		Node: role.Node{NC: m.NC, JS: m.JS, NS: m.NS, NodeID: testNode,
			Logger: zerolog.New(zerolog.MultiLevelWriter(logs, zerolog.NewTestWriter(t))).Level(zerolog.DebugLevel).With().Timestamp().Logger()},
		Tools: m.Tools, Calls: m.Calls,
		ApproverKeys: []string{identity.PublicKey(kp)},
		Servers:      servers,
		Environ:      os.Environ(),
		Version:      "v1.2.3",
		MinBackoff:   50 * time.Millisecond,
		MaxBackoff:   200 * time.Millisecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("Run did not return 30s after its context ended")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &running{Mesh: m, logs: logs, stop: stop, approver: kp}
}

// stdioServer configures the test binary as an MCP server; it returns the
// file where it counts executions of "count".
func stdioServer(t *testing.T, name string) (config.MCPServer, string) {
	counter := filepath.Join(t.TempDir(), "count")
	return config.MCPServer{
		Name:    name,
		Command: os.Args[0],
		// The race detector waits 1s when a program exits; not in children.
		Env: map[string]string{envServer: "stdio", envCounter: counter, "GORACE": strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")},
	}, counter
}

// call calls a tool as an agent does, with an approval of that call signed
// by the test's approver unless req carries one (read-only tools ignore it).
func (r *running) call(t *testing.T, server, tool string, req mesh.ToolRequest, hdr nats.Header) (*mesh.ToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if req.Approval == nil {
		req.Approval = approve(t, r.approver, req.CallID, server, tool, req.Arguments)
	}
	return bus.CallTool(ctx, r.NC, r.NS, server, tool, req, hdr)
}

func (r *running) mustCall(t *testing.T, server, tool string, req mesh.ToolRequest) *mesh.ToolResult {
	t.Helper()
	res, err := r.call(t, server, tool, req, nil)
	if err != nil {
		t.Fatalf("call %s.%s: %v", server, tool, err)
	}
	return res
}

// waitServing waits until server answers its echo tool.
func (r *running) waitServing(t *testing.T, server string) {
	t.Helper()
	meshtest.Eventually(t, 30*time.Second, func() bool {
		_, err := r.call(t, server, "echo", mesh.ToolRequest{}, nil)
		return err == nil
	}, "server %s serves echo", server)
}

func (r *running) catalog(t *testing.T, server string) map[string]mesh.ToolEntry {
	t.Helper()
	list, err := store.NewCatalog(r.Tools).List(t.Context())
	if err != nil {
		t.Fatalf("list catalog: %v", err)
	}
	out := map[string]mesh.ToolEntry{}
	for _, e := range list {
		if e.Server == server {
			out[e.Name] = e
		}
	}
	return out
}

func wantKind(t *testing.T, err error, want *mesh.Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v (kind %s), want kind %s", err, mesh.ErrorKind(err), want.Kind())
	}
}

func TestCatalog(t *testing.T) {
	srv, _ := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	var tools map[string]mesh.ToolEntry
	meshtest.Eventually(t, 30*time.Second, func() bool {
		tools = r.catalog(t, "local")
		return len(tools) == 10
	}, "10 tools of server local in the catalog")

	tests := []struct {
		name            string
		wantReadOnly    bool
		wantDestructive bool
		wantAnnotations bool
	}{
		{name: "echo", wantReadOnly: true, wantAnnotations: true},
		{name: "pid", wantReadOnly: true, wantAnnotations: true},
		{name: "count", wantDestructive: true}, // no annotations: MCP default
		{name: "crash", wantDestructive: true},
		{name: "add", wantAnnotations: true}, // destructiveHint: false
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := tools[tt.name]
			if !ok {
				t.Fatalf("tool %s not in catalog", tt.name)
			}
			if e.ReadOnlyHint != tt.wantReadOnly || e.DestructiveHint != tt.wantDestructive {
				t.Errorf("readOnly, destructive = %v, %v; want %v, %v", e.ReadOnlyHint, e.DestructiveHint, tt.wantReadOnly, tt.wantDestructive)
			}
			if (e.Annotations != nil) != tt.wantAnnotations {
				t.Errorf("annotations = %+v, want present: %v", e.Annotations, tt.wantAnnotations)
			}
			if e.Host != testNode || e.Server != "local" || e.UpdatedAt.IsZero() {
				t.Errorf("host, server, updated_at = %q, %q, %v", e.Host, e.Server, e.UpdatedAt)
			}
			var schema map[string]any
			if err := json.Unmarshal(e.InputSchema, &schema); err != nil || schema["type"] != "object" {
				t.Errorf("input schema = %s (%v), want an object schema", e.InputSchema, err)
			}
		})
	}
	add := tools["add"].Annotations
	if add == nil {
		t.Error("add annotations = nil, want destructive false, idempotent true, open world true")
	} else {
		for _, h := range []struct {
			name string
			got  *bool
			want bool
		}{
			{"destructive", add.DestructiveHint, false},
			{"idempotent", add.IdempotentHint, true},
			{"open world", add.OpenWorldHint, true},
		} {
			if h.got == nil {
				t.Errorf("add %s hint = nil, want %v", h.name, h.want)
			} else if *h.got != h.want {
				t.Errorf("add %s hint = %v, want %v", h.name, *h.got, h.want)
			}
		}
	}
	if desc := tools["count"].Description; desc != "Counts its executions." {
		t.Errorf("count description = %q", desc)
	}
	// The child's stderr is read by its own goroutine: the line may trail the catalog.
	meshtest.Eventually(t, 5*time.Second, func() bool { return strings.Contains(r.logs.String(), "test server: up") }, "child stderr not logged")
}

func TestPublishCatalog(t *testing.T) {
	m := meshtest.New(t)
	ctx := t.Context()
	mk := func(host string, names ...string) toolSet {
		set := toolSet{}
		for _, n := range names {
			ti, err := newTool(m.NS, "s", host, &mcp.Tool{Name: n, InputSchema: map[string]any{"type": "object"}}, false, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			set[n] = ti
		}
		return set
	}
	if err := publishCatalog(ctx, m.Tools, "s", mk("a", "one", "two/x")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	key, _ := mesh.ToolKey("s", "one")
	first, err := m.Tools.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// A replica publishing the same tools must not write a new revision.
	if err := publishCatalog(ctx, m.Tools, "s", mk("b", "one", "two/x")); err != nil {
		t.Fatalf("publish again: %v", err)
	}
	again, err := m.Tools.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if again.Revision() != first.Revision() {
		t.Errorf("revision %d → %d after publishing an unchanged tool", first.Revision(), again.Revision())
	}
	// A tool no longer listed is deleted; another server's tools stay.
	if _, err := m.Tools.Put(ctx, "other.keep", []byte(`{"server":"other","name":"keep"}`)); err != nil {
		t.Fatal(err)
	}
	if err := publishCatalog(ctx, m.Tools, "s", mk("a", "one")); err != nil {
		t.Fatalf("publish fewer: %v", err)
	}
	list, err := store.NewCatalog(m.Tools).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Server+"."+e.Name)
	}
	if want := "other.keep s.one"; strings.Join(got, " ") != want {
		t.Errorf("catalog = %q, want %q", strings.Join(got, " "), want)
	}
}

func TestCall(t *testing.T) {
	srv, _ := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")

	res := r.mustCall(t, "local", "echo", mesh.ToolRequest{Arguments: map[string]any{"text": "hi"}})
	if res.Text != "echo: hi" || res.IsError {
		t.Errorf("echo = %+v, want text %q", res, "echo: hi")
	}
	var content []map[string]any
	if err := json.Unmarshal(res.Content, &content); err != nil || len(content) != 1 || content[0]["type"] != "text" {
		t.Errorf("content = %s (%v), want one text block", res.Content, err)
	}

	// The debug line of a call names it (subject, call id, session).
	r.mustCall(t, "local", "echo", mesh.ToolRequest{CallID: "echo-logged", Session: "s-logged", Arguments: map[string]any{"text": "x"}})
	subj, _ := r.NS.Tool("local", "echo")
	want := `"subject":"` + subj + `","call_id":"echo-logged","session":"s-logged","is_error":false,`
	logged := false
	for line := range strings.Lines(r.logs.String()) {
		logged = logged || strings.Contains(line, want) && strings.Contains(line, `"message":"tool called"`)
	}
	if !logged {
		t.Errorf("logs have no line \"tool called\" with %s:\n%s", want, r.logs.String())
	}

	res = r.mustCall(t, "local", "fail", mesh.ToolRequest{})
	if !res.IsError || res.Text != "boom" {
		t.Errorf("fail = %+v, want an isError result with text boom", res)
	}

	res = r.mustCall(t, "local", "add", mesh.ToolRequest{CallID: "add-1", Arguments: map[string]any{"a": 2, "b": 3}})
	if res.Text != "5" {
		t.Errorf("add = %q, want 5", res.Text)
	}

	t.Run("missing call id", func(t *testing.T) {
		_, err := r.call(t, "local", "count", mesh.ToolRequest{}, nil)
		wantKind(t, err, mesh.ErrBadRequest)
	})
	t.Run("bad call id", func(t *testing.T) {
		_, err := r.call(t, "local", "count", mesh.ToolRequest{CallID: "a.b"}, nil)
		wantKind(t, err, mesh.ErrBadRequest)
	})
	t.Run("malformed body", func(t *testing.T) {
		subj, _ := r.NS.Tool("local", "echo")
		msg, err := r.NC.Request(subj, []byte("{not json"), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		err = mesh.ErrorFromMsg(msg)
		wantKind(t, err, mesh.ErrBadRequest)
		if !strings.Contains(err.Error(), "not a JSON object") {
			t.Errorf("message = %q", err.Error())
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		_, err := r.call(t, "local", "nope", mesh.ToolRequest{}, nil)
		wantKind(t, err, mesh.ErrToolUnavailable)
	})
}

func TestCallOnce(t *testing.T) {
	srv, counter := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")

	first := r.mustCall(t, "local", "count", mesh.ToolRequest{CallID: "once-1"})
	second := r.mustCall(t, "local", "count", mesh.ToolRequest{CallID: "once-1"})
	if want := "count 1 call_id once-1"; first.Text != want || second.Text != want {
		t.Errorf("texts = %q, %q; want both %q", first.Text, second.Text, want)
	}
	if n := readCount(counter); n != 1 {
		t.Errorf("count ran %d times for one call id, want 1", n)
	}
	e, err := r.Calls.Get(t.Context(), "once-1")
	if err != nil {
		t.Fatal(err)
	}
	var rec mesh.CallRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.State != mesh.CallDone {
		t.Errorf("record state = %q, want %q", rec.State, mesh.CallDone)
	}
	if rec.Host != testNode {
		t.Errorf("record host = %q, want %q", rec.Host, testNode)
	}
	if rec.Tool != "count" {
		t.Errorf("record tool = %q, want count", rec.Tool)
	}
	if rec.Result == nil {
		t.Errorf("record result = nil, want the call's result: %+v", rec)
	}
	if rec.FinishedAt.IsZero() {
		t.Errorf("record finished at is zero, want the time the call finished: %+v", rec)
	}

	r.mustCall(t, "local", "count", mesh.ToolRequest{CallID: "once-2"})
	if n := readCount(counter); n != 2 {
		t.Errorf("count ran %d times for two call ids, want 2", n)
	}
	_, err = r.call(t, "local", "add", mesh.ToolRequest{CallID: "once-1"}, nil)
	wantKind(t, err, mesh.ErrBadRequest)

	// Read-only tools keep no record.
	r.mustCall(t, "local", "echo", mesh.ToolRequest{CallID: "ro-1"})
	if _, err := r.Calls.Get(t.Context(), "ro-1"); err == nil {
		t.Error("a read-only call was recorded")
	}
}

func putRecord(t *testing.T, r *running, rec mesh.CallRecord) {
	t.Helper()
	data, _ := json.Marshal(rec)
	if _, err := r.Calls.Put(t.Context(), rec.CallID, data); err != nil {
		t.Fatal(err)
	}
}

func TestInterruptedCall(t *testing.T) {
	plain, plainCounter := stdioServer(t, "plain")
	dedupe, dedupeCounter := stdioServer(t, "dedupe")
	dedupe.DedupeCallIDs = true
	r := startHost(t, nil, plain, dedupe)
	r.waitServing(t, "plain")
	r.waitServing(t, "dedupe")
	old := time.Now().Add(-time.Hour)

	tests := []struct {
		name    string
		server  string
		rec     mesh.CallRecord
		wantErr *mesh.Error
		want    string
	}{
		{name: "old started record", server: "plain",
			rec:     mesh.CallRecord{CallID: "int-1", Server: "plain", Tool: "count", State: mesh.CallStarted, Host: "gone", StartedAt: old},
			wantErr: mesh.ErrCallInterrupted},
		{name: "attempt ended without result", server: "plain",
			rec:     mesh.CallRecord{CallID: "int-2", Server: "plain", Tool: "count", State: mesh.CallStarted, Host: "gone", StartedAt: time.Now(), FinishedAt: time.Now()},
			wantErr: mesh.ErrCallInterrupted},
		{name: "server deduplicates", server: "dedupe",
			rec:  mesh.CallRecord{CallID: "int-3", Server: "dedupe", Tool: "count", State: mesh.CallStarted, Host: "gone", StartedAt: old},
			want: "count 1 call_id int-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			putRecord(t, r, tt.rec)
			res, err := r.call(t, tt.server, "count", mesh.ToolRequest{CallID: tt.rec.CallID}, nil)
			if tt.wantErr != nil {
				wantKind(t, err, tt.wantErr)
				if !strings.Contains(err.Error(), "not run again") {
					t.Errorf("message = %q", err.Error())
				}
				return
			}
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if res.Text != tt.want {
				t.Errorf("text = %q, want %q", res.Text, tt.want)
			}
		})
	}
	if n := readCount(plainCounter); n != 0 {
		t.Errorf("interrupted calls ran %d times, want 0", n)
	}
	if n := readCount(dedupeCounter); n != 1 {
		t.Errorf("deduplicated call ran %d times, want 1", n)
	}
}

func TestWaitsForEarlierAttempt(t *testing.T) {
	srv, counter := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")
	putRecord(t, r, mesh.CallRecord{CallID: "w-1", Server: "local", Tool: "count", State: mesh.CallStarted, Host: "other", StartedAt: time.Now()})

	type outcome struct {
		res *mesh.ToolResult
		err error
	}
	approval := approve(t, r.approver, "w-1", "local", "count", nil)
	got := make(chan outcome, 1)
	go func() {
		res, err := bus.CallTool(t.Context(), r.NC, r.NS, "local", "count", mesh.ToolRequest{CallID: "w-1", Approval: approval}, nil)
		got <- outcome{res, err}
	}()
	meshtest.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "waiting for its outcome")
	}, "the call waits for the earlier attempt")
	putRecord(t, r, mesh.CallRecord{CallID: "w-1", Server: "local", Tool: "count", State: mesh.CallDone, Host: "other",
		StartedAt: time.Now(), FinishedAt: time.Now(), Result: &mesh.ToolResult{Text: "from other"}})
	select {
	case o := <-got:
		if o.err != nil || o.res.Text != "from other" {
			t.Errorf("call = %+v, %v; want the other attempt's result", o.res, o.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("call did not return")
	}
	if n := readCount(counter); n != 0 {
		t.Errorf("count ran %d times, want 0", n)
	}
}

func TestTimeout(t *testing.T) {
	srv, _ := stdioServer(t, "local")
	srv.Timeout = config.Duration(300 * time.Millisecond)
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")
	_, err := r.call(t, "local", "slow", mesh.ToolRequest{Arguments: map[string]any{"ms": 10000}}, nil)
	wantKind(t, err, mesh.ErrToolUnavailable)
	if !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("message = %q", err.Error())
	}
	r.mustCall(t, "local", "echo", mesh.ToolRequest{})
}

func pidOf(t *testing.T, r *running, server string) int {
	t.Helper()
	res := r.mustCall(t, server, "pid", mesh.ToolRequest{})
	pid, err := strconv.Atoi(res.Text)
	if err != nil {
		t.Fatalf("pid = %q", res.Text)
	}
	return pid
}

func TestRestart(t *testing.T) {
	srv, _ := stdioServer(t, "local")
	r := startHost(t, func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, 2*time.Second }, srv)
	r.waitServing(t, "local")
	pid := pidOf(t, r, "local")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// During the outage calls fail fast, as unavailable.
	meshtest.Eventually(t, 10*time.Second, func() bool {
		start := time.Now()
		_, err := r.call(t, "local", "echo", mesh.ToolRequest{}, nil)
		if err != nil && !errors.Is(err, mesh.ErrToolUnavailable) {
			t.Fatalf("call during the outage: %v, want tool_unavailable", err)
		}
		if err != nil && time.Since(start) > 2*time.Second {
			t.Fatalf("call during the outage took %v", time.Since(start))
		}
		return err != nil
	}, "a call fails while the server is down")
	meshtest.Eventually(t, 30*time.Second, func() bool {
		res, err := r.call(t, "local", "pid", mesh.ToolRequest{}, nil)
		return err == nil && res.Text != strconv.Itoa(pid)
	}, "the server is restarted")
}

func TestCrashDuringCall(t *testing.T) {
	srv, _ := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")
	_, err := r.call(t, "local", "crash", mesh.ToolRequest{CallID: "crash-1"}, nil)
	wantKind(t, err, mesh.ErrToolUnavailable)
	r.waitServing(t, "local")
	// The crashed call's outcome is unknown: it is not run again.
	_, err = r.call(t, "local", "crash", mesh.ToolRequest{CallID: "crash-1"}, nil)
	wantKind(t, err, mesh.ErrCallInterrupted)
}

func TestShutdown(t *testing.T) {
	srv, _ := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")
	pid := pidOf(t, r, "local")
	if err := r.stop(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("MCP server %d still exists after shutdown (kill 0: %v)", pid, err)
	}
	_, err := r.call(t, "local", "echo", mesh.ToolRequest{}, nil)
	wantKind(t, err, mesh.ErrToolUnavailable)
}

func TestHTTPServer(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "count")
	mcpSrv := testServer(counter, false)
	var mu sync.Mutex
	var apiKeys []string
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		apiKeys = append(apiKeys, req.Header.Get("X-Api-Key"))
		mu.Unlock()
		if req.Header.Get("Authorization") == "Bearer bad" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, req)
	}))
	t.Cleanup(ts.Close)
	r := startHost(t, nil, config.MCPServer{Name: "web", URL: ts.URL, Headers: map[string]string{"X-Api-Key": "k1"}})
	r.waitServing(t, "web")

	res := r.mustCall(t, "web", "count", mesh.ToolRequest{CallID: "web-1"})
	if res.Text != "count 1 call_id web-1" {
		t.Errorf("count = %q", res.Text)
	}
	hdr := nats.Header{}
	hdr.Set("Authorization", "Bearer user-token")
	res, err := r.call(t, "web", "whoami", mesh.ToolRequest{}, hdr)
	if err != nil || res.Text != "Bearer user-token" {
		t.Errorf("whoami = %+v, %v; want the caller's Authorization", res, err)
	}
	res = r.mustCall(t, "web", "whoami", mesh.ToolRequest{})
	if res.Text != "" {
		t.Errorf("whoami without a token = %q, want empty", res.Text)
	}
	// A refused token fails that call only; the session stays up.
	hdr.Set("Authorization", "Bearer bad")
	_, err = r.call(t, "web", "whoami", mesh.ToolRequest{}, hdr)
	wantKind(t, err, mesh.ErrBadRequest)
	r.mustCall(t, "web", "echo", mesh.ToolRequest{})

	mu.Lock()
	for i, k := range apiKeys {
		if k != "k1" {
			t.Errorf("request %d had X-Api-Key %q, want the configured k1", i, k)
		}
	}
	mu.Unlock()
	if logs := r.logs.String(); strings.Contains(logs, "user-token") || strings.Contains(logs, "Bearer bad") {
		t.Errorf("a token was logged:\n%s", logs)
	}

	// notifications/tools/list_changed refreshes the catalog and endpoints.
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "late", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, noIn) (*mcp.CallToolResult, any, error) {
			return text("late"), nil, nil
		})
	meshtest.Eventually(t, 10*time.Second, func() bool {
		res, err := r.call(t, "web", "late", mesh.ToolRequest{}, nil)
		_, listed := r.catalog(t, "web")["late"]
		return err == nil && res.Text == "late" && listed
	}, "tool added at run time is listed and served")
	mcpSrv.RemoveTools("late")
	meshtest.Eventually(t, 10*time.Second, func() bool {
		_, err := r.call(t, "web", "late", mesh.ToolRequest{}, nil)
		_, listed := r.catalog(t, "web")["late"]
		return err != nil && !listed
	}, "removed tool is no longer listed nor served")
	r.mustCall(t, "web", "echo", mesh.ToolRequest{})
}

// A call carries its trace to the MCP server: traceparent in the request's
// _meta (over stdio and HTTP) and in the HTTP headers, in the trace of the
// NATS request that asked for it.
func TestCallCarriesTheTraceToTheServer(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	var mu sync.Mutex
	var headers []string
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testServer(filepath.Join(t.TempDir(), "count"), false) }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			mu.Lock()
			headers = append(headers, req.Header.Get("traceparent"))
			mu.Unlock()
		}
		handler.ServeHTTP(w, req)
	}))
	t.Cleanup(ts.Close)
	stdio, _ := stdioServer(t, "local")
	r := startHost(t, nil, stdio, config.MCPServer{Name: "web", URL: ts.URL})
	r.waitServing(t, "local")
	r.waitServing(t, "web")
	for _, server := range []string{"local", "web"} {
		hdr := nats.Header{}
		hdr.Set("traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
		mu.Lock()
		headers = nil
		mu.Unlock()
		res, err := r.call(t, server, "traceparent", mesh.ToolRequest{}, hdr)
		if err != nil || !strings.HasPrefix(res.Text, "00-"+trace+"-") {
			t.Errorf("%s: the server's _meta traceparent %+v (%v), want one of trace %s", server, res, err, trace)
		}
		mu.Lock()
		if server == "web" && (len(headers) == 0 || !strings.HasPrefix(headers[len(headers)-1], "00-"+trace+"-")) {
			t.Errorf("the HTTP server's traceparent headers %q, want trace %s", headers, trace)
		}
		mu.Unlock()
	}
}

func TestNew(t *testing.T) {
	m := meshtest.New(t)
	ok := Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "n1"}, Servers: []config.MCPServer{{Name: "a", Command: "x"}}}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr bool
	}{
		{name: "valid", edit: func(*Config) {}},
		{name: "no servers", edit: func(c *Config) { c.Servers = nil }},
		{name: "no conn", edit: func(c *Config) { c.NC = nil }, wantErr: true},
		{name: "no js nor buckets", edit: func(c *Config) { c.JS = nil }, wantErr: true},
		{name: "buckets without js", edit: func(c *Config) { c.JS, c.Tools, c.Calls, c.Approvals = nil, m.Tools, m.Calls, m.Approvals }},
		{name: "keys without js nor approvals", edit: func(c *Config) {
			c.JS, c.Tools, c.Calls, c.ApproverKeys = nil, m.Tools, m.Calls, []string{identity.PublicKey(testApprover(t))}
		}},
		{name: "no approvals bucket nor js", edit: func(c *Config) { c.JS, c.Tools, c.Calls = nil, m.Tools, m.Calls }, wantErr: true},
		{name: "bad approver key", edit: func(c *Config) { c.ApproverKeys = []string{"not-a-key"} }, wantErr: true},
		{name: "no node", edit: func(c *Config) { c.NodeID = "" }, wantErr: true},
		{name: "bad server name", edit: func(c *Config) { c.Servers[0].Name = "a.b" }, wantErr: true},
		{name: "no command nor url", edit: func(c *Config) { c.Servers[0].Command = "" }, wantErr: true},
		{name: "command and url", edit: func(c *Config) { c.Servers[0].URL = "http://x" }, wantErr: true},
		{name: "bad url", edit: func(c *Config) { c.Servers[0] = config.MCPServer{Name: "a", URL: "ftp://x"} }, wantErr: true},
		{name: "twice", edit: func(c *Config) { c.Servers = append(c.Servers, c.Servers[0]) }, wantErr: true},
		{name: "backoff order", edit: func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, time.Millisecond }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			cfg.Servers = append([]config.MCPServer(nil), ok.Servers...)
			tt.edit(&cfg)
			_, err := New(cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New: %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v is not ErrInvalidConfig", err)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	m := meshtest.New(t)
	for in, want := range map[string]string{"": DefaultVersion, "v1.2.3": "1.2.3", "1.0.0-rc.1": "1.0.0-rc.1", "dev": DefaultVersion} {
		h, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "n"}, Version: in})
		if err != nil {
			t.Fatal(err)
		}
		if h.version != want {
			t.Errorf("version %q → %q, want %q", in, h.version, want)
		}
	}
}

func TestFindCommand(t *testing.T) {
	dir := t.TempDir()
	name := fmt.Sprintf("toolhost-test-cmd-%d", os.Getpid())
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findCommand(name, []string{t.TempDir(), dir}); err != nil || got != filepath.Join(dir, name) {
		t.Errorf("findCommand = %q, %v; want it in the search dir", got, err)
	}
	if _, err := findCommand(name+"-missing", []string{dir}); err == nil {
		t.Error("findCommand found a missing command")
	}
	if got, err := findCommand("sh", nil); err != nil || !filepath.IsAbs(got) {
		t.Errorf("findCommand(sh) = %q, %v; want a path from PATH", got, err)
	}
}

func TestLineLogger(t *testing.T) {
	var buf bytes.Buffer
	l := &lineLogger{log: zerolog.New(&buf)}
	_, _ = l.Write([]byte("one\ntw"))
	_, _ = l.Write([]byte("o\r\n\nthree"))
	l.flush()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e struct{ Stderr string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		got = append(got, e.Stderr)
	}
	if want := "one two three"; strings.Join(got, " ") != want {
		t.Errorf("lines = %q, want %q", strings.Join(got, " "), want)
	}
}

// A result's _meta state patch reaches the agent as ToolResult.State; one
// that is not an object, or too large, makes the result a tool error.
func TestCallPassesStatePatch(t *testing.T) {
	srv, _ := stdioServer(t, "local")
	r := startHost(t, nil, srv)
	r.waitServing(t, "local")
	tests := []struct {
		name      string
		state     any
		wantState string
		wantError string
	}{
		{name: "object", state: map[string]any{"isClockedIn": true, "lastClockOut": nil}, wantState: `{"isClockedIn":true,"lastClockOut":null}`},
		{name: "none", state: nil},
		{name: "not an object", state: []any{1, 2}, wantError: "must be a JSON object"},
		{name: "too large", state: map[string]any{"x": strings.Repeat("y", mesh.MaxStatePatch)}, wantError: "state too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := r.mustCall(t, "local", "remember", mesh.ToolRequest{Arguments: map[string]any{"state": tt.state}})
			if tt.wantError != "" {
				if !res.IsError || !strings.Contains(res.Text, tt.wantError) || res.State != nil {
					t.Errorf("result = %+v, want a tool error saying %q and no state", res, tt.wantError)
				}
				return
			}
			if res.IsError || res.Text != "remembered" || string(res.State) != tt.wantState {
				t.Errorf("result = text %q, isError %v, state %s; want remembered with state %s", res.Text, res.IsError, res.State, tt.wantState)
			}
		})
	}
}

func TestResultTooLarge(t *testing.T) {
	m := meshtest.New(t)
	h, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "n"}})
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{s: newServer(h, config.MCPServer{Name: "s"}, m.Tools, m.Calls)}
	small := &mesh.ToolResult{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`), Text: "ok"}
	if got := c.fit(&tool{name: "t"}, small); got != small {
		t.Errorf("fit changed a small result: %+v", got)
	}
	big := strings.Repeat("x", int(m.NC.MaxPayload()))
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": big}})
	got := c.fit(&tool{name: "t"}, &mesh.ToolResult{Content: content, Text: big})
	if !got.IsError || !strings.Contains(got.Text, "more than the mesh carries") || len(got.Content) > 1000 {
		t.Errorf("fit(big) = IsError %v, text %.80q, %d content bytes; want a short tool error", got.IsError, got.Text, len(got.Content))
	}
}

// A call started by a toolhost that died moments ago is interrupted at once,
// not after the call timeout: the dead host's key is gone from the nodes
// bucket. A live host's recent call is still waited for.
func TestCallOfADeadHostIsInterruptedAtOnce(t *testing.T) {
	srv, counter := stdioServer(t, "local")
	srv.DedupeCallIDs = true
	var nodes jetstream.KeyValue
	r := startHost(t, func(c *Config) {
		kv, err := c.JS.KeyValue(t.Context(), c.NS.Bucket(mesh.BucketNodes))
		if err != nil {
			t.Fatal(err)
		}
		c.Nodes, nodes = kv, kv
	}, srv)
	r.waitServing(t, "local")

	// "dead" has no key in the nodes bucket; "alive" has one.
	if _, err := nodes.Put(t.Context(), "toolhost.alive", []byte(`{"node":"alive","role":"toolhost","state":"ready"}`)); err != nil {
		t.Fatal(err)
	}
	putRecord(t, r, mesh.CallRecord{CallID: "d-1", Server: "local", Tool: "count", State: mesh.CallStarted, Host: "dead", StartedAt: time.Now()})
	start := time.Now()
	res, err := r.call(t, "local", "count", mesh.ToolRequest{CallID: "d-1"}, nil)
	if err != nil || res.Text != "count 1 call_id d-1" {
		t.Fatalf("call = %+v, %v; want it run again with its call id (the server deduplicates)", res, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v: a dead host's call must not wait out the call timeout", took)
	}
	if n := readCount(counter); n != 1 {
		t.Errorf("count ran %d times, want 1", n)
	}

	putRecord(t, r, mesh.CallRecord{CallID: "a-1", Server: "local", Tool: "count", State: mesh.CallStarted, Host: "alive", StartedAt: time.Now()})
	approval := approve(t, r.approver, "a-1", "local", "count", nil)
	go func() {
		_, _ = bus.CallTool(t.Context(), r.NC, r.NS, "local", "count", mesh.ToolRequest{CallID: "a-1", Approval: approval}, nil)
	}()
	meshtest.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "waiting for its outcome")
	}, "a live host's call is not waited for")
}
