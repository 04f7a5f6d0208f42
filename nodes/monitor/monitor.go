// Package monitor is the monitor role (`mesh monitor`, and inside `mesh up`):
// it finds the nodes that stop beating or that beat but no longer work, and
// applies the recovery their role is given; when too many go down at once
// it puts the mesh in degradation mode, which refuses new conversations.
//
// It subscribes to every node's heartbeat (mesh.hb.>, sent by package
// heartbeat) and keeps what it learns from them in memory only: a monitor
// that restarts knows every live node again within one interval. A node
// silent for [Config.Missed] intervals is down; a node that beats but
// fails [Config.ProbeFailures] liveness probes in a row
// (mesh.node.<id>.probe) is a zombie. For each, the monitor writes a down
// record to the mesh_nodes bucket (kept 10 minutes, for `mesh status`),
// publishes CUSTOM node_down (and node_up when it beats again) on
// mesh.evt._mesh.CUSTOM, and applies the role's [Strategy]: restart (through
// mesh up's supervisor, or by asking the node to exit on
// mesh.node.<id>.restart), replace or alert. Too many nodes down at once put
// the mesh in degradation mode (the _mesh.degraded key), which the bridge
// reads to refuse new conversations until the mesh calms down.
//
// [Role.Run] owns the probe goroutines it starts and returns nil, after
// they have ended, once its context is cancelled.
package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/heartbeat"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// Strategy is what a monitor does about a node it found down.
type Strategy string

// Recovery strategies.
const (
	// StrategyRestart restarts the process: its supervisor (mesh up) kills
	// a zombie and starts a dead one again.
	StrategyRestart Strategy = "restart"
	// StrategyReplace leaves the node down: its work is redelivered to
	// another replica of its role. A zombie is asked to exit so that it
	// stops holding work.
	StrategyReplace Strategy = "replace"
	// StrategyAlert only reports: an ERROR log, a count and an event.
	StrategyAlert Strategy = "alert"
)

// Config configures a [Role].
type Config struct {
	// Node is the process's connections, names and logger: NC and JS are
	// required.
	role.Node
	// Nodes is the nodes bucket, where the monitor writes down records and
	// the degradation mode. Required.
	Nodes jetstream.KeyValue
	// Interval is the nodes' heartbeat interval. Zero means 1s.
	Interval time.Duration
	// Missed is how many heartbeats a node may miss before it is down. Zero
	// means 2: at the default interval a dead node is found within 3 s.
	Missed int
	// ProbeEvery is how often nodes are probed, ProbeTimeout how long a probe
	// waits, ProbeFailures how many failed probes in a row make a zombie.
	// Zero means 2s, 3s and 2.
	ProbeEvery, ProbeTimeout time.Duration
	ProbeFailures            int
	// Strategies by role; roles without one get StrategyRestart.
	Strategies map[string]Strategy
	// Restart, when set, restarts a node for the restart strategy (mesh up
	// kills the process by pid). Nil asks the node itself to exit, on
	// mesh.node.<id>.restart.
	Restart func(info mesh.NodeInfo, reason string)
	// DegradeAfter nodes down within DegradeWindow put the mesh in
	// degradation mode, in which new conversations are refused while failed
	// nodes recover; it leaves the mode when fewer than RecoverBelow nodes
	// have been down for RecoverAfter. Zero means more than 3 within 30s,
	// and fewer than 2 for 2 minutes.
	DegradeAfter  int
	DegradeWindow time.Duration
	RecoverBelow  int
	RecoverAfter  time.Duration
	// ForgetAfter is how long a node stays listed down before the monitor
	// forgets it (a restarted process under a new id never comes back under
	// the old one). Zero means 5 minutes.
	ForgetAfter time.Duration
	// StallHold is how long the monitor waits before it marks down every
	// node at once: when all of them fall silent together, the bus (a
	// NATS server stalled by a store of a gigabyte) or the monitor itself
	// stalled, far likelier than every process dying in the same second.
	// Zero means 10 intervals.
	StallHold time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Role is the monitor role: it watches heartbeats and probes, marks nodes
// down and up, applies the recovery strategies and the degradation mode.
// It keeps only what it learns from the heartbeats; a monitor that
// restarts knows every live node again within one interval.
type Role struct {
	cfg    Config
	log    zerolog.Logger
	events *bus.Publisher

	mu       sync.Mutex
	nodes    map[string]*tracked // by key <role>.<node>
	failures []failure           // recent downs, for degradation
	degraded *mesh.Degradation
	calmFrom time.Time // since when few enough nodes are down
	stats    Stats
	// lastBeat is when the last heartbeat of any node arrived; stallSince
	// when every live node fell silent together (zero: they did not).
	lastBeat   time.Time
	stallSince time.Time
}

type tracked struct {
	info       mesh.NodeInfo
	seen       time.Time
	down       bool
	probeFails int
	probing    bool
}

type failure struct {
	at  time.Time
	key string
}

// Stats counts what a monitor saw.
type Stats struct {
	NodesDown   int `json:"nodes_down_total"`
	NodesUp     int `json:"nodes_up_total"`
	Zombies     int `json:"zombies_total"`
	Degradation int `json:"degradations_total"`
}

// New validates cfg.
func New(cfg Config) (*Role, error) {
	if cfg.NC == nil || cfg.JS == nil || cfg.Nodes == nil {
		return nil, errors.New("monitor: NC, JS and Nodes are required")
	}
	telemetry.NodesWatched(watchedRoles, []string{downSilent, downZombie, downRestarted})
	telemetry.Recoveries(watchedRoles, []string{string(StrategyRestart), string(StrategyReplace), string(StrategyAlert)})
	if cfg.NS.Prefix() == "" {
		cfg.NS = mesh.DefaultNamespace()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = heartbeat.DefaultInterval
	}
	if cfg.Missed <= 0 {
		cfg.Missed = 2
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = 2 * time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 3 * time.Second
	}
	if cfg.ProbeFailures <= 0 {
		cfg.ProbeFailures = 2
	}
	if cfg.DegradeAfter <= 0 {
		cfg.DegradeAfter = 3
	}
	if cfg.DegradeWindow <= 0 {
		cfg.DegradeWindow = 30 * time.Second
	}
	if cfg.RecoverBelow <= 0 {
		cfg.RecoverBelow = 2
	}
	if cfg.RecoverAfter <= 0 {
		cfg.RecoverAfter = 2 * time.Minute
	}
	if cfg.ForgetAfter <= 0 {
		cfg.ForgetAfter = 5 * time.Minute
	}
	if cfg.StallHold <= 0 {
		cfg.StallHold = 10 * cfg.Interval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for role, s := range cfg.Strategies {
		switch s {
		case StrategyRestart, StrategyReplace, StrategyAlert:
		default:
			return nil, fmt.Errorf("monitor: role %s: unknown recovery strategy %q", role, s)
		}
	}
	return &Role{
		cfg: cfg, log: cfg.Logger,
		events: bus.NewPublisher(cfg.JS, cfg.NS), nodes: map[string]*tracked{},
	}, nil
}

// Stats returns the counts so far.
func (m *Role) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// holdForStall reports whether the late nodes are left alone for now: every
// live node (two at least) fell silent at once, and for less than
// StallHold. m.mu is held.
func (m *Role) holdForStall(now time.Time, late, live int) bool {
	if late < 2 || live > 0 || now.Sub(m.lastBeat) <= m.deadline() {
		m.stallSince = time.Time{}
		return false
	}
	if m.stallSince.IsZero() {
		m.stallSince = now
		m.log.Warn().Int("silent", late).Dur("hold", m.cfg.StallHold).Msg("every node fell silent at once: the bus or this monitor stalled; holding off before marking them down")
	}
	return now.Sub(m.stallSince) < m.cfg.StallHold
}

// deadline is how long a node may stay silent.
func (m *Role) deadline() time.Duration {
	return time.Duration(m.cfg.Missed)*m.cfg.Interval + m.cfg.Interval/2
}

// Run watches until ctx ends.
func (m *Role) Run(ctx context.Context) error {
	sub, err := m.cfg.NC.Subscribe(m.cfg.NS.HeartbeatAll(), func(msg *nats.Msg) {
		var info mesh.NodeInfo
		if json.Unmarshal(msg.Data, &info) == nil && info.Node != "" {
			m.seen(ctx, info)
		}
	})
	if err != nil {
		return fmt.Errorf("monitor: subscribe %s: %w", m.cfg.NS.HeartbeatAll(), err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if d, err := store.NewNodes(m.cfg.Nodes).Degraded(ctx); err == nil && d != nil {
		m.mu.Lock()
		m.degraded = d
		m.mu.Unlock()
	}
	check := time.NewTicker(max(m.cfg.Interval/4, 10*time.Millisecond))
	defer check.Stop()
	probe := time.NewTicker(m.cfg.ProbeEvery)
	defer probe.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	m.log.Info().Dur("interval", m.cfg.Interval).Int("missed", m.cfg.Missed).Msg("monitor ready")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-check.C:
			m.check(ctx)
		case <-probe.C:
			m.probeAll(ctx, &wg)
		}
	}
}

// seen records a heartbeat; a node that was down is up again.
func (m *Role) seen(ctx context.Context, info mesh.NodeInfo) {
	key := info.Key()
	m.mu.Lock()
	t := m.nodes[key]
	if t == nil {
		t = &tracked{}
		m.nodes[key] = t
	}
	// A new incarnation (another pid or start time) of a node that did not
	// say goodbye: its supervisor restarted it faster than the deadline, but
	// the previous process died all the same.
	var died *mesh.NodeInfo
	if !t.down && t.info.Node != "" && !t.info.StartedAt.Equal(info.StartedAt) && t.info.State != mesh.NodeDraining {
		prev := t.info
		died = &prev
		t.down = true
	}
	wasDown := t.down
	m.mu.Unlock()
	if died != nil {
		m.markDown(ctx, *died, "its process died and was restarted", false)
	}
	m.mu.Lock()
	t.info, t.seen, t.down = info, m.cfg.Now(), false
	m.lastBeat = t.seen
	if wasDown {
		t.probeFails = 0
		m.stats.NodesUp++
	}
	m.mu.Unlock()
	if wasDown {
		m.log.Info().Str("peer", info.Node).Str("peer_role", info.Role).Msg("node up")
		m.publish(ctx, mesh.CustomNodeUp, info)
	}
}

// check marks down the nodes that stopped beating.
func (m *Role) check(ctx context.Context) {
	now := m.cfg.Now()
	var late []*tracked
	live := 0
	m.mu.Lock()
	for key, t := range m.nodes {
		if t.down && now.Sub(t.seen) > m.cfg.ForgetAfter {
			delete(m.nodes, key)
			continue
		}
		if t.down {
			continue
		}
		if now.Sub(t.seen) <= m.deadline() {
			live++
			continue
		}
		if t.info.State == mesh.NodeDraining {
			// It said goodbye: a clean stop, not a failure.
			delete(m.nodes, key)
			continue
		}
		late = append(late, t)
	}
	if m.holdForStall(now, len(late), live) {
		m.mu.Unlock()
		m.updateDegradation(ctx)
		return
	}
	var down []mesh.NodeInfo
	for _, t := range late {
		t.down = true
		down = append(down, t.info)
	}
	m.mu.Unlock()
	for _, info := range down {
		telemetry.HeartbeatMissed(info.Role)
		m.markDown(ctx, info, fmt.Sprintf("missed %d heartbeats", m.cfg.Missed), false)
	}
	m.updateDegradation(ctx)
}

// probeAll asks every live node whether its work loop works.
func (m *Role) probeAll(ctx context.Context, wg *sync.WaitGroup) {
	m.mu.Lock()
	var targets []*tracked
	for _, t := range m.nodes {
		if !t.down && !t.probing && t.info.State != mesh.NodeDraining && t.info.State != mesh.NodeStarting {
			t.probing = true
			targets = append(targets, t)
		}
	}
	m.mu.Unlock()
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.probe(ctx, t)
		}()
	}
}

func (m *Role) probe(ctx context.Context, t *tracked) {
	m.mu.Lock()
	info := t.info
	m.mu.Unlock()
	subj, err := m.cfg.NS.Probe(info.Node)
	ok := false
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, m.cfg.ProbeTimeout)
		_, err = m.cfg.NC.RequestWithContext(pctx, subj, nil)
		cancel()
		ok = err == nil
	}
	if ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	t.probing = false
	if ok {
		t.probeFails = 0
		m.mu.Unlock()
		return
	}
	t.probeFails++
	zombie := t.probeFails >= m.cfg.ProbeFailures && !t.down && m.cfg.Now().Sub(t.seen) <= m.deadline()
	if zombie {
		t.down = true
		t.probeFails = 0
		m.stats.Zombies++
	}
	m.mu.Unlock()
	if zombie {
		m.markDown(ctx, info, fmt.Sprintf("beats but failed %d liveness probes", m.cfg.ProbeFailures), true)
		m.updateDegradation(ctx)
	}
}

// markDown records a node down, tells everyone and applies its strategy.
func (m *Role) markDown(ctx context.Context, info mesh.NodeInfo, reason string, zombie bool) {
	now := m.cfg.Now()
	strategy := m.cfg.Strategies[info.Role]
	if strategy == "" {
		strategy = StrategyRestart
	}
	m.mu.Lock()
	m.stats.NodesDown++
	m.failures = append(m.failures, failure{at: now, key: info.Key()})
	m.mu.Unlock()
	info.State, info.Detail, info.DownAt = mesh.NodeDown, reason, now.UTC()
	m.log.Error().Str("peer", info.Node).Str("peer_role", info.Role).Int("pid", info.PID).Str("reason", reason).Str("strategy", string(strategy)).Msg("node down")
	telemetry.NodeDown(info.Role, downReason(reason, zombie))
	telemetry.Recovery(info.Role, string(strategy))
	if data, err := json.Marshal(info); err == nil {
		// The record outlives the node's own key, for `mesh status`.
		msg := nats.NewMsg("$KV." + m.cfg.NS.Bucket(mesh.BucketNodes) + "." + info.Key())
		msg.Data = data
		if _, err := m.cfg.JS.PublishMsg(ctx, msg, jetstream.WithMsgTTL(10*time.Minute)); err != nil {
			m.log.Warn().Err(err).Msg("record node down")
		}
	}
	m.publish(ctx, mesh.CustomNodeDown, map[string]any{"node": info, "reason": reason, "strategy": strategy, "zombie": zombie})
	switch strategy {
	case StrategyRestart:
		m.restart(ctx, info, reason, zombie)
	case StrategyReplace:
		if zombie {
			m.askExit(info, reason) // it must stop holding work for others to get it
		}
	case StrategyAlert:
	}
}

// restart restarts a node: the supervisor's hook when there is one, else the
// node is asked to exit (a dead one needs nothing: its supervisor, if any,
// already restarts it).
func (m *Role) restart(ctx context.Context, info mesh.NodeInfo, reason string, zombie bool) {
	if m.cfg.Restart != nil {
		m.cfg.Restart(info, reason)
	} else if zombie {
		m.askExit(info, reason)
	}
	m.publish(ctx, mesh.CustomRecoveryApplied, map[string]any{"node": info.Node, "role": info.Role, "strategy": StrategyRestart})
}

func (m *Role) askExit(info mesh.NodeInfo, reason string) {
	if subj, err := m.cfg.NS.Restart(info.Node); err == nil {
		_ = m.cfg.NC.Publish(subj, []byte(reason))
	}
}

// updateDegradation enters or leaves degradation mode: the mesh refuses
// new conversations while too many nodes are down, and lets existing ones
// go on.
func (m *Role) updateDegradation(ctx context.Context) {
	now := m.cfg.Now()
	m.mu.Lock()
	recent := m.failures[:0]
	for _, f := range m.failures {
		if now.Sub(f.at) <= m.cfg.DegradeWindow {
			recent = append(recent, f)
		}
	}
	m.failures = recent
	downNow := 0
	var downKeys []string
	for key, t := range m.nodes {
		if t.down {
			downNow++
			downKeys = append(downKeys, key)
		}
	}
	sort.Strings(downKeys)
	var enter, leave *mesh.Degradation
	switch {
	case m.degraded == nil && len(recent) > m.cfg.DegradeAfter:
		keys := make([]string, 0, len(recent))
		for _, f := range recent {
			keys = append(keys, f.key)
		}
		m.degraded = &mesh.Degradation{Since: now.UTC(), Reason: fmt.Sprintf("%d nodes failed within %s", len(recent), m.cfg.DegradeWindow), Failed: keys}
		m.stats.Degradation++
		m.calmFrom = time.Time{}
		enter = m.degraded
	case m.degraded != nil && downNow < m.cfg.RecoverBelow:
		if m.calmFrom.IsZero() {
			m.calmFrom = now
		}
		if now.Sub(m.calmFrom) >= m.cfg.RecoverAfter {
			leave, m.degraded = m.degraded, nil
		}
	case m.degraded != nil:
		m.calmFrom = time.Time{}
	}
	m.mu.Unlock()
	switch {
	case enter != nil:
		m.log.Error().Str("reason", enter.Reason).Strs("failed", enter.Failed).Msg("entering degradation mode: new conversations are refused")
		telemetry.SetDegraded(true)
		if data, err := json.Marshal(enter); err == nil {
			if _, err := m.cfg.Nodes.Put(ctx, mesh.DegradedKey, data); err != nil {
				m.log.Warn().Err(err).Msg("record degradation")
			}
		}
		m.publish(ctx, mesh.CustomDegradedEnter, enter)
	case leave != nil:
		m.log.Warn().Strs("still_down", downKeys).Msg("leaving degradation mode")
		telemetry.SetDegraded(false)
		if err := m.cfg.Nodes.Delete(ctx, mesh.DegradedKey); err != nil {
			m.log.Warn().Err(err).Msg("clear degradation")
		}
		m.publish(ctx, mesh.CustomDegradedLeave, leave)
	}
}

// publish publishes a CUSTOM event about the mesh on mesh.evt._mesh.CUSTOM.
func (m *Role) publish(ctx context.Context, name string, value any) {
	if _, err := m.events.Publish(ctx, mesh.SystemSession, "", "", mesh.Custom(name, value)); err != nil && ctx.Err() == nil {
		m.log.Warn().Err(err).Str("event", name).Msg("publish monitor event")
	}
}

// Down lists the nodes the monitor holds down.
func (m *Role) Down() []mesh.NodeInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []mesh.NodeInfo
	for _, t := range m.nodes {
		if t.down {
			out = append(out, t.info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Compare(out[i].Key(), out[j].Key()) < 0 })
	return out
}

// downReason is the bounded reason of mesh_nodes_down_total: silent (missed
// heartbeats), zombie (failed probes) or restarted (came back with another
// start time).
func downReason(reason string, zombie bool) string {
	switch {
	case zombie:
		return downZombie
	case strings.HasPrefix(reason, "missed"):
		return downSilent
	}
	return downRestarted
}

// The reasons a node is recorded down, as mesh_nodes_down_total labels
// them.
const (
	downZombie    = "zombie"
	downSilent    = "silent"
	downRestarted = "restarted"
)

// watchedRoles are the roles whose nodes a monitor watches.
var watchedRoles = []string{mesh.RoleAgent, mesh.RoleToolhost, mesh.RoleApprover, mesh.RoleGroup, mesh.RoleBridge, mesh.RoleMonitor}
