package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// aguiForkResult is what agui-fork.mjs prints.
type aguiForkResult struct {
	Original    string `json:"original"`
	FirstAnswer string `json:"firstAnswer"`
	SecondUser  string `json:"secondUser"`
	Runs        []struct {
		Name        string        `json:"name"`
		ThreadID    string        `json:"threadId"`
		RunID       string        `json:"runId"`
		Error       string        `json:"error"`
		RunFailed   string        `json:"runFailed"`
		Outcome     string        `json:"outcome"`
		Events      []string      `json:"events"`
		NewMessages []aguiMessage `json:"newMessages"`
	} `json:"runs"`
}

// userTexts are the texts of a conversation's user messages, in order.
func userTexts(conv map[string]any) []string {
	var out []string
	for _, m := range list(conv, "messages") {
		if str(m, "role") == "user" {
			out = append(out, str(m, "content"))
		}
	}
	return out
}

// TestAGUIForkThroughForwardedProps forks threads with the official AG-UI
// client (testdata/peers/agui-fork.mjs): a run on a new thread with
// forwardedProps.fork {from, after} or {from, before} makes that thread a
// branch of the other (its history up to the point, the caller's) and
// answers its last user message there; a later run on the branch with the
// same props is a plain run of it; an unknown original, two points, or an
// existing thread that is no branch fail the run; the original is
// unchanged.
func TestAGUIForkThroughForwardedProps(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@ag-ui/client")
	m := startMesh(t, meshOpts{})
	original, after, before := uuid.NewString(), uuid.NewString(), uuid.NewString()

	var res aguiForkResult
	runPeer(t, node, "agui-fork.mjs", 2*time.Minute, []string{
		"MESH_URL=" + m.url(""), "THREAD_ID=" + original, "AFTER_ID=" + after, "BEFORE_ID=" + before,
	}, &res, nil)
	want := []string{"first", "second", "after", "afterAgain", "before", "unknown", "twoPoints", "intoOriginal"}
	if len(res.Runs) != len(want) {
		t.Fatalf("runs %+v, want %v", res.Runs, want)
	}
	runs := map[string]int{}
	for i, r := range res.Runs {
		runs[r.Name] = i
	}
	for _, name := range want[:5] {
		r := res.Runs[runs[name]]
		if r.Error != "" || r.RunFailed != "" || r.Outcome != "success" {
			t.Errorf("the official client's %s run on %s: outcome %q, error %s %s; events %v", name, r.ThreadID, r.Outcome, r.Error, r.RunFailed, r.Events)
		}
	}
	if res.FirstAnswer == "" {
		t.Fatalf("no answer id of the first run: %+v", res.Runs[0].NewMessages)
	}
	for name, status := range map[string]string{"unknown": "404", "twoPoints": "400", "intoOriginal": "409"} {
		r := res.Runs[runs[name]]
		if got := r.Error + r.RunFailed; !strings.Contains(got, status) {
			t.Errorf("the %s run: %q, want it refused with HTTP %s", name, got, status)
		}
	}
	checkHolds(t, "the answer on the branch after the first answer", reply(res.Runs[runs["after"]].NewMessages), []string{"resources_list"})
	checkHolds(t, "the answer on the branch before the second message", reply(res.Runs[runs["before"]].NewMessages), []string{"resources_list"})

	// Over REST: each branch is the caller's and names its point; the
	// original is unchanged; nothing was made of the refused runs.
	same := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	orig := obj(m.do(http.StatusOK, "GET", "/conversations/"+original, nil), "conversation")
	same("the original's user messages", userTexts(orig), []string{"hello", "list all resources"})
	a := obj(m.do(http.StatusOK, "GET", "/conversations/"+after, nil), "conversation")
	same("the branch after the first answer", userTexts(a), []string{"hello", "help", "list all resources"})
	if str(a, "forked_from", "conversation") != original || str(a, "forked_from", "message") != res.FirstAnswer {
		t.Errorf("the branch after the first answer: forked_from %v, want %s at %s", obj(a, "forked_from"), original, res.FirstAnswer)
	}
	b := obj(m.do(http.StatusOK, "GET", "/conversations/"+before, nil), "conversation")
	same("the branch before the second message", userTexts(b), []string{"hello", "help"})
	if str(b, "forked_from", "conversation") != original {
		t.Errorf("the branch before the second message: forked_from %v, want %s", obj(b, "forked_from"), original)
	}
	fam := m.do(http.StatusOK, "GET", "/conversations/"+original+"/branches", nil)
	if n := len(list(fam, "branches")); n != 3 {
		t.Errorf("the family holds %d conversations, want the original and its two branches: %v", n, fam)
	}
	for _, name := range []string{"unknown", "twoPoints"} {
		id := res.Runs[runs[name]].ThreadID
		if status, _ := m.try("GET", "/conversations/"+id, nil); status != http.StatusNotFound {
			t.Errorf("the refused %s run left conversation %s (GET: %d)", name, id, status)
		}
	}
}
