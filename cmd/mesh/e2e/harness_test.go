package e2e

import (
	"bytes"
	"cmp"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// testCommit is the commit the tests' build is stamped with: the stamp
// `make build` gives a checkout with changes.
const testCommit = "1a2b3c4-dirty"

// binDir holds the mesh and mcp-resources binaries built once for the tests.
var binDir string

func TestMain(m *testing.M) {
	if os.Getenv(testMCPEnv) != "" {
		os.Exit(runTestMCPServer())
	}
	if os.Getenv(baselineEnv) != "" {
		os.Exit(runBaseline())
	}
	if os.Getenv(floorRoleEnv) != "" {
		os.Exit(runFloorRole())
	}
	dir, err := os.MkdirTemp("", "mesh-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := func() int {
		defer os.RemoveAll(dir)
		for _, b := range []struct{ out, pkg string }{{"mesh", ".."}, {"mcp-resources", "../../mcp-resources"}} {
			args := []string{"build", "-ldflags", "-X main.commit=" + testCommit, "-o", filepath.Join(dir, b.out)}
			if raceEnabled {
				args = append(args, "-race")
			}
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "build %s: %v\n", b.out, err)
				return 1
			}
		}
		// MESH_BENCH_BIN runs another build of mesh (another branch's), to
		// compare two builds alternately with the same benchmarks.
		if other := os.Getenv("MESH_BENCH_BIN"); other != "" {
			data, err := os.ReadFile(other) // a copy: children find themselves by the name mesh
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "mesh"), data, 0o755)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "MESH_BENCH_BIN:", err)
				return 1
			}
		}
		// The test binary doubles as a test MCP server (see testmcp_test.go).
		self, _ := os.Executable()
		if err := os.Symlink(self, filepath.Join(dir, "mesh-test-mcp")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// defaultConfig is config/agent.yaml, the configuration `make run` uses.
func defaultConfig(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile("../../../config/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// meshProc is a `mesh up` started by a test, on free ports and a temporary
// data dir.
type meshProc struct {
	t        testing.TB
	dir      string
	dataDir  string
	config   string
	httpAddr string
	natsAddr string
	env      []string
	args     []string
	logPath  string
	// bin is the directory of the mesh binary it runs: binDir, or an older
	// release's (the upgrade test).
	bin string

	mu  sync.Mutex
	cmd *exec.Cmd
	log *logPipe
}

type meshOpts struct {
	config string
	env    []string
	// logLevel is the roles' log level; empty means debug.
	logLevel string
	// noWait skips waiting for the mesh to be ready.
	noWait bool
	// args are given to `mesh up`.
	args []string
	// bin is the directory of the mesh binary to run; empty means this
	// build's (binDir).
	bin string
	// logName is the name of its log file in its directory; empty means
	// mesh.log.
	logName string
}

// freeAddr returns a loopback address whose port is free and stays free
// until a process of the test binds it.
var freeAddr = meshtest.FreeAddr

// startMesh runs `mesh up` and waits until the bridge answers and the tool
// catalog is published.
func startMesh(t testing.TB, o meshOpts) *meshProc {
	t.Helper()
	if o.config == "" {
		o.config = defaultConfig(t)
	}
	if o.logLevel == "" {
		o.logLevel = "debug"
	}
	dir := t.TempDir()
	m := &meshProc{t: t, dir: dir, dataDir: filepath.Join(dir, "data"), config: filepath.Join(dir, "agent.yaml"),
		httpAddr: freeAddr(t), natsAddr: freeAddr(t), env: append([]string{"MESH_LOG_LEVEL=" + o.logLevel}, o.env...), args: o.args, logPath: filepath.Join(dir, cmp.Or(o.logName, "mesh.log")), bin: cmp.Or(o.bin, binDir)}
	if err := os.WriteFile(m.config, []byte(o.config), 0o644); err != nil {
		t.Fatal(err)
	}
	m.start()
	t.Cleanup(func() {
		m.stop()
		checkLogLines(t, m.logPath)
		if t.Failed() {
			t.Logf("mesh log (%s):\n%s", m.logPath, tail(m.logs(), 120))
			keepLog(t, m.logPath)
		}
	})
	if !o.noWait {
		m.waitReady()
		if strings.Contains(o.config, testGateEnv) {
			// Ready needs a tool host, not each of its servers: the gated
			// items server (gatedGroupConfig) may come up later, and a turn
			// sent before would find only the resources' tools.
			m.waitServerTools("items")
		}
	}
	return m
}

// waitServerTools waits until the tool catalog lists tools of server. It
// reads the catalog's bucket as the mesh's admin: the bridge's GET /tools
// may want a token the harness does not have.
func (m *meshProc) waitServerTools(server string) {
	m.t.Helper()
	js, err := jetstream.New(m.adminNATS(m.t))
	if err != nil {
		m.t.Fatal(err)
	}
	kv, err := js.KeyValue(m.t.Context(), mesh.DefaultNamespace().Bucket(mesh.BucketTools))
	if err != nil {
		m.t.Fatal(err)
	}
	catalog := store.NewCatalog(kv)
	meshtest.Eventually(m.t, 60*time.Second, func() bool {
		tools, _ := catalog.List(m.t.Context())
		return slices.ContainsFunc(tools, func(e mesh.ToolEntry) bool { return e.Server == server })
	}, "the tools of server %s are not in the catalog", server)
}

// keepLog copies a failed test's whole mesh log, which goes with the
// test's temporary directory, into testdata/artifacts/logs (beside the
// screenshots), or the directory MESH_TEST_LOGS names: the log's tail above
// seldom shows how a chaos run went wrong.
func keepLog(t testing.TB, path string) {
	dir := os.Getenv("MESH_TEST_LOGS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts", "logs")
	}
	data, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		name := fmt.Sprintf("%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
		err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
		t.Logf("whole mesh log kept in %s", filepath.Join(dir, name))
	}
	if err != nil {
		t.Logf("keep the mesh log: %v", err)
	}
}

func (m *meshProc) start() {
	m.t.Helper()
	lp := newLogPipe(m.t, m.logPath)
	cmd := exec.Command(filepath.Join(m.bin, "mesh"), append([]string{"up"}, m.args...)...)
	cmd.Env = append(os.Environ(),
		"MESH_CONFIG="+m.config, "MESH_DATA_DIR="+m.dataDir,
		"MESH_HTTP_ADDR="+m.httpAddr, "MESH_NATS_ADDR="+m.natsAddr,
		"MESH_LOG_FORMAT=json", "NATS_URL=", "NATS_CREDS=", "NATS_NKEY=", "NATS_RESPONDER_CREDS=", "NATS_RESPONDER_NKEY=", "MESH_NATS_AUTH=",
		"PATH="+m.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		testMCPEnv+"=",
	)
	cmd.Env = append(cmd.Env, m.env...)
	cmd.SysProcAttr = meshProcAttr()
	if err := lp.start(cmd); err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.cmd, m.log = cmd, lp
	m.mu.Unlock()
}

// stop sends SIGTERM to `mesh up` and waits for the whole tree to exit.
func (m *meshProc) stop() {
	m.mu.Lock()
	cmd, lp := m.cmd, m.log
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers, if any
	lp.close()
}

// killTree sends SIGKILL to `mesh up` and every process of its group.
func (m *meshProc) killTree() {
	m.mu.Lock()
	cmd, lp := m.cmd, m.log
	m.cmd = nil
	m.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	// Children die with their parent (Pdeathsig); wait until none is left.
	meshtest.Eventually(m.t, 10*time.Second, func() bool { return len(descendants(cmd.Process.Pid)) == 0 }, "processes of the killed mesh still alive")
	lp.close()
}

// logPipe is where the processes a test starts write their log: a pipe,
// which a goroutine copies to the log file. A process killed in the middle
// of a write to a regular file may leave part of its line there, the next
// writer's line then following on the same line; a write of up to PIPE_BUF
// (4 KiB) to a pipe is whole or not at all. That is also how a mesh logs in
// production: to journald or a container runtime, through a pipe.
type logPipe struct {
	w    *os.File // the processes' end
	r    *os.File
	done chan struct{}
}

func newLogPipe(t testing.TB, path string) *logPipe {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	lp := &logPipe{w: w, r: r, done: make(chan struct{})}
	go func() {
		defer close(lp.done)
		_, _ = io.Copy(f, r)
		_ = f.Close()
	}()
	return lp
}

// start starts cmd writing its output (stdout and stderr) into the pipe,
// then lets go of the test's own copy of the processes' end: the copy ends
// when the last process holding it has. A cmd that does not start leaves
// the log as it was.
func (lp *logPipe) start(cmd *exec.Cmd) error {
	cmd.Stdout, cmd.Stderr = lp.w, lp.w
	err := cmd.Start()
	_ = lp.w.Close()
	if err != nil {
		lp.close()
	}
	return err
}

// close waits until the log has what every process wrote: their end of the
// pipe is closed once the last of them is gone (a process that outlives
// the test's kills by 10 s is not waited for).
func (lp *logPipe) close() {
	select {
	case <-lp.done:
	case <-time.After(10 * time.Second):
		_ = lp.r.Close()
		<-lp.done
	}
}

// restart starts `mesh up` again on the same data dir and ports.
func (m *meshProc) restart() {
	m.t.Helper()
	m.start()
	m.waitReady()
}

func (m *meshProc) waitReady() {
	m.t.Helper()
	meshtest.Eventually(m.t, 60*time.Second, func() bool {
		status, _ := m.try("GET", "/ready", nil)
		return status == http.StatusOK
	}, "mesh at %s did not become ready; log:\n%s", m.httpAddr, tail(m.logs(), 60))
}

func (m *meshProc) logs() string {
	data, _ := os.ReadFile(m.logPath)
	return string(data)
}

func (m *meshProc) url(path string) string { return "http://" + m.httpAddr + path }

// sendLater posts a message to conversation conv in the background, for a
// test that acts on the mesh while the turn runs; wait returns the answer,
// failing the test with what when none comes within timeout.
func (m *meshProc) sendLater(conv, text string) (wait func(timeout time.Duration, what string) map[string]any) {
	answer := make(chan map[string]any, 1)
	go func() {
		_, body := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": text})
		answer <- body
	}()
	return func(timeout time.Duration, what string) map[string]any {
		m.t.Helper()
		select {
		case body := <-answer:
			return body
		case <-time.After(timeout):
			m.t.Fatal(what)
			return nil
		}
	}
}

// openGate lets the tool calls of the test MCP server that wait on the gate
// file of dir go on.
func openGate(t testing.TB, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// try makes a request and decodes a JSON answer; status 0 means no answer,
// or one cut off before its end.
func (m *meshProc) try(method, path string, body any, headers ...string) (int, map[string]any) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, m.url(path), rd)
	if err != nil {
		m.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		// Cut off mid-body (a bridge killed while it answered): a status
		// with half a body is no answer.
		return 0, nil
	}
	checkAnswer(m.t, req, resp, data)
	_ = json.Unmarshal(data, &out)
	if out == nil {
		out = map[string]any{"_raw": string(data)}
	}
	return resp.StatusCode, out
}

// do is try that fails the test when the status is not want.
func (m *meshProc) do(want int, method, path string, body any, headers ...string) map[string]any {
	m.t.Helper()
	status, out := m.try(method, path, body, headers...)
	if status != want {
		m.t.Fatalf("%s %s: status %d, want %d; body %v", method, path, status, want, out)
	}
	return out
}

// childPID finds the pid of the role process `mesh up` runs.
func (m *meshProc) childPID(role string) int {
	m.t.Helper()
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	var pid int
	meshtest.Eventually(m.t, 30*time.Second, func() bool {
		for _, p := range descendants(cmd.Process.Pid) {
			args := cmdline(p)
			if len(args) >= 2 && filepath.Base(args[0]) == "mesh" && args[1] == role {
				pid = p
				return true
			}
		}
		return false
	}, "no %s process under mesh up", role)
	return pid
}

// descendants lists the processes below pid.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so cut at the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func cmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// adminNATS connects to m's NATS server as the mesh's admin, with the
// identity `mesh up` generated under its data dir (as the README tells a
// user of the nats CLI to do).
func (m *meshProc) adminNATS(t testing.TB) *nats.Conn {
	t.Helper()
	return adminConn(t, "nats://"+m.natsAddr, m.dataDir)
}

// adminConn connects to url as the admin of the mesh whose data dir is
// dataDir; the connection closes when the test ends.
func adminConn(t testing.TB, url, dataDir string) *nats.Conn {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(filepath.Join(dataDir, "creds", "admin.nk"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// resourceRows counts rows of the sample server's database by name.
func (m *meshProc) resourceRows(name string) int {
	m.t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(m.dataDir, "resources.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		m.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM resources WHERE name = ?", name).Scan(&n); err != nil {
		m.t.Fatalf("count %s: %v", name, err)
	}
	return n
}

// json helpers over decoded answers

func obj(v any, path ...string) map[string]any {
	cur, _ := v.(map[string]any)
	for _, p := range path {
		cur, _ = cur[p].(map[string]any)
	}
	return cur
}

func str(v any, path ...string) string {
	if len(path) == 0 {
		s, _ := v.(string)
		return s
	}
	m := obj(v, path[:len(path)-1]...)
	s, _ := m[path[len(path)-1]].(string)
	return s
}

func list(v any, path ...string) []any {
	m := obj(v, path[:len(path)-1]...)
	l, _ := m[path[len(path)-1]].([]any)
	return l
}
