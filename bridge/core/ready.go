package core

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
)

// Check results of [Core.Readiness].
const (
	CheckOK      = "ok"
	CheckFailed  = "failed"
	CheckMissing = "none running"
	// CheckNotConfigured: the mesh has no MCP servers, so no toolhost is needed.
	CheckNotConfigured = "not configured"
)

// Readiness checks what a turn needs: the NATS connection (event_bus), the
// buckets (storage), a toolhost and an approver answering their service
// pings, and an agent pulling from its work queue.
func (c *Core) Readiness(ctx context.Context) (ready bool, checks map[string]string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	checks = map[string]string{"event_bus": CheckOK, "storage": CheckOK, "toolhosts": CheckOK, "approvers": CheckOK, "agents": CheckOK}
	if !c.cfg.NC.IsConnected() {
		// Off the bus nothing else can be known: say what the connection
		// does (reconnecting, closed) rather than wait for every check to
		// time out.
		status := strings.ToLower(c.cfg.NC.Status().String())
		for k := range checks {
			checks[k] = "unknown: nats " + status
		}
		checks["event_bus"] = CheckFailed + ": " + status
		return false, checks
	}
	if _, err := c.cfg.Resources.Sessions.Status(ctx); err != nil {
		checks["storage"] = CheckFailed
	}
	ping := func(service string) string {
		_, err := c.cfg.NC.RequestWithContext(ctx, mesh.ServicePing(service), nil)
		switch {
		case err == nil:
			return CheckOK
		case errors.Is(err, nats.ErrNoResponders):
			return CheckMissing
		}
		return CheckFailed
	}
	if c.cfg.NoToolServers {
		checks["toolhosts"] = CheckNotConfigured
	} else {
		checks["toolhosts"] = ping(mesh.ToolServiceName)
	}
	checks["approvers"] = ping(mesh.ApprovalServiceName)
	cons, err := c.cfg.JS.Consumer(ctx, c.ns.Stream(mesh.StreamWork), "agent_"+c.cfg.Agent)
	if err != nil {
		checks["agents"] = CheckMissing
	} else if info, err := cons.Info(ctx); err != nil {
		checks["agents"] = CheckFailed
	} else if info.NumWaiting == 0 {
		checks["agents"] = CheckMissing
	}
	if c.draining.Load() {
		checks["bridge"] = "draining"
	}
	if c.Degradation() != nil {
		checks["mesh"] = "degraded"
	}
	ready = true
	for _, v := range checks {
		if v != CheckOK && v != CheckNotConfigured {
			ready = false
		}
	}
	return ready, checks
}
