package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The terminal commands (mesh chat, approve, tail, sessions, tools), run
// as a person would: the real binary against a real `mesh up`, in a pipe
// here and under tmux in cli_chat_test.go.

// cliEnv is the environment of a terminal command pointed at m: its
// agent.yaml and data dir (the admin's NATS credentials), its addresses.
func (m *meshProc) cliEnv(extra ...string) []string {
	env := append(os.Environ(),
		"MESH_CONFIG="+m.config, "MESH_DATA_DIR="+m.dataDir,
		"MESH_HTTP_ADDR="+m.httpAddr, "MESH_NATS_ADDR="+m.natsAddr,
		"NATS_URL=", "NATS_CREDS=", "NATS_NKEY=", "MESH_NATS_AUTH=", "MESH_URL=", "MESH_TOKEN=", "NO_COLOR=1",
	)
	return append(env, extra...)
}

// cliResult is what a terminal command printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

// cli runs `mesh args…` with stdin and the extra environment, within a
// minute.
func (m *meshProc) cli(stdin string, env []string, args ...string) cliResult {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "mesh"), args...)
	cmd.Env = m.cliEnv(env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		m.t.Fatalf("mesh %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		m.t.Fatalf("mesh %s did not end within 90 s:\n%s", strings.Join(args, " "), r)
	}
	return r
}

// mustCLI runs a terminal command that must exit with want.
func (m *meshProc) mustCLI(want int, stdin string, env []string, args ...string) cliResult {
	m.t.Helper()
	r := m.cli(stdin, env, args...)
	if r.code != want {
		m.t.Fatalf("mesh %s: want exit %d, got\n%s", strings.Join(args, " "), want, r)
	}
	return r
}

// itemsConfig is the default agent with the test MCP server's gated items
// tools beside the resources, and a one-member group chat "desk".
func itemsConfig(t testing.TB, dir string) string {
	return gatedGroupConfig(t, dir, `  - name: desk
    participants:
      - {agent: clerk, description: answers questions, prompt: "You are the desk clerk."}
`)
}

// authCLIConfig is the default configuration with static tokens: alice a
// user, ops and kim approvers.
func authCLIConfig(t testing.TB) string {
	return defaultConfig(t) + `auth:
  tokens:
    - {name: alice, token: ` + aliceToken + `, roles: [user]}
    - {name: ops, token: ` + opsToken + `, roles: [approver]}
    - {name: kim, token: ` + kimToken + `, roles: [approver]}
`
}

const (
	aliceToken = "alice-token-cli-e2e-0123456789"
	opsToken   = "ops-token-cli-e2e-0123456789ab"
	kimToken   = "kim-token-cli-e2e-0123456789ab"
)

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

func TestCLIUsageAndCompletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := &meshProc{t: t, dir: dir, dataDir: filepath.Join(dir, "data"), config: filepath.Join(dir, "agent.yaml"), httpAddr: freeAddr(t), natsAddr: freeAddr(t)}
	if err := os.WriteFile(m.config, []byte(defaultConfig(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want int
		out  string
	}{
		{"no command", nil, 2, ""},
		{"unknown command", []string{"frobnicate"}, 2, ""},
		{"help", []string{"--help"}, 0, "chat"},
		{"chat help", []string{"chat", "--help"}, 0, "Ctrl-C cancels the"},
		{"approve help", []string{"approve", "--help"}, 0, "already decided"},
		{"tail help", []string{"tail", "--help"}, 0, "--from-start"},
		{"sessions help", []string{"sessions", "--help"}, 0, "rm ID"},
		{"tools help", []string{"tools", "--help"}, 0, "read-only"},
		{"unknown flag", []string{"tail", "--bogus"}, 2, ""},
		{"tail without a conversation", []string{"tail"}, 2, ""},
		{"tail both", []string{"tail", "abc", "--all"}, 2, ""},
		{"tail unknown type", []string{"tail", "--all", "--types", "NOPE"}, 2, ""},
		{"tail from-start and since", []string{"tail", "--all", "--from-start", "--since", "5m"}, 2, ""},
		{"approve yes without uuid", []string{"approve", "yes"}, 2, ""},
		{"chat agent and group", []string{"chat", "--agent", "a", "--group", "b"}, 2, ""},
		{"tools call bad json", []string{"tools", "call", "resources", "resources_list", "{not json"}, 2, ""},
		{"bad url", []string{"approve", "--url", "ftp://x"}, 2, ""},
		{"no mesh: NATS", []string{"sessions"}, 1, ""},
		{"no mesh: HTTP", []string{"approve"}, 1, ""},
		{"bash completion", []string{"completion", "bash"}, 0, "__start_mesh"},
		{"zsh completion", []string{"completion", "zsh"}, 0, "#compdef mesh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.t = t
			r := m.mustCLI(tc.want, "", nil, tc.args...)
			if !strings.Contains(r.stdout, tc.out) {
				t.Errorf("stdout lacks %q:\n%s", tc.out, r)
			}
			if tc.want != 0 && r.stderr == "" {
				t.Errorf("exit %d with nothing on stderr", tc.want)
			}
		})
	}
}
