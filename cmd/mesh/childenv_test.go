package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// TestUpProcessesEnvironment checks what of the environment of `mesh up`
// each role's process gets: the basics and the mesh's settings, the
// secrets of the parts of the configuration it uses, nothing else.
func TestUpProcessesEnvironment(t *testing.T) {
	const yaml = `name: desk-agent
llm:
  model: gpt-4o-mini
mcp_servers:
  - name: items
    command: items-server
    env: {ITEMS_TOKEN: "${ITEMS_TOKEN}"}
groups:
  - name: desk
    strategy: llm
    model: claude-haiku-4-5
    participants: [{agent: desk-agent}]
auth:
  tokens:
    - {name: alice, token: "${ALICE_TOKEN}", roles: [user]}
    - {name: root, token: "${ROOT_TOKEN}", roles: [admin]}
  jwt:
    hs256_secret: ${JWT_SECRET}
    issuer: https://issuer.example
    audience: agent-mesh
`
	basics := []string{"PATH=/usr/bin", "HOME=/home/op", "MESH_LOG_LEVEL=debug", "OTEL_EXPORTER_OTLP_ENDPOINT=http://otel:4318"}
	secrets := []string{
		"ALICE_TOKEN=alice-token-0123456789", "ROOT_TOKEN=root-token-0123456789", "JWT_SECRET=" + strings.Repeat("j", 32),
		"ITEMS_TOKEN=items-token", "OPENAI_API_KEY=sk-openai", "ANTHROPIC_API_KEY=sk-ant", "GEMINI_API_KEY=gem-key",
		"AWS_SECRET_ACCESS_KEY=aws-secret", "MESH_APPROVER_KEY=/op/approver.nk",
	}
	environ := append(slices.Clone(basics), secrets...)
	cfg, err := config.Parse("agent.yaml", []byte(yaml), func(k string) string { return envValue(environ, k) })
	if err != nil {
		t.Fatal(err)
	}
	roleEnv := map[string][]string{
		mesh.RoleApprover: {config.EnvApproverKey + "=/data/keys/approver.nk"},
		mesh.RoleToolhost: {config.EnvApproverPublicKeys + "=UKEY"},
	}
	tests := []struct {
		role string
		// inherited is what of environ the role gets; extra what `mesh up`
		// sets for it.
		inherited, extra []string
	}{
		{role: mesh.RoleAgent, inherited: []string{"OPENAI_API_KEY=sk-openai"}},
		{role: mesh.RoleGroup, inherited: []string{"ANTHROPIC_API_KEY=sk-ant"}},
		{role: mesh.RoleToolhost, inherited: []string{"ITEMS_TOKEN=items-token"}, extra: roleEnv[mesh.RoleToolhost]},
		{role: mesh.RoleBridge, inherited: []string{"ALICE_TOKEN=alice-token-0123456789", "ROOT_TOKEN=root-token-0123456789", "JWT_SECRET=" + strings.Repeat("j", 32)}},
		{role: mesh.RoleApprover, extra: roleEnv[mesh.RoleApprover]},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			procs := upProcesses(cfg, "nats://127.0.0.1:4222", map[string]int{tt.role: 1}, roleEnv, 1, environ)
			if len(procs) != 1 {
				t.Fatalf("%d processes, want 1", len(procs))
			}
			env := procs[0].Env
			var got []string
			for _, kv := range env {
				if slices.Contains(environ, kv) {
					got = append(got, kv)
				}
			}
			want := append(slices.Clone(basics), tt.inherited...)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("inherited:\n got  %q\n want %q", got, want)
			}
			for _, kv := range tt.extra {
				if !slices.Contains(env, kv) {
					t.Errorf("%s is not set; env %q", kv, env)
				}
			}
			for _, kv := range []string{config.EnvNATSURL + "=nats://127.0.0.1:4222", "GOMAXPROCS=1"} {
				if !slices.Contains(env, kv) {
					t.Errorf("%s is not set; env %q", kv, env)
				}
			}
		})
	}
}

// TestRoleUses checks which parts of the configuration each role uses.
func TestRoleUses(t *testing.T) {
	const yaml = `name: a
llm:
  model: gpt-4o-mini
groups:
  - name: round
    participants: [{agent: a}]
  - name: picked
    strategy: llm
    participants: [{agent: a}]
`
	cfg, err := config.Parse("agent.yaml", []byte(yaml), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		role        string
		models      []string
		auth, tools bool
	}{
		{role: mesh.RoleAgent, models: []string{"gpt-4o-mini"}},
		{role: mesh.RoleGroup, models: []string{"gpt-4o-mini"}},
		{role: mesh.RoleToolhost, tools: true},
		{role: mesh.RoleBridge, auth: true},
		{role: mesh.RoleApprover},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			u := roleUses(cfg, tt.role)
			var models []string
			for _, m := range u.Models {
				models = append(models, m)
			}
			if !slices.Equal(models, tt.models) || u.Auth != tt.auth || u.Tools != tt.tools {
				t.Errorf("roleUses = %+v, want models %v, auth %v, tools %v", u, tt.models, tt.auth, tt.tools)
			}
		})
	}
}
