package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// environOf is getenv over a list of "key=value".
func environOf(environ []string) func(string) string {
	m := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// envYAML names a variable in every part that has secrets: the auth
// section, the MCP servers, and models of two providers.
const envYAML = `name: agent-a
llm:
  model: gpt-4o-mini
agent:
  name: root
  type: sequential
  agents:
    - {name: writer, type: llm}
    - {name: critic, type: llm, model: claude-sonnet-4-5}
mcp_servers:
  - name: items
    command: items-server
    args: ["--remote", "$ITEMS_REMOTE", "--db", "${MESH_DATA_DIR}/items.db"]
    env:
      ITEMS_TOKEN: ${ITEMS_TOKEN}
auth:
  tokens:
    - {name: alice, token: "${ALICE_TOKEN}", roles: [user]}
  jwt:
    hs256_secret: ${JWT_SECRET}
    issuer: https://issuer.example
    audience: agent-mesh
  stream_key: ${MESH_STREAM_KEY}
`

// parentEnv is the environment of a `mesh up`: the basics, the mesh's
// settings, every part's secrets, and secrets of nothing the mesh knows.
var parentEnv = []string{
	"PATH=/usr/bin", "HOME=/home/op", "LC_ALL=C.UTF-8", "GORACE=halt_on_error=1",
	"HTTPS_PROXY=http://proxy:3128", "OTEL_SERVICE_NAME=mesh",
	"MESH_LOG_LEVEL=debug", "MESH_CONFIG=/etc/mesh/agent.yaml", "NATS_URL=nats://n:4222",
	"MESH_APPROVER_KEY=/keys/approver.nk",
	"ALICE_TOKEN=alice-token-0123456789", "JWT_SECRET=" + strings.Repeat("j", 32), "MESH_STREAM_KEY=" + strings.Repeat("s", 32),
	"ITEMS_TOKEN=items-token", "ITEMS_REMOTE=https://items.example",
	"OPENAI_API_KEY=sk-openai", "OPENAI_BASE_URL=http://llm:8000/v1", "ANTHROPIC_API_KEY=sk-ant", "GEMINI_API_KEY=gem-key",
	"AWS_SECRET_ACCESS_KEY=aws-secret", "MESH_TOKEN=cli-token", "=C:=C:\\",
}

func TestEnv(t *testing.T) {
	basics := []string{
		"PATH=/usr/bin", "HOME=/home/op", "LC_ALL=C.UTF-8", "GORACE=halt_on_error=1",
		"HTTPS_PROXY=http://proxy:3128", "OTEL_SERVICE_NAME=mesh",
		"MESH_LOG_LEVEL=debug", "MESH_CONFIG=/etc/mesh/agent.yaml", "NATS_URL=nats://n:4222",
	}
	tests := []struct {
		name string
		yaml string
		uses func(c *Config) Uses
		want []string // added to basics
	}{
		{
			name: "a process that uses no secret part (the approver)",
			yaml: envYAML,
			uses: func(*Config) Uses { return Uses{} },
		},
		{
			name: "the bridge: the variables the auth section names",
			yaml: envYAML,
			uses: func(*Config) Uses { return Uses{Auth: true} },
			want: []string{"ALICE_TOKEN=alice-token-0123456789", "JWT_SECRET=" + strings.Repeat("j", 32), "MESH_STREAM_KEY=" + strings.Repeat("s", 32)},
		},
		{
			name: "the bridge: the key of its moderation service",
			yaml: envYAML + "safety:\n  moderation:\n    api: openai\n    url: https://moderation.example/v1/moderations\n",
			uses: func(*Config) Uses { return Uses{Auth: true} },
			want: []string{"ALICE_TOKEN=alice-token-0123456789", "JWT_SECRET=" + strings.Repeat("j", 32), "MESH_STREAM_KEY=" + strings.Repeat("s", 32), "OPENAI_API_KEY=sk-openai"},
		},
		{
			name: "the tool host: the variables the MCP servers name",
			yaml: envYAML,
			uses: func(*Config) Uses { return Uses{Tools: true} },
			want: []string{"ITEMS_TOKEN=items-token", "ITEMS_REMOTE=https://items.example"},
		},
		{
			name: "the agents: keys and base URLs of their models' providers",
			yaml: envYAML,
			uses: func(c *Config) Uses { return Uses{Models: c.AgentModels()} },
			want: []string{"OPENAI_API_KEY=sk-openai", "OPENAI_BASE_URL=http://llm:8000/v1", "ANTHROPIC_API_KEY=sk-ant"},
		},
		{
			name: "an offline model needs no key",
			yaml: minimal,
			uses: func(c *Config) Uses { return Uses{Models: c.AgentModels()} },
		},
		{
			name: "a group without the llm strategy calls no model",
			yaml: envYAML + "groups:\n  - name: desk\n    model: gemini-2.5-flash\n    participants: [{agent: agent-a}]\n",
			uses: func(c *Config) Uses { return Uses{Models: c.SelectorModels()} },
		},
		{
			name: "a group's llm strategy: its selector's provider",
			yaml: envYAML + "groups:\n  - name: desk\n    strategy: llm\n    model: gemini-2.5-flash\n    participants: [{agent: agent-a}]\n",
			uses: func(c *Config) Uses { return Uses{Models: c.SelectorModels()} },
			want: []string{"GEMINI_API_KEY=gem-key"},
		},
		{
			name: "a group's llm strategy without a model: llm.model's provider",
			yaml: envYAML + "groups:\n  - name: desk\n    strategy: llm\n    participants: [{agent: agent-a}]\n",
			uses: func(c *Config) Uses { return Uses{Models: c.SelectorModels()} },
			want: []string{"OPENAI_API_KEY=sk-openai", "OPENAI_BASE_URL=http://llm:8000/v1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("agent.yaml", []byte(tt.yaml), environOf(parentEnv))
			if err != nil {
				t.Fatal(err)
			}
			got := c.Env(tt.uses(c), parentEnv)
			want := append(slices.Clone(basics), tt.want...)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("Env:\n got  %q\n want %q", got, want)
			}
		})
	}
}

// TestEnvIsNeverNil: os/exec gives a child with a nil environment its
// parent's whole one.
func TestEnvIsNeverNil(t *testing.T) {
	c, err := Parse("agent.yaml", []byte(minimal), env())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Env(Uses{}, []string{"AWS_SECRET_ACCESS_KEY=x"}); got == nil || len(got) != 0 {
		t.Errorf("Env = %#v, want empty and not nil", got)
	}
	if got := ProgramEnv(nil); got == nil {
		t.Error("ProgramEnv(nil) is nil")
	}
}

func TestProgramEnv(t *testing.T) {
	got := ProgramEnv(parentEnv)
	want := []string{"PATH=/usr/bin", "HOME=/home/op", "LC_ALL=C.UTF-8", "GORACE=halt_on_error=1"}
	if !slices.Equal(got, want) {
		t.Errorf("ProgramEnv:\n got  %q\n want %q", got, want)
	}
}

// Every variable Load reads reaches the processes that use it: a new
// setting or secret that Env does not know would be missing from the
// roles of `mesh up`.
func TestEnvPassesEveryVariableLoadReads(t *testing.T) {
	yaml := strings.Replace(envYAML, "auth:\n", "  - {name: remote, url: \"${REMOTE_MCP}\"}\nauth:\n", 1) +
		"groups:\n  - name: desk\n    strategy: llm\n    model: gemini-2.5-flash\n    participants: [{agent: agent-a}, {agent: helper, model: ollama:llama3.2}, {agent: drafter, model: command-a-03-2025}]\n"
	read := map[string]bool{}
	getenv := func(k string) string {
		read[k] = true
		return ""
	}
	c, err := Parse("agent.yaml", []byte(yaml), getenv)
	if err != nil {
		t.Fatal(err)
	}
	var environ []string
	for k := range read {
		environ = append(environ, k+"=v")
	}
	all := c.Env(Uses{Models: c.Models(), Auth: true, Tools: true}, environ)
	for _, k := range slices.Sorted(maps.Keys(read)) {
		if k == EnvApproverKey {
			continue // the approver's alone, from `mesh up`
		}
		if !slices.Contains(all, k+"=v") {
			t.Errorf("Load reads %s, which Env passes to no process", k)
		}
	}
	if len(read) < 40 {
		t.Errorf("Load read %d variables: the test does not see them", len(read))
	}
}

// A role loads a file whose MCP servers name variables it does not get;
// the tool host, which gets them, refuses one that is empty.
func TestCheckTools(t *testing.T) {
	const yaml = minimal + `mcp_servers:
  - name: local
    command: ${ITEMS_BIN}
    env: {ITEMS_TOKEN: "${ITEMS_TOKEN}"}
  - name: remote
    url: ${REMOTE_URL}
`
	tests := []struct {
		name      string
		env       []string
		wantField string // of CheckTools' error; empty means none
		wantVar   string
	}{
		{name: "none of the tool host's variables", wantField: "mcp_servers[0].command", wantVar: "ITEMS_BIN"},
		{name: "the url's missing", env: []string{"ITEMS_BIN", "/bin/items"}, wantField: "mcp_servers[1].url", wantVar: "REMOTE_URL"},
		{name: "every variable", env: []string{"ITEMS_BIN", "/bin/items", "REMOTE_URL", "https://mcp.example/mcp"}},
		{name: "an env value may be empty", env: []string{"ITEMS_BIN", "/bin/items", "REMOTE_URL", "https://mcp.example/mcp", "ITEMS_TOKEN", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("agent.yaml", []byte(yaml), env(tt.env...))
			if err != nil {
				t.Fatalf("Parse: %v; a role that does not use the servers must load the file", err)
			}
			err = c.CheckTools()
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("CheckTools: %v", err)
				}
				if c.MCPServers[0].Command != "/bin/items" || c.MCPServers[1].URL != "https://mcp.example/mcp" {
					t.Errorf("servers = %+v", c.MCPServers)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Field != tt.wantField || !strings.Contains(err.Error(), tt.wantVar) {
				t.Fatalf("CheckTools = %v, want an error on %s naming %s", err, tt.wantField, tt.wantVar)
			}
		})
	}
	// A url that is set is checked by every role, as before.
	if _, err := Parse("agent.yaml", []byte(yaml), env("REMOTE_URL", "ftp://x")); err == nil || !strings.Contains(err.Error(), "mcp_servers[1].url") {
		t.Errorf("a bad url: %v", err)
	}
}

func TestModelsByRole(t *testing.T) {
	const yaml = envYAML + `groups:
  - name: desk
    strategy: llm
    model: gemini-2.5-flash
    participants: [{agent: agent-a}, {agent: helper, model: ollama:llama3.2}]
  - name: line
    model: claude-haiku-4-5
    participants: [{agent: agent-a}]
`
	c, err := Parse("agent.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  map[string]string
		want map[string]string
	}{
		{"agents", c.AgentModels(), map[string]string{
			"llm.model": "gpt-4o-mini", "agent.agents[1].model": "claude-sonnet-4-5", "groups[0].participants[1].model": "ollama:llama3.2",
		}},
		{"groups", c.SelectorModels(), map[string]string{"groups[0].model": "gemini-2.5-flash"}},
		{"all", c.Models(), map[string]string{
			"llm.model": "gpt-4o-mini", "agent.agents[1].model": "claude-sonnet-4-5", "groups[0].participants[1].model": "ollama:llama3.2",
			"groups[0].model": "gemini-2.5-flash", "groups[1].model": "claude-haiku-4-5",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !maps.Equal(tt.got, tt.want) {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	// Each role checks the keys of the models it calls.
	withOpenAI, err := Parse("agent.yaml", []byte(yaml), env("OPENAI_API_KEY", "k", "ANTHROPIC_API_KEY", "k"))
	if err != nil {
		t.Fatal(err)
	}
	if err := withOpenAI.CheckModelKeys(withOpenAI.AgentModels()); err != nil {
		t.Errorf("the agents' keys: %v", err)
	}
	if err := withOpenAI.CheckModelKeys(withOpenAI.SelectorModels()); err == nil || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Errorf("the groups' keys without GEMINI_API_KEY: %v", err)
	}
}
