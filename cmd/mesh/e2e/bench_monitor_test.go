package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/heartbeat"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// BenchmarkMonitor runs `mesh monitor` as its own process against 100 nodes
// heartbeating at 1 s (in the benchmark's process), reports the monitor's
// CPU use over 20 s, then crashes 20 nodes and reports how long the monitor
// took to report each down (p50 and max).
func BenchmarkMonitor(b *testing.B) {
	dir := b.TempDir()
	natsAddr := freeAddr(b)
	srv, err := natsserver.Start(natsserver.Config{Listen: natsAddr, StoreDir: filepath.Join(dir, "js")})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	res, err := store.Provision(b.Context(), js, mesh.DefaultNamespace(), store.ProvisionConfig{})
	if err != nil {
		b.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, []byte("name: bench\nllm:\n  model: offline\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	mon := exec.Command(filepath.Join(binDir, "mesh"), "monitor")
	mon.Env = append(os.Environ(), "MESH_CONFIG="+cfgPath, "NATS_URL="+url, "MESH_LOG_LEVEL=warn", "MESH_LOG_FORMAT=json")
	if err := mon.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = mon.Process.Kill(); _ = mon.Wait() }()

	downs := map[string]time.Time{}
	var mu sync.Mutex
	if _, err := nc.Subscribe("mesh.evt._mesh.CUSTOM", func(m *nats.Msg) {
		var ev struct {
			Name  string `json:"name"`
			Value struct {
				Node mesh.NodeInfo `json:"node"`
			} `json:"value"`
		}
		if json.Unmarshal(m.Data, &ev) == nil && ev.Name == mesh.CustomNodeDown {
			mu.Lock()
			downs[ev.Value.Node.Node] = time.Now()
			mu.Unlock()
		}
	}); err != nil {
		b.Fatal(err)
	}

	const nodes, kills = 100, 20
	type beating struct {
		nc     *nats.Conn
		cancel context.CancelFunc
	}
	var all []beating
	for i := range nodes {
		bnc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		bjs, _ := jetstream.New(bnc)
		beat, err := heartbeat.NewBeat(heartbeat.BeatConfig{Node: role.Node{NC: bnc, JS: bjs, NS: mesh.DefaultNamespace(), NodeID: fmt.Sprintf("bench-%03d", i)}, Nodes: res.Nodes, Role: mesh.RoleAgent})
		if err != nil {
			b.Fatal(err)
		}
		beat.SetState(mesh.NodeReady, "")
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = beat.Run(ctx) }()
		all = append(all, beating{bnc, cancel})
	}
	defer func() {
		for _, n := range all {
			n.cancel()
			n.nc.Close()
		}
	}()

	b.ResetTimer()
	time.Sleep(3 * time.Second) // every node seen a few times
	cpu0, t0 := meshtest.MustProc(b, mon.Process.Pid).CPU, time.Now()
	time.Sleep(20 * time.Second)
	cpu1, t1 := meshtest.MustProc(b, mon.Process.Pid).CPU, time.Now()
	b.ReportMetric(100*(cpu1-cpu0).Seconds()/t1.Sub(t0).Seconds(), "monitor-cpu-%")

	killed := map[string]time.Time{}
	for i := range kills {
		n := all[i]
		n.nc.Close() // a crash: no goodbye
		n.cancel()
		killed[fmt.Sprintf("bench-%03d", i)] = time.Now()
		time.Sleep(150 * time.Millisecond)
	}
	meshtest.Eventually(b, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(downs) >= kills
	}, "not every crash was reported")
	var took []time.Duration
	mu.Lock()
	for id, at := range killed {
		took = append(took, downs[id].Sub(at))
	}
	mu.Unlock()
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "detect-p50-s")
	b.ReportMetric(took[len(took)-1].Seconds(), "detect-max-s")
	b.ReportMetric(0, "ns/op")
}
