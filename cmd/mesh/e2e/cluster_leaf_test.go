package e2e

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// linkProxy is a TCP link the test can cut: it forwards connections to
// target until cut, which closes them and refuses new ones until restore.
type linkProxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func startLinkProxy(t testing.TB, target string) *linkProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{l: l, target: target}
	t.Cleanup(func() { _ = l.Close(); p.cut() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	return p
}

func (p *linkProxy) forward(c net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

func (p *linkProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *linkProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// TestClusterLeafEdge runs a central mesh (`mesh up`, its server taking
// leaf nodes) and an edge `mesh up` whose embedded server is a leaf node of
// it, with no JetStream of its own, running only a tool host of a tool the
// center does not have. The center's agent calls the edge's tool; with the
// link cut, the call does not reach the edge; restored, calls resume.
func TestClusterLeafEdge(t *testing.T) {
	t.Parallel()
	creds, leaf := filepath.Join(t.TempDir(), "creds"), freeAddr(t)
	shared := []string{"MESH_NATS_CREDS_DIR=" + creds}
	center := startMesh(t, meshOpts{env: append([]string{"MESH_NATS_LEAF_LISTEN=" + leaf}, shared...), logLevel: "info"})
	link := startLinkProxy(t, leaf)

	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	edgeConfig := `name: edge
llm:
  model: offline
mcp_servers:
  - name: items
    command: mesh-test-mcp
    env:
      ` + testMCPEnv + `: "1"
      ` + testCountCallsEnv + `: "` + calls + `"
`
	startMesh(t, meshOpts{config: edgeConfig, noWait: true, logLevel: "info",
		env:  append([]string{"MESH_NATS_LEAF_REMOTES=" + link.l.Addr().String(), "MESH_NATS_SERVER_NAME=edge"}, shared...),
		args: []string{"--replicas", "agent=0,approver=0,bridge=0,group=0"}})

	hasTool := func() bool {
		status, out := center.try("GET", "/tools", nil)
		return status == http.StatusOK && strings.Contains(mustJSON(out), `"items_count"`)
	}
	meshtest.Eventually(t, 90*time.Second, hasTool, "the center's catalog never listed the edge's tool")
	edgeCalls := func() int {
		data, _ := os.ReadFile(calls)
		return strings.Count(string(data), "\n")
	}
	countAtCenter := func() (ran bool) {
		conv := center.newConversation()
		_, out := center.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "count the items"})
		c := obj(out, "conversation")
		for _, tc := range toolCalls(c) {
			if str(tc, "name") == "items_count" && !strings.Contains(mustJSON(tc), "unavailable") {
				return true
			}
		}
		return false
	}
	if !countAtCenter() || edgeCalls() != 1 {
		t.Fatalf("the center's agent did not run the edge's tool (%d calls at the edge)", edgeCalls())
	}

	link.cut()
	before := edgeCalls()
	_ = countAtCenter()
	if n := edgeCalls(); n != before {
		t.Errorf("a call reached the edge through a cut link (%d calls, %d before)", n, before)
	}
	link.restore()
	meshtest.Eventually(t, 90*time.Second, func() bool { return countAtCenter() && edgeCalls() > before },
		"calls to the edge's tool did not resume after the link came back")
}

func mustJSON(v any) string {
	return string(meshtest.JSON(v))
}

// TestClusterReplicasMismatch: a mesh whose streams exist with one replica
// and a configuration that asks for three stops with exit code 2 and a
// message naming the stream, both counts and the way out, at once.
func TestClusterReplicasMismatch(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, false, defaultConfig(t))
	start := time.Now()
	cmd := exec.Command(filepath.Join(binDir, "mesh"), "provision")
	cmd.Env = append(os.Environ(), "MESH_CONFIG="+c.config, "MESH_DATA_DIR="+filepath.Join(c.dir, "roles"), "MESH_LOG_FORMAT=json",
		"NATS_URL="+c.urls()[0], "NATS_NKEY="+filepath.Join(c.credsDir, "admin.nk"), "MESH_NATS_REPLICAS=3")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("mesh provision with nats.replicas 3 over R1 streams: %v\n%s", err, out)
	}
	for _, want := range []string{"stream MESH_EVENTS has 1 replica(s) but nats.replicas asks for 3", "nats stream edit MESH_EVENTS --replicas 3"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error does not say %q:\n%s", want, out)
		}
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("took %s to give up", time.Since(start))
	}
}
