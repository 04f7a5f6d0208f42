package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// touch records a sign of progress.
func (a *Role) touch() { a.lastProgress.Store(time.Now().UnixNano()) }

// Health reports whether the agent's work loop works, for liveness probes: it
// consumes its work queue, and it is not stuck — every worker busy with no
// turn making progress for StuckAfter. A process that beats but fails this
// is a zombie that its monitor restarts.
func (a *Role) Health(context.Context) error {
	if !a.loop.Consuming() {
		return errors.New("agent: not consuming its work queue")
	}
	// Turns waiting for their provider's capacity are waiting, not stuck:
	// the model client bounds that wait (llm.max_queue_wait).
	if a.loop.Busy() < a.workers || a.modelWaiting.Load() > 0 {
		return nil
	}
	idle := time.Since(time.Unix(0, a.lastProgress.Load()))
	if idle > a.cfg.StuckAfter {
		return fmt.Errorf("agent: all %d workers busy and no progress for %s", a.workers, idle.Round(time.Second))
	}
	return nil
}

// Breakers reports the states of the agent's circuit breakers: one per MCP
// server it calls ("mcp:<server>") and one per sub-agent ("a2a:<name>").
func (a *Role) Breakers() map[string]string {
	out := a.servers.states()
	maps.Copy(out, a.pool.states())
	return out
}

// Default breaker settings of the MCP servers, as the agent calls them
// (breakers.tools): a server that fails this many calls in a row is not
// called for the cooldown.
const (
	defaultServerBreakerFailures = 5
	defaultServerBreakerCooldown = 15 * time.Second
)

// breakers are circuit breakers by MCP server.
type breakers struct {
	failures int
	cooldown time.Duration

	mu sync.Mutex
	m  map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]
}

func newBreakers(c config.Breaker) *breakers {
	b := &breakers{failures: c.Failures, cooldown: c.Cooldown.Std()}
	if b.failures <= 0 {
		b.failures = defaultServerBreakerFailures
	}
	if b.cooldown <= 0 {
		b.cooldown = defaultServerBreakerCooldown
	}
	return b
}

func (b *breakers) get(server string) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]{}
	}
	cb := b.m[server]
	if cb == nil {
		cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        "mcp:" + server,
			MaxRequests: 1,
			Timeout:     b.cooldown,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(b.failures) },
		})
		b.m[server] = cb
	}
	return cb
}

func (b *breakers) states() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]string, len(b.m))
	for name, cb := range b.m {
		out["mcp:"+name] = cb.State().String()
	}
	return out
}

// errOpen is the failure of a call to server refused by its open breaker.
func (b *breakers) errOpen(server string) error {
	return mesh.ErrToolUnavailable.With(fmt.Sprintf("tool server %q is unavailable: its circuit breaker is open after %d failed calls; retrying in %s", server, b.failures, b.cooldown))
}

// states reports the breaker of every sub-agent.
func (p *remotePool) states() map[string]string {
	out := map[string]string{}
	for _, r := range p.all() {
		out["a2a:"+r.cfg.Name] = r.gate.State().String()
	}
	return out
}

// Info is what the agent says of itself in its node's heartbeats, for the
// agent directory: the models its llm steps call, the tools and
// sub-agents they are offered as the catalog stands, and its workers, busy
// or not.
func (a *Role) Info() mesh.AgentInfo {
	info := mesh.AgentInfo{Name: a.name, Description: a.cfg.Agent.Description, Capabilities: a.cfg.Agent.Capabilities, Workers: a.workers, Busy: a.loop.Busy(), Waiting: int(a.modelWaiting.Load())}
	tools, subs, models := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, s := range a.steps {
		switch s.cfg.Type {
		case config.NodeA2A:
			subs[s.cfg.Name] = true
		case config.NodeLLM:
			if s.provider != nil {
				models[s.provider.Model()] = true
			}
			o := a.stepTools(s)
			for _, t := range o.tools {
				if r, ok := o.remote[t.Name]; ok {
					subs[r.cfg.Name] = true
				} else {
					tools[t.Name] = true
				}
			}
		}
	}
	info.Tools, info.SubAgents = slices.Sorted(maps.Keys(tools)), slices.Sorted(maps.Keys(subs))
	info.Models = slices.Sorted(maps.Keys(models))
	return info
}
