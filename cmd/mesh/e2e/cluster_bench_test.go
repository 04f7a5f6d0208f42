package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

// benchClusterConfig is the sample agent on a model that takes delay per
// call (the local fake of OpenAI's API), each agent replica running one
// turn at a time (mesh.workers: 1): the figure measures what replicas add,
// not one process's concurrency.
func benchClusterConfig(t testing.TB) string {
	conf := strings.Replace(defaultConfig(t), "model: offline", "model: gpt-4o-mini", 1)
	return conf + "\nmesh:\n  workers: 1\n  tool_wait: 10s\nhttp:\n  wait_timeout: 120s\n"
}

// BenchmarkClusterTurns: turns per second (a tool turn: two model calls of
// 200 ms and the sample server's list) with 1, 2 and 4 agent replicas on a
// 3-node cluster of `mesh nats` (R3), and with 1 replica on a single
// server; 8 clients send turns for 15 s. Replicas are added to one running
// cluster, each connecting to a node of its own in turn.
func BenchmarkClusterTurns(b *testing.B) {
	const delay, window, clients = 200 * time.Millisecond, 15 * time.Second, 8
	srv := llmtest.Start(b, llmtest.Config{API: llmtest.OpenAI, Backend: slowModel{offline.New(), delay}})
	env := []string{"OPENAI_API_KEY=k", "OPENAI_BASE_URL=" + srv.BaseURL()}
	measure := func(b *testing.B, m *meshProc) float64 {
		m.send(m.newConversation(), "list all resources") // warm up
		convs := make([]string, clients)
		for i := range convs {
			convs[i] = m.newConversation()
		}
		var done atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(window)
		for _, conv := range convs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					if status, _ := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"}); status == http.StatusOK {
						done.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return float64(done.Load()) / window.Seconds()
	}
	rates := map[string]float64{}
	for _, nodes := range []int{1, 3} {
		c := startCluster(b, nodes, false, benchClusterConfig(b))
		startBenchRoles(b, c, env)
		m := &meshProc{t: b, httpAddr: c.bridgeAddr}
		counts := []int{1, 2, 4}
		if nodes == 1 {
			counts = []int{1}
		}
		running := 0
		for _, agents := range counts {
			name := fmt.Sprintf("nodes=%d/agents=%d", nodes, agents)
			b.Run(name, func(b *testing.B) {
				for ; running < agents; running++ {
					c.startRole("agent", c.urls()[running%len(c.nodes)], env...)
				}
				waitAgents(b, c, agents)
				m.t = b
				m.waitReady()
				rate := measure(b, m)
				rates[name] = rate
				b.ReportMetric(rate, "turns/s")
				b.ReportMetric(0, "ns/op")
			})
		}
		if nodes == 3 {
			logFootprint(b, c)
		}
	}
	base := rates["nodes=3/agents=1"]
	if base > 0 {
		b.Logf("turns/s with a %v model, one turn per replica at a time: single server 1 agent %.2f; 3-node cluster 1 agent %.2f, 2 agents %.2f (%.2f×), 4 agents %.2f (%.2f×)",
			delay, rates["nodes=1/agents=1"], base, rates["nodes=3/agents=2"], rates["nodes=3/agents=2"]/base, rates["nodes=3/agents=4"], rates["nodes=3/agents=4"]/base)
	}
}

// startBenchRoles starts every role but the agents on c, each on a node in
// turn, and records the bridge's address.
func startBenchRoles(b *testing.B, c *natsCluster, env []string) {
	c.bridgeAddr = freeAddr(b)
	c.startRole("bridge", c.urls()[0], append([]string{"MESH_HTTP_ADDR=" + c.bridgeAddr, "MESH_LOG_LEVEL=warn"}, env...)...)
	c.startRole("toolhost", c.urls()[1%len(c.nodes)], "MESH_LOG_LEVEL=warn")
	c.startRole("toolhost", c.urls()[2%len(c.nodes)], "MESH_LOG_LEVEL=warn")
	c.startRole("approver", c.urls()[0], "MESH_LOG_LEVEL=warn")
}

// waitAgents waits until n agent processes beat ready in the nodes bucket.
func waitAgents(b *testing.B, c *natsCluster, n int) {
	js := clusterAdmin(b, c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		kv, err := js.KeyValue(ctx, "mesh_nodes")
		if err == nil {
			ready := 0
			if keys, err := kv.ListKeys(ctx); err == nil {
				for k := range keys.Keys() {
					if e, err := kv.Get(ctx, k); err == nil && strings.HasPrefix(k, "agent.") && strings.Contains(string(e.Value()), `"state":"ready"`) {
						ready++
					}
				}
			}
			if ready >= n {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	b.Fatalf("%d agents did not become ready", n)
}

// BenchmarkClusterEventLatency: from a publisher of events (as an agent, on
// one node) to an SSE client of the bridge (on another node), p50 and p99,
// on a 3-node cluster with R3 streams against a single server.
func BenchmarkClusterEventLatency(b *testing.B) {
	const events = 1000
	p99 := map[int]time.Duration{}
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			c := startCluster(b, nodes, false, defaultConfig(b))
			startBenchRoles(b, c, nil)
			c.startRole("agent", c.urls()[len(c.nodes)-1], "MESH_LOG_LEVEL=warn")
			m := &meshProc{t: b, httpAddr: c.bridgeAddr}
			m.waitReady()
			conv := m.newConversation()
			opt, _ := nats.NkeyOptionFromSeed(c.credsDir + "/admin.nk")
			nc, err := nats.Connect(c.urls()[len(c.nodes)-1], opt)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			pub := bus.NewPublisher(js, mesh.DefaultNamespace())
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			r := openSSEBench(b, ctx, m.url("/conversations/"+conv+"/events"))
			defer r.close()
			var lat []time.Duration
			for range events {
				if _, err := pub.Publish(ctx, conv, "bench", "", stamp()); err != nil {
					b.Fatal(err)
				}
				ev, err := r.next()
				if err != nil {
					b.Fatal(err)
				}
				if t, ok := sentAt([]byte(ev.data)); ok {
					lat = append(lat, time.Since(t))
				}
			}
			reportQ(b, "sse", lat)
			slices.Sort(lat)
			p99[nodes] = lat[int(0.99*float64(len(lat)-1))]
			b.ReportMetric(0, "ns/op")
		})
	}
	if p99[1] > 0 {
		b.Logf("event publish→SSE p99: single server %v, 3-node cluster (R3) %v: %.2f×", p99[1], p99[3], float64(p99[3])/float64(p99[1]))
	}
}

// logFootprint logs what the cluster's processes hold after the runs: the
// resident memory of each, and the JetStream store per turn.
func logFootprint(b *testing.B, c *natsCluster) {
	var parts []string
	for _, p := range append(c.nodeProcs(), c.procs...) {
		p.mu.Lock()
		cmd := p.cmd
		p.mu.Unlock()
		if cmd != nil {
			parts = append(parts, fmt.Sprintf("%s %.0f MiB", p.name, rssMiB(cmd.Process.Pid)))
		}
	}
	b.Logf("resident memory after the runs: %s", strings.Join(parts, ", "))
	js := clusterAdmin(b, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var store []string
	for _, name := range []string{"MESH_EVENTS", "KV_mesh_sessions", "KV_mesh_approvals", "KV_mesh_calls"} {
		if s, err := js.Stream(ctx, name); err == nil {
			st := s.CachedInfo().State
			store = append(store, fmt.Sprintf("%s %d msgs %.1f MiB", name, st.Msgs, float64(st.Bytes)/(1<<20)))
		}
	}
	b.Logf("JetStream store (per replica): %s", strings.Join(store, ", "))
}

// rssMiB is a process's resident memory, from /proc.
func rssMiB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
