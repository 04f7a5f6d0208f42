package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// TestCLITailFromStartEqualsReplay: `mesh tail --from-start` on a finished
// conversation prints exactly the stored events GET
// /conversations/{id}/events replays, in order, as JSON and one line each for people; --types and
// --all --since filter; a follower sees a new turn live and stops on
// Ctrl-C with exit 0.
func TestCLITailFromStartEqualsReplay(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv, _ := m.firstTurn("list all resources")
	out := m.send(conv, "add resource web-1 with value 7")
	uuid := str(out, "result", "approval", "uuid")
	m.do(http.StatusOK, "POST", "/approvals/"+uuid, map[string]any{"approved": true})
	other, _ := m.firstTurn("list all resources")

	// How many events the stream holds for conv, from NATS itself.
	nc := m.adminNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), "MESH_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	total := storedOn(t, js, "MESH_EVENTS", "mesh.evt."+conv+".>")
	if total < 10 {
		t.Fatalf("the stream holds %d events of the conversation", total)
	}

	// The replay of the bridge: the stored events, each with its id, but
	// for the agent's RUN_STARTED of a run the bridge started where it was
	// queued or decided; the starts and ends it writes have no id.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sse := openSSE(t, ctx, m.url("/conversations/"+conv+"/events"), "")
	var replay []string
	opened := map[string]bool{}
	for len(replay)+len(opened) < total {
		ev, err := sse.next()
		if err != nil {
			t.Fatalf("replay after %d of %d events: %v", len(replay), total, err)
		}
		var e struct {
			Type     string         `json:"type"`
			RunID    string         `json:"runId"`
			Metadata map[string]any `json:"metadata"`
		}
		_ = json.Unmarshal([]byte(ev.data), &e)
		switch {
		case ev.id != "":
			replay = append(replay, ev.data)
		case e.Type == "RUN_STARTED" && (e.Metadata["mesh"] == "queued" || e.Metadata["mesh"] == "decided"):
			opened[e.RunID] = true
		}
	}
	sse.close()

	r := m.mustCLI(0, "", nil, "tail", conv, "--from-start", "--no-follow", "--json")
	var got []string
	var kept []int // the lines of the stored events the replay sends
	for i, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		var e struct {
			Type  string `json:"type"`
			RunID string `json:"runId"`
		}
		_ = json.Unmarshal([]byte(line), &e)
		if e.Type == "RUN_STARTED" && opened[e.RunID] {
			continue
		}
		got = append(got, line)
		kept = append(kept, i)
	}
	if len(got) != len(replay) || len(got)+len(opened) != total {
		t.Fatalf("tail printed %d events (%d after the runs the bridge started), the replay has %d:\n%s", total, len(got), len(replay), r)
	}
	for i := range replay {
		if got[i] != replay[i] {
			t.Fatalf("event %d differs:\n tail   %s\n replay %s", i, got[i], replay[i])
		}
	}

	// For people: one line per event, its type on it.
	r = m.mustCLI(0, "", nil, "tail", conv, "--from-start", "--no-follow")
	pretty := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(pretty) != total {
		t.Fatalf("tail (text) printed %d lines, want %d:\n%s", len(pretty), total, r)
	}
	for i := range replay {
		if typ := eventType(replay[i]); !strings.Contains(pretty[kept[i]], " "+typ) {
			t.Errorf("line %d %q lacks its type %s", kept[i], pretty[kept[i]], typ)
		}
	}
	if !strings.Contains(r.stdout, "RUN_FINISHED run "+uuid+" success") || !strings.Contains(r.stdout, "CUSTOM approval_decided") {
		t.Errorf("the text lacks the resumed run or the decision:\n%s", r.stdout)
	}

	// --types keeps those types only.
	wantFinished := 0
	for _, d := range replay {
		if eventType(d) == "RUN_FINISHED" {
			wantFinished++
		}
	}
	r = m.mustCLI(0, "", nil, "tail", conv, "--from-start", "--no-follow", "--json", "--types", "run_finished")
	if n := strings.Count(r.stdout, "\n"); n != wantFinished || strings.Count(r.stdout, `"type":"RUN_FINISHED"`) != n {
		t.Errorf("--types RUN_FINISHED printed %d lines, want %d:\n%s", n, wantFinished, r)
	}
	// --all --since names the conversations.
	r = m.mustCLI(0, "", nil, "tail", "--all", "--since", "1h", "--no-follow", "--types", "RUN_STARTED")
	if !strings.Contains(r.stdout, conv) || !strings.Contains(r.stdout, other) {
		t.Errorf("--all --since lacks a conversation:\n%s", r)
	}
	// Nothing stored and not following: nothing printed.
	if r := m.mustCLI(0, "", nil, "tail", conv, "--no-follow"); r.stdout != "" {
		t.Errorf("tail --no-follow without a replay printed:\n%s", r)
	}

	// Following: a new turn shows live; Ctrl-C stops with 0.
	consumers := func() int {
		info, err := stream.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := consumers()
	cmd := exec.Command(filepath.Join(binDir, "mesh"), "tail", conv)
	cmd.Env = m.cliEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	seen := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			seen <- sc.Text()
		}
		close(seen)
	}()
	// The follower starts at the stream's end, once its consumer exists.
	meshtest.Eventually(t, 30*time.Second, func() bool { return consumers() > before }, "mesh tail made no consumer")
	m.send(conv, "list all resources")
	deadline := time.After(30 * time.Second)
	var lines []string
	for live := false; !live; {
		select {
		case line := <-seen:
			lines = append(lines, line)
			live = strings.Contains(line, "RUN_FINISHED")
		case <-deadline:
			t.Fatalf("mesh tail did not show the live turn; it printed:\n%s", strings.Join(lines, "\n"))
		}
	}
	if !strings.Contains(lines[0], "CUSTOM run_queued") {
		t.Errorf("the live turn starts with %q, want its run_queued", lines[0])
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("mesh tail after Ctrl-C: %v", err)
	}
}
