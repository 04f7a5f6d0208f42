package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Node states a process reports in its heartbeats.
const (
	NodeStarting = "starting"
	NodeReady    = "ready"
	NodeDegraded = "degraded"
	NodeDraining = "draining"
	// NodeDown is written by a monitor for a node it found dead.
	NodeDown = "down"
)

// NodeInfo is what a node says of itself in every heartbeat, and what the
// nodes bucket holds under <role>.<node id>.
type NodeInfo struct {
	Node    string `json:"node"`
	Role    string `json:"role"`
	State   string `json:"state"`
	PID     int    `json:"pid,omitempty"`
	Host    string `json:"host,omitempty"`
	Version string `json:"version,omitempty"`
	// Detail says why a node is degraded, or why a monitor marked it down.
	Detail string `json:"detail,omitempty"`
	// Breakers are the states of the circuit breakers the node holds, by
	// name (an MCP server, a sub-agent, a model endpoint): closed, open or
	// half-open.
	Breakers map[string]string `json:"breakers,omitempty"`
	// Serves names what the node does work for: an agent process's agents,
	// a group process's groups.
	Serves []string `json:"serves,omitempty"`
	// Agents is what an agent process says of the agents it serves: the
	// agent directory (GET /agents) is built from these.
	Agents []AgentInfo `json:"agents,omitempty"`
	// Metrics is the address the node serves Prometheus /metrics on.
	Metrics string `json:"metrics,omitempty"`
	// Reconnects counts the times the node's NATS connection moved to
	// another server: a reply it sends to a request received before a move
	// is refused by the new server, so a caller waiting on it asks again.
	Reconnects uint64    `json:"reconnects,omitempty"`
	Seq        uint64    `json:"seq"`
	StartedAt  time.Time `json:"started_at"`
	BeatAt     time.Time `json:"beat_at"`
	// DownAt is when a monitor marked the node down.
	DownAt time.Time `json:"down_at,omitzero"`
}

// AgentInfo is an agent as the process serving it describes it in every
// heartbeat.
type AgentInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Tools are the function names the agent's models are offered (the
	// catalog as it stands, cut to the steps' tools lists); SubAgents the
	// A2A agents it delegates to.
	Tools     []string `json:"tools,omitempty"`
	SubAgents []string `json:"sub_agents,omitempty"`
	// Workers is how many turns the process runs at once for the agent,
	// Busy how many it is running.
	Workers int `json:"workers"`
	Busy    int `json:"busy"`
}

// Key is the node's key in the nodes bucket.
func (n NodeInfo) Key() string { return n.Role + "." + n.Node }

// SystemSession is the pseudo-session of events about the mesh itself
// (node_down, node_up, degradation): mesh.evt._mesh.CUSTOM.
const SystemSession = "_mesh"

// Names of the CUSTOM events the monitor publishes on SystemSession.
const (
	CustomNodeDown = "node_down"
	// CustomSessionSaveFailed: an agent failed to save a run's outcome
	// three times in a row (it keeps trying); value is {conversation,
	// runId, agent, node, failures, error}.
	CustomSessionSaveFailed = "session_save_failed"
	CustomNodeUp            = "node_up"
	CustomDegradedEnter     = "degradation_entered"
	CustomDegradedLeave     = "degradation_left"
	CustomRecoveryApplied   = "recovery_applied"
)

// DegradedKey is the key of the nodes bucket that holds the degradation
// state while the mesh is degraded (too many nodes went down: new
// conversations are refused until they recover).
const DegradedKey = "_mesh.degraded"

// Degradation is the value under DegradedKey.
type Degradation struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
	Failed []string  `json:"failed"`
}

// SubjectRestart asks a node to exit so that its supervisor starts it again:
// mesh.node.<node id>.restart.
const SubjectRestart = "%s.node.%s.restart"

// Restart returns mesh.node.<node id>.restart.
func (n Namespace) Restart(node string) (string, error) {
	return n.build(SubjectRestart, node)
}

// Nodes reads the nodes bucket.
type Nodes struct{ kv jetstream.KeyValue }

// NewNodes returns a reader of the nodes bucket.
func NewNodes(kv jetstream.KeyValue) *Nodes { return &Nodes{kv: kv} }

// List returns every node the bucket knows, live or marked down.
func (n *Nodes) List(ctx context.Context) ([]NodeInfo, error) {
	keys, err := n.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []NodeInfo
	for key := range keys.Keys() {
		if strings.HasPrefix(key, "_mesh.") {
			continue
		}
		e, err := n.kv.Get(ctx, key)
		if err != nil {
			continue
		}
		var info NodeInfo
		if json.Unmarshal(e.Value(), &info) == nil {
			out = append(out, info)
		}
	}
	return out, nil
}

// Degraded returns the degradation in force, or nil.
func (n *Nodes) Degraded(ctx context.Context) (*Degradation, error) {
	e, err := n.kv.Get(ctx, DegradedKey)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	var d Degradation
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}
