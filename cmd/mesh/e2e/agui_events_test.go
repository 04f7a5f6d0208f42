package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// aguiEventsResult is what agui-events.mjs prints.
type aguiEventsResult struct {
	Types []string `json:"types"`
	Runs  []struct {
		RunID   string `json:"runId"`
		Mesh    string `json:"mesh"`
		Outcome string `json:"outcome"`
	} `json:"runs"`
	Messages []struct {
		ID          string   `json:"id"`
		Role        string   `json:"role"`
		ToolCallIDs []string `json:"toolCallIds"`
		ToolCallID  string   `json:"toolCallId"`
	} `json:"messages"`
	VerifyError  string   `json:"verifyError"`
	SchemaErrors []string `json:"schemaErrors"`
}

// A conversation's replay is a sequence of AG-UI runs that @ag-ui/client's
// connectAgent accepts (its verifyEvents): a tool turn and a turn that asks
// for approval each start where they were queued, the resume where its
// approval was decided, and a rating, which belongs to no run, comes in a
// run of its own. Read again from the middle of a run, the stream opens
// that run first.
func TestEventsReplayIsARunSequence(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@ag-ui/client", "@ag-ui/core", "rxjs")
	m := startMesh(t, meshOpts{})
	conv, first := m.firstTurn("list all resources")
	ap := m.addPending(conv, "create a server replay-test with value 5")
	uuid := str(ap, "uuid")
	out := m.do(http.StatusOK, "POST", "/approvals/"+uuid, map[string]any{"answer": "yes"})
	answer := ""
	for _, msg := range list(out, "conversation", "messages") {
		if str(msg, "role") == "assistant" && str(msg, "content") != "" {
			answer = str(msg, "id")
		}
	}
	m.do(http.StatusOK, "POST", "/conversations/"+conv+"/messages/"+answer+"/feedback", map[string]any{"rating": "like"})

	var res aguiEventsResult
	runPeer(t, node, "agui-events.mjs", time.Minute, []string{"MESH_URL=" + m.url(""), "CONVERSATION=" + conv}, &res, nil)
	if res.VerifyError != "" || len(res.SchemaErrors) != 0 {
		t.Fatalf("the official client refused the replay: %s %v\nevents %v", res.VerifyError, res.SchemaErrors, res.Types)
	}
	var got []string
	for _, r := range res.Runs {
		got = append(got, r.Mesh+":"+r.Outcome)
	}
	want := []string{"queued:success", "queued:interrupt", "decided:success", "envelope:success"}
	if !slices.Equal(got, want) {
		t.Fatalf("runs (why the bridge started them : outcome) %v, want %v\nevents %v", got, want, res.Types)
	}
	if run := str(first, "result", "run_id"); run != "" && res.Runs[0].RunID != run {
		t.Errorf("first run %s, want the turn's run %s", res.Runs[0].RunID, run)
	}
	if res.Runs[2].RunID != uuid {
		t.Errorf("resume run %s, want the approval's id %s", res.Runs[2].RunID, uuid)
	}
	// Every run starts once: the agent's own RUN_STARTED of a queued run is
	// not sent again.
	if n := strings.Count(strings.Join(res.Types, " "), "RUN_STARTED"); n != 4 {
		t.Errorf("%d RUN_STARTED, want 4: %v", n, res.Types)
	}
	// The client's messages hold the approved call and its result.
	call := str(ap, "tool_call_id")
	var asked, answered bool
	for _, msg := range res.Messages {
		asked = asked || slices.Contains(msg.ToolCallIDs, call)
		answered = answered || msg.Role == "tool" && msg.ToolCallID == call
	}
	if call == "" || !asked || !answered {
		t.Errorf("the client's messages %+v: want tool call %q and its result", res.Messages, call)
	}

	// From the middle of the resume: the stream opens that run again.
	after := m.eventSeqAfter(conv, "approval_decided", "TOOL_CALL_RESULT")
	var mid aguiEventsResult
	runPeer(t, node, "agui-events.mjs", time.Minute, []string{"MESH_URL=" + m.url(""), "CONVERSATION=" + conv, "AFTER=" + after}, &mid, nil)
	if mid.VerifyError != "" || len(mid.Runs) < 1 || mid.Runs[0].RunID != uuid || mid.Runs[0].Mesh != "resumed" {
		t.Errorf("read after approval_decided: runs %+v, error %q; events %v", mid.Runs, mid.VerifyError, mid.Types)
	}
}

// eventSeqAfter returns the SSE id of the first stored event of conv of
// type typ after its CUSTOM event named custom.
func (m *meshProc) eventSeqAfter(conv, custom, typ string) string {
	m.t.Helper()
	_, body := m.streamFor("GET", "/conversations/"+conv+"/events", nil, 2*time.Second)
	seen := false
	id := ""
	for _, line := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data := strings.TrimPrefix(line, "data: ")
			if seen && id != "" && strings.Contains(data, `"type":"`+typ+`"`) {
				return id
			}
			seen = seen || strings.Contains(data, `"name":"`+custom+`"`)
		case line == "":
			id = ""
		}
	}
	m.t.Fatalf("no %s after %s in the events of %s:\n%s", typ, custom, conv, body)
	return ""
}
