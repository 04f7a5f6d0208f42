package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// directory reads GET /agents by name.
func directory(t *testing.T, m *meshProc) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, a := range list(m.do(http.StatusOK, "GET", "/agents", nil), "agents") {
		out[str(a, "name")] = obj(a)
	}
	return out
}

// servedIn reports whether a process's log shows it ran a turn of conv.
func servedIn(t *testing.T, logPath, conv string) bool {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"session":"`+conv+`"`) && strings.Contains(line, `"role":"agent"`) {
			return true
		}
	}
	return false
}

// TestAgentDirectoryFollowsItsProcesses: two agents served by separate
// `mesh agent` processes are both online in GET /agents, with their tools,
// capabilities and their A2A cards; a conversation started with each, over REST, AG-UI
// (forwardedProps.agent) and A2A (/agents/<name>/a2a), is run by that
// agent's process only; an unknown agent is 404; a killed process's agent
// goes offline within the monitor's detection time.
func TestAgentDirectoryFollowsItsProcesses(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{args: []string{"--replicas", "agent=0"}, noWait: true})
	_, mainLog := runRole(t, m, "agent")
	reviewerConfig := filepath.Join(m.dir, "reviewer.yaml")
	if err := os.WriteFile(reviewerConfig, []byte("name: reviewer\ndescription: Reviews the resources.\ncapabilities: [reviews]\nprompt: You review resources.\nllm:\n  model: offline\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reviewer, reviewerLog := runRole(t, m, "agent", "MESH_CONFIG="+reviewerConfig, "MESH_NODE_ID=reviewer-1")
	m.waitReady()

	var dir map[string]map[string]any
	meshtest.Eventually(t, 30*time.Second, func() bool {
		dir = directory(t, m)
		return str(dir["reviewer"], "status") == "online" && str(dir["resource-manager"], "status") == "online" &&
			len(list(dir["reviewer"], "tools")) > 0
	}, "both agents online with their tools in GET /agents")
	rm, rv := dir["resource-manager"], dir["reviewer"]
	if rm["default"] != true {
		t.Errorf("resource-manager is not the default agent: %v", rm)
	}
	if rv["default"] == true {
		t.Errorf("reviewer is the default agent: %v", rv)
	}
	checkStrs(t, "reviewer's directory entry", rv, map[string]string{
		"description": "Reviews the resources.",
		"card":        "/agents/reviewer/.well-known/agent-card.json",
	})
	if nodes := list(rv, "nodes"); !slices.Contains(nodes, any("reviewer-1")) {
		t.Errorf("reviewer served by %v, want reviewer-1 among them", nodes)
	}
	if models := list(rv, "models"); !slices.Equal(models, []any{"offline"}) {
		t.Errorf("reviewer's models %v, want [offline], the model its process calls", models)
	}
	if caps := list(rv, "capabilities"); !slices.Equal(caps, []any{"reviews"}) {
		t.Errorf("reviewer's capabilities %v, want [reviews] from its process's configuration", caps)
	}
	if tools := list(rv, "tools"); !slices.Contains(tools, any("resources_list")) {
		t.Errorf("reviewer's tools %v, want resources_list among them", tools)
	}
	if one := m.do(http.StatusOK, "GET", "/agents/reviewer", nil); str(one, "name") != "reviewer" || str(one, "a2a") != "/agents/reviewer/a2a" {
		t.Errorf("GET /agents/reviewer = %v", one)
	}

	// REST: a conversation with each agent, run by its own process.
	withReviewer := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"agent": "reviewer", "message": "list all resources"})
	revConv := str(withReviewer, "conversation", "id")
	if str(withReviewer, "conversation", "agent") != "reviewer" || str(withReviewer, "result", "outcome") != "success" {
		t.Fatalf("conversation with reviewer: %v", withReviewer)
	}
	mainConv, _ := m.firstTurn("list all resources")
	// An agent logs a turn after publishing its end, and the log reaches its
	// file through a pipe: wait for each process's own line, then check that
	// the other process has none.
	meshtest.Eventually(t, 10*time.Second, func() bool {
		return servedIn(t, reviewerLog, revConv) && servedIn(t, mainLog, mainConv)
	}, "each conversation must be run by its agent's process: the reviewer's or main's turn is not in its log")
	if servedIn(t, reviewerLog, mainConv) || servedIn(t, mainLog, revConv) {
		t.Errorf("each conversation must be run by its agent's process only: reviewer ran main's %v, main ran reviewer's %v",
			servedIn(t, reviewerLog, mainConv), servedIn(t, mainLog, revConv))
	}

	// AG-UI: forwardedProps.agent makes a new thread the reviewer's.
	thread := "thread-for-reviewer"
	status, _ := m.try("POST", "/agui", map[string]any{"threadId": thread, "runId": "run-r1", "state": map[string]any{}, "tools": []any{}, "context": []any{},
		"messages": []any{map[string]any{"id": "u1", "role": "user", "content": "list all resources"}}, "forwardedProps": map[string]any{"agent": "reviewer"}}, "Accept", "text/event-stream")
	if status != http.StatusOK {
		t.Fatalf("AG-UI run for reviewer: status %d", status)
	}
	if got := m.do(http.StatusOK, "GET", "/conversations/"+thread, nil); str(got, "conversation", "agent") != "reviewer" {
		t.Errorf("AG-UI thread stored for %q, want reviewer", str(got, "conversation", "agent"))
	}

	// A2A: the reviewer's own card and endpoint.
	card := m.do(http.StatusOK, "GET", "/agents/reviewer/.well-known/agent-card.json", nil)
	if str(card, "name") != "reviewer" || !strings.HasSuffix(str(card, "url"), "/agents/reviewer/a2a") {
		t.Errorf("reviewer's card = %v", card)
	}
	status, out := m.try("POST", "/agents/reviewer/a2a", map[string]any{"jsonrpc": "2.0", "id": "r-1", "method": "message/send", "params": a2aSrvMessage("list all resources", "")})
	task := obj(out, "result")
	if status != http.StatusOK || str(task, "status", "state") != "completed" {
		t.Fatalf("A2A message/send to reviewer: %d %v", status, out)
	}
	if got := m.do(http.StatusOK, "GET", "/conversations/"+str(task, "id"), nil); str(got, "conversation", "agent") != "reviewer" {
		t.Errorf("A2A task stored for %q, want reviewer", str(got, "conversation", "agent"))
	}

	// Unknown agents.
	if s, body := m.try("POST", "/conversations", map[string]any{"agent": "nobody"}); s != http.StatusNotFound || str(body, "code") != "agent_not_found" {
		t.Errorf("conversation with an unknown agent: %d %v, want 404 agent_not_found", s, body)
	}
	if s, _ := m.try("GET", "/agents/nobody/.well-known/agent-card.json", nil); s != http.StatusNotFound {
		t.Errorf("card of an unknown agent: %d, want 404", s)
	}

	// The reviewer's process dies: offline, the other agent unaffected.
	if err := reviewer.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	meshtest.Eventually(t, 15*time.Second, func() bool {
		dir = directory(t, m)
		return str(dir["reviewer"], "status") == "offline"
	}, "reviewer not offline after its process was killed")
	t.Logf("reviewer offline %v after its process was killed", time.Since(killed).Round(100*time.Millisecond))
	if str(dir["resource-manager"], "status") != "online" {
		t.Errorf("resource-manager %v after the reviewer died, want online", dir["resource-manager"])
	}
}
