// Package config loads agent.yaml and the environment into a validated
// [Config]. It is the only package that reads files and environment
// variables; roles receive what they need from it.
//
// The file describes the agents, the [Definition] part of a Config (name,
// description, prompt, llm, mcp, mcp_servers, a2a, state_tool, agent,
// groups), and how the mesh's processes run, its [Process] part (host,
// port, data_dir and the sections mesh, http, nats, sessions, log,
// monitor, breakers, metrics, approvals, auth: HTTP authentication, see
// [Auth]; limits, see [Limits]; files; prices and budgets, see [Budgets]).
// Environment variables override the file:
//
//	MESH_CONFIG      path of the file (default config/agent.yaml)
//	MESH_DATA_DIR    data directory (default ./data)
//	MESH_HTTP_ADDR   bridge listen address (default 127.0.0.1:8080)
//	MESH_HTTP_HOSTS  the host names the bridge answers, comma-separated (http.hosts)
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
//	OTEL_METRICS_EXPORTER=otlp (and _METRICS_ENDPOINT, _PROTOCOL): metrics pushed too
//
// API keys come only from the environment (GEMINI_API_KEY, ANTHROPIC_API_KEY,
// OPENAI_API_KEY) and are held as modelspec.Key values that never print,
// as the auth section's secrets are [Secret] ones. The model types (a
// model name's provider, sampling, the keys) are mesh/llm/modelspec's:
// config fills them, the model clients take them.
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
	EnvHTTPHosts = "MESH_HTTP_HOSTS"
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
	// DefaultModel is llm.model when the file sets none. It needs
	// GEMINI_API_KEY; a file meant to run without a key says model: offline.
	DefaultModel         = "gemini-2.5-flash"
	DefaultAckWait       = 10 * time.Second
	DefaultMaxDeliver    = 5
	DefaultWorkers       = 4096
	DefaultMaxIterations = 10
	DefaultToolWait      = 2 * time.Second
)

// Config is the whole configuration of a mesh: agent.yaml and the
// environment, validated. It has two parts with one job each, embedded so
// that the file stays one flat document and a field reads cfg.Name or
// cfg.NATS whichever part holds it:
//
//   - [Definition]: what the agents are (name, description, prompt, model,
//     tools, sub-agents, tree, group chats);
//   - [Process]: what a process of the mesh runs with, whichever agents it
//     serves (data directory, NATS, HTTP, auth, sessions, logs, monitor,
//     breakers, metrics, limits, files, approvals, the mesh's tuning), and
//     what the environment adds (node id, API keys, base URLs, traces).
//
// A role takes the part it uses where it uses one: the approver checks
// policies against the agents' Definition; the agent role and the bridge,
// which use both, take the whole Config.
type Config struct {
	Definition `yaml:",inline"`
	Process    `yaml:",inline"`

	// Path is the file the configuration was read from.
	Path string `yaml:"-"`

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
	if err := c.applySettingEnv(getenv); err != nil {
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
	if v := getenv(EnvHTTPHosts); v != "" {
		// A deployment's Ingress host, set where the manifests set the
		// rest of the bridge's environment.
		c.HTTP.Hosts = nil
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				c.HTTP.Hosts = append(c.HTTP.Hosts, h)
			}
		}
	}
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
	if m := c.Safety.Moderation; m != nil {
		m.Key = Secret(getenv(m.KeyVariable()))
	}
	c.Keys = keysFromEnv(getenv)
	c.BaseURLs = map[string]string{}
	for _, provider := range []string{modelspec.ProviderGoogle, modelspec.ProviderAnthropic, modelspec.ProviderOpenAI, modelspec.ProviderOllama, modelspec.ProviderCohere} {
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
	c.Safety.applyDefaults()
	c.Files.applyDefaults(c.HTTP.MaxBodyBytes)
	if c.LLM.Model == "" {
		c.LLM.Model = DefaultModel
	}
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
