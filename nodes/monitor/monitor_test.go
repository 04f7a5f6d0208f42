package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/heartbeat"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// node is a beating node on its own connection, which a test can cut to
// simulate a crash.
type node struct {
	beat   *heartbeat.Beat
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

func startNode(t *testing.T, m *meshtest.Mesh, role, id string, interval time.Duration, health func(context.Context) error) *node {
	t.Helper()
	nc := meshtest.Conn(t, m.Server.ClientURL())
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(t.Context(), m.NS.Bucket(mesh.BucketNodes))
	if err != nil {
		t.Fatal(err)
	}
	cfg := heartbeat.BeatConfig{Nodes: kv, Role: role, Interval: interval, Health: health}
	cfg.NC, cfg.JS, cfg.NS, cfg.NodeID = nc, js, m.NS, id
	b, err := heartbeat.NewBeat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.SetState(mesh.NodeReady, "")
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{beat: b, nc: nc, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(n.done); _ = b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-n.done })
	return n
}

// crash stops the node without a goodbye.
func (n *node) crash() {
	n.nc.Close()
	n.cancel()
	<-n.done
}

type recorder struct {
	mu       sync.Mutex
	events   []string
	restarts []string
}

func (r *recorder) restart(info mesh.NodeInfo, _ string) {
	r.mu.Lock()
	r.restarts = append(r.restarts, info.Node)
	r.mu.Unlock()
}

func (r *recorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e == name {
			n++
		}
	}
	return n
}

func startMonitor(t *testing.T, m *meshtest.Mesh, cfg Config) (*Role, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg.NC, cfg.JS, cfg.NS, cfg.Nodes = m.NC, m.JS, m.NS, m.Nodes
	if cfg.Restart == nil {
		cfg.Restart = rec.restart
	}
	mon, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := m.NC.Subscribe("mesh.evt._mesh.CUSTOM", func(msg *nats.Msg) {
		var ev mesh.Event
		_ = json.Unmarshal(msg.Data, &ev)
		rec.mu.Lock()
		rec.events = append(rec.events, ev.Name)
		rec.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mon.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return mon, rec
}

func TestDeadNodeIsFoundWithinItsDeadline(t *testing.T) {
	m := meshtest.New(t)
	const interval = 100 * time.Millisecond
	mon, rec := startMonitor(t, m, Config{Interval: interval})
	n := startNode(t, m, mesh.RoleAgent, "agent-1", interval, nil)
	meshtest.Eventually(t, 5*time.Second, func() bool { return known(mon) == 1 }, "node not seen")

	killed := time.Now()
	n.crash()
	meshtest.Eventually(t, 5*time.Second, func() bool { return rec.count(mesh.CustomNodeDown) == 1 }, "no node_down")
	// 2 missed beats plus half an interval is the deadline; the slack is for
	// a loaded machine (the detection figures are in `make bench`).
	if took, limit := time.Since(killed), 3*interval+interval/2+500*time.Millisecond; took > limit {
		t.Errorf("found down after %v, want within %v (2 missed beats)", took, limit)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.restarts) == 1 && rec.restarts[0] == "agent-1"
	}, "agent-1 not restarted (restart strategy)")
	e, err := m.Nodes.Get(t.Context(), "agent.agent-1")
	if err != nil {
		t.Fatal(err)
	}
	var info mesh.NodeInfo
	_ = json.Unmarshal(e.Value(), &info)
	if info.State != mesh.NodeDown || info.Detail == "" {
		t.Errorf("recorded %+v, want down with a reason", info)
	}

	// The same node beating again is up.
	startNode(t, m, mesh.RoleAgent, "agent-1", interval, nil)
	meshtest.Eventually(t, 5*time.Second, func() bool { return rec.count(mesh.CustomNodeUp) == 1 }, "no node_up")
	if got := mon.Stats(); got.NodesDown != 1 || got.NodesUp != 1 {
		t.Errorf("stats = %+v", got)
	}
}

func TestCleanStopIsNotAFailure(t *testing.T) {
	m := meshtest.New(t)
	const interval = 100 * time.Millisecond
	mon, rec := startMonitor(t, m, Config{Interval: interval})
	n := startNode(t, m, mesh.RoleToolhost, "th-1", interval, nil)
	meshtest.Eventually(t, 5*time.Second, func() bool { return known(mon) == 1 }, "node not seen")
	n.cancel()
	<-n.done
	meshtest.Eventually(t, 5*time.Second, func() bool { return known(mon) == 0 }, "stopped node not forgotten")
	if rec.count(mesh.CustomNodeDown) != 0 {
		t.Error("a clean stop was reported down")
	}
	if _, err := m.Nodes.Get(t.Context(), "toolhost.th-1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the stopped node's key is still there: %v", err)
	}
}

func TestZombieIsCaughtByTheProbe(t *testing.T) {
	m := meshtest.New(t)
	const interval = 100 * time.Millisecond
	var stuck atomic.Bool
	_, rec := startMonitor(t, m, Config{Interval: interval, ProbeEvery: 100 * time.Millisecond, ProbeTimeout: 150 * time.Millisecond})
	startNode(t, m, mesh.RoleAgent, "agent-z", interval, func(ctx context.Context) error {
		if stuck.Load() {
			<-ctx.Done() // a work loop that no longer answers
			return ctx.Err()
		}
		return nil
	})
	// Healthy: probes pass, nothing happens.
	time.Sleep(500 * time.Millisecond) // several probe rounds must pass without effect
	if rec.count(mesh.CustomNodeDown) != 0 {
		t.Fatal("a healthy node was reported down")
	}
	stuck.Store(true)
	meshtest.Eventually(t, 5*time.Second, func() bool {
		downs := rec.count(mesh.CustomNodeDown)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return downs == 1 && len(rec.restarts) == 1 && rec.restarts[0] == "agent-z"
	}, "zombie not caught and restarted")
}

func TestReplaceAsksAZombieToExit(t *testing.T) {
	m := meshtest.New(t)
	const interval = 100 * time.Millisecond
	exited := make(chan string, 1)
	_, _ = startMonitor(t, m, Config{Interval: interval, ProbeEvery: 100 * time.Millisecond, ProbeTimeout: 150 * time.Millisecond,
		Strategies: map[string]Strategy{mesh.RoleAgent: StrategyReplace}})
	nc := meshtest.Conn(t, m.Server.ClientURL())
	js, _ := jetstream.New(nc)
	b, err := heartbeat.NewBeat(heartbeat.BeatConfig{Node: role.Node{NC: nc, JS: js, NS: m.NS, NodeID: "agent-r"}, Nodes: m.Nodes, Role: mesh.RoleAgent, Interval: interval,
		Health:    func(context.Context) error { return errors.New("stuck") },
		OnRestart: func(reason string) { exited <- reason }})
	if err != nil {
		t.Fatal(err)
	}
	b.SetState(mesh.NodeReady, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = b.Run(ctx) }()
	select {
	case reason := <-exited:
		if reason == "" {
			t.Error("no reason given")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the zombie was not asked to exit")
	}
}

func TestDegradationModeEntersAndLeaves(t *testing.T) {
	m := meshtest.New(t)
	const interval = 100 * time.Millisecond
	mon, rec := startMonitor(t, m, Config{Interval: interval, DegradeAfter: 3, DegradeWindow: 10 * time.Second, RecoverBelow: 2, RecoverAfter: 300 * time.Millisecond, Strategies: map[string]Strategy{mesh.RoleAgent: StrategyAlert}})
	var nodes []*node
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		nodes = append(nodes, startNode(t, m, mesh.RoleAgent, id, interval, nil))
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return known(mon) == 4 }, "nodes not seen")
	for _, n := range nodes[:3] {
		n.crash()
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return rec.count(mesh.CustomNodeDown) == 3 }, "three downs")
	if d, _ := store.NewNodes(m.Nodes).Degraded(t.Context()); d != nil {
		t.Fatalf("degraded after 3 failures; the threshold is more than 3")
	}
	nodes[3].crash()
	meshtest.Eventually(t, 5*time.Second, func() bool {
		d, _ := store.NewNodes(m.Nodes).Degraded(t.Context())
		return d != nil && len(d.Failed) == 4
	}, "not degraded after 4 failures")
	// Recovery: the nodes come back, the mode ends by itself.
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		startNode(t, m, mesh.RoleAgent, id, interval, nil)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		d, _ := store.NewNodes(m.Nodes).Degraded(t.Context())
		return d == nil && rec.count(mesh.CustomDegradedLeave) == 1
	}, "degradation did not end")
	if rec.count(mesh.CustomDegradedEnter) != 1 {
		t.Errorf("degradation entered %d times", rec.count(mesh.CustomDegradedEnter))
	}
}

// known is how many nodes the monitor tracks.
func known(mon *Role) int {
	mon.mu.Lock()
	defer mon.mu.Unlock()
	return len(mon.nodes)
}

func TestQuickRestartIsStillReportedDown(t *testing.T) {
	m := meshtest.New(t)
	const interval = 100 * time.Millisecond
	_, rec := startMonitor(t, m, Config{Interval: 500 * time.Millisecond})
	n := startNode(t, m, mesh.RoleAgent, "agent-q", interval, nil)
	meshtest.Eventually(t, 5*time.Second, func() bool { return rec.count(mesh.CustomNodeDown) == 0 && n.beat.State() == mesh.NodeReady }, "node not ready")
	time.Sleep(3 * interval) // the monitor has seen it
	n.crash()
	// Its supervisor starts it again at once, under the same node id, well
	// within the monitor's deadline (1.25 s here).
	time.Sleep(time.Millisecond) // a new start time
	startNode(t, m, mesh.RoleAgent, "agent-q", interval, nil)
	meshtest.Eventually(t, 5*time.Second, func() bool {
		return rec.count(mesh.CustomNodeDown) == 1 && rec.count(mesh.CustomNodeUp) == 1
	}, "the restart was not reported as a death and a return")
}

// TestEveryNodeSilentAtOnceIsHeldAsAStall: when every live node falls
// silent in the same check (a NATS server that stalls for seconds under a
// huge store, or this monitor paused), the monitor holds off for
// StallHold instead of marking the whole mesh down and restarting healthy
// processes; a node still silent once the others beat again is down, and
// a silence longer than the hold is a real loss.
func TestEveryNodeSilentAtOnceIsHeldAsAStall(t *testing.T) {
	m := meshtest.New(t)
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	mon, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NS: m.NS}, Nodes: m.Nodes, Interval: time.Second, StallHold: 10 * time.Second,
		Now: now, Restart: func(mesh.NodeInfo, string) {}})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	beat := func(ids ...string) {
		for _, id := range ids {
			mon.seen(t.Context(), mesh.NodeInfo{Node: id, Role: mesh.RoleAgent, State: mesh.NodeReady, StartedAt: started})
		}
	}
	downs := func() int { return mon.Stats().NodesDown }

	beat("a", "b", "c")
	advance(5 * time.Second) // past the 2.5 s deadline, every node at once
	mon.check(t.Context())
	if n := downs(); n != 0 {
		t.Fatalf("%d nodes marked down when all fell silent together", n)
	}
	// The bus is back: a and b beat, c does not: c alone is down.
	beat("a", "b")
	mon.check(t.Context())
	if n := downs(); n != 1 || !mon.nodes["agent.c"].down || mon.nodes["agent.a"].down {
		t.Fatalf("after a and b beat again: %d down, want c alone", n)
	}
	// Silent together again, longer than the hold: they are gone.
	advance(5 * time.Second)
	mon.check(t.Context())
	if n := downs(); n != 1 {
		t.Fatalf("%d down within the hold, want 1", n)
	}
	advance(11 * time.Second)
	mon.check(t.Context())
	if n := downs(); n != 3 {
		t.Fatalf("%d down after the hold, want 3", n)
	}
}

// TestNodesDownSeriesExistBeforeTheFirst: a running monitor exposes
// mesh_nodes_down_total and mesh_heartbeat_misses_total for every role and
// reason before any node went down, so that increase() over them (the
// shipped MeshNodeDown alert) sees the first one.
func TestNodesDownSeriesExistBeforeTheFirst(t *testing.T) {
	m := meshtest.New(t)
	startMonitor(t, m, Config{Interval: 100 * time.Millisecond})
	families, err := telemetry.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			key := f.GetName()
			for _, l := range metric.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			seen[key] = true
		}
	}
	for _, role := range watchedRoles {
		if !seen["mesh_heartbeat_misses_total role="+role] {
			t.Errorf("no mesh_heartbeat_misses_total series for role %s", role)
		}
		for _, reason := range []string{downSilent, downZombie, downRestarted} {
			if !seen["mesh_nodes_down_total reason="+reason+" role="+role] {
				t.Errorf("no mesh_nodes_down_total series for role %s, reason %s", role, reason)
			}
		}
	}
}
