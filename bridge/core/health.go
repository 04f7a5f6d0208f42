package core

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Health statuses, as [Core.Health] decides them: healthy, degraded (a few
// nodes down, a breaker open, or more than 80 % of the mesh's capacity of
// active conversations taken) or unhealthy (NATS out of reach, more nodes
// down, or the mesh in degradation mode).
const (
	Healthy   = "healthy"
	Degraded  = "degraded"
	Unhealthy = "unhealthy"
)

// Health is the mesh's health as /health reports it.
type Health struct {
	Status         string `json:"status"`
	UptimeSeconds  int    `json:"uptime_seconds"`
	ActiveSessions int    `json:"active_sessions"`
	// Sessions counts the conversations by status, deleted and expired ones
	// among them while they are kept.
	Sessions map[string]int `json:"sessions"`
	// FailedNodes are the nodes a monitor marked down in the last minutes
	// (of every role, agents and the others alike).
	FailedNodes int               `json:"failed_nodes"`
	Failed      []mesh.NodeInfo   `json:"failed,omitempty"`
	Nodes       map[string]int    `json:"nodes"`
	Breakers    map[string]string `json:"breakers,omitempty"`
	// Metrics are the Prometheus endpoints of the live nodes, by node.
	Metrics map[string]string `json:"metrics,omitempty"`
	// Degradation is set while the mesh is in degradation mode.
	Degradation *mesh.Degradation `json:"degradation,omitempty"`
	Version     string            `json:"version"`
	Timestamp   time.Time         `json:"timestamp"`
}

// failedWithin is how recent a down record must be to count as failed.
const failedWithin = 2 * time.Minute

// Health reports the mesh's health: healthy with no failed node, degraded
// with 1 to 3, an open breaker or past 80 % of the capacity, unhealthy with
// more failed nodes or in degradation mode.
func (c *Core) Health(ctx context.Context, version string, uptime time.Duration) Health {
	h := Health{Status: Healthy, UptimeSeconds: int(uptime.Seconds()), Nodes: map[string]int{}, Version: version, Timestamp: time.Now().UTC()}
	nodes, err := store.NewNodes(c.cfg.Resources.Nodes).List(ctx)
	if err != nil || !c.cfg.NC.IsConnected() {
		h.Status = Unhealthy
		return h
	}
	for _, n := range nodes {
		if n.State == mesh.NodeDown {
			if time.Since(n.DownAt) <= failedWithin {
				h.Failed = append(h.Failed, n)
			}
			continue
		}
		h.Nodes[n.Role]++
		if n.Metrics != "" {
			if h.Metrics == nil {
				h.Metrics = map[string]string{}
			}
			h.Metrics[n.Node] = n.Metrics
		}
		for name, state := range n.Breakers {
			if h.Breakers == nil {
				h.Breakers = map[string]string{}
			}
			h.Breakers[n.Node+"/"+name] = state
		}
	}
	h.FailedNodes = len(h.Failed)
	h.ActiveSessions = c.activeSessions(ctx)
	h.Sessions = c.SessionCounts()
	h.Degradation = c.Degradation()
	open := 0
	for _, state := range h.Breakers {
		if state != "closed" {
			open++
		}
	}
	busy := h.Sessions[string(mesh.StatusQueued)] + h.Sessions[string(mesh.StatusRunning)] + h.Sessions[string(mesh.StatusWaitingApproval)]
	h.Status = healthStatus(h.FailedNodes, h.Degradation != nil, open, busy, c.cfg.MaxActiveSessions)
	return h
}

// statusCounts are [Core.SessionCounts] with every status present, at 0
// when no conversation has it: a gauge with no series shows no data.
func (c *Core) statusCounts() map[string]int {
	counts := c.SessionCounts()
	for _, s := range []mesh.Status{mesh.StatusActive, mesh.StatusQueued, mesh.StatusRunning, mesh.StatusWaitingApproval, mesh.StatusCompleted, mesh.StatusDeleted, mesh.StatusExpired} {
		counts[string(s)] += 0
	}
	return counts
}

// healthStatus decides the status from the failed nodes, the degradation
// mode, the open breakers and the conversations holding a turn (busy)
// against the mesh's capacity (0: none).
func healthStatus(failed int, degradation bool, openBreakers, busy, capacity int) string {
	switch {
	case degradation || failed > 3:
		return Unhealthy
	case failed > 0 || openBreakers > 0:
		return Degraded
	// More than 80 %: time to add a replica before conversations are refused.
	case capacity > 0 && busy*5 > capacity*4:
		return Degraded
	}
	return Healthy
}

// HealthCode is status as the mesh_health_status gauge reports it:
// 0 healthy, 1 degraded, 2 unhealthy.
func HealthCode(status string) float64 {
	switch status {
	case Healthy:
		return 0
	case Degraded:
		return 1
	}
	return 2
}

// activeSessions counts conversations, cached for a few seconds.
func (c *Core) activeSessions(ctx context.Context) int {
	if c.listsLoaded() {
		n := 0
		for s, k := range c.SessionCounts() {
			if s != string(mesh.StatusDeleted) && s != string(mesh.StatusExpired) {
				n += k
			}
		}
		return n
	}
	if v := c.sessionCount.Load(); v != nil && time.Since(v.at) < 5*time.Second {
		return v.n
	}
	keys, err := c.cfg.Resources.Sessions.ListKeys(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for k := range keys.Keys() {
		if !strings.HasPrefix(k, store.RunKeyPrefix) {
			n++
		}
	}
	c.sessionCount.Store(&counted{n: n, at: time.Now()})
	return n
}

type counted struct {
	n  int
	at time.Time
}

// Degradation is the degradation mode in force, or nil.
func (c *Core) Degradation() *mesh.Degradation { return c.degraded.Load() }

// SetDraining makes readiness fail: the bridge is stopping. It closes
// [Core.Stopping], so that long-lived connections say goodbye.
func (c *Core) SetDraining() {
	c.draining.Store(true)
	c.stopOnce.Do(func() { close(c.stopping) })
}

// Stopping is closed when the bridge begins to stop: a WebSocket then
// tells its client why and closes, which the server's shutdown does not do
// for connections it no longer owns.
func (c *Core) Stopping() <-chan struct{} { return c.stopping }

// Hold counts a connection the HTTP server no longer owns (a WebSocket)
// until the function it returns is called; [Core.WaitHeld] waits for them.
func (c *Core) Hold() (release func()) {
	c.held.Add(1)
	var once sync.Once
	return func() { once.Do(func() { c.held.Add(-1) }) }
}

// WaitHeld waits until every held connection is released, or ctx ends.
// It polls: a connection may still be taking hold while it waits.
func (c *Core) WaitHeld(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for c.held.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchDegradation follows the degradation key of the nodes bucket.
func (c *Core) watchDegradation(ctx context.Context) error {
	_, err := store.WatchKV(ctx, c.cfg.Resources.Nodes, store.KVWatch{Keys: mesh.DegradedKey, Apply: func(e jetstream.KeyValueEntry) {
		if e.Operation() != jetstream.KeyValuePut {
			c.degraded.Store(nil)
			return
		}
		var d mesh.Degradation
		if json.Unmarshal(e.Value(), &d) == nil {
			c.degraded.Store(&d)
		}
	}})
	return err
}
