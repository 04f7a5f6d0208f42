package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// queueMesh is a mesh whose agents the test runs itself (none under mesh
// up), with POSTs that answer 202 after 2 s; extra is more configuration.
func queueMesh(t *testing.T, extra string) (*meshProc, *exec.Cmd) {
	t.Helper()
	m := startMesh(t, meshOpts{config: defaultConfig(t) + "\nhttp:\n  wait_timeout: 2s\n" + extra, args: []string{"--replicas", "agent=0"}, noWait: true})
	agentCmd, _ := runRole(t, m, "agent")
	m.waitReady()
	return m, agentCmd
}

// stopAgent kills the test's agent process and waits for it to be gone.
func stopAgent(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
}

// sendQueued sends text with no agent running: the answer is a 202 after
// the wait limit that says the turn is queued; it returns the answer.
func sendQueued(t *testing.T, m *meshProc, conv, text string) map[string]any {
	t.Helper()
	status, out := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": text})
	if status != http.StatusAccepted {
		t.Fatalf("send with no agent: %d %v, want 202 after the wait limit", status, out)
	}
	run := str(out, "run_id")
	if run == "" || str(out, "conversation_id") != conv || str(out, "status") != "queued" {
		t.Errorf("202 body: run_id %q, conversation_id %q, status %q; want the run, %s, queued", run, str(out, "conversation_id"), str(out, "status"), conv)
	}
	if u := str(out, "events_url"); !strings.HasPrefix(u, "/conversations/"+conv+"/events?after=") {
		t.Errorf("202 events_url = %q, want the conversation's events from the run on", u)
	}
	if str(out, "conversation", "status") != "queued" || str(out, "conversation", "queued_turn", "id") != run {
		t.Errorf("202 conversation: status %q, queued_turn %v; want queued, the run", str(out, "conversation", "status"), obj(out, "conversation", "queued_turn"))
	}
	return out
}

// A message sent while no agent runs is queued, and every surface says
// so: REST (status queued, queued_turn, the list's counts, the 202),
// AG-UI (the run starts where it was queued, CUSTOM run_queued; /agui refuses a
// second message), A2A (submitted). A second message is refused; once an
// agent runs, the queued turn runs, once.
func TestQueuedTurnIsVisibleAndRunsWhenAnAgentComes(t *testing.T) {
	t.Parallel()
	m, agentCmd := queueMesh(t, "")
	conv, _ := m.firstTurn("list all resources") // the agent works, and has its consumer
	stopAgent(t, agentCmd)

	out := sendQueued(t, m, conv, "add resource queued-1 with value 4")
	run := str(out, "run_id")

	// REST.
	c := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
	if got := str(c, "status"); got != "queued" {
		t.Fatalf("GET while queued: status %q, want queued", got)
	}
	if c["turn"] != nil {
		t.Fatalf("GET while queued: turn %v, want none", c["turn"])
	}
	if got := str(c, "queued_turn", "id"); got != run {
		t.Fatalf("GET while queued: queued turn %q, want %q", got, run)
	}
	if got := str(c, "queued_turn", "message"); got != "add resource queued-1 with value 4" {
		t.Fatalf("GET while queued: queued message %q, want the one sent", got)
	}
	all := m.do(http.StatusOK, "GET", "/conversations", nil)
	if n, _ := obj(all, "summary")["queued"].(float64); n != 1 {
		t.Errorf("list summary = %v, want 1 queued", obj(all, "summary"))
	}
	status, refused := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"})
	if status != http.StatusConflict || str(refused, "code") != "turn_in_progress" || !strings.Contains(str(refused, "error"), run) {
		t.Errorf("second message while queued: %d %v, want 409 turn_in_progress naming %s", status, refused, run)
	}

	// AG-UI: the run's events, from the 202's events_url.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sse := openSSE(t, ctx, m.url(str(out, "events_url")), "")
	defer sse.close()
	// The run starts where its turn was queued, and run_queued follows.
	var ev struct {
		Type     string         `json:"type"`
		Name     string         `json:"name"`
		RunID    string         `json:"runId"`
		Value    map[string]any `json:"value"`
		Metadata map[string]any `json:"metadata"`
	}
	for i, want := range []string{"RUN_STARTED", "CUSTOM"} {
		got, err := sse.next()
		if err != nil {
			t.Fatal(err)
		}
		ev.Value, ev.Metadata = nil, nil
		switch err := json.Unmarshal([]byte(got.data), &ev); {
		case err != nil:
			t.Errorf("event %d from events_url %s: %v", i, got.data, err)
		case ev.Type != want:
			t.Errorf("event %d from events_url is %s %s, want %s", i, ev.Type, ev.Name, want)
		case want == "RUN_STARTED" && (ev.RunID != run || ev.Metadata["mesh"] != "queued"):
			t.Errorf("events_url starts %s, want RUN_STARTED of run %s, metadata mesh queued", got.data, run)
		case want == "CUSTOM" && (ev.Name != "run_queued" || ev.Value["runId"] != run):
			t.Errorf("events_url's second event %s, want run_queued of run %s", got.data, run)
		}
	}
	status, aguiOut := m.try("POST", "/agui", map[string]any{"threadId": conv, "runId": "agui-run-2", "messages": []any{map[string]any{"id": "u2", "role": "user", "content": "list all resources"}}})
	if status != http.StatusConflict || str(aguiOut, "code") != "turn_in_progress" {
		t.Errorf("AG-UI run while queued: %d %v, want 409 turn_in_progress", status, aguiOut)
	}

	// A2A.
	task := a2aSrvResult(m, "tasks/get", map[string]any{"id": conv})
	if state := str(task, "status", "state"); state != "submitted" {
		t.Errorf("A2A task while queued = %s, want submitted", state)
	}

	// An agent comes: the queued turn runs.
	runRole(t, m, "agent")
	var types []string
	for {
		e, err := sse.next()
		if err != nil {
			t.Fatalf("events of the run: %v (so far %v)", err, types)
		}
		_ = json.Unmarshal([]byte(e.data), &ev)
		if ev.Type == "RUN_STARTED" || ev.Type == "RUN_FINISHED" || ev.Type == "RUN_ERROR" {
			types = append(types, ev.Type+" "+ev.RunID)
		}
		if ev.Type == "RUN_FINISHED" || ev.Type == "RUN_ERROR" {
			break
		}
	}
	// The run started where it was queued: the agent's own RUN_STARTED is
	// not sent again.
	if want := fmt.Sprintf("RUN_FINISHED %s", run); strings.Join(types, ",") != want {
		t.Errorf("run events = %v, want %s", types, want)
	}
	c = obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
	if str(c, "status") != "waiting_approval" || c["queued_turn"] != nil || str(c, "pending_approval", "tool_name") != "resources_add" {
		t.Errorf("after the run: status %q, queued_turn %v, pending approval %v; want waiting for the add's approval", str(c, "status"), c["queued_turn"], obj(c, "pending_approval"))
	}
	var users []string
	for _, msg := range list(c, "messages") {
		if str(msg, "role") == "user" {
			users = append(users, str(msg, "content"))
		}
	}
	if strings.Join(users, "|") != "list all resources|add resource queued-1 with value 4" {
		t.Errorf("user messages = %q, want each message once, in order", users)
	}
	if task := a2aSrvResult(m, "tasks/get", map[string]any{"id": conv}); str(task, "status", "state") != "input-required" {
		t.Errorf("A2A task after the run = %s, want input-required", str(task, "status", "state"))
	}
}

// A queued turn whose work item is gone from the stream (purged here with
// a raw JetStream client; a bridge killed between its record and its
// publish leaves the same) is published again by the next read of its
// conversation, and runs once an agent comes.
func TestLostQueuedTurnIsPublishedAgain(t *testing.T) {
	t.Parallel()
	m, agentCmd := queueMesh(t, "  queue_check_after: 1s\n")
	conv, _ := m.firstTurn("list all resources")
	stopAgent(t, agentCmd)
	run := str(sendQueued(t, m, conv, "list all resources again"), "run_id")

	js := meshJS(t, m)
	work, err := js.Stream(t.Context(), "MESH_WORK")
	if err != nil {
		t.Fatal(err)
	}
	if err := work.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The next read after queue_check_after finds the item gone and
	// publishes it again.
	meshtest.Eventually(t, 30*time.Second, func() bool {
		c := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
		n, _ := obj(c, "queued_turn")["republished"].(float64)
		return str(c, "status") == "queued" && n == 1
	}, "the lost work item was not published again")
	msg, err := work.GetLastMsgForSubject(t.Context(), "mesh.work.agent.resource-manager."+conv)
	if err != nil || !strings.Contains(string(msg.Data), run) {
		t.Fatalf("the work item is not back on the conversation's subject: %v", err)
	}
	runRole(t, m, "agent")
	meshtest.Eventually(t, 60*time.Second, func() bool {
		c := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
		return str(c, "status") == "active" && str(c, "last_run", "id") == run && str(c, "last_run", "outcome") == "success"
	}, "the turn published again did not run")
	c := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
	n := 0
	for _, msg := range list(c, "messages") {
		if str(msg, "role") == "user" && str(msg, "content") == "list all resources again" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the turn's message is there %d times, want 1", n)
	}
}
