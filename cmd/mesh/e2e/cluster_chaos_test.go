package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	runClusterChaos(t, false)
}

// TestClusterPlainNATS is TestClusterChaos on a cluster of plain
// nats-server processes (the server of the module, the version the mesh
// embeds) started from deploy/nats/nats-server.conf with the files `mesh
// creds` writes, provisioned by `mesh provision`: roles only, each given
// the three servers' URLs.
func TestClusterPlainNATS(t *testing.T) {
	runClusterChaos(t, true)
}

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

// turnClock records the turns' durations against the windows in which a
// node was down.
type turnClock struct {
	mu      sync.Mutex
	turns   [][2]time.Time
	windows [][2]time.Time
}

func (tc *turnClock) turn(start, end time.Time) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.turns = append(tc.turns, [2]time.Time{start, end})
}

func (tc *turnClock) down(from, to time.Time) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.windows = append(tc.windows, [2]time.Time{from, to})
}

// longest is the longest turn that overlapped a node's loss, and the
// longest of the others.
func (tc *turnClock) longest() (during, otherwise time.Duration, overlapping int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, tr := range tc.turns {
		d := tr[1].Sub(tr[0])
		hit := slices.ContainsFunc(tc.windows, func(w [2]time.Time) bool { return tr[0].Before(w[1]) && tr[1].After(w[0]) })
		if hit {
			overlapping++
			during = max(during, d)
		} else {
			otherwise = max(otherwise, d)
		}
	}
	return during, otherwise, overlapping
}

func runClusterChaos(t *testing.T, plain bool) {
	seconds, conversations := envInt("MESH_CLUSTER_SECONDS", 24), envInt("MESH_CLUSTER_CONVERSATIONS", 4)
	c := startCluster(t, 3, plain, clusterConfig(t))
	m := startClusterMesh(t, c, !plain, 2)
	js := clusterAdmin(t, c)
	streams := []string{"MESH_EVENTS", "MESH_WORK", "KV_mesh_sessions", "KV_mesh_approvals", "KV_mesh_tools", "KV_mesh_nodes", "KV_mesh_calls"}
	for _, name := range streams {
		s, err := js.Stream(t.Context(), name)
		if err != nil || s.CachedInfo().Config.Replicas != 3 {
			t.Fatalf("%s: want R3: %v", name, err)
		}
	}

	var st chaosStats
	st.cause = map[string]int{}
	var clock turnClock
	start := time.Now()
	deadline := start.Add(time.Duration(seconds) * time.Second)
	at := func(frac float64) time.Time {
		return start.Add(time.Duration(frac * float64(seconds) * float64(time.Second)))
	}
	// The killer: the events stream's leader, then the sessions bucket's
	// (another node, if the first still leads it).
	killerDone := make(chan []string, 1)
	go func() {
		var killed []string
		first := -1
		for _, k := range []struct {
			stream   string
			kill, up float64
		}{{"MESH_EVENTS", 0.15, 0.35}, {"KV_mesh_sessions", 0.55, 0.75}} {
			time.Sleep(time.Until(at(k.kill)))
			i := leaderOf(t, c, js, k.stream)
			if i == first {
				i = (i + 1) % len(c.nodes)
			}
			first = i
			from := time.Now()
			c.kill(i)
			killed = append(killed, fmt.Sprintf("%s (leader of %s)", c.nodes[i].name, k.stream))
			time.Sleep(time.Until(at(k.up)))
			c.restart(i)
			clock.down(from, time.Now())
		}
		killerDone <- killed
	}()

	drivers := make([]*chaosDriver, conversations)
	var wg sync.WaitGroup
	for i := range drivers {
		d := &chaosDriver{m: m, t: t, id: i, st: &st, onTurn: clock.turn}
		drivers[i] = d
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.run(deadline)
		}()
	}
	wg.Wait()
	killed := <-killerDone
	m.waitReady()
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
	during, otherwise, overlapping := clock.longest()
	kind := "mesh nats"
	if plain {
		kind = "nats-server"
	}
	summary := fmt.Sprintf("cluster chaos (%s): %d s, %d conversations, %d turns, %d approvals, %d retried requests (%s); killed %s; longest turn during a node's loss %s (%d turns overlapped one), longest otherwise %s",
		kind, seconds, conversations, st.turns.Load(), st.approved.Load(), st.retries.Load(), st.byCause(), strings.Join(killed, ", then "),
		during.Round(time.Millisecond), overlapping, otherwise.Round(time.Millisecond))
	t.Log(summary)
	fmt.Println(summary)
}
