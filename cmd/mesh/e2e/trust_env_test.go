package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// procEnviron reads the environment a process was started with.
func procEnviron(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("environment of %d: %v", pid, err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(bytes.TrimRight(data, "\x00"), []byte{0}) {
		k, v, _ := strings.Cut(string(kv), "=")
		env[k] = v
	}
	return env
}

// childNamed finds the pid of the process below pid whose program is
// named name.
func childNamed(t *testing.T, pid int, name string) int {
	t.Helper()
	var found int
	meshtest.Eventually(t, 30*time.Second, func() bool {
		for _, p := range descendants(pid) {
			if args := cmdline(p); len(args) > 0 && filepath.Base(args[0]) == name {
				found = p
				return true
			}
		}
		return false
	}, "no %s process below %d", name, pid)
	return found
}

// mcpBaseEnv is what an MCP server gets of the toolhost's environment
// besides its env section: what a program needs to run.
func mcpBaseEnv(name string) bool {
	switch name {
	case "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE", "TZ", "TMPDIR",
		"GOMAXPROCS", "GOGC", "GOMEMLIMIT", "GODEBUG", "GOTRACEBACK", "GORACE", "GOCOVERDIR", "MESH_CPU_PROFILE":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// Each process of `mesh up` holds only its own secrets: started with the
// bridge's tokens and JWT secret, a model's API key, an MCP server's token
// (each given through ${NAME}) and secrets the configuration does not
// name, every role and every MCP server gets an environment built for it.
// The monitor runs inside `mesh up`, which holds the operator's
// environment to hand out.
func TestEachProcessHoldsOnlyItsSecrets(t *testing.T) {
	t.Parallel()
	secret := func(what string) string { return what + "-" + mesh.NewID() + mesh.NewID() }
	values := map[string]string{
		"ALICE_TOKEN":     secret("alice"),
		"ROOT_TOKEN":      secret("root"),
		"JWT_SECRET":      secret("jwt-secret"),
		"MESH_STREAM_KEY": secret("stream-key"),
		"ITEMS_TOKEN":     secret("items"),
		// Secrets of nothing the mesh uses: a provider it does not call,
		// and a cloud credential.
		"ANTHROPIC_API_KEY":     secret("sk-ant"),
		"AWS_SECRET_ACCESS_KEY": secret("aws"),
	}
	opts, srv := llmMeshOpts(t, llmCases()[0], "")
	values["OPENAI_API_KEY"] = llmCases()[0].key()
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if k != "OPENAI_API_KEY" {
			opts.env = append(opts.env, k+"="+values[k])
		}
	}
	opts.config += `  - name: items
    command: mesh-test-mcp
    env:
      ` + testMCPEnv + `: "1"
      ITEMS_TOKEN: "${ITEMS_TOKEN}"
groups:
  - name: desk
    participants: [{agent: resource-manager}]
auth:
  tokens:
    - {name: alice, token: "${ALICE_TOKEN}", roles: [user]}
    - {name: root, token: "${ROOT_TOKEN}", roles: [admin]}
  jwt:
    hs256_secret: "${JWT_SECRET}"
    issuer: ` + jwtIssuer + `
    audience: ` + jwtAudience + `
  stream_key: "${MESH_STREAM_KEY}"
`
	m := startMesh(t, opts)
	m.waitServerTools("items")

	// The mesh works: a turn with a tool call, as alice; a JWT signed with
	// the secret, the admin's token and a stream token at the bridge.
	alice := []string{"Authorization", "Bearer " + values["ALICE_TOKEN"]}
	conv := str(m.do(http.StatusCreated, "POST", "/conversations", nil, alice...), "conversation", "id")
	out := m.send(conv, "list all resources", alice...)
	if calls := toolCalls(obj(out, "conversation")); len(calls) != 1 || str(calls[0], "name") != "resources_list" {
		t.Fatalf("tool calls = %v, want one resources_list", calls)
	}
	for _, r := range srv.Requests() {
		if r.Status != http.StatusOK {
			t.Errorf("the model refused a request of the agent: %d %s", r.Status, r.Error)
		}
	}
	jwt := (&jwtKeys{hs: []byte(values["JWT_SECRET"])}).token(t, "HS256", "jay", []string{"user"}, time.Minute, jwtAudience)
	if me := m.do(http.StatusOK, "GET", "/auth/me", nil, "Authorization", "Bearer "+jwt); str(me, "principal", "name") != "jay" {
		t.Errorf("/auth/me with the JWT: %v", me)
	}
	if me := m.do(http.StatusOK, "GET", "/auth/me", nil, "Authorization", "Bearer "+values["ROOT_TOKEN"]); str(me, "principal", "name") != "root" {
		t.Errorf("/auth/me with the admin's token: %v", me)
	}
	m.do(http.StatusOK, "POST", "/auth/stream-token", nil, alice...)

	toolhost := m.childPID(mesh.RoleToolhost)
	pids := map[string]int{
		"agent": m.childPID(mesh.RoleAgent), "toolhost": toolhost, "approver": m.childPID(mesh.RoleApprover),
		"group": m.childPID(mesh.RoleGroup), "bridge": m.childPID(mesh.RoleBridge),
		"items server": childNamed(t, toolhost, "mesh-test-mcp"), "resources server": childNamed(t, toolhost, "mcp-resources"),
	}
	// Who holds each secret; nobody else may, under any name.
	holders := map[string][]string{
		"ALICE_TOKEN": {"bridge"}, "ROOT_TOKEN": {"bridge"}, "JWT_SECRET": {"bridge"}, "MESH_STREAM_KEY": {"bridge"},
		// The tool host expands the items server's section with it.
		"ITEMS_TOKEN":    {"toolhost", "items server"},
		"OPENAI_API_KEY": {"agent"},
	}
	for _, proc := range slices.Sorted(maps.Keys(pids)) {
		env := procEnviron(t, pids[proc])
		all := ""
		for k, v := range env {
			all += k + "=" + v + "\n"
		}
		for _, name := range slices.Sorted(maps.Keys(values)) {
			holds := slices.Contains(holders[name], proc)
			switch {
			case holds && env[name] != values[name]:
				t.Errorf("the %s has no %s, which it needs", proc, name)
			case !holds && strings.Contains(all, values[name]):
				t.Errorf("the %s holds %s", proc, name)
			}
		}
		if !strings.HasSuffix(proc, "server") {
			continue
		}
		// An MCP server: what a program needs to run, and what its env
		// section names.
		for name := range env {
			if !mcpBaseEnv(name) && !(proc == "items server" && (name == testMCPEnv || name == "ITEMS_TOKEN")) {
				t.Errorf("the %s has %s, which neither its env section nor running a program needs", proc, name)
			}
		}
		if env["PATH"] == "" {
			t.Errorf("the %s has no PATH", proc)
		}
	}
}
