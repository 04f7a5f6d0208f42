package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The tests in this file and in web_test.go drive the mesh with real peers
// installed from npm in testdata/peers (`make peers`, or `npm ci` there):
// the official AG-UI client and playwright-core, which drives Debian's
// Chromium. Each peer is a script of testdata/peers that prints one JSON
// object on stdout; the Go test asserts on it.

// peersDir holds the npm peers: package.json, package-lock.json, scripts.
const peersDir = "testdata/peers"

// needPeer is the one rule for a missing peer (node, an npm package,
// Chromium): the test is skipped on a developer's machine, and fails in CI
// (CI=true), where .ci/run installs every peer and a missing one is a broken
// setup rather than a reason to test less.
func needPeer(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: .ci/run installs the test peers, so this is a broken setup)", msg)
	}
	t.Skipf("%s: skipped (install with `make peers`; CI=true makes this a failure)", msg)
}

// nodeWith returns the node binary after checking that the npm packages are
// installed in peersDir.
func nodeWith(t testing.TB, packages ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		needPeer(t, "node is not on PATH")
	}
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(peersDir, "node_modules", p, "package.json")); err != nil {
			needPeer(t, "npm package %s is not installed in cmd/mesh/e2e/%s", p, peersDir)
		}
	}
	return node
}

// runPeer runs the node script of peersDir with env added to the test's
// environment, logs its stderr and decodes the JSON object it printed last
// on stdout into out. A script that fails or prints no JSON fails the test.
//
// A script hands control to the test at a checkpoint by printing
// {"checkpoint": name} on a line of stdout and reading one line of stdin:
// runPeer calls checkpoints[name] (on the test's goroutine) and answers "ok".
func runPeer(t *testing.T, node, script string, timeout time.Duration, env []string, out any, checkpoints map[string]func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = peersDir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", script, err)
	}
	waited := false
	defer func() {
		if !waited { // a checkpoint failed the test: stop the script
			cancel()
			_ = cmd.Wait()
		}
	}()
	var last string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		var cp struct {
			Checkpoint string `json:"checkpoint"`
		}
		if json.Unmarshal([]byte(line), &cp) == nil && cp.Checkpoint != "" {
			fn := checkpoints[cp.Checkpoint]
			if fn == nil {
				t.Errorf("%s: unknown checkpoint %q", script, cp.Checkpoint)
				_, _ = io.WriteString(stdin, "unknown\n")
				continue
			}
			t.Logf("%s: checkpoint %s", script, cp.Checkpoint)
			fn()
			_, _ = io.WriteString(stdin, "ok\n")
			continue
		}
		if line != "" {
			last = line
		}
	}
	_ = stdin.Close()
	runErr := cmd.Wait()
	waited = true
	t.Logf("%s ran in %v; its log:\n%s", script, time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	if err := json.Unmarshal([]byte(last), out); err != nil {
		t.Fatalf("%s: %v; no JSON result on stdout (%v): %q", script, runErr, err, last)
	}
	if runErr != nil {
		t.Errorf("%s: %v (its result: %s)", script, runErr, last)
	}
}

// aguiResult is what agui-run.mjs prints.
type aguiResult struct {
	ThreadID string    `json:"threadId"`
	Runs     []aguiRun `json:"runs"`
}

type aguiRun struct {
	Name string `json:"name"`
	// Error is the client's rejection of the run (a protocol violation, an
	// HTTP error), with its stack; RunFailed what onRunFailed was told.
	Error             string          `json:"error"`
	RunFailed         string          `json:"runFailed"`
	Events            []string        `json:"events"`
	Outcome           string          `json:"outcome"`
	Interrupts        []aguiInterrupt `json:"interrupts"`
	PendingInterrupts []aguiInterrupt `json:"pendingInterrupts"`
	Result            map[string]any  `json:"result"`
	NewMessages       []aguiMessage   `json:"newMessages"`
	Messages          []aguiMessage   `json:"messages"`
}

type aguiInterrupt struct {
	ID         string `json:"id"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
	ToolCallID string `json:"toolCallId"`
}

type aguiMessage struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"toolCallId"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"toolCalls"`
}

func (m aguiMessage) text() string { s, _ := m.Content.(string); return s }

// call finds the tool call named name among msgs and its result.
func call(msgs []aguiMessage, name string) (id, args, result string, ok bool) {
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.Function.Name == name {
				id, args, ok = c.ID, c.Function.Arguments, true
			}
		}
	}
	for _, m := range msgs {
		if ok && m.Role == "tool" && m.ToolCallID == id {
			result = m.text()
		}
	}
	return id, args, result, ok
}

// reply is the text of the last assistant message of msgs.
func reply(msgs []aguiMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" && msgs[i].text() != "" {
			return msgs[i].text()
		}
	}
	return ""
}

// TestAGUIOfficialClient runs the official npm client, @ag-ui/client's
// HttpAgent, against POST /agui of the real binary: a tool turn, a turn that
// pauses for approval (RUN_FINISHED with an interrupt outcome), its resume
// (approved), and a second pause answered with a cancelled resume. The
// client verifies every stream itself; a rejection fails the test with the
// client's own message.
func TestAGUIOfficialClient(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@ag-ui/client")
	m := startMesh(t, meshOpts{logLevel: "info"})
	thread := uuid.NewString()

	var res aguiResult
	runPeer(t, node, "agui-run.mjs", 2*time.Minute, []string{"AGUI_URL=" + m.url("/agui"), "THREAD_ID=" + thread}, &res, nil)
	runs := map[string]aguiRun{}
	for _, r := range res.Runs {
		runs[r.Name] = r
		if r.Error != "" || r.RunFailed != "" {
			t.Errorf("the official AG-UI client rejected the %q run:\n%s\nonRunFailed: %s\nevents: %v", r.Name, r.Error, r.RunFailed, r.Events)
		}
		if len(r.Events) < 2 || r.Events[0] != "RUN_STARTED" || r.Events[len(r.Events)-1] != "RUN_FINISHED" {
			t.Errorf("%s: events %v, want RUN_STARTED … RUN_FINISHED", r.Name, r.Events)
		}
	}
	if len(res.Runs) != 5 {
		t.Fatalf("runs = %d (%v), want tool, interrupt, resume, interrupt-remove, cancel", len(res.Runs), names(res.Runs))
	}

	// (a) A tool turn: the reply and the tool call with its result.
	tool := runs["tool"]
	if tool.Outcome != "success" {
		t.Errorf("tool run outcome = %q, want success", tool.Outcome)
	}
	if _, _, result, ok := call(tool.NewMessages, "resources_list"); !ok || !strings.Contains(result, `"count"`) {
		t.Errorf("tool run messages %+v: want the resources_list call and its result", tool.NewMessages)
	}
	if r := reply(tool.NewMessages); !strings.Contains(r, "resource") {
		t.Errorf("tool run reply = %q, want the resources reported", r)
	}

	// (b) An approval turn ends with an interrupt the client keeps as pending.
	paused := runs["interrupt"]
	if paused.Outcome != "interrupt" || len(paused.Interrupts) != 1 || len(paused.PendingInterrupts) != 1 {
		t.Fatalf("interrupt run: outcome %q, interrupts %+v, pendingInterrupts %+v; want one tool_approval interrupt", paused.Outcome, paused.Interrupts, paused.PendingInterrupts)
	}
	in := paused.Interrupts[0]
	addID, addArgs, addResult, ok := call(paused.NewMessages, "resources_add")
	switch {
	case !ok:
		t.Errorf("interrupt run messages %+v: want the resources_add call", paused.NewMessages)
	case in.Reason != "tool_approval" || in.ToolCallID != addID || !strings.Contains(in.Message, "ag-1"):
		t.Errorf("interrupt = %+v, want reason tool_approval for call %s (ag-1)", in, addID)
	case addResult != "":
		t.Errorf("resources_add has a result before its approval: %q", addResult)
	case !strings.Contains(addArgs, `"ag-1"`):
		t.Errorf("resources_add arguments = %s, want name ag-1", addArgs)
	}

	// The resume decides the interrupt and completes the paused turn.
	resumed := runs["resume"]
	if resumed.Outcome != "success" || len(resumed.PendingInterrupts) != 0 {
		t.Errorf("resume run: outcome %q, pendingInterrupts %+v; want success and none pending", resumed.Outcome, resumed.PendingInterrupts)
	}
	if _, _, result, _ := call(resumed.Messages, "resources_add"); !strings.Contains(result, `"ag-1"`) {
		t.Errorf("resources_add result after the resume = %q, want the created ag-1", result)
	}
	if r := reply(resumed.NewMessages); !strings.Contains(r, "ag-1") {
		t.Errorf("resume reply = %q, want ag-1 reported", r)
	}
	ap := m.do(http.StatusOK, "GET", "/approvals/"+in.ID, nil)
	// Decided by the caller's principal: anonymous, authentication off.
	if str(ap, "approval", "status") != "approved" || str(ap, "approval", "decision", "by") != "anonymous" {
		t.Errorf("approval %s = %v, want approved by anonymous", in.ID, obj(ap, "approval"))
	}

	// A cancelled resume rejects the call: nothing is removed.
	cancelled := runs["cancel"]
	if _, _, result, _ := call(cancelled.Messages, "resources_remove"); cancelled.Outcome != "success" || !strings.HasPrefix(result, "rejected") {
		t.Errorf("cancel run: outcome %q, resources_remove result %q; want success and a rejected call", cancelled.Outcome, result)
	}

	if n := m.resourceRows("ag-1"); n != 1 {
		t.Errorf("rows named ag-1 = %d, want 1 (created once, removal rejected)", n)
	}
	conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+thread, nil), "conversation")
	if str(conv, "status") != "active" || conv["pending_approval"] != nil {
		t.Errorf("conversation %s: status %s, pending %v; want active with nothing pending", thread, str(conv, "status"), conv["pending_approval"])
	}
	if users := messagesOf(conv, "user"); len(users) != 3 {
		t.Errorf("conversation has %d user messages, want 3 (one per turn, none for the resumes)", len(users))
	}
}

func names(runs []aguiRun) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.Name)
	}
	return out
}

// TestAGUIOfficialClientOnAPipeline runs the same scenario against the
// sequential pipeline of config/examples: every run, including those that
// pause inside the executor and those that resume it, passes the client's
// own checks of steps (started once, finished before the run ends), and
// the steps show both nodes. The rejected removal ends the pipeline: its
// run is cancelled, and the official client takes that too.
func TestAGUIOfficialClientOnAPipeline(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@ag-ui/client")
	m := startMesh(t, meshOpts{config: exampleConfig(t, "sequential"), logLevel: "info"})
	thread := uuid.NewString()
	var res aguiResult
	runPeer(t, node, "agui-run.mjs", 2*time.Minute, []string{"AGUI_URL=" + m.url("/agui"), "THREAD_ID=" + thread}, &res, nil)
	if len(res.Runs) != 5 {
		t.Fatalf("runs = %d (%v), want tool, interrupt, resume, interrupt-remove, cancel", len(res.Runs), names(res.Runs))
	}
	want := map[string]string{"tool": "success", "interrupt": "interrupt", "resume": "success", "interrupt-remove": "interrupt", "cancel": "cancelled"}
	for _, r := range res.Runs {
		if r.Error != "" || r.RunFailed != "" {
			t.Errorf("the official AG-UI client rejected the %q run:\n%s\nonRunFailed: %s\nevents: %v", r.Name, r.Error, r.RunFailed, r.Events)
		}
		if r.Outcome != want[r.Name] {
			t.Errorf("%s: outcome %q, want %q", r.Name, r.Outcome, want[r.Name])
		}
	}
	tool := strings.Join(res.Runs[0].Events, " ")
	if strings.Count(tool, "STEP_STARTED") != 3 || strings.Count(tool, "STEP_FINISHED") != 3 || !strings.Contains(tool, "STATE_DELTA") {
		t.Errorf("tool run events %s, want three steps (pipeline, analyzer, executor) and state deltas", tool)
	}
	if n := m.resourceRows("ag-1"); n != 1 {
		t.Errorf("rows named ag-1 = %d, want 1 (created once, removal rejected)", n)
	}
}
