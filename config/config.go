// Package config loads agent.yaml and the environment into a validated
// [Config]. It is the only package that reads files and environment
// variables; roles receive what they need from it.
//
// The file describes one agent (name, description, prompt, llm.model, host,
// port, data_dir, mcp, mcp_servers, a2a, agent) plus the mesh's own
// sections (mesh, http, nats, sessions, groups, approvals, auth:
// HTTP authentication, see [Auth]; limits, see [Limits]). Environment
// variables override the file:
//
//	MESH_CONFIG      path of the file (default config/agent.yaml)
//	MESH_DATA_DIR    data directory (default ./data)
//	MESH_HTTP_ADDR   bridge listen address (default 127.0.0.1:8080)
//	MESH_NATS_ADDR   embedded NATS listen address (default 127.0.0.1:4222)
//	NATS_URL         use this NATS server instead of starting one
//	NATS_CREDS       a JWT creds file to connect with (nats.creds)
//	NATS_NKEY        an nkey seed file to connect with (nats.nkey)
//	NATS_RESPONDER_CREDS, NATS_RESPONDER_NKEY: the identity a role answers
//	                 requests with (nats.responder_creds, nats.responder_nkey)
//	MESH_NATS_AUTH   nkeys (default) or none: identities on the embedded server (nats.auth)
//	MESH_NATS_SERVER_NAME, MESH_NATS_CLUSTER_NAME, MESH_NATS_CLUSTER_LISTEN,
//	MESH_NATS_ROUTES, MESH_NATS_LEAF_LISTEN, MESH_NATS_LEAF_REMOTES,
//	MESH_NATS_REPLICAS, MESH_NATS_CREDS_DIR, MESH_NATS_MONITOR_ADDR: the nats
//	section's cluster, leaf node, replication and credentials settings (see [NATS])
//	MESH_HEALTH_ADDR a role's /health and /ready for container probes
//	MESH_PREFIX      subject prefix (default mesh)
//	MESH_LOG_LEVEL   debug, info (default), warn or error
//	MESH_LOG_FORMAT  json, or console (the default on a terminal)
//	MESH_CPU_PROFILE a directory: every role writes a CPU profile there as it runs, and its heap as it ends
//	MESH_APPROVER_KEY          approvals.signing_key: the approver's nkey seed file
//	MESH_APPROVER_PUBLIC_KEYS  approvals.public_keys, comma-separated
//	MESH_METRICS_ADDR          metrics.listen: where a role serves Prometheus /metrics
//	OTEL_EXPORTER_OTLP_ENDPOINT (and _TRACES_ENDPOINT, _PROTOCOL): traces on, see [Telemetry]
//
// API keys come only from the environment (GEMINI_API_KEY, ANTHROPIC_API_KEY,
// OPENAI_API_KEY) and are held as [Secret] values that never print.
//
// A process holds only the secrets of the parts it uses: [Config.Env] is
// the environment `mesh up` gives a role (the bridge the auth section's
// variables, the agents their models' keys, the tool host its MCP
// servers'), [ProgramEnv] what an MCP server gets besides its env section.
// Load does not fail on a ${NAME} that a part names and this process
// lacks; the role that uses the part checks it ([Config.CheckAuth],
// [Config.CheckTools], [Config.CheckModelKeys]).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// Environment variables read by [Load].
const (
	EnvConfig    = "MESH_CONFIG"
	EnvDataDir   = "MESH_DATA_DIR"
	EnvHTTPAddr  = "MESH_HTTP_ADDR"
	EnvNATSAddr  = "MESH_NATS_ADDR"
	EnvNATSURL   = "NATS_URL"
	EnvNATSCreds = "NATS_CREDS"
	EnvNATSNKey  = "NATS_NKEY"
	EnvNATSAuth  = "MESH_NATS_AUTH"
	EnvPrefix    = "MESH_PREFIX"
	EnvLogLevel  = "MESH_LOG_LEVEL"
	EnvLogFmt    = "MESH_LOG_FORMAT"
	EnvProfile   = "MESH_CPU_PROFILE"
	EnvNodeID    = "MESH_NODE_ID"
	// EnvMetricsAddr sets metrics.listen.
	EnvMetricsAddr = "MESH_METRICS_ADDR"
	// EnvHealthAddr is where a role answers /health and /ready ([Config.HealthAddr]).
	EnvHealthAddr = "MESH_HEALTH_ADDR"
	// EnvApproverKey and EnvApproverPublicKeys set approvals.signing_key
	// and approvals.public_keys (comma-separated).
	EnvApproverKey        = "MESH_APPROVER_KEY"
	EnvApproverPublicKeys = "MESH_APPROVER_PUBLIC_KEYS"
)

// Defaults.
const (
	DefaultConfigPath        = "config/agent.yaml"
	DefaultDataDir           = "./data"
	DefaultHTTPAddr          = "127.0.0.1:8080"
	DefaultNATSAddr          = "127.0.0.1:4222"
	DefaultMaxToolIterations = 10
	DefaultMaxBodyBytes      = 1 << 20
	DefaultSessionMaxBytes   = 4 << 20
	DefaultWaitTimeout       = 30 * time.Second
	DefaultLLMTimeout        = 60 * time.Second
	DefaultAckWait           = 10 * time.Second
	DefaultMaxDeliver        = 5
	DefaultWorkers           = 32
	DefaultMaxIterations     = 10
	DefaultToolWait          = 2 * time.Second
)

// Config is the whole configuration of a mesh.
type Config struct {
	// Name names the agent; its turns go to mesh.work.agent.<Name>.<conversation>.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Prompt is the system prompt, the first message of every conversation.
	Prompt  string `yaml:"prompt"`
	Host    string `yaml:"host"`
	Port    int    `yaml:"port"`
	DataDir string `yaml:"data_dir"`
	LLM     LLM    `yaml:"llm"`
	// MCP is the single MCP server of the original format; it is served as
	// the server named "default" unless mcp_servers also names one so.
	MCP        *MCPServer  `yaml:"mcp"`
	MCPServers []MCPServer `yaml:"mcp_servers"`
	A2A        []A2AAgent  `yaml:"a2a"`
	// StateTool offers the built-in set_state tool to the agent built from
	// the top-level fields (an agent: tree sets it per llm node).
	StateTool bool `yaml:"state_tool"`
	// Agent is the agent tree; when absent one llm node is built from the
	// top-level fields.
	Agent    *Node    `yaml:"agent"`
	Groups   []Group  `yaml:"groups"`
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
	// Files limits the images and documents of users' messages, see [Files].
	Files Files `yaml:"files"`

	// Path is the file the configuration was read from.
	Path string `yaml:"-"`
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

	// unset names the variables named in the file (${NAME}) that are
	// empty in this process, by field ("auth.tokens[0].token",
	// "mcp_servers[1].url"): only the role that uses the field refuses them
	// ([Config.CheckAuth], [Config.CheckTools]).
	unset map[string]string
	// authVars and toolVars are the variables that the auth section and
	// the MCP servers name: the secrets of the bridge and of the tool host
	// ([Config.Env]).
	authVars, toolVars map[string]bool
}

// LLM selects the model.
type LLM struct {
	// Model is required: "offline", a model name (gemini-…, claude-…, gpt-…)
	// or provider:model.
	Model string `yaml:"model"`
	// BaseURL overrides the provider's API URL (gateways, proxies, Ollama).
	BaseURL string `yaml:"base_url"`
	// Timeout bounds one model call. Zero means 60s.
	Timeout Duration `yaml:"timeout"`
	// MaxRetries bounds retries of a failed call. Zero means 3; -1 disables.
	MaxRetries int `yaml:"max_retries"`
	// Sampling: max_tokens, temperature and top_p of every call (a tree
	// node's own settings replace them for its calls).
	modelspec.Sampling `yaml:",inline"`
}

// MCPServer is a tool server: a command run over stdio, or a URL spoken to
// over streamable HTTP.
type MCPServer struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	// Headers are sent with every HTTP request to URL.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one tool call. Zero means 30s.
	Timeout Duration `yaml:"timeout"`
	// DedupeCallIDs says the server deduplicates tools/call requests by the
	// "agentmesh/call_id" key of their _meta (the sample server does), so a
	// call interrupted by a crash may safely be sent again with the same id.
	DedupeCallIDs bool `yaml:"dedupe_call_ids"`
}

// A2AAgent is a remote agent reached over A2A, offered to the model as a tool.
type A2AAgent struct {
	Name        string `yaml:"name"`
	URL         string `yaml:"url"`
	Description string `yaml:"description"`
	// Destructive makes a call to the agent need approval, as a destructive
	// tool's does.
	Destructive bool `yaml:"destructive"`
	// DestructiveHint is the original spelling of Destructive.
	DestructiveHint bool `yaml:"destructiveHint"`
}

// IsDestructive reports whether calls need approval.
func (a A2AAgent) IsDestructive() bool { return a.Destructive || a.DestructiveHint }

// SubAgents lists the A2A agents the configuration delegates to: the
// top-level a2a list, the a2a lists of the agent tree's llm nodes and its
// a2a nodes, each name once.
func (c *Config) SubAgents() []A2AAgent {
	var out []A2AAgent
	seen := map[string]bool{}
	add := func(a A2AAgent) {
		if a.Name == "" || seen[a.Name] {
			return
		}
		seen[a.Name] = true
		out = append(out, a)
	}
	for _, a := range c.A2A {
		add(a)
	}
	var walk func(n *Node)
	walk = func(n *Node) {
		if n == nil {
			return
		}
		for _, a := range n.A2A {
			add(a)
		}
		if n.Type == NodeA2A {
			add(A2AAgent{Name: n.Name, URL: n.URL, Description: n.Description, Destructive: n.Destructive || n.DestructiveHint})
		}
		for i := range n.Agents {
			walk(&n.Agents[i])
		}
	}
	walk(c.Agent)
	return out
}

// Node types of the agent tree.
const (
	NodeLLM        = "llm"
	NodeSequential = "sequential"
	NodeParallel   = "parallel"
	NodeLoop       = "loop"
	NodeA2A        = "a2a"
)

// Node is a node of the agent tree: an llm step, or a sequential, parallel,
// loop or a2a node.
type Node struct {
	Name        string `yaml:"name"`
	Type        string `yaml:"type"`
	Description string `yaml:"description"`
	// Model overrides the agent's llm.model for an llm node.
	Model  string `yaml:"model"`
	Prompt string `yaml:"prompt"`
	// Sampling: an llm node's max_tokens, temperature and top_p, over the
	// agent's llm section.
	modelspec.Sampling `yaml:",inline"`
	// OutputKey stores the node's reply in session state.
	OutputKey   string `yaml:"output_key"`
	CanExitLoop bool   `yaml:"can_exit_loop"`
	// MaxIterations bounds a loop. Zero means 10.
	MaxIterations int `yaml:"max_iterations"`
	// AllowDestructive runs destructive tools without asking for approval.
	AllowDestructive bool `yaml:"allow_destructive"`
	// StateTool offers an llm node the built-in set_state tool, which
	// changes the conversation's state (docs/conversation-state.md).
	StateTool bool `yaml:"state_tool"`
	// Tools limits the tools an llm node is offered to these names: absent
	// means every tool, an empty list none (a node that only writes).
	Tools *[]string `yaml:"tools"`
	// Ref makes this child the node of that name defined elsewhere in the
	// tree (its whole subtree), instead of defining one here.
	Ref string `yaml:"ref"`
	// Agents are the children of sequential, parallel and loop nodes.
	Agents []Node `yaml:"agents"`
	// URL, Destructive: an a2a node's remote agent.
	URL             string `yaml:"url"`
	Destructive     bool   `yaml:"destructive"`
	DestructiveHint bool   `yaml:"destructiveHint"`
	// A2A are remote agents offered to an llm node as tools.
	A2A []A2AAgent `yaml:"a2a"`
}

// Group is a group chat: several agents in one conversation, the next
// speaker chosen by a strategy after every turn.
type Group struct {
	Name         string        `yaml:"name"`
	Description  string        `yaml:"description"`
	Participants []Participant `yaml:"participants"`
	// Strategy picks the next speaker: round_robin (the default), priority,
	// router or llm.
	Strategy string `yaml:"strategy"`
	// Model plays the selector of the llm strategy; empty means llm.model.
	Model string `yaml:"model"`
	// SelectorPrompt replaces the llm strategy's instructions; the list of
	// participants and the recent history follow it.
	SelectorPrompt string `yaml:"selector_prompt"`
	// MaxTurns bounds the member turns that answer one user message. Zero
	// means 10.
	MaxTurns int `yaml:"max_turns"`
	// MaxConsecutive bounds the turns one member takes in a row. Zero means 1.
	MaxConsecutive int `yaml:"max_consecutive"`
	// MinInterval is the least time between two turns of one member.
	MinInterval Duration `yaml:"min_interval"`
	// TerminationPhrase in a member's answer ends the chat. Empty means
	// TERMINATE.
	TerminationPhrase string `yaml:"termination_phrase"`
	// AllowedTransitions lists, by member, the members that may speak after
	// it; a member not listed may be followed by anyone.
	AllowedTransitions map[string][]string `yaml:"allowed_transitions"`
	// Default is the router strategy's member when no keyword or pattern
	// matches.
	Default string `yaml:"default"`
}

// Group defaults.
const (
	StrategyRoundRobin = "round_robin"
	StrategyPriority   = "priority"
	StrategyRouter     = "router"
	StrategyLLM        = "llm"

	DefaultGroupMaxTurns       = 10
	DefaultGroupMaxConsecutive = 1
	DefaultTerminationPhrase   = "TERMINATE"
)

// Participant is a member of a group: an agent, by name. With a prompt or a
// model it is defined here (an agent of this mesh with the top-level
// tools); without, it is the top-level agent when it has its name, or an
// agent that another process serves (its own agent.yaml).
type Participant struct {
	Agent       string `yaml:"agent"`
	Description string `yaml:"description"`
	// Priority orders members for the priority and router strategies:
	// higher first.
	Priority int `yaml:"priority"`
	// Keywords (words, case-insensitive) and Patterns (regular
	// expressions) route a message to the member.
	Keywords []string `yaml:"keywords"`
	Patterns []string `yaml:"patterns"`
	Prompt   string   `yaml:"prompt"`
	Model    string   `yaml:"model"`
	// Sampling: the member's max_tokens, temperature and top_p, over the
	// llm section, when it is defined here.
	modelspec.Sampling `yaml:",inline"`
}

// Defined reports whether the participant is an agent defined by the group.
func (p Participant) Defined() bool { return p.Prompt != "" || p.Model != "" }

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

// Sessions tunes the sessions bucket.
type Sessions struct {
	// History is how many revisions of each conversation are kept. Zero means 5.
	History uint8 `yaml:"history"`
	// TTL expires conversations untouched for that long (every save
	// renews it). Zero means 7 days; "never" (or a negative duration)
	// means never.
	TTL Duration `yaml:"ttl"`
	// MaxBytes bounds the messages a read of a conversation loads: the
	// history sent to the model (the newest messages whose JSON fits, 64
	// at most) and a page of GET /conversations/{id}. At least
	// http.max_body_bytes (one message always fits), at most 64 MiB. Zero
	// means 4 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// ExpiredKept is how long an expired conversation still answers 410
	// expired (the bucket keeps the key's limit marker that long) before
	// it is not found. At most the TTL (the marker ages out with the
	// bucket's max age). Zero means 24h, or the TTL when that is shorter.
	ExpiredKept Duration `yaml:"expired_kept"`
}

// DefaultSessionTTL and DefaultExpiredKept are the defaults of sessions.ttl
// and sessions.expired_kept.
const (
	DefaultSessionTTL  = 7 * 24 * time.Hour
	DefaultExpiredKept = 24 * time.Hour
)

// Never is the duration "never" (sessions.ttl: never).
const Never Duration = -1

// ExpireAfter is sessions.ttl: zero when conversations never expire.
func (s Sessions) ExpireAfter() time.Duration {
	if s.TTL < 0 {
		return 0
	}
	return s.TTL.Or(DefaultSessionTTL)
}

// KeptExpired is sessions.expired_kept, its default when zero. The default
// is cut to the TTL: the limit marker that says a key expired is itself a
// message of the bucket, which ages out with the bucket's max age.
func (s Sessions) KeptExpired() time.Duration {
	if s.ExpiredKept == 0 {
		if ttl := s.ExpireAfter(); ttl > 0 && ttl < DefaultExpiredKept {
			return ttl
		}
	}
	return s.ExpiredKept.Or(DefaultExpiredKept)
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
	// Format is json or console. Empty means console on a terminal, else json.
	Format string `yaml:"format"`
}

// Duration is a time.Duration written as "30s" or "1m30s" in YAML.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string, a number of seconds, or
// "never" ([Never]).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a duration such as 30s", n.Line)
	}
	if n.Value == "never" {
		*d = Never
		return nil
	}
	if secs, err := strconv.ParseFloat(n.Value, 64); err == nil {
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 30s or 2m", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

// Error is a configuration error naming the file, the field and what is expected.
type Error struct {
	File  string
	Field string
	Want  string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("config %s: %s", e.File, e.Want)
	}
	return fmt.Sprintf("config %s: %s: %s", e.File, e.Field, e.Want)
}

// FromEnvironment loads the file named by MESH_CONFIG (or the default path)
// with the process environment.
func FromEnvironment() (*Config, error) {
	path := os.Getenv(EnvConfig)
	if path == "" {
		path = DefaultConfigPath
	}
	return Load(path, os.Getenv)
}

// Load reads path, applies the environment given by getenv and validates the
// result.
func Load(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Want: fmt.Sprintf("cannot read it (%v); set %s to the path of agent.yaml", errors.Unwrap(err), EnvConfig)}
	}
	return Parse(path, data, getenv)
}

// Parse is [Load] of data already read; path names it in errors.
func Parse(path string, data []byte, getenv func(string) string) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, &Error{File: path, Want: yamlErrorText(err)}
	}
	c.Path = path
	c.unset = map[string]string{}
	if err := c.applyEnv(getenv); err != nil {
		return nil, err
	}
	c.applyDefaults()
	c.expandTools(getenv)
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func yamlErrorText(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return "invalid YAML: " + strings.Join(te.Errors, "; ")
	}
	return "invalid YAML: " + err.Error()
}

func (c *Config) applyEnv(getenv func(string) string) error {
	if v := getenv(EnvDataDir); v != "" {
		c.DataDir = v
	}
	if v := getenv(EnvNATSURL); v != "" {
		c.NATS.URL = v
	}
	if v := getenv(EnvNATSAddr); v != "" {
		c.NATS.Listen = v
	}
	if v := getenv(EnvNATSCreds); v != "" {
		c.NATS.Creds, c.NATS.NKey = v, ""
	}
	if v := getenv(EnvNATSNKey); v != "" {
		c.NATS.NKey, c.NATS.Creds = v, ""
	}
	if v := getenv(EnvNATSAuth); v != "" {
		c.NATS.Auth = v
	}
	if err := c.applyNATSEnv(getenv); err != nil {
		return err
	}
	if v := getenv(EnvPrefix); v != "" {
		c.Mesh.Prefix = v
	}
	if v := getenv(EnvLogLevel); v != "" {
		c.Log.Level = v
	}
	if v := getenv(EnvLogFmt); v != "" {
		c.Log.Format = v
	}
	c.ProfileDir = getenv(EnvProfile)
	if v := getenv(EnvMetricsAddr); v != "" {
		c.Metrics.Listen = v
	}
	c.Telemetry = telemetryFromEnv(getenv)
	if v := getenv(EnvApproverKey); v != "" {
		c.Approvals.SigningKey = v
	}
	if v := getenv(EnvApproverPublicKeys); v != "" {
		c.Approvals.PublicKeys = nil
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				c.Approvals.PublicKeys = append(c.Approvals.PublicKeys, k)
			}
		}
	}
	c.NodeID = getenv(EnvNodeID)
	c.HealthAddr = getenv(EnvHealthAddr)
	switch v := getenv(EnvHTTPAddr); {
	case v != "":
		c.HTTPAddr = v
	case c.Host != "" || c.Port != 0:
		host, port := c.Host, c.Port
		if host == "" {
			host = "127.0.0.1"
		}
		if port == 0 {
			port = 8080
		}
		c.HTTPAddr = net.JoinHostPort(host, strconv.Itoa(port))
	default:
		c.HTTPAddr = DefaultHTTPAddr
	}
	c.applyAuthEnv(getenv)
	c.Keys = keysFromEnv(getenv)
	c.BaseURLs = map[string]string{}
	for _, provider := range []string{modelspec.ProviderGoogle, modelspec.ProviderAnthropic, modelspec.ProviderOpenAI, modelspec.ProviderOllama} {
		if v := getenv(modelspec.BaseURLEnv(provider)); v != "" {
			c.BaseURLs[provider] = v
		}
	}
	return nil
}

func (c *Config) applyDefaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Approvals.SigningKey == "" {
		c.Approvals.SigningKey = c.DataPath("keys", "approver.nk")
	}
	if c.Prompt == "" {
		c.Prompt = DefaultPrompt
	}
	if c.NATS.Listen == "" {
		c.NATS.Listen = DefaultNATSAddr
	}
	if c.NATS.Auth == "" {
		c.NATS.Auth = NATSAuthNKeys
	}
	if c.HTTP.MaxBodyBytes == 0 {
		c.HTTP.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.HTTP.WaitTimeout == 0 {
		c.HTTP.WaitTimeout = Duration(DefaultWaitTimeout)
	}
	if c.Sessions.MaxBytes == 0 {
		c.Sessions.MaxBytes = max(DefaultSessionMaxBytes, c.HTTP.MaxBodyBytes)
	}
	c.HTTP.applyDefaults()
	c.Files.applyDefaults(c.HTTP.MaxBodyBytes)
	if c.LLM.Timeout == 0 {
		c.LLM.Timeout = Duration(DefaultLLMTimeout)
	}
	if c.Mesh.MaxToolIterations == 0 {
		c.Mesh.MaxToolIterations = DefaultMaxToolIterations
	}
	if c.Mesh.Workers == 0 {
		c.Mesh.Workers = DefaultWorkers
	}
	if c.Mesh.AckWait == 0 {
		c.Mesh.AckWait = Duration(DefaultAckWait)
	}
	if c.Mesh.MaxDeliver == 0 {
		c.Mesh.MaxDeliver = DefaultMaxDeliver
	}
	c.applyAuthDefaults()
	if c.MCP != nil {
		s := *c.MCP
		if s.Name == "" {
			s.Name = "default"
		}
		c.MCPServers = append([]MCPServer{s}, c.MCPServers...)
		c.MCP = nil
	}
}

// DataPath is a path inside the data directory.
func (c *Config) DataPath(elem ...string) string {
	return filepath.Join(append([]string{c.DataDir}, elem...)...)
}

// EmbeddedNATS reports whether the mesh runs its own NATS server.
func (c *Config) EmbeddedNATS() bool { return c.NATS.URL == "" }

// CredsDir is where the mesh keeps its NATS identities: nats.creds_dir,
// else <data_dir>/creds.
func (c *Config) CredsDir() string {
	if c.NATS.CredsDir != "" {
		return c.NATS.CredsDir
	}
	return c.DataPath("creds")
}

// DefaultPrompt is the system prompt of an agent whose file sets none.
const DefaultPrompt = "You are a helpful agent. Use the tools you have to do what the user asks."

// Tree returns the agent tree: the agent: section, or one llm node built from
// the top-level fields when there is none, so that an agent without a tree
// runs as a tree of one node.
func (c *Config) Tree() *Node {
	if c.Agent != nil {
		return c.Agent
	}
	return &Node{Name: c.Name, Type: NodeLLM, Description: c.Description, Prompt: c.Prompt, Model: c.LLM.Model, A2A: c.A2A, StateTool: c.StateTool}
}

// Group finds a group by name.
func (c *Config) Group(name string) *Group {
	for i := range c.Groups {
		if c.Groups[i].Name == name {
			return &c.Groups[i]
		}
	}
	return nil
}

// Agents are the agents this configuration defines: the top-level one,
// then every group participant defined with a prompt or a model, each as a
// configuration of its own (a single llm node with the top-level tools and
// settings, and the participant's prompt and model).
func (c *Config) Agents() []*Config {
	out := []*Config{c}
	seen := map[string]bool{c.Name: true}
	for _, g := range c.Groups {
		for _, p := range g.Participants {
			if !p.Defined() || seen[p.Agent] {
				continue
			}
			seen[p.Agent] = true
			a := *c
			a.Name, a.Description, a.Agent, a.A2A, a.Groups = p.Agent, p.Description, nil, nil, nil
			if p.Prompt != "" {
				a.Prompt = p.Prompt
			}
			if p.Model != "" {
				a.LLM.Model = p.Model
			}
			a.LLM.Sampling = a.LLM.Sampling.Over(p.Sampling)
			out = append(out, &a)
		}
	}
	return out
}

// AgentNamed is the agent of Agents named name, or nil.
func (c *Config) AgentNamed(name string) *Config {
	for _, a := range c.Agents() {
		if a.Name == name {
			return a
		}
	}
	return nil
}
