package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// DefaultInterval is how often a node beats.
const DefaultInterval = time.Second

// BeatConfig configures the heartbeat of one node.
type BeatConfig struct {
	// Node is the process's connections, names and logger. NC, JS and
	// NodeID are required; probes are answered on Responder.
	role.Node
	// Nodes is the nodes bucket; the node's key there lives as long as it
	// beats (per-key TTL).
	Nodes   jetstream.KeyValue
	Role    string
	Version string
	// Commit is the source the process was built from, reported in beats.
	Commit string
	// Metrics is the address of the node's /metrics, reported in beats.
	Metrics string
	// Interval between beats. Zero means 1s.
	Interval time.Duration
	// Health answers liveness probes: nil when the node's work loop actually
	// works. A node whose Health fails, or blocks past the probe's timeout,
	// does not answer, so a monitor catches a zombie that still beats. Nil
	// means always healthy.
	Health func(context.Context) error
	// Breakers reports the node's circuit breakers, included in each beat.
	Breakers func() map[string]string
	// OnRestart is called when a monitor asks this node to restart (it
	// found it a zombie): cmd makes the process exit so its supervisor starts
	// it again. Nil ignores such requests.
	OnRestart func(reason string)
}

// Beat publishes a node's heartbeats on mesh.hb.<role>.<node id>, keeps its
// key in the nodes bucket alive, and answers probes on
// mesh.node.<node id>.probe.
type Beat struct {
	cfg  BeatConfig
	log  zerolog.Logger
	subj string
	key  string

	// pub makes publishes leave in the order their infos were taken: a
	// tick marshalled before SetServes must not land after it and leave a
	// stale key for a whole interval.
	pub    sync.Mutex
	mu     sync.Mutex
	info   mesh.NodeInfo
	agents func() []mesh.AgentInfo
}

// NewBeat validates cfg.
func NewBeat(cfg BeatConfig) (*Beat, error) {
	if cfg.NC == nil || cfg.JS == nil || cfg.Nodes == nil || cfg.Role == "" || cfg.NodeID == "" {
		return nil, errors.New("heartbeat: NC, JS, Nodes, Role and NodeID are required")
	}
	if cfg.NS.Prefix() == "" {
		cfg.NS = mesh.DefaultNamespace()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Responder == nil {
		cfg.Responder = cfg.NC
	}
	subj, err := cfg.NS.Heartbeat(cfg.Role, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	b := &Beat{cfg: cfg, subj: subj, log: cfg.Logger, info: mesh.NodeInfo{
		Node: cfg.NodeID, Role: cfg.Role, State: mesh.NodeStarting, PID: os.Getpid(), Host: host,
		Version: cfg.Version, Commit: cfg.Commit, Metrics: cfg.Metrics, StartedAt: time.Now().UTC(),
	}}
	b.key = b.info.Key()
	return b, nil
}

// SetState changes the state the node reports (starting, ready, degraded,
// draining); the change goes out at once.
func (b *Beat) SetState(state, detail string) {
	b.mu.Lock()
	changed := b.info.State != state || b.info.Detail != detail
	b.info.State, b.info.Detail = state, detail
	b.mu.Unlock()
	if changed {
		b.beat(context.Background())
	}
}

// SetServes names what the node does work for (its agents, its groups);
// the change goes out at once.
func (b *Beat) SetServes(names []string) {
	b.mu.Lock()
	b.info.Serves = append([]string(nil), names...)
	b.mu.Unlock()
	b.beat(context.Background())
}

// SetAgents gives the node's beats what it says of the agents it serves
// (their tools, their busy workers); agents is called at every beat. The
// change goes out at once.
func (b *Beat) SetAgents(agents func() []mesh.AgentInfo) {
	b.mu.Lock()
	b.agents = agents
	b.mu.Unlock()
	b.beat(context.Background())
}

// State is the state the node reports.
func (b *Beat) State() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.info.State
}

// Run beats until ctx ends; then it removes the node's key, so that a node
// that stops cleanly is not reported down.
func (b *Beat) Run(ctx context.Context) error {
	probe, err := b.cfg.NS.Probe(b.cfg.NodeID)
	if err != nil {
		return err
	}
	probeSub, err := b.cfg.Responder.Subscribe(probe, b.answerProbe)
	if err != nil {
		return fmt.Errorf("heartbeat: subscribe %s: %w", probe, err)
	}
	defer func() { _ = probeSub.Unsubscribe() }()
	restart, err := b.cfg.NS.Restart(b.cfg.NodeID)
	if err != nil {
		return err
	}
	restartSub, err := b.cfg.NC.Subscribe(restart, func(m *nats.Msg) {
		reason := string(m.Data)
		b.log.Error().Str("reason", reason).Msg("a monitor asked this node to restart")
		if b.cfg.OnRestart != nil {
			b.cfg.OnRestart(reason)
		}
	})
	if err != nil {
		return fmt.Errorf("heartbeat: subscribe %s: %w", restart, err)
	}
	defer func() { _ = restartSub.Unsubscribe() }()

	t := time.NewTicker(b.cfg.Interval)
	defer t.Stop()
	b.beat(ctx)
	for {
		select {
		case <-ctx.Done():
			// A last beat says "draining", so monitors take the silence that
			// follows for a clean stop; then the key goes.
			b.mu.Lock()
			b.info.State = mesh.NodeDraining
			b.mu.Unlock()
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			b.publish(dctx, true)
			_ = b.cfg.Nodes.Delete(dctx, b.key)
			cancel()
			return nil
		case <-t.C:
			b.beat(ctx)
		}
	}
}

// beat publishes one heartbeat and refreshes the node's key.
func (b *Beat) beat(ctx context.Context) { b.publish(ctx, false) }

// publish sends a heartbeat and writes the node's key with a TTL of three
// intervals, so that a node that stops beating leaves the bucket by itself;
// sync waits for the write.
func (b *Beat) publish(ctx context.Context, sync bool) {
	b.pub.Lock()
	defer b.pub.Unlock()
	b.mu.Lock()
	b.info.Seq++
	b.info.BeatAt = time.Now().UTC()
	b.info.Reconnects = b.cfg.NC.Stats().Reconnects
	if b.cfg.Breakers != nil {
		b.info.Breakers = b.cfg.Breakers()
	}
	if b.agents != nil {
		b.info.Agents = b.agents()
	}
	data, err := json.Marshal(b.info)
	b.mu.Unlock()
	if err != nil {
		return
	}
	if err := b.cfg.NC.Publish(b.subj, data); err != nil {
		b.log.Debug().Err(err).Msg("heartbeat publish")
	}
	ttl := max(3*b.cfg.Interval, time.Second)
	m := nats.NewMsg("$KV." + b.cfg.NS.Bucket(mesh.BucketNodes) + "." + b.key)
	m.Data = data
	if sync {
		_, err = b.cfg.JS.PublishMsg(ctx, m, jetstream.WithMsgTTL(ttl))
	} else {
		_, err = b.cfg.JS.PublishMsgAsync(m, jetstream.WithMsgTTL(ttl))
	}
	if err != nil {
		b.log.Debug().Err(err).Msg("heartbeat registry")
	}
}

// answerProbe replies only when the node's work loop is healthy within the
// probe's patience; silence is the answer of a zombie.
func (b *Beat) answerProbe(m *nats.Msg) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Interval*2)
		defer cancel()
		if b.cfg.Health != nil {
			if err := b.cfg.Health(ctx); err != nil {
				b.log.Warn().Err(err).Msg("liveness probe failed")
				return
			}
		}
		b.mu.Lock()
		data, _ := json.Marshal(b.info)
		b.mu.Unlock()
		_ = m.Respond(data)
	}()
}
