package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// tmuxChat is a terminal command running in a tmux session of its own, typed
// into with send-keys and read with capture-pane, as a person at a terminal.
type tmuxChat struct {
	t    *testing.T
	tmux string
	sock string
}

// startTmux runs `mesh args…` pointed at m in a new tmux server; the shell
// prints EXIT=<code> when it ends.
func startTmux(t *testing.T, m *meshProc, env []string, args ...string) *tmuxChat {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is not installed (.ci/run installs it)")
		}
		t.Skip("tmux is not installed")
	}
	c := &tmuxChat{t: t, tmux: tmux, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	shell := filepath.Join(binDir, "mesh") + " " + strings.Join(args, " ") + "; echo EXIT=$?; sleep 600"
	cmd := exec.Command(tmux, "-S", c.sock, "new-session", "-d", "-x", "200", "-y", "50", "-s", "chat", shell)
	// A new tmux server passes its environment to the session's shell;
	// NO_COLOR unset: colours are on, as at a terminal (capture-pane drops them).
	cmd.Env = append(m.cliEnv(env...), "TERM=xterm-256color", "NO_COLOR=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", c.sock, "kill-server").Run() })
	return c
}

// screen is the whole pane, history included, wrapped lines joined.
func (c *tmuxChat) screen() string {
	out, err := exec.Command(c.tmux, "-S", c.sock, "capture-pane", "-p", "-J", "-S", "-", "-t", "chat").Output()
	if err != nil {
		c.t.Fatalf("tmux capture-pane: %v", err)
	}
	return string(out)
}

// keys sends tmux key names (Enter, C-c …).
func (c *tmuxChat) keys(keys ...string) {
	c.t.Helper()
	args := append([]string{"-S", c.sock, "send-keys", "-t", "chat"}, keys...)
	if out, err := exec.Command(c.tmux, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
}

// typeLine types text literally, then Enter.
func (c *tmuxChat) typeLine(text string) {
	c.t.Helper()
	if out, err := exec.Command(c.tmux, "-S", c.sock, "send-keys", "-t", "chat", "-l", text).CombinedOutput(); err != nil {
		c.t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
	c.keys("Enter")
}

// waitFor waits until the screen shows text at least n times.
func (c *tmuxChat) waitFor(text string, n int) string {
	c.t.Helper()
	return c.waitForAny(n, text)
}

// waitForAny waits until the screen shows one of texts n times; it reads
// the screen ten times a second (each read runs tmux).
func (c *tmuxChat) waitForAny(n int, texts ...string) string {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := c.screen()
		for _, text := range texts {
			if strings.Count(s, text) >= n {
				return s
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after 60s the screen does not show %q %d times:\n%s", texts, n, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var convLine = regexp.MustCompile(`conversation ([0-9a-f-]{36})`)

// TestCLIChatInTmux drives `mesh chat` at a terminal: a tool turn, an
// approval answered y, one decided elsewhere while the prompt waits, a
// turn cancelled with Ctrl-C, and a second Ctrl-C that quits (exit 130).
func TestCLIChatInTmux(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: itemsConfig(t, dir)})
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644) })
	c := startTmux(t, m, nil, "chat")
	head := c.waitFor("you>", 1)
	found := convLine.FindStringSubmatch(head)
	if found == nil {
		t.Fatalf("no conversation id on the screen:\n%s", head)
	}
	conv := found[1]

	// A tool turn: the call, its result and the streamed answer.
	c.typeLine("list all resources")
	s := c.waitFor("you>", 2)
	for _, want := range []string{"[call] resources_list {}", `[result] {"count":0,"resources":[]}`, "resource-manager: There are no resources."} {
		if !strings.Contains(s, want) {
			t.Errorf("the tool turn lacks %q:\n%s", want, s)
		}
	}

	// An approval: the tool and its arguments, decided on the spot.
	c.typeLine("add resource web-1 with value 7")
	s = c.waitFor("approve? [y/n]", 1)
	if !strings.Contains(s, `[approval needed] resources_add on resources {"name":"web-1","value":7}`) {
		t.Errorf("the approval does not show its tool and arguments:\n%s", s)
	}
	if n := m.resourceRows("web-1"); n != 0 {
		t.Fatalf("web-1 exists before the approval (%d rows)", n)
	}
	c.typeLine("y")
	s = c.waitFor("you>", 3)
	for _, want := range []string{"[approved by cli:", "Created resource web-1"} {
		if !strings.Contains(s, want) {
			t.Errorf("the approved turn lacks %q:\n%s", want, s)
		}
	}
	if n := m.resourceRows("web-1"); n != 1 {
		t.Errorf("web-1 has %d rows after the approval, want 1", n)
	}
	if by := decidedBy(m, conv, nil); !strings.HasPrefix(by, "cli:") {
		t.Errorf("the conversation's result says decided_by %q, want the person at the terminal", by)
	}

	// An approval decided elsewhere (over REST) while the prompt waits:
	// the prompt goes, the chat says who decided and the turn ends, with
	// no key pressed.
	c.typeLine("add resource web-2 with value 8")
	c.waitFor("approve? [y/n]", 2)
	var pending string
	for _, ap := range list(m.do(http.StatusOK, "GET", "/approvals?status=pending", nil), "approvals") {
		if str(ap, "conversation_id") == conv {
			pending = str(ap, "uuid")
		}
	}
	if pending == "" {
		t.Fatal("no pending approval of the chat's conversation")
	}
	m.do(http.StatusOK, "POST", "/approvals/"+pending, map[string]any{"approved": true, "by": "someone-on-the-web"})
	s = c.waitFor("you>", 4)
	for _, want := range []string{"[approved by someone-on-the-web", "Created resource web-2"} {
		if !strings.Contains(s, want) {
			t.Errorf("the turn decided elsewhere lacks %q:\n%s", want, s)
		}
	}

	// Ctrl-C cancels the running turn; the chat goes on.
	c.typeLine("list items")
	meshtest.Eventually(t, 30*time.Second, func() bool { return lines(t, filepath.Join(dir, "calls")) == 1 }, "the tool call never started")
	c.keys("C-c")
	c.waitFor("[cancelling the turn: Ctrl-C again quits]", 1)
	c.waitForAny(1, "[cancelled]", "[error CANCELLED]")
	c.waitFor("you>", 5)
	if st := str(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation", "status"); st != "active" {
		t.Errorf("after Ctrl-C the conversation is %q, want active", st)
	}

	// A second Ctrl-C, at the prompt the cancelled turn left, quits with
	// exit code 130.
	c.keys("C-c")
	c.waitFor("EXIT=130", 1)
}

// decidedBy is decided_by on the last tool result of conversation conv.
func decidedBy(m *meshProc, conv string, headers []string) string {
	m.t.Helper()
	by := ""
	for _, msg := range list(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil, headers...), "conversation", "messages") {
		if str(msg, "role") == "tool" && str(msg, "decided_by") != "" {
			by = str(msg, "decided_by")
		}
	}
	return by
}

// TestCLIChatInAPipe drives `mesh chat` through a pipe: one message a line,
// the line after an approval request answers it; resuming prints the
// history; --json prints the events; a group chat; the exit codes.
func TestCLIChatInAPipe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: itemsConfig(t, dir)})

	r := m.mustCLI(0, "list all resources\nadd resource web-2 with value 3\ny\n", nil, "chat")
	for _, want := range []string{"[call] resources_list {}", "resource-manager: There are no resources.",
		`[approval needed] resources_add on resources {"name":"web-2","value":3}`, "[approved by cli:", "Created resource web-2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r)
		}
	}
	found := convLine.FindStringSubmatch(r.stderr)
	if found == nil || !strings.Contains(r.stderr, "? [y/n]") {
		t.Fatalf("stderr has no conversation id or approval prompt:\n%s", r)
	}
	conv := found[1]
	if n := m.resourceRows("web-2"); n != 1 {
		t.Errorf("web-2 has %d rows, want 1", n)
	}

	// Resuming prints the history, with who decided.
	r = m.mustCLI(0, "", nil, "chat", conv)
	for _, want := range []string{"you: list all resources", "you: add resource web-2 with value 3", "[call] resources_add", "(decided by cli:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the resumed history lacks %q:\n%s", want, r)
		}
	}

	// n rejects; an approval left unanswered at the end of the input stays
	// pending.
	r = m.mustCLI(0, "add resource web-3 with value 1\nn\nadd resource web-4 with value 1\n", nil, "chat")
	if !strings.Contains(r.stdout, "[rejected by cli:") || !strings.Contains(r.stderr, "left pending: mesh approve yes|no") {
		t.Errorf("rejection or pending approval not shown:\n%s", r)
	}
	if a, b := m.resourceRows("web-3"), m.resourceRows("web-4"); a != 0 || b != 0 {
		t.Errorf("web-3 has %d rows, web-4 %d: want none", a, b)
	}
	pending := list(m.do(http.StatusOK, "GET", "/approvals?status=pending", nil), "approvals")
	if len(pending) != 1 || str(pending[0], "tool_args", "name") != "web-4" {
		t.Errorf("pending approvals %v, want web-4's", pending)
	}

	// --json: one AG-UI event per line.
	r = m.mustCLI(0, "list all resources\n", nil, "chat", "--json")
	var types []string
	for line := range strings.Lines(strings.TrimSpace(r.stdout)) {
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type == "" {
			t.Fatalf("stdout line %q is not an event:\n%s", line, r)
		}
		types = append(types, ev.Type)
	}
	if len(types) < 3 || types[len(types)-1] != "RUN_FINISHED" || !strings.Contains(strings.Join(types, " "), "TOOL_CALL_RESULT") {
		t.Errorf("event types %v, want a tool turn ending with RUN_FINISHED", types)
	}

	// A group chat names its speaker.
	r = m.mustCLI(0, "list all resources\n", nil, "chat", "--group", "desk")
	if !strings.Contains(r.stdout, "[speaker clerk]") || !strings.Contains(r.stdout, "[call] resources_list") {
		t.Errorf("the group chat lacks its speaker or call:\n%s", r)
	}

	m.mustCLI(0, "/quit\n", nil, "chat", "--agent", "resource-manager")
	if r := m.mustCLI(2, "", nil, "chat", "--agent", "someone-else"); !strings.Contains(r.stderr, `serves the agent "resource-manager"`) {
		t.Errorf("--agent of another agent: %s", r)
	}
	if r := m.mustCLI(1, "", nil, "chat", "00000000-0000-0000-0000-000000000000"); !strings.Contains(r.stderr, "not found") {
		t.Errorf("an unknown conversation: %s", r)
	}
}

// TestCLIChatWaitsForAnApprover: a user whose token may not decide sees
// the approval, says y, is told so, and the chat goes on once an approver
// decides with `mesh approve yes`.
func TestCLIChatWaitsForAnApprover(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: authCLIConfig(t)})
	cmd := exec.Command(filepath.Join(binDir, "mesh"), "chat")
	cmd.Env = m.cliEnv("MESH_TOKEN=" + aliceToken)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	notes := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			notes <- sc.Text()
		}
		close(notes)
	}()
	waitNote := func(text string) string {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case line, ok := <-notes:
				if !ok {
					t.Fatalf("mesh chat ended before saying %q", text)
				}
				if strings.Contains(line, text) {
					return line
				}
			case <-deadline:
				t.Fatalf("mesh chat never said %q", text)
			}
		}
	}
	_, _ = io.WriteString(stdin, "add resource web-5 with value 5\n")
	waitNote("? [y/n]")
	_, _ = io.WriteString(stdin, "y\n")
	waitNote("your token may not decide")
	r := m.mustCLI(0, "", []string{"MESH_TOKEN=" + opsToken}, "approve", "list", "--json")
	var aps []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &aps); err != nil || len(aps) != 1 {
		t.Fatalf("approve list: %v\n%s", err, r)
	}
	m.mustCLI(0, "", []string{"MESH_TOKEN=" + opsToken}, "approve", "yes", str(aps[0], "uuid"))
	_ = stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mesh chat: %v\n%s", err, stdout.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("mesh chat did not end after the approver decided:\n%s", stdout.String())
	}
	for _, want := range []string{"[approved by ops", "Created resource web-5"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
}
