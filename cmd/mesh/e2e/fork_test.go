package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// messageIDs are the ids of a conversation's messages, oldest first.
func messageIDs(conv map[string]any) []string {
	var out []string
	for _, m := range list(conv, "messages") {
		out = append(out, str(m, "id"))
	}
	return out
}

// TestForkAfterToolCallAndApproval forks, through REST and mesh fork, a
// conversation that set state with a tool and ran a destructive call a
// person approved: the branch's history and state are the original's at
// that point, the original is unchanged, new turns on each diverge, and a
// pending approval never carries over.
func TestForkAfterToolCallAndApproval(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: defaultConfig(t) + "state_tool: true\n"})
	conv := m.newConversation()
	// A tool call that sets state, then a destructive one a person approves.
	m.send(conv, "set state mode to night")
	ap := m.addPending(conv, "add resource forked-one with value 5")
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
	if n := m.resourceRows("forked-one"); n != 1 {
		t.Fatalf("rows of the approved resource = %d, want 1", n)
	}
	at := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
	atIDs := messageIDs(at)
	if !slices.ContainsFunc(list(at, "messages"), func(v any) bool { return str(v, "decided_by") != "" }) {
		t.Fatalf("no decided tool result in %v", atIDs)
	}
	point := atIDs[len(atIDs)-1]
	// The original goes on: its state changes after the point.
	m.send(conv, "set state mode to day")
	orig := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")

	out := m.do(http.StatusCreated, "POST", "/conversations/"+conv+"/fork", map[string]any{"after": point})
	branch := str(out, "id")
	if str(out, "forked_from", "conversation") != conv || str(out, "forked_from", "message") != point || obj(out, "forked_from")["event_seq"] == nil {
		t.Fatalf("forked_from = %v", obj(out, "forked_from"))
	}
	b := obj(m.do(http.StatusOK, "GET", "/conversations/"+branch, nil), "conversation")
	if got := messageIDs(b); !slices.Equal(got, atIDs) {
		t.Fatalf("branch history %v, want the original's at the point %v", got, atIDs)
	}
	if b["message_count"] != at["message_count"] || str(b, "state", "mode") != "night" || str(b, "status") != "active" || b["pending_approval"] != nil {
		t.Fatalf("branch: count %v (want %v), state %v (want mode night), status %s, pending %v", b["message_count"], at["message_count"], b["state"], str(b, "status"), b["pending_approval"])
	}
	if str(b, "forked_from", "conversation") != conv {
		t.Errorf("GET of the branch: forked_from %v", b["forked_from"])
	}
	if now := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation"); !slices.Equal(messageIDs(now), messageIDs(orig)) || str(now, "state", "mode") != "day" || now["forked_from"] != nil {
		t.Fatalf("the original changed: %v state %v", messageIDs(now), now["state"])
	}

	// New turns on each diverge.
	m.send(branch, "set state mode to evening")
	m.send(conv, "list resources")
	b = obj(m.do(http.StatusOK, "GET", "/conversations/"+branch, nil), "conversation")
	o := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
	bIDs, oIDs := messageIDs(b), messageIDs(o)
	if !slices.Equal(bIDs[:len(atIDs)], atIDs) || len(bIDs) <= len(atIDs) || str(b, "state", "mode") != "evening" {
		t.Fatalf("branch after its turn: %v, state %v", bIDs, b["state"])
	}
	if str(o, "state", "mode") != "day" || len(oIDs) <= len(messageIDs(orig)) {
		t.Fatalf("original after its turn: %v, state %v", oIDs, o["state"])
	}
	for _, id := range bIDs[len(atIDs):] {
		if slices.Contains(oIDs, id) {
			t.Errorf("the branch's message %s is in the original", id)
		}
	}

	// A conversation waiting for an approval, forked at its newest
	// message: the branch waits for nothing, and takes a message.
	pending := m.addPending(conv, "add resource never-here with value 3")
	w := obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
	wIDs := messageIDs(w)
	out = m.do(http.StatusCreated, "POST", "/conversations/"+conv+"/fork", map[string]any{"after": wIDs[len(wIDs)-1]})
	pb := obj(out, "conversation")
	if str(pb, "status") != "active" || pb["pending_approval"] != nil || pb["pending_approvals"] != nil || pb["queued_turn"] != nil {
		t.Fatalf("branch of a waiting conversation: %v", pb)
	}
	msgs := list(pb, "messages")
	if last := msgs[len(msgs)-1]; str(last, "role") != "tool" || last.(map[string]any)["is_error"] != true {
		t.Errorf("the call that waited is not answered as not run on the branch: %v", last)
	}
	aps := m.do(http.StatusOK, "GET", "/approvals?status=pending", nil)
	for _, a := range list(aps, "approvals") {
		if str(a, "conversation_id") != conv {
			t.Errorf("a pending approval of another conversation: %v", a)
		}
	}
	m.send(str(out, "id"), "list resources")
	if n := m.resourceRows("never-here"); n != 0 {
		t.Errorf("rows of the resource still waiting = %d, want 0", n)
	}
	m.do(http.StatusOK, "POST", "/approvals/"+str(pending, "uuid"), map[string]any{"approved": false})

	// Editing a user message: a fork before it with the new text.
	var lastUser string
	for _, v := range list(orig, "messages") {
		if str(v, "role") == "user" {
			lastUser = str(v, "id")
		}
	}
	out = m.do(http.StatusOK, "POST", "/conversations/"+conv+"/fork", map[string]any{"before": lastUser, "message": "set state mode to dawn"})
	edited := str(out, "conversation_id")
	if edited == "" || str(out, "id") != edited || str(out, "forked_from", "conversation") != conv || str(out, "result", "outcome") != "success" {
		t.Fatalf("edit: %v", out)
	}
	e := obj(m.do(http.StatusOK, "GET", "/conversations/"+edited, nil), "conversation")
	if str(e, "state", "mode") != "dawn" || !slices.Equal(messageIDs(e)[:len(atIDs)], atIDs) {
		t.Errorf("edited branch: %v, state %v", messageIDs(e), e["state"])
	}

	// The family, and mesh fork.
	fam := m.do(http.StatusOK, "GET", "/conversations/"+edited+"/branches", nil)
	if str(fam, "root") != conv || len(list(fam, "branches")) != 4 || str(list(fam, "branches")[0], "id") != conv {
		t.Errorf("branches: %v", fam)
	}
	listed := false
	for _, v := range list(m.do(http.StatusOK, "GET", "/conversations?limit=500", nil), "conversations") {
		listed = listed || str(v, "id") == edited && str(v, "forked_from", "conversation") == conv
	}
	if !listed {
		t.Errorf("the list does not show the edited branch with its forked_from")
	}
	r := m.mustCLI(0, "", nil, "fork", conv, "--after", point)
	if !strings.HasPrefix(r.stdout, "branch ") || !strings.Contains(r.stdout, "of "+conv) {
		t.Errorf("mesh fork: %s", r)
	}
	cliBranch := strings.Fields(r.stdout)[1]
	c := obj(m.do(http.StatusOK, "GET", "/conversations/"+cliBranch, nil), "conversation")
	if !slices.Equal(messageIDs(c), atIDs) || str(c, "state", "mode") != "night" {
		t.Errorf("the branch mesh fork made: %v, state %v", messageIDs(c), c["state"])
	}
	// The original deleted and purged: its branches keep their history
	// and go on.
	m.do(http.StatusOK, "DELETE", "/conversations/"+conv+"?purge=true", nil)
	m.do(http.StatusNotFound, "GET", "/conversations/"+conv, nil)
	c = obj(m.do(http.StatusOK, "GET", "/conversations/"+cliBranch, nil), "conversation")
	if !slices.Equal(messageIDs(c), atIDs) {
		t.Fatalf("a branch after its original's purge: %v, want %v", messageIDs(c), atIDs)
	}
	m.send(cliBranch, "set state mode to noon")
	if c := obj(m.do(http.StatusOK, "GET", "/conversations/"+cliBranch, nil), "conversation"); str(c, "state", "mode") != "noon" || !slices.Equal(messageIDs(c)[:len(atIDs)], atIDs) {
		t.Errorf("a branch's turn after its original's purge: %v, state %v", messageIDs(c), c["state"])
	}
	if r := m.cli("", nil, "fork", cliBranch, "--after", point, "--before", point); r.code != 2 {
		t.Errorf("mesh fork with two points: %s", r)
	}
	if r := m.cli("", nil, "fork", cliBranch, "--after", "no-such-message"); r.code != 1 || !strings.Contains(r.stderr, "no-such-message") {
		t.Errorf("mesh fork at an unknown message: %s", r)
	}
}
