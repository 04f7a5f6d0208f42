package e2e

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// wsToken is a user who may also decide approvals: the WebSocket peer
// answers its own interrupts.
const wsToken = "dana-token-ws-e2e-0123456789"

// wsRun is one run as agui-ws.mjs reports it.
type wsRun struct {
	Name        string         `json:"name"`
	Types       []string       `json:"types"`
	Seqs        []uint64       `json:"seqs"`
	Cursors     []string       `json:"cursors"`
	Last        map[string]any `json:"last"`
	ToolResults []string       `json:"toolResults"`
	VerifyError *string        `json:"verifyError"`
}

type wsResult struct {
	Runs       map[string]wsRun `json:"runs"`
	Interrupts []map[string]any `json:"interrupts"`
	Drop       struct {
		Before, After, Joined, Whole wsRun
		JoinedJSON                   string `json:"joinedJSON"`
		WholeJSON                    string `json:"wholeJSON"`
	} `json:"drop"`
	BadFrame    map[string]any   `json:"badFrame"`
	ReadOnly    map[string]any   `json:"readOnly"`
	Connections []map[string]any `json:"connections"`
}

// TestAGUIWebSocketClient drives GET /agui/ws of the real binary with the
// npm ws client (agui-ws.mjs): a tool turn, an approval interrupt and its
// resume on one socket (bearer header), then a run whose socket is dropped
// mid-run (its tool waits for the gate) and reattached on a new socket
// authenticated by a stream token in the query: the frames before and
// after the drop are exactly the frames of the whole run, and that socket
// refuses a run (a stream token only reads). Every run's events pass
// @ag-ui/client's own verifier. A frame that is not JSON gets an error
// frame and the socket runs a turn after it.
func TestAGUIWebSocketClient(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "ws", "@ag-ui/client")
	dir := t.TempDir()
	cfg := itemsConfig(t, dir) + `auth:
  tokens:
    - {name: dana, token: ` + wsToken + `, roles: [user, approver]}
`
	m := startMesh(t, meshOpts{config: cfg, logLevel: "info"})

	var res wsResult
	runPeer(t, node, "agui-ws.mjs", 3*time.Minute, []string{"MESH_URL=" + m.url(""), "TOKEN=" + wsToken}, &res, map[string]func(){
		"dropped": func() { openGate(t, dir) },
	})

	for _, name := range []string{"tool", "interrupt", "resume", "afterBadFrame"} {
		r, ok := res.Runs[name]
		switch {
		case !ok:
			t.Errorf("no %s run", name)
			continue
		case r.VerifyError != nil:
			t.Errorf("%s: @ag-ui/client's verifier: %s (events %v)", name, *r.VerifyError, r.Types)
		case len(r.Types) < 2 || r.Types[0] != "RUN_STARTED" || r.Types[len(r.Types)-1] != "RUN_FINISHED":
			t.Errorf("%s: events %v, want RUN_STARTED … RUN_FINISHED", name, r.Types)
		}
		checkSeqs(t, name, r)
	}
	if got := res.Runs["tool"]; len(got.ToolResults) == 0 || !strings.Contains(got.ToolResults[0], `"count"`) {
		t.Errorf("tool run: results %v, want resources_list's", got.ToolResults)
	}
	if len(res.Interrupts) != 1 || res.Interrupts[0]["reason"] != "tool_approval" {
		t.Fatalf("interrupt run: interrupts %v, want one tool_approval", res.Interrupts)
	}
	if out, _ := res.Runs["interrupt"].Last["outcome"].(map[string]any); out["type"] != "interrupt" {
		t.Errorf("interrupt run ends with %v", res.Runs["interrupt"].Last)
	}
	resumed := res.Runs["resume"]
	if out, _ := resumed.Last["outcome"].(map[string]any); out["type"] != "success" || len(resumed.ToolResults) != 1 || !strings.Contains(resumed.ToolResults[0], "ws-1") {
		t.Errorf("resume: last %v, results %v; want success with resources_add's result", resumed.Last, resumed.ToolResults)
	}

	// The drop: nothing missing, nothing twice, and the run was not
	// cancelled by it.
	d := res.Drop
	if len(d.Before.Types) == 0 || !slices.Contains(d.Before.Types, "TOOL_CALL_END") || slices.Contains(d.Before.Types, "TOOL_CALL_RESULT") {
		t.Errorf("before the drop: %v, want the tool call started and no result yet", d.Before.Types)
	}
	if len(d.After.Types) == 0 || d.After.Types[0] == "RUN_STARTED" || d.After.Types[len(d.After.Types)-1] != "RUN_FINISHED" {
		t.Errorf("after the drop: %v, want the rest up to RUN_FINISHED", d.After.Types)
	}
	if d.JoinedJSON != d.WholeJSON {
		t.Errorf("the frames before and after the drop are not the whole run's:\njoined %s\nwhole  %s", d.JoinedJSON, d.WholeJSON)
	}
	checkSeqs(t, "drop", d.Joined)
	if d.Joined.VerifyError != nil {
		t.Errorf("the joined run fails @ag-ui/client's verifier: %s", *d.Joined.VerifyError)
	}
	if len(d.Joined.ToolResults) != 1 || !strings.Contains(d.Joined.ToolResults[0], "items") {
		t.Errorf("the dropped run's tool results: %v, want items_list's", d.Joined.ToolResults)
	}
	if out, _ := d.Joined.Last["outcome"].(map[string]any); out["type"] != "success" {
		t.Errorf("the dropped run ended with %v, want success (a drop does not cancel)", d.Joined.Last)
	}

	if res.ReadOnly["type"] != "error" || res.ReadOnly["code"] != "read_only" {
		t.Errorf("a run frame on the stream token's socket got %v, want an error frame read_only", res.ReadOnly)
	}
	if res.BadFrame["type"] != "error" || res.BadFrame["code"] != "bad_request" {
		t.Errorf("a frame that is not JSON got %v, want an error frame bad_request", res.BadFrame)
	}
	// Each socket opened with its own connection_open frame.
	ids := map[string]bool{}
	for i, c := range res.Connections {
		id := str(c, "connectionId")
		if c["type"] != "connection_open" || uuid.Validate(id) != nil || ids[id] || c["heartbeatMs"] != 15000.0 || c["maxThreads"] != 16.0 {
			t.Errorf("socket %d opened with %v, want connection_open with its own connectionId, heartbeatMs 15000, maxThreads 16", i, c)
		}
		ids[id] = true
	}
	if len(res.Connections) != 3 {
		t.Errorf("%d connection frames, want one for each of the 3 sockets", len(res.Connections))
	}
}

// checkSeqs checks that a run's frames have rising sequences, each its
// cursor's last part.
func checkSeqs(t *testing.T, name string, r wsRun) {
	t.Helper()
	for i, s := range r.Seqs {
		if i > 0 && s <= r.Seqs[i-1] {
			t.Errorf("%s: frame %d has seq %d after %d", name, i, s, r.Seqs[i-1])
		}
		if i < len(r.Cursors) && !strings.HasSuffix(r.Cursors[i], "."+strconv.FormatUint(s, 10)) {
			t.Errorf("%s: frame %d: cursor %q for seq %d", name, i, r.Cursors[i], s)
		}
	}
}
