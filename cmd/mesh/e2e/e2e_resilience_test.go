package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// meshEvents collects the CUSTOM events the mesh publishes about itself
// (mesh.evt._mesh.CUSTOM), read with a plain NATS client.
type meshEvents struct {
	mu     sync.Mutex
	events []struct {
		at    time.Time
		name  string
		value map[string]any
	}
}

func watchMeshEvents(t *testing.T, m *meshProc) *meshEvents {
	t.Helper()
	nc := m.adminNATS(t)
	w := &meshEvents{}
	if _, err := nc.Subscribe("mesh.evt._mesh.CUSTOM", func(m *nats.Msg) {
		var ev struct {
			Name  string         `json:"name"`
			Value map[string]any `json:"value"`
		}
		_ = json.Unmarshal(m.Data, &ev)
		w.mu.Lock()
		w.events = append(w.events, struct {
			at    time.Time
			name  string
			value map[string]any
		}{time.Now(), ev.Name, ev.Value})
		w.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// first returns when the first event named name about a node of role came.
func (w *meshEvents) first(name, role string) (time.Time, map[string]any, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		node := obj(e.value, "node")
		if e.name == name && (str(node, "role") == role || str(e.value, "role") == role) {
			return e.at, e.value, true
		}
	}
	return time.Time{}, nil, false
}

func TestMonitorFindsAKilledAgentAndItIsRestarted(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	w := watchMeshEvents(t, m)
	old := m.childPID("agent")
	killed := time.Now()
	if err := killPID(old); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	meshtest.Eventually(t, 10*time.Second, func() bool {
		var ok bool
		at, _, ok = w.first("node_down", "agent")
		return ok
	}, "no node_down for the killed agent")
	if took := at.Sub(killed); took > 3*time.Second {
		t.Errorf("the agent was reported down %v after its death; want within 3 s", took)
	}
	meshtest.Eventually(t, 30*time.Second, func() bool { return m.childPID("agent") != old }, "agent not restarted")
	meshtest.Eventually(t, 10*time.Second, func() bool { _, _, ok := w.first("node_up", "agent"); return ok }, "no node_up for the restarted agent")
	// The mesh works on.
	m.firstTurn("list all resources")
}

// runRole runs one role of m's mesh as a direct child of the test.
func runRole(t *testing.T, m *meshProc, role string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	// A role started by hand finds its identity in the data dir, once
	// mesh up has made it (unless the test gives it one).
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "NATS_NKEY=") }) {
		seed := filepath.Join(m.dataDir, "creds", role+".nk")
		meshtest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(seed); return err == nil }, "no identity %s", seed)
	}
	// A name of its own: two roles started in the same millisecond once
	// shared a time-named file and wrote over each other's lines.
	f, err := os.CreateTemp(m.dir, role+"-"+time.Now().Format("150405.000")+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	logPath := f.Name()
	_ = f.Close()
	lp := newLogPipe(t, logPath)
	cmd := exec.Command(filepath.Join(binDir, "mesh"), role)
	cmd.Env = append(os.Environ(), "MESH_CONFIG="+m.config, "MESH_DATA_DIR="+m.dataDir, "MESH_HTTP_ADDR="+m.httpAddr,
		"NATS_URL=nats://"+m.natsAddr, "MESH_LOG_FORMAT=json", "MESH_LOG_LEVEL=debug",
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	if err := lp.start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		lp.close()
		checkLogLines(t, logPath)
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", role, tail(string(data), 60))
		}
	})
	return cmd, logPath
}

func TestSIGTERMLetsTheTurnInFlightFinish(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// No agent under mesh up: the test runs its own, to see how it exits.
	m := startMesh(t, meshOpts{config: gateConfig(dir), args: []string{"--replicas", "agent=0"}, noWait: true})
	agentCmd, agentLog := runRole(t, m, "agent")
	m.waitReady()
	conv := m.newConversation()
	wait := m.sendLater(conv, "list items")
	meshtest.Eventually(t, 30*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "calls"))
		return len(data) > 0
	}, "the tool call never started")
	if err := agentCmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// The turn is still allowed to finish: the tool answers now.
	openGate(t, dir)
	exited := make(chan error, 1)
	go func() { exited <- agentCmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("agent exit: %v, want status 0", err)
		}
		if took := time.Since(stopped); took > 35*time.Second {
			t.Errorf("agent took %v to stop", took)
		}
		// Its last line says how long the stop took.
		meshtest.Eventually(t, 5*time.Second, func() bool {
			data, _ := os.ReadFile(agentLog)
			return bytes.Contains(data, []byte(`"shutdown_seconds":`))
		}, "the agent's log has no shutdown_seconds")
	case <-time.After(40 * time.Second):
		t.Fatal("the agent did not exit within the drain limit")
	}
	body := wait(60*time.Second, "the turn in flight never answered")
	if str(body, "conversation", "status") != "active" || !strings.Contains(str(body, "result", "response"), "alpha") {
		t.Errorf("the turn in flight did not complete: %v", body)
	}
}

func TestNATSRestartLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	natsAddr := freeAddr(t)
	natsData := filepath.Join(dir, "nats-data")
	startNATS := func() *exec.Cmd {
		cmd := exec.Command(filepath.Join(binDir, "mesh"), "nats")
		cmd.Env = append(os.Environ(), "MESH_CONFIG=../../../config/agent.yaml", "MESH_DATA_DIR="+natsData, "MESH_NATS_ADDR="+natsAddr, "NATS_URL=", "NATS_CREDS=", "NATS_NKEY=")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		admin := filepath.Join(natsData, "creds", "admin.nk")
		meshtest.Eventually(t, 20*time.Second, func() bool {
			opt, err := nats.NkeyOptionFromSeed(admin)
			if err != nil {
				return false
			}
			nc, err := nats.Connect("nats://"+natsAddr, nats.Timeout(200*time.Millisecond), opt)
			if err != nil {
				return false
			}
			nc.Close()
			return true
		}, "mesh nats did not start")
		return cmd
	}
	srv := startNATS()
	// The test runs the agents itself, to leave work queued while none runs.
	// The roles use the identities `mesh nats` generated ({role}: each its own).
	m := startMesh(t, meshOpts{
		config: defaultConfig(t) + "\nhttp:\n  wait_timeout: 2s\n",
		env:    []string{"NATS_URL=nats://" + natsAddr, "NATS_NKEY=" + filepath.Join(natsData, "creds", "{role}.nk")},
		args:   []string{"--replicas", "agent=0"},
		noWait: true,
	})
	m.natsAddr = natsAddr
	agentKey := "NATS_NKEY=" + filepath.Join(natsData, "creds", "agent.nk")
	first, _ := runRole(t, m, "agent", agentKey)
	m.waitReady()
	pending := m.newConversation()
	ap := m.addPending(pending, "add resource through-restart with value 5")

	// No agent: a turn waits in the work queue.
	_ = first.Process.Kill()
	_ = first.Wait()
	queued := m.newConversation()
	if status, body := m.try("POST", "/conversations/"+queued+"/messages", map[string]any{"message": "list all resources"}); status != http.StatusAccepted {
		t.Fatalf("status %d %v, want 202: no agent runs", status, body)
	}

	// The server dies and comes back on the same store.
	_ = srv.Process.Signal(syscall.SIGKILL)
	_ = srv.Wait()
	startNATS()
	runRole(t, m, "agent", agentKey)
	m.waitReady() // every role reconnected by itself

	meshtest.Eventually(t, 30*time.Second, func() bool {
		_, got := m.try("GET", "/conversations/"+queued, nil)
		return str(got, "conversation", "last_run", "outcome") == "success"
	}, "the queued turn was lost")
	got := m.do(http.StatusOK, "GET", "/conversations/"+pending, nil)
	if str(got, "conversation", "pending_approval", "uuid") != str(ap, "uuid") {
		t.Fatalf("the pending approval is gone: %v", obj(got, "conversation"))
	}
	// Ready as the bridge sees it, the approver's service may still be
	// subscribing again on the new server: the bridge answers 503
	// unavailable meanwhile (nothing decided), and a client tries again.
	meshtest.Eventually(t, 30*time.Second, func() bool {
		status, body := m.try("POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
		if status != http.StatusOK && status != http.StatusServiceUnavailable {
			t.Fatalf("POST /approvals/%s: status %d %v", str(ap, "uuid"), status, body)
		}
		return status == http.StatusOK
	}, "the approval was never decided")
	if n := m.resourceRows("through-restart"); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
	m.send(pending, "list all resources")
}

func TestZombieAgentIsCaughtByTheProbeAndRestarted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// One worker, stuck in a tool call that never answers: the agent beats
	// but no longer works.
	config := strings.Replace(gateConfig(dir), "mesh:\n", "mesh:\n  workers: 1\n", 1) +
		"monitor:\n  stuck_after: 2s\n  probe_every: 1s\n  probe_timeout: 1s\n  probe_failures: 2\n"
	m := startMesh(t, meshOpts{config: config})
	w := watchMeshEvents(t, m)
	old := m.childPID("agent")
	conv := m.newConversation()
	wait := m.sendLater(conv, "list items")
	var value map[string]any
	meshtest.Eventually(t, 30*time.Second, func() bool {
		var ok bool
		_, value, ok = w.first("node_down", "agent")
		return ok
	}, "the stuck agent was not found")
	if value["zombie"] != true {
		t.Errorf("node_down = %v, want a zombie (it kept beating)", value)
	}
	meshtest.Eventually(t, 30*time.Second, func() bool { return m.childPID("agent") != old }, "the zombie was not restarted")
	// The turn it held is redelivered to the new process and completes.
	openGate(t, dir)
	if body := wait(60*time.Second, "the turn did not complete"); !strings.Contains(str(body, "result", "response"), "alpha") {
		t.Errorf("answer = %v, want the completed turn", body)
	}
}

// A role told to stop while it still waits for NATS stops cleanly: exit 0,
// and nothing but JSON lines on stderr (a log pipeline reads every one).
func TestRoleStoppedWhileWaitingForNATSExitsCleanly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "toolhost.log")
	lp := newLogPipe(t, logPath)
	cmd := exec.Command(filepath.Join(binDir, "mesh"), "toolhost")
	config, err := filepath.Abs("../../../config/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "MESH_CONFIG="+config, "MESH_DATA_DIR="+dir,
		"NATS_URL=nats://"+meshtest.FreeAddr(t), "MESH_LOG_FORMAT=json")
	if err := lp.start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	meshtest.Eventually(t, 30*time.Second, func() bool {
		data, _ := os.ReadFile(logPath)
		return strings.Contains(string(data), "waiting for NATS")
	}, "the toolhost never said it waits for NATS")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("a stop while waiting for NATS exited with %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the toolhost did not stop within 30 s of SIGTERM")
	}
	lp.close()
	checkLogLines(t, logPath)
	if t.Failed() {
		data, _ := os.ReadFile(logPath)
		t.Logf("toolhost log:\n%s", data)
	}
}
