package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// The environment of the processes the mesh starts. A process gets what a
// program needs to run and the variables of the parts of the configuration
// it uses, nothing else of its parent's environment: a role started by
// `mesh up` ([Config.Env]) and an MCP server started as a command
// ([ProgramEnv] and the server's env section).

// programEnv are the variables any program may need to run, none a secret:
// the login's (HOME, LOGNAME, PATH, SHELL, TERM, USER: what the MCP SDKs'
// stdio clients give a server by default), the locale (and LC_*), the time
// zone, the temporary directory, and the settings of Go's runtime (the
// roles and the sample server are Go programs; GOCOVERDIR collects the
// counters of a coverage build).
var programEnv = []string{
	"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER",
	"LANG", "LANGUAGE", "TZ", "TMPDIR",
	"GOMAXPROCS", "GOGC", "GOMEMLIMIT", "GODEBUG", "GOTRACEBACK", "GORACE", "GOCOVERDIR",
}

// networkEnv are the proxy and TLS trust settings that Go's HTTP client
// reads: a role calling a model, a JWKS or an HTTP MCP server through a
// proxy, or trusting a private CA, needs them.
var networkEnv = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
}

// settingEnv are the variables of the mesh's own settings that [Load]
// reads, none a secret. MESH_APPROVER_KEY is not among them: only the
// approver needs where its signing key is, and `mesh up` gives it that.
func settingEnv() []string {
	return []string{
		EnvConfig, EnvDataDir, EnvHTTPAddr, EnvHTTPHosts, EnvNATSAddr, EnvNATSURL, EnvNATSCreds, EnvNATSNKey, EnvNATSAuth,
		EnvPrefix, EnvLogLevel, EnvLogFmt, EnvProfile, EnvNodeID, EnvMetricsAddr, EnvHealthAddr, EnvApproverPublicKeys,
		EnvNATSServerName, EnvNATSCredsDir, EnvNATSReplicas, EnvNATSClusterName, EnvNATSClusterListen,
		EnvNATSRoutes, EnvNATSLeafListen, EnvNATSLeafRemotes, EnvNATSMonitorAddr, EnvNATSResponderCreds, EnvNATSResponderNKey,
		EnvEventsMaxAge, EnvSessionsTTL, EnvSessionsMaxBytes, EnvSessionsSaveRetry, EnvMaxActiveSessions,
		EnvMonitorInterval, EnvMonitorProbeTimeout,
	}
}

// Variables of the settings an operator changes most, each named after its
// key in agent.yaml (MESH_ and the key, section first). They win over the
// file, as every MESH_* variable does.
const (
	EnvEventsMaxAge        = "MESH_EVENTS_MAX_AGE"        // mesh.events_max_age
	EnvSessionsTTL         = "MESH_SESSIONS_TTL"          // sessions.ttl
	EnvSessionsMaxBytes    = "MESH_SESSIONS_MAX_BYTES"    // sessions.max_bytes
	EnvSessionsSaveRetry   = "MESH_SESSIONS_SAVE_RETRY"   // sessions.save_retry, comma-separated
	EnvMaxActiveSessions   = "MESH_MAX_ACTIVE_SESSIONS"   // limits.max_active_sessions
	EnvMonitorInterval     = "MESH_MONITOR_INTERVAL"      // monitor.interval (heartbeats)
	EnvMonitorProbeTimeout = "MESH_MONITOR_PROBE_TIMEOUT" // monitor.probe_timeout
)

// applySettingEnv applies the variables of the settings above; a value
// that does not parse is an error naming the key and the variable.
func (c *Config) applySettingEnv(getenv func(string) string) error {
	bad := func(field, env, v, want string) error {
		return &Error{File: c.Path, Field: field + " (" + env + ")", Want: fmt.Sprintf("%q is not %s", v, want)}
	}
	for _, d := range []struct {
		env, field string
		dst        *Duration
	}{
		{EnvEventsMaxAge, "mesh.events_max_age", &c.Mesh.EventsMaxAge},
		{EnvSessionsTTL, "sessions.ttl", &c.Sessions.TTL},
		{EnvMonitorInterval, "monitor.interval", &c.Monitor.Interval},
		{EnvMonitorProbeTimeout, "monitor.probe_timeout", &c.Monitor.ProbeTimeout},
	} {
		if v := getenv(d.env); v != "" {
			var out Duration
			if out.UnmarshalYAML(&yaml.Node{Kind: yaml.ScalarNode, Value: v}) != nil {
				return bad(d.field, d.env, v, "a duration such as 30s or 24h")
			}
			*d.dst = out
		}
	}
	if v := getenv(EnvSessionsSaveRetry); v != "" {
		c.Sessions.SaveRetry = nil
		for _, item := range splitList(v) {
			var out Duration
			if out.UnmarshalYAML(&yaml.Node{Kind: yaml.ScalarNode, Value: item}) != nil || out < 0 {
				return bad("sessions.save_retry", EnvSessionsSaveRetry, v, "a list of pauses such as 1s,5s,30s")
			}
			c.Sessions.SaveRetry = append(c.Sessions.SaveRetry, out)
		}
	}
	if v := getenv(EnvSessionsMaxBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return bad("sessions.max_bytes", EnvSessionsMaxBytes, v, "a number of bytes")
		}
		c.Sessions.MaxBytes = n
	}
	if v := getenv(EnvMaxActiveSessions); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return bad("limits.max_active_sessions", EnvMaxActiveSessions, v, "a number of conversations")
		}
		c.Limits.MaxActiveSessions = n
	}
	return nil
}

// Uses names the parts of a configuration that a process uses, and so the
// secrets of the environment it gets from [Config.Env].
type Uses struct {
	// Models are the models the process calls, by the field naming each
	// (as [Definition.Models] lists them): it gets their providers' API keys and
	// base URLs.
	Models map[string]string
	// Auth is the bridge's: the variables that the auth section names
	// (${NAME} tokens, hs256_secret, stream_key), and the key of the
	// moderation service of the safety section.
	Auth bool
	// Tools is the tool host's: the variables that the MCP servers' command,
	// args, url and env name.
	Tools bool
}

// Env is the environment of a process of the mesh that uses u, drawn from
// environ (a list of "key=value", as [os.Environ] gives it) in its order:
// what a program needs to run (see [ProgramEnv]), the proxy and TLS trust
// settings (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE,
// SSL_CERT_DIR), OpenTelemetry's (OTEL_*), the mesh's own settings (the
// variables of the package doc, MESH_APPROVER_KEY aside), and the variables
// of the parts that u names. Nothing else passes: neither a secret of a
// part the process does not use, nor anything the configuration does not
// name.
func (c *Config) Env(u Uses, environ []string) []string {
	keep := map[string]bool{}
	for _, names := range [][]string{programEnv, networkEnv, settingEnv(), modelEnv(u.Models)} {
		for _, n := range names {
			keep[n] = true
		}
	}
	if u.Auth {
		maps.Copy(keep, c.authVars)
		if m := c.Safety.Moderation; m != nil {
			keep[m.KeyVariable()] = true
		}
	}
	if u.Tools {
		maps.Copy(keep, c.toolVars)
	}
	return filterEnv(environ, func(name string) bool {
		return keep[name] || strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "OTEL_")
	})
}

// ProgramEnv is what of environ any program needs to run and which holds no
// secret: HOME, LOGNAME, PATH, SHELL, TERM, USER, the locale (LANG,
// LANGUAGE, LC_*), TZ, TMPDIR, and Go's runtime settings (GOMAXPROCS,
// GOGC, GOMEMLIMIT, GODEBUG, GOTRACEBACK, GORACE, GOCOVERDIR), in environ's
// order.
func ProgramEnv(environ []string) []string {
	return filterEnv(environ, func(name string) bool {
		return slices.Contains(programEnv, name) || strings.HasPrefix(name, "LC_")
	})
}

// filterEnv keeps the entries of environ whose name keep accepts. The
// result is never nil: a nil environment makes os/exec hand a child the
// whole environment of its parent.
func filterEnv(environ []string, keep func(name string) bool) []string {
	out := []string{}
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && name != "" && keep(name) {
			out = append(out, kv)
		}
	}
	return out
}

// modelEnv lists the variables of the API keys and base URLs of the
// providers of models.
func modelEnv(models map[string]string) []string {
	var out []string
	for _, name := range models {
		m, err := modelspec.ParseModel(name)
		if err != nil {
			continue // Load refused it already
		}
		for _, v := range []string{modelspec.KeyEnv(m.Provider), modelspec.BaseURLEnv(m.Provider)} {
			if v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// expandTools replaces $NAME and ${NAME} in the MCP servers' command,
// args, url and env values with the variables' values, ${MESH_DATA_DIR}
// with the data directory in effect. It records the variables they name,
// which the tool host gets ([Uses].Tools), and, by field, the first one a
// command or url names that is empty here: the tool host refuses it
// ([Config.CheckTools]), while the other roles, which start without the
// tool host's variables, take the value as given.
func (c *Config) expandTools(getenv func(string) string) {
	c.toolVars = map[string]bool{}
	for i := range c.MCPServers {
		s := &c.MCPServers[i]
		expand := func(field, v string) string {
			return os.Expand(v, func(name string) string {
				if name == EnvDataDir {
					return c.DataDir
				}
				c.toolVars[name] = true
				val := getenv(name)
				if val == "" && field != "" && c.unset[field] == "" {
					c.unset[field] = name
				}
				return val
			})
		}
		field := fmt.Sprintf("mcp_servers[%d]", i)
		s.Command = expand(field+".command", s.Command)
		s.URL = expand(field+".url", s.URL)
		for j := range s.Args {
			s.Args[j] = expand("", s.Args[j])
		}
		for k, v := range s.Env {
			s.Env[k] = expand("", v)
		}
	}
}
