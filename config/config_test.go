package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

const minimal = "name: agent-a\nllm:\n  model: offline\n"

func TestParseDefaults(t *testing.T) {
	c, err := Parse("agent.yaml", []byte(minimal), env())
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"data dir", c.DataDir, DefaultDataDir},
		{"http addr", c.HTTPAddr, DefaultHTTPAddr},
		{"nats listen", c.NATS.Listen, DefaultNATSAddr},
		{"embedded", c.EmbeddedNATS(), true},
		{"prompt", c.Prompt, DefaultPrompt},
		{"max iterations", c.Mesh.MaxToolIterations, 10},
		{"wait timeout", c.HTTP.WaitTimeout.Std(), 30 * time.Second},
		{"body limit", c.HTTP.MaxBodyBytes, int64(1 << 20)},
		{"history bytes", c.Sessions.MaxBytes, int64(4 << 20)},
		{"llm timeout", c.LLM.Timeout.Std(), 60 * time.Second},
		{"tree", c.Tree().Type, NodeLLM},
		{"state tool", c.Tree().StateTool, false},
		{"signing key", c.Approvals.SigningKey, filepath.Join(DefaultDataDir, "keys", "approver.nk")},
		{"public keys", len(c.Approvals.PublicKeys), 0},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

// A file without llm.model runs gemini-2.5-flash, so without GEMINI_API_KEY
// the key check names the variable and the offline alternative.
func TestModelDefaultsToGeminiFlash(t *testing.T) {
	c, err := Parse("agent.yaml", []byte("name: a\n"), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM.Model != "gemini-2.5-flash" || c.Tree().Model != "gemini-2.5-flash" {
		t.Fatalf("llm.model = %q, tree model = %q, want gemini-2.5-flash", c.LLM.Model, c.Tree().Model)
	}
	err = c.CheckKeys()
	if err == nil {
		t.Fatal("CheckKeys without GEMINI_API_KEY = nil, want an error naming it")
	}
	for _, want := range []string{"llm.model", "gemini-2.5-flash", "GEMINI_API_KEY", "offline"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CheckKeys error %q does not say %q", err, want)
		}
	}
	c, err = Parse("agent.yaml", []byte("name: a\n"), env("GEMINI_API_KEY", "k"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckKeys(); err != nil {
		t.Errorf("CheckKeys with GEMINI_API_KEY set: %v", err)
	}
}

// state_tool at the top level reaches the llm node built from it.
func TestStateToolOfTheSingleNode(t *testing.T) {
	c, err := Parse("agent.yaml", []byte(minimal+"state_tool: true\n"), env())
	if err != nil {
		t.Fatal(err)
	}
	if !c.Tree().StateTool {
		t.Errorf("Tree().StateTool = false, want true from the top-level state_tool")
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	yaml := minimal + "host: 0.0.0.0\nport: 9000\ndata_dir: ./x\nmcp_servers:\n  - name: r\n    command: srv\n    args: [\"--db\", \"${MESH_DATA_DIR}/r.db\"]\n"
	c, err := Parse("a.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "0.0.0.0:9000" || c.MCPServers[0].Args[1] != "./x/r.db" {
		t.Errorf("from the file: addr %s args %v", c.HTTPAddr, c.MCPServers[0].Args)
	}
	c, err = Parse("a.yaml", []byte(yaml), env(EnvHTTPAddr, "127.0.0.1:1", EnvDataDir, "/d", EnvNATSAddr, "127.0.0.1:2", EnvNATSURL, "nats://n:4222"))
	if err != nil {
		t.Fatal(err)
	}
	// The environment wins over the file.
	if c.HTTPAddr != "127.0.0.1:1" {
		t.Errorf("http addr = %q, want 127.0.0.1:1 from the environment", c.HTTPAddr)
	}
	if c.DataDir != "/d" {
		t.Errorf("data dir = %q, want /d from the environment", c.DataDir)
	}
	if c.NATS.Listen != "127.0.0.1:2" {
		t.Errorf("nats listen = %q, want 127.0.0.1:2 from the environment", c.NATS.Listen)
	}
	if c.NATS.URL != "nats://n:4222" {
		t.Errorf("nats url = %q, want nats://n:4222 from the environment", c.NATS.URL)
	}
	if c.EmbeddedNATS() {
		t.Error("EmbeddedNATS() = true with a NATS URL in the environment, want false")
	}
	if c.MCPServers[0].Args[1] != "/d/r.db" {
		t.Errorf("args = %v, want ${MESH_DATA_DIR} expanded to /d", c.MCPServers[0].Args)
	}
}

func TestApprovalsFromFileAndEnvironment(t *testing.T) {
	const k1, k2 = "OBMDHI6ULAXIZYVF6H2RNGK4P6UUOGH35ICHQNWHRHX42JLCJ2WTP5T6", "OC2SLIQA2G5NUWS2XJIJ6Y7XSZQ2B5HZ3NGWGR4AXQKKQWWJRJKFGLHI"
	yaml := minimal + "data_dir: /d\napprovals:\n  signing_key: /k/approver.nk\n  public_keys: [" + k1 + "]\n"
	c, err := Parse("a.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.Approvals.SigningKey != "/k/approver.nk" || len(c.Approvals.PublicKeys) != 1 || c.Approvals.PublicKeys[0] != k1 {
		t.Errorf("from the file: %+v", c.Approvals)
	}
	c, err = Parse("a.yaml", []byte(yaml), env(EnvApproverKey, "/e/seed.nk", EnvApproverPublicKeys, k1+", "+k2))
	if err != nil {
		t.Fatal(err)
	}
	if c.Approvals.SigningKey != "/e/seed.nk" || len(c.Approvals.PublicKeys) != 2 || c.Approvals.PublicKeys[1] != k2 {
		t.Errorf("environment did not win: %+v", c.Approvals)
	}
	c, err = Parse("a.yaml", []byte(minimal+"data_dir: /d\n"), env())
	if err != nil || c.Approvals.SigningKey != filepath.Join("/d", "keys", "approver.nk") {
		t.Errorf("default signing key %q (%v), want it under the data dir", c.Approvals.SigningKey, err)
	}
}

// NATS credentials: the environment wins over the file, and the last one
// given of a creds file and a seed is the one; identities are on unless
// nats.auth says none.
func TestNATSIdentitySettings(t *testing.T) {
	yaml := minimal + "nats:\n  creds: /etc/mesh/{role}.creds\n  tls: {ca: ca.pem}\n  url: tls://n:4222\n"
	c, err := Parse("a.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS.Auth != NATSAuthNKeys {
		t.Errorf("from the file: nats auth = %q, want %q", c.NATS.Auth, NATSAuthNKeys)
	}
	if c.NATS.Creds != "/etc/mesh/{role}.creds" {
		t.Errorf("from the file: nats creds = %q, want /etc/mesh/{role}.creds", c.NATS.Creds)
	}
	if c.NATS.TLS.CA != "ca.pem" {
		t.Errorf("from the file: nats tls ca = %q, want ca.pem", c.NATS.TLS.CA)
	}
	if got := c.CredsDir(); got != "data/creds" {
		t.Errorf("from the file: creds dir = %q, want data/creds", got)
	}
	c, err = Parse("a.yaml", []byte(yaml), env(EnvNATSNKey, "/s/agent.nk", EnvNATSAuth, "none"))
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS.NKey != "/s/agent.nk" || c.NATS.Creds != "" || c.NATS.Auth != NATSAuthNone {
		t.Errorf("environment did not win: %+v", c.NATS)
	}
}

func TestLegacyMCPSection(t *testing.T) {
	c, err := Parse("a.yaml", []byte(minimal+"mcp:\n  command: srv\n  args: [a]\n"), env())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.MCPServers) != 1 || c.MCPServers[0].Name != "default" || c.MCPServers[0].Command != "srv" {
		t.Errorf("servers = %+v", c.MCPServers)
	}
}

func TestParseErrorsNameFileFieldAndExpectation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"missing name", "llm:\n  model: offline\n", []string{"name", "is required"}},
		{"bad name", "name: a.b\nllm:\n  model: offline\n", []string{"name", `"a.b"`}},
		{"unknown model", "name: a\nllm:\n  model: llama3\n", []string{"llm.model", "llama3", "provider:model"}},
		{"unknown provider", "name: a\nllm:\n  model: acme:x\n", []string{"llm.model", "acme"}},
		{"bad port", minimal + "port: 70000\n", []string{"port", "70000"}},
		{"bad duration", minimal + "http:\n  wait_timeout: soon\n", []string{"soon", "duration"}},
		{"bad MCP tool choice", minimal + "http:\n  mcp_tools: [a.b.c]\n", []string{"http.mcp_tools", "a.b.c"}},
		{"wrong type", minimal + "port: eighty\n", []string{"eighty"}},
		{"unknown field", minimal + "colour: blue\n", []string{"colour"}},
		{"server without name", minimal + "mcp_servers:\n  - command: x\n", []string{"mcp_servers[0].name"}},
		{"server twice", minimal + "mcp_servers:\n  - {name: x, command: a}\n  - {name: x, command: b}\n", []string{"mcp_servers[1].name", "twice"}},
		{"server both", minimal + "mcp_servers:\n  - {name: x, command: a, url: \"http://h\"}\n", []string{"mcp_servers[0]", "both"}},
		{"bad url", minimal + "mcp_servers:\n  - {name: x, url: \"ftp://h\"}\n", []string{"mcp_servers[0].url"}},
		{"a2a without url", minimal + "a2a:\n  - {name: b}\n", []string{"a2a[0].url"}},
		{"node unknown type", minimal + "agent:\n  name: root\n  type: tree\n", []string{"agent.type", "tree"}},
		{"composite without children", minimal + "agent:\n  name: root\n  type: sequential\n", []string{"agent.agents", "root"}},
		{"duplicate node", minimal + "agent:\n  name: root\n  type: sequential\n  agents:\n    - {name: root, type: llm}\n", []string{"agent.agents[0].name", "unique"}},
		{"bad log level", minimal + "log:\n  level: loud\n", []string{"log.level", "loud"}},
		{"log output twice", minimal + "log:\n  outputs: [stderr, mesh.log, stderr]\n", []string{"log.outputs[2]", "twice"}},
		{"empty log output", minimal + "log:\n  outputs: [\"\"]\n", []string{"log.outputs[0]", "stderr, stdout or a file path"}},
		{"log output a directory", minimal + "log:\n  outputs: [logs/]\n", []string{"log.outputs[0]", "directory"}},
		{"history below a message", minimal + "sessions:\n  max_bytes: 1000\n", []string{"sessions.max_bytes", "1000", "http.max_body_bytes"}},
		{"history too big", minimal + "sessions:\n  max_bytes: 100000000\n", []string{"sessions.max_bytes", "64 MiB"}},
		{"events kept under an hour", minimal + "mesh:\n  events_max_age: 30m\n", []string{"mesh.events_max_age", "30m0s", "1h to 720h"}},
		{"events kept over 30 days", minimal + "mesh:\n  events_max_age: 721h\n", []string{"mesh.events_max_age", "721h0m0s", "1h to 720h"}},
		{"save retry pause too long", minimal + "sessions:\n  save_retry: [1s, 11m]\n", []string{"sessions.save_retry", "11m0s", "10ms to 10m"}},
		{"save retry too many", minimal + "sessions:\n  save_retry: [1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s]\n", []string{"sessions.save_retry", "at most 10"}},
		{"placeholder without producer", minimal + "agent:\n  name: p\n  type: sequential\n  agents:\n    - {name: a, type: llm, output_key: analysis}\n    - {name: b, type: llm, prompt: \"Execute {plan}\"}\n", []string{"agent.agents[1].prompt", `"b"`, "{plan}"}},
		{"cycle by ref", minimal + "agent:\n  name: p\n  type: sequential\n  agents:\n    - name: l\n      type: loop\n      agents:\n        - {ref: p}\n", []string{"agent.agents[0].agents[0].ref", `"l"`, `"p"`, "cycle"}},
		{"ref to nothing", minimal + "agent:\n  name: p\n  type: sequential\n  agents:\n    - {ref: ghost}\n", []string{"agent.agents[0].ref", "ghost"}},
		{"state tool on a composite", minimal + "agent:\n  name: p\n  type: sequential\n  state_tool: true\n  agents:\n    - {name: a, type: llm}\n", []string{"agent.state_tool", `"p"`, "llm nodes"}},
		{"top-level state tool with a tree", minimal + "state_tool: true\nagent:\n  name: p\n  type: llm\n", []string{"state_tool", "llm nodes"}},
		{"loop without children", minimal + "agent:\n  name: p\n  type: loop\n", []string{"agent.agents", `"p"`}},
		{"negative breaker", minimal + "breakers:\n  tools: {failures: -1}\n", []string{"breakers.tools.failures", "0 (default) or more"}},
		{"negative cooldown", minimal + "breakers:\n  llm: {cooldown: -5s}\n", []string{"breakers.llm.cooldown", "negative"}},
		{"bad approver key", minimal + "approvals:\n  public_keys: [OABC]\n", []string{"approvals.public_keys[0]", "public nkey"}},
		{"unknown nats auth", minimal + "nats:\n  auth: open\n", []string{"nats.auth", "MESH_NATS_AUTH", "open", "nkeys or none"}},
		{"tls cert without key", minimal + "nats:\n  tls: {cert: c.pem}\n", []string{"nats.tls", "cert and key"}},
		{"embedded tls without cert", minimal + "nats:\n  tls: {ca: ca.pem}\n", []string{"nats.tls", "embedded server"}},
		{"write timeout shorter than the wait", minimal + "http:\n  wait_timeout: 30s\n  write_timeout: 10s\n", []string{"http.write_timeout", "wait_timeout"}},
		{"negative idle timeout", minimal + "http:\n  idle_timeout: -1s\n", []string{"http.idle_timeout", "negative"}},
		{"bad after_tools", minimal + "groups:\n  - name: desk\n    participants: [{agent: a, after_tools: ['[']}]\n", []string{"groups[0].participants[0].after_tools[0]", "pattern"}},
		{"bad block pattern", minimal + "safety:\n  block_patterns: ['(unclosed']\n", []string{"safety.block_patterns[0]", "regular expression"}},
		{"unknown moderation api", minimal + "safety:\n  moderation:\n    api: acme\n    url: https://m.example\n", []string{"safety.moderation.api", "openai or azure"}},
		{"moderation without url", minimal + "safety:\n  moderation:\n    api: azure\n", []string{"safety.moderation.url"}},
		{"negative socket heartbeat", minimal + "http:\n  websocket:\n    heartbeat: -1s\n", []string{"http.websocket.heartbeat", "negative"}},
		{"negative socket threads", minimal + "http:\n  websocket:\n    max_threads: -2\n", []string{"http.websocket.max_threads", "negative"}},
		{"host with a path", minimal + "http:\n  hosts: [\"agents.example.com/x\"]\n", []string{"http.hosts", "agents.example.com/x"}},
		{"origin with a path", minimal + "http:\n  cors:\n    origins: [\"https://app.example/page\"]\n", []string{"http.cors.origins", "scheme://host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("conf/agent.yaml", []byte(tt.yaml), env())
			if err == nil {
				t.Fatal("no error")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("err %T is not a *config.Error", err)
			}
			msg := err.Error()
			for _, w := range append(tt.want, "conf/agent.yaml") {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestHTTPEdgeSettings(t *testing.T) {
	c, err := Parse("a.yaml", []byte(minimal), env())
	if err != nil {
		t.Fatal(err)
	}
	h := c.HTTP
	if got := h.ReadHeaderTimeout.Std(); got != DefaultReadHeaderTimeout {
		t.Errorf("default read header timeout = %v, want %v", got, DefaultReadHeaderTimeout)
	}
	if got := h.ReadTimeout.Std(); got != DefaultReadTimeout {
		t.Errorf("default read timeout = %v, want %v", got, DefaultReadTimeout)
	}
	if got := h.IdleTimeout.Std(); got != DefaultIdleTimeout {
		t.Errorf("default idle timeout = %v, want %v", got, DefaultIdleTimeout)
	}
	if got, want := h.WriteTimeout.Std(), DefaultWaitTimeout+DefaultWriteMargin; got != want {
		t.Errorf("default write timeout = %v, want %v (the wait timeout and its margin)", got, want)
	}
	if len(h.Hosts) != 0 || len(h.CORS.Origins) != 0 {
		t.Errorf("hosts or origins by default: %v %v", h.Hosts, h.CORS.Origins)
	}
	c, err = Parse("a.yaml", []byte(minimal+"http:\n  read_timeout: 2s\n  idle_timeout: 3s\n  wait_timeout: 5s\n  hosts: [agents.example.com]\n  cors:\n    origins: [\"https://app.example\"]\n"), env())
	if err != nil {
		t.Fatal(err)
	}
	h = c.HTTP
	if h.ReadTimeout.Std() != 2*time.Second || h.IdleTimeout.Std() != 3*time.Second || h.WriteTimeout.Std() != 5*time.Second+DefaultWriteMargin {
		t.Errorf("timeouts from the file: %+v", h)
	}
	if !h.HostAllowed("agents.example.com:8080") || h.HostAllowed("evil.example") {
		t.Errorf("hosts: %v", h.Hosts)
	}
	if a, ok := h.CORS.OriginAllowed("https://app.example"); !ok || a != "https://app.example" {
		t.Errorf("origin refused: %v", h.CORS.Origins)
	}
	if _, ok := h.CORS.OriginAllowed("https://evil.example"); ok {
		t.Error("another origin allowed")
	}
}

func TestTreeRefsAreExpanded(t *testing.T) {
	yaml := minimal + `agent:
  name: p
  type: sequential
  agents:
    - {name: check, type: llm, output_key: status, tools: []}
    - {name: act, type: llm, prompt: "Do {status}"}
    - {ref: check}
`
	c, err := Parse("a.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	kids := c.Tree().Agents
	if len(kids) != 3 {
		t.Fatalf("got %d children, want 3: %+v", len(kids), kids)
	}
	// The third is a copy of check.
	if kids[2].Name != "check" {
		t.Errorf("third child's name = %q, want check", kids[2].Name)
	}
	if kids[2].OutputKey != "status" {
		t.Errorf("third child's output key = %q, want status", kids[2].OutputKey)
	}
	if kids[2].Tools == nil {
		t.Error("third child's tools = nil (every tool), want [] as on check")
	} else if len(*kids[2].Tools) != 0 {
		t.Errorf("third child's tools = %v, want [] as on check", *kids[2].Tools)
	}
	if c.Tree().Agents[1].Tools != nil {
		t.Errorf("a node without tools: gets %v, want nil (every tool)", c.Tree().Agents[1].Tools)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yaml"), env())
	if err == nil || !strings.Contains(err.Error(), "none.yaml") || !strings.Contains(err.Error(), EnvConfig) {
		t.Errorf("err = %v", err)
	}
}

func TestDefaultConfigFileLoads(t *testing.T) {
	c, err := Load("agent.yaml", env(EnvDataDir, "/data"))
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM.Model != "offline" || len(c.MCPServers) != 1 || c.MCPServers[0].Args[1] != "/data/resources.db" {
		t.Errorf("config/agent.yaml = %+v", c)
	}
	if err := c.CheckKeys(); err != nil {
		t.Errorf("the default config needs a key: %v", err)
	}
}

// Without MESH_CONFIG the process loads config/agent.yaml of its working
// directory.
func TestFromEnvironmentFallsBackToConfigAgentYAML(t *testing.T) {
	t.Chdir("..")
	t.Setenv(EnvConfig, "")
	t.Setenv(EnvDataDir, "/data")
	c, err := FromEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != DefaultConfigPath || DefaultConfigPath != "config/agent.yaml" {
		t.Errorf("loaded %s, want config/agent.yaml", c.Path)
	}
	if c.Name == "" || c.LLM.Model != "offline" {
		t.Errorf("config/agent.yaml gave name %q, model %q", c.Name, c.LLM.Model)
	}
	t.Chdir(t.TempDir())
	if _, err := FromEnvironment(); err == nil || !strings.Contains(err.Error(), "config/agent.yaml") || !strings.Contains(err.Error(), EnvConfig) {
		t.Errorf("FromEnvironment without the file = %v, want an error naming config/agent.yaml and %s", err, EnvConfig)
	}
}

func TestCheckKeys(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		env     []string
		wantErr string
	}{
		{"offline", minimal, nil, ""},
		{"claude without key", "name: a\nllm:\n  model: claude-sonnet-4-5\n", nil, "ANTHROPIC_API_KEY"},
		{"claude with key", "name: a\nllm:\n  model: claude-sonnet-4-5\n", []string{"ANTHROPIC_API_KEY", "k"}, ""},
		{"node model without key", minimal + "agent:\n  name: r\n  type: sequential\n  agents:\n    - {name: x, type: llm, model: gpt-4o}\n", nil, "OPENAI_API_KEY"},
		{"openai at a custom URL needs none", "name: a\nllm:\n  model: openai:qwen\n  base_url: http://localhost:8000/v1\n", nil, ""},
		{"ollama needs none", "name: a\nllm:\n  model: ollama:llama3.2\n", nil, ""},
		{"cohere without key", "name: a\nllm:\n  model: command-a-03-2025\n", nil, "COHERE_API_KEY"},
		{"cohere with key", "name: a\nllm:\n  model: cohere:command-r7b-12-2024\n", []string{"COHERE_API_KEY", "k"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("a.yaml", []byte(tt.yaml), env(tt.env...))
			if err != nil {
				t.Fatal(err)
			}
			err = c.CheckKeys()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
			}
		})
	}
}

func TestSecretNeverPrints(t *testing.T) {
	const key = "sk-very-secret"
	c, err := Parse("a.yaml", []byte(minimal), env("OPENAI_API_KEY", key))
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(c)
	for _, s := range []string{fmt.Sprint(c.Keys), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.Keys), string(j)} {
		if strings.Contains(s, key) {
			t.Errorf("the key leaks in %q", s)
		}
	}
	if c.Keys.For(modelspec.ProviderOpenAI).Reveal() != key {
		t.Error("Reveal does not give the key")
	}
}

func TestMain(m *testing.M) {
	// Tests read agent.yaml relative to this directory.
	if _, err := os.Stat("agent.yaml"); err != nil {
		fmt.Fprintln(os.Stderr, "run from config/:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestExamplesLoad parses every sample configuration of config/examples.
func TestExamplesLoad(t *testing.T) {
	paths, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(paths) < 4 {
		t.Fatalf("examples: %v, %v", paths, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse(p, data, env())
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if (c.Agent == nil || len(c.Agent.Agents) == 0) && len(c.Groups) == 0 {
			t.Errorf("%s has neither an agent tree nor a group", p)
		}
	}
}

func TestSubAgents(t *testing.T) {
	t.Parallel()
	c := &Definition{
		A2A: []A2AAgent{{Name: "a", URL: "http://a"}},
		Agent: &Node{Type: NodeSequential, Agents: []Node{
			{Type: NodeLLM, A2A: []A2AAgent{{Name: "a", URL: "http://a"}, {Name: "b", URL: "http://b"}}},
			{Type: NodeA2A, Name: "c", URL: "http://c", DestructiveHint: true},
		}},
	}
	got := c.SubAgents()
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("SubAgents names = %q, want [a b c]", names)
	}
	if !got[2].IsDestructive() {
		t.Errorf("SubAgents c: IsDestructive() = false, want true from destructive_hint: %+v", got[2])
	}
}

func TestNATSMaxMemory(t *testing.T) {
	for mb, want := range map[int]int64{0: DefaultNATSMaxMemoryMB << 20, -1: 0, 200: 200 << 20} {
		if got := (NATS{MaxMemoryMB: mb}).MaxMemory(); got != want {
			t.Errorf("max_memory_mb %d: %d bytes, want %d", mb, got, want)
		}
	}
}

// MESH_HTTP_HOSTS sets http.hosts, the names the bridge answers: a
// container's configuration file need not know its Ingress's host.
func TestHTTPHostsFromEnvironment(t *testing.T) {
	c, err := Parse("a.yaml", []byte(minimal+"http:\n  hosts: [file.example]\n"), env(EnvHTTPHosts, " agents.example.com, chat.example.com:8443 ,"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.HTTP.Hosts; len(got) != 2 || got[0] != "agents.example.com" || got[1] != "chat.example.com:8443" {
		t.Errorf("hosts %q, want the variable's two names instead of the file's", got)
	}
	if !c.HTTP.HostAllowed("agents.example.com") || c.HTTP.HostAllowed("file.example") {
		t.Errorf("hosts allowed: %v", c.HTTP.Hosts)
	}
}
