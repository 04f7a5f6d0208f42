package config

import (
	"path/filepath"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// Process is what a process of the mesh runs with, whichever agents it
// serves: the file's data directory, bridge address and sections of the
// mesh (mesh, http, nats, sessions, log, monitor, breakers, metrics,
// approvals, auth, limits, files, prices, budgets), and what the
// environment adds to them.
// It is the part of [Config] that is not the agents' [Definition].
type Process struct {
	Host     string   `yaml:"host"`
	Port     int      `yaml:"port"`
	DataDir  string   `yaml:"data_dir"`
	Mesh     Mesh     `yaml:"mesh"`
	HTTP     HTTP     `yaml:"http"`
	NATS     NATS     `yaml:"nats"`
	Sessions Sessions `yaml:"sessions"`
	Log      Log      `yaml:"log"`
	Monitor  Monitor  `yaml:"monitor"`
	Breakers Breakers `yaml:"breakers"`
	// Metrics is where each role process serves Prometheus metrics.
	Metrics Metrics `yaml:"metrics"`
	// Approvals configures the signed approvals: the approver's signing
	// key and the keys tool hosts trust.
	Approvals Approvals `yaml:"approvals"`
	// Auth is HTTP authentication at the bridge; absent means off (loopback
	// only, see [Config.CheckExposure]).
	Auth Auth `yaml:"auth"`
	// Limits are the bridge's rate and capacity limits, see [Limits].
	Limits Limits `yaml:"limits"`
	// Safety screens users' messages before they are queued (the bridge's).
	Safety Safety `yaml:"safety"`
	// Files limits the images and documents of users' messages, see [Files].
	Files Files `yaml:"files"`
	// Prices are what models' tokens cost, per million tokens, by model
	// name as llm.model takes it; cost is shown and budgeted only for the
	// models listed. See [Budgets].
	Prices map[string]modelspec.Price `yaml:"prices"`
	// Budgets stop a conversation's, or a principal's, next turn once its
	// tokens or cost are spent, see [Budgets].
	Budgets Budgets `yaml:"budgets"`

	// HTTPAddr is the bridge's effective listen address.
	HTTPAddr string `yaml:"-"`
	// Keys are the API keys found in the environment.
	Keys modelspec.Keys `yaml:"-"`
	// NodeID names this process in heartbeats and logs (MESH_NODE_ID; `mesh
	// up` gives each child a stable one). Empty means <role>-<host>-<pid>.
	NodeID string `yaml:"-"`
	// HealthAddr, when set (MESH_HEALTH_ADDR), is host:port where a role
	// process without HTTP of its own answers /health and /ready, for
	// container probes.
	HealthAddr string `yaml:"-"`
	// ProfileDir, when set, is where each role writes a CPU profile of its run.
	ProfileDir string `yaml:"-"`
	// BaseURLs are provider base URLs given by the environment, by provider.
	BaseURLs map[string]string `yaml:"-"`
	// Telemetry is what the standard OTEL_* variables say about traces.
	Telemetry Telemetry `yaml:"-"`
}

// Mesh tunes the roles.
type Mesh struct {
	// Prefix of subjects, streams and buckets. Empty means "mesh".
	Prefix string `yaml:"prefix"`
	// MaxToolIterations bounds model calls in one turn. Zero means 10.
	MaxToolIterations int `yaml:"max_tool_iterations"`
	// Workers is how many turns one agent process runs at once. Zero means 32.
	Workers int `yaml:"workers"`
	// AckWait is how long a work item may go without a sign of progress
	// before it is redelivered. Zero means 10s.
	AckWait Duration `yaml:"ack_wait"`
	// MaxDeliver bounds deliveries of one work item. Zero means 5.
	MaxDeliver int `yaml:"max_deliver"`
	// EventsMaxAge is how long events are kept. Zero means 7 days.
	EventsMaxAge Duration `yaml:"events_max_age"`
	// ToolWait is how long a tool call waits for a toolhost when none serves
	// the tool (one is restarting) before it fails. Zero means 2s.
	ToolWait Duration `yaml:"tool_wait"`
	// Replicas is how many processes of each role `mesh up` runs. A role
	// not named runs one.
	Replicas map[string]int `yaml:"replicas"`
	// RestartBackoff is the first pause before `mesh up` restarts a role that
	// died; it doubles while the role keeps dying quickly. Zero means 200ms.
	RestartBackoff Duration `yaml:"restart_backoff"`
}

// Approvals configures the signing of approval decisions. The approver
// signs every decision with its key; a tool host runs a tool that is not
// read-only only with a decision signed by a key it trusts.
type Approvals struct {
	// SigningKey is the file holding the approver's nkey seed. Empty means
	// <data_dir>/keys/approver.nk, which `mesh up` creates when missing
	// (mode 0600).
	SigningKey string `yaml:"signing_key"`
	// PublicKeys are the approver public keys tool hosts trust (several
	// during a key rotation). Empty means the keys the approvers publish in
	// the approvals bucket (_keys.<key>), which only the approver may write.
	PublicKeys []string `yaml:"public_keys"`
}

// Monitor configures heartbeats, failure detection and recovery.
type Monitor struct {
	// Interval between heartbeats of every node. Zero means 1s.
	Interval Duration `yaml:"interval"`
	// Missed heartbeats make a node down. Zero means 2.
	Missed int `yaml:"missed"`
	// ProbeEvery, ProbeTimeout, ProbeFailures: liveness probes that catch a
	// node which beats but no longer works. Zero means 2s, 3s, 2.
	ProbeEvery    Duration `yaml:"probe_every"`
	ProbeTimeout  Duration `yaml:"probe_timeout"`
	ProbeFailures int      `yaml:"probe_failures"`
	// Strategies by role: what the monitor does about a node it found down,
	// restart (default), replace or alert.
	Strategies map[string]string `yaml:"strategies"`
	// DegradeAfter nodes down within DegradeWindow enter degradation mode;
	// it ends when fewer than RecoverBelow are down for RecoverAfter. Zero
	// means 3, 30s, 2, 2m.
	DegradeAfter  int      `yaml:"degrade_after"`
	DegradeWindow Duration `yaml:"degrade_window"`
	RecoverBelow  int      `yaml:"recover_below"`
	RecoverAfter  Duration `yaml:"recover_after"`
	// StuckAfter: an agent whose workers are all busy and none made progress
	// for that long fails its liveness probes. Zero means 5m.
	StuckAfter Duration `yaml:"stuck_after"`
}

// Breakers tunes the circuit breakers an agent keeps: one per model
// endpoint, one per MCP server and one per A2A sub-agent, so that a peer
// that keeps failing is left alone for a while instead of slowing every
// turn.
type Breakers struct {
	// LLM: zero means 5 failed attempts and 30s; failures -1 disables it.
	LLM Breaker `yaml:"llm"`
	// Tools: zero means 5 failed calls and 15s.
	Tools Breaker `yaml:"tools"`
	// A2A: zero means 5 failed attempts and 30s.
	A2A Breaker `yaml:"a2a"`
}

// Breaker is one kind of circuit breaker: Failures failures in a row open
// it; open, it refuses calls for Cooldown, then lets one through to probe.
type Breaker struct {
	Failures int      `yaml:"failures"`
	Cooldown Duration `yaml:"cooldown"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Empty means info.
	Level string `yaml:"level"`
	// Format is json or console. Empty means console on a terminal, else
	// json. A file output is always JSON.
	Format string `yaml:"format"`
	// Outputs are where the lines go: stderr, stdout or a file path
	// (appended to, created 0600), each once. Empty means stderr.
	Outputs []string `yaml:"outputs"`
}

// Log outputs besides a file path.
const (
	LogStderr = "stderr"
	LogStdout = "stdout"
)

// DataPath is a path inside the data directory.
func (c *Process) DataPath(elem ...string) string {
	return filepath.Join(append([]string{c.DataDir}, elem...)...)
}

// EmbeddedNATS reports whether the mesh runs its own NATS server.
func (c *Process) EmbeddedNATS() bool { return c.NATS.URL == "" }

// CredsDir is where the mesh keeps its NATS identities: nats.creds_dir,
// else <data_dir>/creds.
func (c *Process) CredsDir() string {
	if c.NATS.CredsDir != "" {
		return c.NATS.CredsDir
	}
	return c.DataPath("creds")
}
