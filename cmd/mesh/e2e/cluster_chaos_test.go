package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// TestClusterChaos runs the mesh on a 3-node cluster of `mesh nats`
// processes (R3 streams and buckets) with its roles spread so that each
// connects to a different node (2 agents, 2 tool hosts, an approver, a
// monitor and a bridge, each given one node's URL and finding the others
// from the cluster), drives conversations of tool turns and approvals, and
// meanwhile kills with SIGKILL the node that leads the events stream, and
// restarts it, then the one that leads the conversations' bucket. Every
// conversation completes or waits for a listed approval, no message is
// missing or doubled, every approved call ran exactly once and nothing ran
// without approval. It reports the longest turn (send to settled) that
// overlapped a node's loss, beside the longest otherwise.
//
// `make test` runs it small; `make chaos-cluster` with
// MESH_CLUSTER_CONVERSATIONS=50 (and longer, MESH_CLUSTER_SECONDS).
func TestClusterChaos(t *testing.T) {
	runClusterChaos(t, false, false, earlier{})
}

// TestClusterPlainNATS is TestClusterChaos on a cluster of plain
// nats-server processes (the server of the module, the version the mesh
// embeds) started from deploy/nats/nats-server.conf with the files `mesh
// creds` writes, provisioned by `mesh provision`: roles only, each given
// the three servers' URLs.
func TestClusterPlainNATS(t *testing.T) {
	runClusterChaos(t, true, false, earlier{})
}

// TestClusterRollingRestart is TestClusterChaos with an upgrade's rolling
// restart in place of the kills: each `mesh nats` node in turn, then each
// role but the bridge (one bridge has nobody to hand its clients to; run
// two behind a load balancer), every request served.
func TestClusterRollingRestart(t *testing.T) {
	runClusterChaos(t, false, true, earlier{})
}

// TestClusterRollingUpgrade is TestClusterRollingRestart from the last
// release that testdata/upgrade/releases names: every node and role starts
// on that release and is restarted on this build, one at a time, so that
// for most of the run both versions serve side by side; the bridge is
// replaced last, once the load is over. Nothing is lost or done twice.
func TestClusterRollingUpgrade(t *testing.T) {
	rs := releases(t)
	last := rs[len(rs)-1]
	runClusterChaos(t, false, true, earlier{name: last.name, bin: buildRelease(t, last)})
}

// checkBuilds waits until the heartbeat of every live role of the mesh
// passes is: which build each process runs, as `mesh status` shows it.
func checkBuilds(t *testing.T, js jetstream.JetStream, is func(mesh.NodeInfo) bool, what string) {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), mesh.DefaultNamespace().Bucket(mesh.BucketNodes))
	if err != nil {
		t.Fatal(err)
	}
	nodes := store.NewNodes(kv)
	var last []string
	meshtest.Eventually(t, 30*time.Second, func() bool {
		list, err := nodes.List(t.Context())
		last = last[:0]
		for _, info := range list {
			if info.State != mesh.NodeDown && !is(info) {
				last = append(last, fmt.Sprintf("%s %s (version %q, commit %q)", info.Role, info.Node, info.Version, info.Commit))
			}
		}
		return err == nil && len(list) > 0 && len(last) == 0
	}, "roles whose beats are not %s build: %v", what, &last)
}

// earlier is an earlier release a cluster starts on: its name, and the
// directory of its mesh binary; the zero value is this build.
type earlier struct{ name, bin string }

// clusterConfig is the clusters' agent.yaml: the sample agent, with room
// for a turn to wait out a node's loss.
func clusterConfig(t testing.TB) string {
	return defaultConfig(t) + "\nmesh:\n  tool_wait: 10s\nhttp:\n  wait_timeout: 60s\n"
}

// startClusterMesh starts the roles on c: spread one node each (spread), or
// each with every node's URL.
func startClusterMesh(t testing.TB, c *natsCluster, spread bool, agents int) *meshProc {
	t.Helper()
	n := 0
	url := func() string {
		if !spread {
			return strings.Join(c.urls(), ",")
		}
		n++
		return c.urls()[(n-1)%len(c.nodes)]
	}
	httpAddr := freeAddr(t)
	c.startRole("bridge", url(), "MESH_HTTP_ADDR="+httpAddr)
	for range agents {
		c.startRole("agent", url())
	}
	c.startRole("toolhost", url())
	c.startRole("toolhost", url())
	c.startRole("approver", url())
	c.startRole("monitor", url())
	m := &meshProc{t: t, httpAddr: httpAddr, dataDir: filepath.Join(c.dir, "roles")}
	m.waitReady()
	return m
}

// clusterAdmin connects to c as the mesh's admin.
func clusterAdmin(t testing.TB, c *natsCluster) jetstream.JetStream {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(filepath.Join(c.credsDir, "admin.nk"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(strings.Join(c.urls(), ","), opt, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	return js
}

// leaderOf is the index of the node that leads stream.
func leaderOf(t testing.TB, c *natsCluster, js jetstream.JetStream, stream string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		s, err := js.Stream(ctx, stream)
		if err == nil && s.CachedInfo().Cluster != nil {
			for i, n := range c.nodes {
				if n.name == s.CachedInfo().Cluster.Leader {
					return i
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no leader for %s", stream)
	return -1
}

// metaLeader is the index of the node that leads the JetStream meta
// group, from a node's monitoring endpoint.
func metaLeader(t testing.TB, c *natsCluster) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		for _, node := range c.nodes {
			var jsz struct {
				Meta struct {
					Leader string `json:"leader"`
				} `json:"meta_cluster"`
			}
			resp, err := http.Get("http://" + node.monitor + "/jsz")
			if err != nil {
				continue
			}
			err = json.NewDecoder(resp.Body).Decode(&jsz)
			_ = resp.Body.Close()
			if i := slices.IndexFunc(c.nodes, func(n *clusterNode) bool { return n.name == jsz.Meta.Leader }); err == nil && i >= 0 {
				return i
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no meta leader")
	return -1
}

// turnClock records the turns' durations against the windows in which a
// node was down.
type turnClock struct {
	mu      sync.Mutex
	turns   [][2]time.Time
	windows []lossWindow
}

// lossWindow is a node's loss: from its SIGKILL until it is healthy again.
type lossWindow struct {
	what     string
	from, to time.Time
}

func (tc *turnClock) turn(start, end time.Time) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.turns = append(tc.turns, [2]time.Time{start, end})
}

func (tc *turnClock) down(what string, from, to time.Time) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.windows = append(tc.windows, lossWindow{what, from, to})
}

// turnTimes are the durations of some turns, sorted.
type turnTimes []time.Duration

func (tt turnTimes) pct(p float64) time.Duration {
	if len(tt) == 0 {
		return 0
	}
	return tt[min(len(tt)-1, int(p*float64(len(tt))))]
}

func (tt turnTimes) max() time.Duration { return tt.pct(1) }

func (tt turnTimes) String() string {
	return fmt.Sprintf("%d turns, p50 %s p99 %s max %s", len(tt), tt.pct(0.5).Round(time.Millisecond),
		tt.pct(0.99).Round(time.Millisecond), tt.max().Round(time.Millisecond))
}

// split sorts the turns' durations into those that overlapped each
// window, and the others.
func (tc *turnClock) split() (during []turnTimes, otherwise turnTimes) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	during = make([]turnTimes, len(tc.windows))
	for _, tr := range tc.turns {
		d, hit := tr[1].Sub(tr[0]), false
		for i, w := range tc.windows {
			if tr[0].Before(w.to) && tr[1].After(w.from) {
				during[i], hit = append(during[i], d), true
			}
		}
		if !hit {
			otherwise = append(otherwise, d)
		}
	}
	for _, tt := range append(during, otherwise) {
		slices.Sort(tt)
	}
	return during, otherwise
}

// killLeaders kills with SIGKILL the leader of the events stream, then of
// the sessions' bucket, then of the meta group (each time another node
// than the last, should it still lead), each restarted before the next.
func killLeaders(t *testing.T, c *natsCluster, js jetstream.JetStream, at func(float64) time.Time, clock *turnClock) {
	last := -1
	for _, k := range []struct {
		leader   string
		kill, up float64
	}{{"MESH_EVENTS", 0.10, 0.25}, {"KV_mesh_sessions", 0.40, 0.55}, {"the meta group", 0.70, 0.85}} {
		time.Sleep(time.Until(at(k.kill)))
		var i int
		if k.leader == "the meta group" {
			i = metaLeader(t, c)
		} else {
			i = leaderOf(t, c, js, k.leader)
		}
		if i == last {
			i = (i + 1) % len(c.nodes)
		}
		last = i
		from := time.Now()
		c.kill(i)
		time.Sleep(time.Until(at(k.up)))
		c.restart(i)
		clock.down(fmt.Sprintf("%s (leader of %s)", c.nodes[i].name, k.leader), from, time.Now())
	}
}

// rollingRestart restarts, one at a time, every NATS node (SIGTERM, then
// started again on its store once the last is healthy) and then every
// role but the bridge (SIGTERM, started again), the way an upgrade does.
func rollingRestart(c *natsCluster, at func(float64) time.Time, clock *turnClock) {
	time.Sleep(time.Until(at(0.05)))
	// Each process starts again on this build: an upgrade when it ran an
	// earlier release's.
	mesh := filepath.Join(binDir, "mesh")
	for i, node := range c.nodes {
		from := time.Now()
		node.proc.stop(false)
		node.proc.args[0] = mesh
		c.restart(i)
		clock.down(node.name+" (restarted)", from, time.Now())
		time.Sleep(2 * time.Second)
	}
	for _, p := range c.procs {
		if strings.HasPrefix(p.name, "bridge") {
			continue
		}
		from := time.Now()
		p.stop(false)
		p.args[0] = mesh
		p.start()
		clock.down(p.name+" (restarted)", from, time.Now())
		time.Sleep(time.Second)
	}
}

// runClusterChaos runs the cluster chaos: on plain nats-server nodes or
// `mesh nats` ones, with a rolling restart or leader kills; from, when not
// the zero value, is an earlier release the cluster starts on, and the
// rolling restart upgrades.
func runClusterChaos(t *testing.T, plain, rolling bool, from earlier) {
	seconds, conversations := envInt("MESH_CLUSTER_SECONDS", 24), envInt("MESH_CLUSTER_CONVERSATIONS", 4)
	c := startClusterOf(t, cmp.Or(from.bin, binDir), 3, plain, clusterConfig(t))
	m := startClusterMesh(t, c, !plain, 2)
	js := clusterAdmin(t, c)
	streams := []string{"MESH_EVENTS", "MESH_WORK", "KV_mesh_sessions", "KV_mesh_approvals", "KV_mesh_tools", "KV_mesh_nodes", "KV_mesh_calls"}
	for _, name := range streams {
		s, err := js.Stream(t.Context(), name)
		if err != nil || s.CachedInfo().Config.Replicas != 3 {
			t.Fatalf("%s: want R3: %v", name, err)
		}
	}

	if from.bin != "" {
		// The earlier release's roles report no commit in their beats.
		checkBuilds(t, js, func(info mesh.NodeInfo) bool { return info.Commit == "" }, "the earlier release's")
	}

	var st chaosStats
	st.cause = map[string]int{}
	var clock turnClock
	start := time.Now()
	deadline := start.Add(time.Duration(seconds) * time.Second)
	at := func(frac float64) time.Time {
		return start.Add(time.Duration(frac * float64(seconds) * float64(time.Second)))
	}
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		if rolling {
			rollingRestart(c, at, &clock)
		} else {
			killLeaders(t, c, js, at, &clock)
		}
	}()

	drivers := make([]*chaosDriver, conversations)
	var wg sync.WaitGroup
	for i := range drivers {
		d := &chaosDriver{m: m, t: t, id: i, st: &st, onTurn: clock.turn, strict: true}
		drivers[i] = d
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.run(deadline)
		}()
	}
	wg.Wait()
	<-killerDone
	if from.bin != "" {
		// The bridge last: with one bridge, its clients have nobody else.
		for _, p := range c.procs {
			if strings.HasPrefix(p.name, "bridge") {
				p.stop(false)
				p.args[0] = filepath.Join(binDir, "mesh")
				p.start()
			}
		}
	}
	m.waitReady()
	if from.bin != "" {
		checkBuilds(t, js, func(info mesh.NodeInfo) bool { return info.Commit == testCommit }, "this build's")
	}
	for _, d := range drivers {
		d.check()
	}
	for _, d := range drivers {
		for name, approved := range d.destructive {
			n := m.resourceRows(name)
			switch {
			case approved && n != 1:
				t.Errorf("%s: approved, but %d rows (want exactly 1)", name, n)
			case !approved && n != 0:
				t.Errorf("%s: never approved, but %d rows", name, n)
			}
		}
	}
	if st.turns.Load() < int64(conversations) {
		t.Errorf("only %d turns ran", st.turns.Load())
	}
	during, otherwise := clock.split()
	kind := "mesh nats"
	switch {
	case plain:
		kind = "nats-server"
	case from.bin != "":
		kind = "mesh nats, upgraded from " + from.name
	}
	var losses []string
	for i, w := range clock.windows {
		losses = append(losses, fmt.Sprintf("%s down %s: %s", w.what, w.to.Sub(w.from).Round(time.Millisecond), during[i]))
	}
	summary := fmt.Sprintf("cluster chaos (%s): %d s, %d conversations, %d turns, %d approvals, %d failed requests, %d retried (%s); %s; outside a loss: %s",
		kind, seconds, conversations, st.turns.Load(), st.approved.Load(), st.failed.Load(), st.retries.Load(), st.byCause(), strings.Join(losses, "; "), otherwise)
	t.Log(summary)
	fmt.Println(summary)
	if st.failed.Load() > 0 {
		t.Errorf("%d requests failed while a node was lost (%s): every one should have waited out the election", st.failed.Load(), st.byCause())
	}
	for i, w := range clock.windows {
		if slow := during[i].max() - otherwise.max(); slow > 5*time.Second {
			t.Logf("the longest turn overlapping the loss of %s took %s more than the longest otherwise", w.what, slow.Round(time.Millisecond))
		}
	}
}

// TestClusterLostMajority stops two of three `mesh nats` nodes: the
// streams have no majority left to elect a leader. A message is then
// refused with 503 and Retry-After once nats.failover_wait has passed
// unanswered, and every message after it at once (within 2 s). When one
// node comes back the mesh serves again, with nobody restarting a role.
func TestClusterLostMajority(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, false, clusterConfig(t)+"nats:\n  failover_wait: 8s\n")
	m := startClusterMesh(t, c, false, 1)
	conv := str(m.do(http.StatusCreated, "POST", "/conversations", nil), "conversation", "id")
	m.do(http.StatusOK, "POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"})

	c.kill(1)
	c.kill(2)
	send := func(key string) (status int, retryAfter string, took time.Duration, body string) {
		start := time.Now()
		req, err := http.NewRequest("POST", m.url("/conversations/"+conv+"/messages"), strings.NewReader(`{"message":"list all resources"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After"), time.Since(start), string(data)
	}
	status, retryAfter, took, body := send("lost-1")
	t.Logf("first message after the loss: %d in %s: %s", status, took.Round(time.Millisecond), body)
	if status != http.StatusServiceUnavailable || retryAfter == "" {
		t.Fatalf("first message after the loss: %d, Retry-After %q; want 503 with Retry-After", status, retryAfter)
	}
	if took > 8*time.Second+10*time.Second {
		t.Errorf("the first refusal took %s, far past nats.failover_wait (8s)", took.Round(time.Millisecond))
	}
	for i := range 3 {
		status, retryAfter, took, body = send(fmt.Sprintf("lost-%d", i+2))
		if status != http.StatusServiceUnavailable || retryAfter == "" || took > 2*time.Second {
			t.Errorf("message %d after the loss: %d, Retry-After %q, in %s; want 503 with Retry-After within 2 s: %s", i+2, status, retryAfter, took.Round(time.Millisecond), body)
		}
	}

	// Started, not waited for: a node's health check wants every stream
	// current, which a cluster still missing one node may take long to
	// say; the mesh serves as soon as the two elect their leaders.
	back := time.Now()
	c.nodes[1].proc.start()
	d := &chaosDriver{m: m, t: t, conv: conv, st: &chaosStats{cause: map[string]int{}}}
	d.retry("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"}, "Idempotency-Key", "back")
	d.settle()
	status, _ = m.try("GET", "/conversations/"+conv, nil)
	if status != http.StatusOK {
		t.Errorf("the conversation after one node came back: %d", status)
	}
	t.Logf("after one node came back: a turn served and settled %s later, after %d refused requests", time.Since(back).Round(time.Millisecond), d.st.retries.Load())
}
