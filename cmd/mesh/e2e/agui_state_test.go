package e2e

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// stateConfig is an agent offered set_state, with the test MCP server's
// clock_in, whose result carries a state patch in _meta.
func stateConfig() string {
	return `name: shift
llm:
  model: offline
state_tool: true
mesh:
  ack_wait: 2s
mcp_servers:
  - name: clock
    command: mesh-test-mcp
    env:
      ` + testMCPEnv + `: "1"
      ` + testClockEnv + `: "1"
`
}

// agentTools is the tools GET /agents lists for agent name.
func agentTools(t *testing.T, m *meshProc, name string) []string {
	t.Helper()
	var out []string
	for _, v := range list(directory(t, m)[name], "tools") {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// TestAGUIStateFromTools: a tool that sets state (an MCP tool's _meta
// patch, the built-in set_state) produces STATE_DELTAs that the official
// AG-UI client applies to the same state the server holds; a client of
// the thread that knows nothing starts from the run's STATE_SNAPSHOT.
func TestAGUIStateFromTools(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@ag-ui/client")
	m := startMesh(t, meshOpts{config: stateConfig(), logLevel: "info"})
	meshtest.Eventually(t, 30*time.Second, func() bool {
		tools := agentTools(t, m, "shift")
		return slices.Contains(tools, "clock_in") && slices.Contains(tools, "set_state")
	}, "GET /agents never listed clock_in and set_state for shift")

	thread := uuid.NewString()
	var res struct {
		Runs []struct {
			Name    string         `json:"name"`
			Error   string         `json:"error"`
			Outcome string         `json:"outcome"`
			Events  []string       `json:"events"`
			Deltas  []any          `json:"deltas"`
			State   map[string]any `json:"state"`
		} `json:"runs"`
		PatchFailures []string `json:"patchFailures"`
	}
	runPeer(t, node, "agui-state.mjs", 2*time.Minute, []string{"AGUI_URL=" + m.url("/agui"), "THREAD_ID=" + thread}, &res, nil)
	if len(res.Runs) != 3 {
		t.Fatalf("runs = %d, want clock, set, fresh", len(res.Runs))
	}
	if len(res.PatchFailures) > 0 {
		t.Errorf("the client failed to apply STATE_DELTA: %q", res.PatchFailures)
	}
	server := obj(m.do(http.StatusOK, "GET", "/conversations/"+thread, nil), "conversation", "state")
	if server["isClockedIn"] != true || server["mode"] != "night" || str(server, "lastClockIn") == "" {
		t.Errorf("server state = %v, want isClockedIn, lastClockIn and mode night", server)
	}
	for i, r := range res.Runs {
		if r.Error != "" || r.Outcome != "success" {
			t.Errorf("%s: outcome %q, error %s", r.Name, r.Outcome, r.Error)
		}
		events := strings.Join(r.Events, " ")
		if i < 2 && (len(r.Deltas) == 0 || !strings.Contains(events, "TOOL_CALL_RESULT STATE_DELTA")) {
			t.Errorf("%s: events %s, want a STATE_DELTA right after the tool's result", r.Name, events)
		}
		if snap := slices.Index(r.Events, "STATE_SNAPSHOT"); snap < 0 || snap > slices.Index(r.Events, "TEXT_MESSAGE_START") || i == 2 && len(r.Deltas) != 0 {
			t.Errorf("%s: events %s, want a STATE_SNAPSHOT first (after RUN_STARTED and run_queued), and no delta in the last run", r.Name, events)
		}
	}
	// After each run, the client holds the state the server holds now
	// (the last run changes nothing).
	if last := res.Runs[1].State; !reflect.DeepEqual(last, server) {
		t.Errorf("client state after set_state = %v, server %v", last, server)
	}
	if fresh := res.Runs[2].State; !reflect.DeepEqual(fresh, server) {
		t.Errorf("fresh client state = %v, server %v", fresh, server)
	}
	if clocked := res.Runs[0].State; clocked["isClockedIn"] != true || clocked["mode"] != nil {
		t.Errorf("client state after clock_in = %v, want isClockedIn and no mode yet", clocked)
	}
}
