package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// TestReadmeTourRunsAsWritten runs every command of README.md's tour, taken
// from the README itself, in bash with -e, against `mesh up` on the default
// configuration, as a newcomer pastes them into a second terminal: curl,
// jq, the nats CLI (pinned in testdata/peers/natscli) and bin/mesh. Only
// what differs from a newcomer's machine is rewritten: the mesh's ports and
// data directory (the test's are free ones), bin/ (the test's build), and
// a command that streams until Ctrl-C, which runs for 3 s instead.
func TestReadmeTourRunsAsWritten(t *testing.T) {
	t.Parallel()
	tools := t.TempDir()
	for _, name := range []string{"bash", "curl", "jq", "timeout"} {
		p, err := exec.LookPath(name)
		if err != nil {
			needPeer(t, "the README's tour needs %s", name)
		}
		if err := os.Symlink(p, filepath.Join(tools, name)); err != nil {
			t.Fatal(err)
		}
	}
	natsCLI(t, tools)
	if err := os.Symlink(filepath.Join(binDir, "mesh"), filepath.Join(tools, "mesh")); err != nil {
		t.Fatal(err)
	}

	m := startMesh(t, meshOpts{logLevel: "info"})
	agentBefore := m.childPID("agent")
	script := readmeTour(t, m)
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(tools, "bash"), "-euo", "pipefail", "-x", "-c", script)
	var err error
	cmd.Dir, err = filepath.Abs("../../..") // the clone, as the README's reader stands in it
	if err != nil {
		t.Fatal(err)
	}
	// Only the tools above, and for bin/mesh the data directory the test's
	// `mesh up` uses in place of ./data: the context there says the rest.
	cmd.Env = []string{"PATH=" + tools, "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"MESH_DATA_DIR=" + m.dataDir, "NO_COLOR=1"}
	out, err := cmd.CombinedOutput()
	t.Logf("the tour:\n%s", out)
	if err != nil {
		t.Fatalf("the README's tour failed: %v (its trace is above)", err)
	}

	text := string(out)
	for _, want := range []struct{ what, text string }{
		{"a turn that called resources_list", `"resources_list"`},
		{"a turn that waits for an approval", `"waiting_approval":true`},
		{"the decision resumed the turn", `"status":"approved"`},
		{"the events stream replayed the turn", `"type":"RUN_FINISHED"`},
		{"nats sub subscribed as the admin", "Subscribing on mesh.evt.>"},
		{"the bridge answered its health check", `"status":"healthy"`},
		{"nats kv get read the conversation", "mesh_sessions >"},
		{"nats stream info read the work queue", "Information for Stream MESH_WORK"},
		{"mesh status listed the agent", "agent"},
	} {
		if !strings.Contains(text, want.text) {
			t.Errorf("%s: %q is not in the tour's output", want.what, want.text)
		}
	}
	if n := m.resourceRows("web-1"); n != 1 {
		t.Errorf("resource web-1: %d rows after the approval, want 1", n)
	}
	meshtest.Eventually(t, 30*time.Second, func() bool {
		return m.childPID("agent") != agentBefore
	}, "the agent the tour killed (pid %d) was not started again", agentBefore)
	m.waitReady()
}

// readmeTour is the shell of README.md's tour: its sh blocks from "A
// five-minute tour" to the next section, rewritten for m (see
// TestReadmeTourRunsAsWritten).
func readmeTour(t *testing.T, m *meshProc) string {
	t.Helper()
	data, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks  []string
		inTour  bool
		inBlock bool
		cur     []string
	)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inTour = strings.HasPrefix(line, "## A five-minute tour")
		case inTour && !inBlock && line == "```sh":
			inBlock, cur = true, nil
		case inBlock && line == "```":
			inBlock = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case inBlock:
			cur = append(cur, line)
		}
	}
	if len(blocks) < 5 {
		t.Fatalf("README.md's tour has %d sh blocks; the test expects the turn, the approval, the stream, nats and the kill", len(blocks))
	}
	port := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	script := strings.NewReplacer(
		"localhost:8080", "localhost:"+port(m.httpAddr),
		"nats://127.0.0.1:4222", "nats://"+m.natsAddr,
		"./data/", m.dataDir+"/",
		"bin/mesh", "mesh",
	).Replace(strings.Join(blocks, "\n"))
	// A command that streams until Ctrl-C runs for 3 s; the comment after
	// it would swallow what is appended, so it goes.
	streaming := regexp.MustCompile(`^(curl -N|nats sub) `)
	lines := strings.Split(script, "\n")
	for i, line := range lines {
		if !streaming.MatchString(line) {
			continue
		}
		if c := strings.Index(line, "  #"); c > 0 {
			line = strings.TrimRight(line[:c], " ")
		}
		lines[i] = fmt.Sprintf("timeout 3 %s || [ $? = 124 ]", line)
	}
	return strings.Join(lines, "\n")
}

// natsCLI builds the nats CLI of testdata/peers/natscli into dir.
func natsCLI(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "nats"), "github.com/nats-io/natscli/nats")
	cmd.Dir = filepath.Join(peersDir, "natscli")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		needPeer(t, "the nats CLI does not build (`go mod download` in cmd/mesh/e2e/%s/natscli fetches its modules): %v\n%s", peersDir, err, out)
	}
}
