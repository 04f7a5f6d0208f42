package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	a2a "github.com/agentmesh/agentmesh/mesh/a2a"
)

// a2aForkTask is a task as a2a-fork.mjs sums it up.
type a2aForkTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	State     string `json:"state"`
	Artifact  string `json:"artifact"`
	History   []struct {
		ID   string `json:"id"`
		Role string `json:"role"`
		Text string `json:"text"`
	} `json:"history"`
}

// texts are the texts of the task's history, "user: …" and "agent: …".
func (k a2aForkTask) users() []string {
	var out []string
	for _, m := range k.History {
		if m.Role == "user" {
			out = append(out, m.Text)
		}
	}
	return out
}

// TestA2AForkExtension forks contexts with the official A2A JavaScript
// client (testdata/peers/a2a-fork.mjs): the card declares the fork
// extension; a message in a new context whose metadata names the original
// context and a point, blocking or streamed, starts a branch with that
// history and answers the message there; a fork from an unknown context is
// TaskNotFound and one into an existing context that is no branch is
// refused; the original is unchanged. A plain 0.3 JSON-RPC request with
// X-A2A-Extensions gets the extension listed back.
func TestA2AForkExtension(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@a2a-js/sdk")
	m := startMesh(t, meshOpts{})
	original, branch, streamed := uuid.NewString(), uuid.NewString(), uuid.NewString()

	var res struct {
		Error      string `json:"error"`
		Extensions []struct {
			URI         string `json:"uri"`
			Description string `json:"description"`
		} `json:"extensions"`
		Original        a2aForkTask `json:"original"`
		Branch          a2aForkTask `json:"branch"`
		BranchHistory   a2aForkTask `json:"branchHistory"`
		StreamedHistory a2aForkTask `json:"streamedHistory"`
		OriginalAfter   a2aForkTask `json:"originalAfter"`
		Streamed        struct {
			Events []string `json:"events"`
			Text   string   `json:"text"`
		} `json:"streamed"`
		Unknown string `json:"unknown"`
		Taken   string `json:"taken"`
	}
	runPeer(t, node, "a2a-fork.mjs", 2*time.Minute, []string{
		"A2A_BASE=" + m.url(""), "ORIGINAL=" + original, "BRANCH=" + branch, "STREAMED=" + streamed,
	}, &res, nil)
	if res.Error != "" {
		t.Fatalf("@a2a-js/sdk: %s", res.Error)
	}
	if len(res.Extensions) != 1 || res.Extensions[0].URI != a2a.ExtensionFork || res.Extensions[0].Description == "" {
		t.Errorf("the card's extensions %+v, want the fork extension %s, described", res.Extensions, a2a.ExtensionFork)
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	same("the original's user messages", res.Original.users(), []string{"hello", "list all resources"})
	if res.Branch.ID != branch || res.Branch.ContextID != branch || res.Branch.State != "TASK_STATE_COMPLETED" {
		t.Errorf("the forked send answered task %s (context %s) %s, want %s completed", res.Branch.ID, res.Branch.ContextID, res.Branch.State, branch)
	}
	checkHolds(t, "the branch's answer", res.Branch.Artifact, []string{"resources_list"})
	same("the branch's user messages", res.BranchHistory.users(), []string{"hello", "help"})
	if len(res.BranchHistory.History) < 2 || len(res.Original.History) < 2 || res.BranchHistory.History[1].ID != res.Original.History[1].ID {
		t.Errorf("the branch's history %+v does not start with the original's first exchange %+v", res.BranchHistory.History, res.Original.History)
	}
	if n := len(res.Streamed.Events); n == 0 || res.Streamed.Events[n-1] != "statusUpdate:TASK_STATE_COMPLETED" {
		t.Errorf("the forked stream: %v, want it to end completed", res.Streamed.Events)
	}
	same("the streamed branch's user messages", res.StreamedHistory.users(), []string{"hello", "list all resources"})
	same("the original's user messages afterwards", res.OriginalAfter.users(), []string{"hello", "list all resources"})
	if len(res.OriginalAfter.History) != len(res.Original.History) {
		t.Errorf("the original's history grew from %d to %d messages", len(res.Original.History), len(res.OriginalAfter.History))
	}
	if !strings.Contains(res.Unknown, "TaskNotFound") {
		t.Errorf("a fork of an unknown context: %s, want TaskNotFound", res.Unknown)
	}
	if res.Taken == "no error" || !strings.Contains(res.Taken, "not a branch") {
		t.Errorf("a fork into an existing context: %s, want it refused", res.Taken)
	}

	// The REST view of the branches, and a raw 0.3 request: activation
	// is listed back, and the metadata alone forks.
	for _, id := range []string{branch, streamed} {
		c := obj(m.do(http.StatusOK, "GET", "/conversations/"+id, nil), "conversation")
		if str(c, "forked_from", "conversation") != original {
			t.Errorf("conversation %s: forked_from %v, want %s", id, obj(c, "forked_from"), original)
		}
	}
	raw := uuid.NewString()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{
		"kind": "message", "messageId": uuid.NewString(), "role": "user", "contextId": raw,
		"parts":    []any{map[string]any{"kind": "text", "text": "help"}},
		"metadata": map[string]any{a2a.ExtensionFork: map[string]any{"from": original, "after": res.Original.History[1].ID}},
	}}})
	req, _ := http.NewRequest("POST", m.url("/a2a"), strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-A2A-Extensions", "https://example.org/other-extension, "+a2a.ExtensionFork)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Header.Values("X-A2A-Extensions"); len(got) != 1 || got[0] != a2a.ExtensionFork {
		t.Errorf("the answer's X-A2A-Extensions %q, want only the fork extension listed back", got)
	}
	var answer map[string]any
	_ = json.Unmarshal(data, &answer)
	if str(answer, "result", "contextId") != raw || str(answer, "result", "status", "state") != "completed" {
		t.Errorf("a raw 0.3 fork answered %s, want task %s completed", data, raw)
	}
	c := obj(m.do(http.StatusOK, "GET", "/conversations/"+raw, nil), "conversation")
	same("the raw fork's user messages", userTexts(c), []string{"hello", "help"})
}
