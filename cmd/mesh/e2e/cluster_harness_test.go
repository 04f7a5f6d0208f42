package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// natsCluster is a NATS cluster of separate processes on loopback ports:
// `mesh nats` servers (the embedded server in cluster mode), or plain
// nats-server processes (the server built from the module) started from
// deploy/nats/nats-server.conf. Every node and every role shares one
// credentials directory, written by `mesh creds`.
type natsCluster struct {
	t        testing.TB
	dir      string
	credsDir string
	config   string // agent.yaml of every process
	plain    bool
	nodes    []*clusterNode
	procs    []*clusterProc // roles
	// bridgeAddr is the HTTP address of a bridge a benchmark started.
	bridgeAddr string
	// bin is the directory of the mesh binary its nodes and roles start
	// with: binDir, or an earlier release's (a rolling upgrade).
	bin string
}

type clusterNode struct {
	name, client, route, monitor string
	proc                         *clusterProc
}

// clusterProc is one process of a cluster test, logging to its own file.
type clusterProc struct {
	t       testing.TB
	name    string
	args    []string
	env     []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited
	log    *logPipe
}

func (p *clusterProc) start() {
	p.t.Helper()
	lp := newLogPipe(p.t, p.logPath)
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Env = append(os.Environ(), "NATS_URL=", "NATS_CREDS=", "NATS_NKEY=", "NATS_RESPONDER_CREDS=", "NATS_RESPONDER_NKEY=", "MESH_NATS_AUTH=", testMCPEnv+"=",
		"MESH_LOG_FORMAT=json", "MESH_LOG_LEVEL=info", "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, p.env...)
	cmd.SysProcAttr = meshProcAttr()
	if err := lp.start(cmd); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited, p.log = cmd, exited, lp
	p.mu.Unlock()
}

// exitedEarly reports whether the process started last has exited, and
// how, before anything stopped it.
func (p *clusterProc) exitedEarly() (bool, string) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return false, ""
	}
	select {
	case <-exited:
		return true, cmd.ProcessState.String()
	default:
		return false, ""
	}
}

// stop ends the process: SIGTERM (SIGKILL with kill), then waits.
func (p *clusterProc) stop(kill bool) {
	p.mu.Lock()
	cmd, exited, lp := p.cmd, p.exited, p.log
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(cmd.Process.Pid, sig)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its MCP servers, if any
	lp.close()
}

func (p *clusterProc) logs() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data)
}

var buildNATSServer = sync.OnceValue(func() error {
	cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "nats-server"), "github.com/nats-io/nats-server/v2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("build nats-server: %v\n%s", err, out)
	}
	return nil
})

// startCluster starts n NATS servers as a cluster (one: a single server), writes the shared
// credentials first, and waits until JetStream answers on every node.
func startCluster(t testing.TB, n int, plain bool, config string) *natsCluster {
	t.Helper()
	return startClusterOf(t, binDir, n, plain, config)
}

// startClusterOf is startCluster with the mesh binary of directory bin.
func startClusterOf(t testing.TB, bin string, n int, plain bool, config string) *natsCluster {
	t.Helper()
	dir := t.TempDir()
	c := &natsCluster{t: t, dir: dir, credsDir: filepath.Join(dir, "creds"), config: filepath.Join(dir, "agent.yaml"), plain: plain, bin: bin}
	if err := os.WriteFile(c.config, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var routes []string
	for i := range n {
		node := &clusterNode{name: fmt.Sprintf("n%d", i+1), client: freeAddr(t), route: freeAddr(t), monitor: freeAddr(t)}
		c.nodes = append(c.nodes, node)
		routes = append(routes, node.route)
	}
	creds := exec.Command(filepath.Join(binDir, "mesh"), "creds", "--dir", c.credsDir, "--routes", strings.Join(routes, ","))
	creds.Env = append(os.Environ(), "MESH_CONFIG="+c.config, "MESH_DATA_DIR="+filepath.Join(dir, "roles"))
	if out, err := creds.CombinedOutput(); err != nil {
		t.Fatalf("mesh creds: %v\n%s", err, out)
	}
	if plain {
		if err := buildNATSServer(); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range c.nodes {
		nodeDir := filepath.Join(dir, node.name)
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := &clusterProc{t: t, name: node.name, logPath: filepath.Join(dir, node.name+".log")}
		if plain {
			// The deployment's own file, beside the credentials it includes.
			conf, err := os.ReadFile("../../../deploy/nats/nats-server.conf")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(nodeDir, "nats-server.conf"), conf, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(c.credsDir, filepath.Join(nodeDir, "creds")); err != nil {
				t.Fatal(err)
			}
			host, port, _ := net.SplitHostPort(node.client)
			_, mport, _ := net.SplitHostPort(node.monitor)
			p.args = []string{filepath.Join(binDir, "nats-server"), "-c", filepath.Join(nodeDir, "nats-server.conf"),
				"-a", host, "-p", port, "-m", mport, "--cluster", "nats://" + node.route}
			p.env = []string{"NATS_SERVER_NAME=" + node.name, "NATS_STORE_DIR=" + filepath.Join(nodeDir, "jetstream")}
		} else {
			p.args = []string{filepath.Join(bin, "mesh"), "nats"}
			p.env = []string{"MESH_CONFIG=" + c.config, "MESH_DATA_DIR=" + nodeDir, "MESH_NATS_CREDS_DIR=" + c.credsDir,
				"MESH_NATS_ADDR=" + node.client, "MESH_NATS_SERVER_NAME=" + node.name, "MESH_NATS_MONITOR_ADDR=" + node.monitor}
			if n > 1 { // one node is a single server, the comparison's baseline
				p.env = append(p.env, "MESH_NATS_CLUSTER_LISTEN="+node.route, "MESH_NATS_ROUTES="+strings.Join(routes, ","))
			}
		}
		node.proc = p
		p.start()
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.stop(false)
		}
		for _, node := range c.nodes {
			node.proc.stop(false)
		}
		for _, p := range append(c.procs, c.nodeProcs()...) {
			if p.name != "" && !strings.HasPrefix(filepath.Base(p.args[0]), "nats-server") {
				checkLogLines(t, p.logPath)
			}
			if t.Failed() {
				t.Logf("%s log:\n%s", p.name, tail(p.logs(), 40))
			}
		}
		if keep := os.Getenv("MESH_KEEP_LOGS"); keep != "" {
			// The run's logs, whole, for a person to read.
			_ = exec.Command("cp", "-r", dir, filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))).Run()
		}
	})
	for i := range c.nodes {
		c.waitNode(i)
	}
	if plain {
		// No `mesh nats` provisions a plain cluster: `mesh provision` does, as the admin.
		prov := exec.Command(filepath.Join(binDir, "mesh"), "provision")
		prov.Env = append(os.Environ(), "MESH_CONFIG="+c.config, "MESH_DATA_DIR="+filepath.Join(dir, "roles"),
			"NATS_URL="+strings.Join(c.urls(), ","), "NATS_NKEY="+filepath.Join(c.credsDir, "admin.nk"), "MESH_LOG_FORMAT=json")
		if out, err := prov.CombinedOutput(); err != nil {
			t.Fatalf("mesh provision: %v\n%s", err, out)
		}
	}
	return c
}

func (c *natsCluster) nodeProcs() []*clusterProc {
	var out []*clusterProc
	for _, n := range c.nodes {
		out = append(out, n.proc)
	}
	return out
}

// waitNode waits until node i's JetStream is up and has a meta leader, and
// fails at once if its process exits.
func (c *natsCluster) waitNode(i int) {
	c.t.Helper()
	node := c.nodes[i]
	meshtest.Eventually(c.t, 90*time.Second, func() bool {
		// A node that died (a port it could not bind, say) never becomes
		// healthy: say so now, not after the wait.
		if gone, how := node.proc.exitedEarly(); gone {
			c.t.Fatalf("NATS node %s exited (%s); log:\n%s", node.name, how, tail(node.proc.logs(), 30))
		}
		resp, err := http.Get("http://" + node.monitor + "/healthz")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "ok")
	}, "NATS node %s is not healthy; log:\n%s", node.name, tail(node.proc.logs(), 30))
}

func (c *natsCluster) urls() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, "nats://"+n.client)
	}
	return out
}

// kill stops node i with SIGKILL; restart starts it again on its store.
func (c *natsCluster) kill(i int) { c.nodes[i].proc.stop(true) }

func (c *natsCluster) restart(i int) {
	c.nodes[i].proc.start()
	c.waitNode(i)
}

// startRole runs `mesh <role>` connected to url (its NATS_URL), with the
// role's identity from the shared credentials directory and the roles'
// shared data directory (the sample server's database, the approver's key).
func (c *natsCluster) startRole(role, url string, env ...string) *clusterProc {
	c.t.Helper()
	name := fmt.Sprintf("%s-%d", role, len(c.procs)+1)
	p := &clusterProc{t: c.t, name: name, logPath: filepath.Join(c.dir, name+".log"),
		args: []string{filepath.Join(c.bin, "mesh"), role},
		env: append([]string{"MESH_CONFIG=" + c.config, "MESH_DATA_DIR=" + filepath.Join(c.dir, "roles"),
			"MESH_NATS_CREDS_DIR=" + c.credsDir, "NATS_URL=" + url, "MESH_NODE_ID=" + hostToken() + "-" + name}, env...)}
	c.procs = append(c.procs, p)
	p.start()
	return p
}

// hostToken names this machine in node ids.
func hostToken() string {
	h, _ := os.Hostname()
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, h)
}
