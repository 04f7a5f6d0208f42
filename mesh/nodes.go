package mesh

import (
	"time"
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
	// Commit is the source the process was built from (git describe):
	// during a rolling upgrade, which build each process runs.
	Commit string `json:"commit,omitempty"`
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
	// Capabilities are what its configuration says it can do.
	Capabilities []string `json:"capabilities,omitempty"`
	// Models are the models its llm steps call (provider:model).
	Models []string `json:"models,omitempty"`
	// Workers is how many turns the process runs at once for the agent,
	// Busy how many it is running; Waiting how many of those wait for
	// their model's provider (its concurrency bound, its rate limits).
	Workers int `json:"workers"`
	Busy    int `json:"busy"`
	Waiting int `json:"waiting,omitempty"`
}

// Key is the node's key in the nodes bucket.
func (n NodeInfo) Key() string { return n.Role + "." + n.Node }

const (
	// SystemSession is the pseudo-session of events about the mesh itself
	// (node_down, node_up, degradation): mesh.evt._mesh.CUSTOM.
	SystemSession = "_mesh"

	// Names of the CUSTOM events the monitor publishes on SystemSession.
	CustomNodeDown = "node_down"
	// CustomSessionSaveFailed: an agent failed to save a run's outcome
	// three times in a row (it keeps trying); value is {conversation,
	// runId, agent, node, failures, error}.
	CustomSessionSaveFailed = "session_save_failed"
	CustomNodeUp            = "node_up"
	CustomDegradedEnter     = "degradation_entered"
	CustomDegradedLeave     = "degradation_left"
	CustomRecoveryApplied   = "recovery_applied"

	// DegradedKey is the key of the nodes bucket that holds the degradation
	// state while the mesh is degraded (too many nodes went down: new
	// conversations are refused until they recover).
	DegradedKey = "_mesh.degraded"
)

// Degradation is the value under DegradedKey.
type Degradation struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
	Failed []string  `json:"failed"`
}
