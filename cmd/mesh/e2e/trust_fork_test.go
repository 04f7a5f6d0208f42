package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	a2a "github.com/agentmesh/agentmesh/mesh/a2a"
)

// testForkOwnership: bob, another user, cannot fork ursula's conversation
// conv through AG-UI (forwardedProps.fork) or A2A (the fork extension): it
// is not found, and neither the thread nor the context he named is made.
// Ursula forks it through both.
func testForkOwnership(t *testing.T, m *authMesh, conv string) {
	_, c := m.call(t, "user", "GET", "/conversations/"+conv, nil)
	var answer string
	for _, msg := range list(c, "conversation", "messages") {
		if str(msg, "role") == "assistant" && str(msg, "content") != "" {
			answer = str(msg, "id")
		}
	}
	if answer == "" {
		t.Fatalf("ursula's conversation %s has no answer to fork after: %v", conv, c)
	}
	run := func(caller, thread string) int {
		st, _, _ := m.probe(t, caller, "POST", "/agui", map[string]any{"threadId": thread, "runId": thread + "-r1",
			"messages": []any{map[string]any{"id": "m1", "role": "user", "content": "help"}}, "tools": []any{}, "context": []any{},
			"forwardedProps": map[string]any{"fork": map[string]any{"from": conv, "after": answer}}})
		return st
	}
	send := func(caller, context string) (int, map[string]any) {
		return m.rpc(t, caller, "", "message/send", a2aText("help", map[string]any{"contextId": context,
			"metadata": map[string]any{a2a.ExtensionFork: map[string]any{"from": conv, "after": answer}}}))
	}
	stamp := time.Now().UnixNano()
	thread, context := fmt.Sprintf("bob-fork-thread-%d", stamp), fmt.Sprintf("bob-fork-context-%d", stamp)
	if st := run("bob", thread); st != http.StatusNotFound {
		t.Errorf("bob forks ursula's %s over AG-UI: %d, want 404", conv, st)
	}
	if st, out := send("bob", context); st != http.StatusOK || rpcCode(out) != -32001 {
		t.Errorf("bob forks ursula's %s over A2A: %d %v, want task not found (-32001)", conv, st, out)
	}
	for _, id := range []string{thread, context} {
		if st, _ := m.call(t, "admin", "GET", "/conversations/"+id, nil); st != http.StatusNotFound {
			t.Errorf("bob's refused fork made conversation %s (admin GET: %d)", id, st)
		}
	}
	mine := fmt.Sprintf("ursula-fork-%d", stamp)
	if st := run("user", mine+"-thread"); st != http.StatusOK {
		t.Errorf("ursula forks her %s over AG-UI: %d, want 200", conv, st)
	}
	if st, out := send("user", mine+"-context"); st != http.StatusOK || str(out, "result", "status", "state") != "completed" {
		t.Errorf("ursula forks her %s over A2A: %d %v, want a completed task", conv, st, out)
	}
	for _, id := range []string{mine + "-thread", mine + "-context"} {
		if st, b := m.call(t, "user", "GET", "/conversations/"+id, nil); st != http.StatusOK || str(b, "conversation", "owner") != "ursula" || str(b, "conversation", "forked_from", "conversation") != conv {
			t.Errorf("ursula's branch %s: %d, owner %q, forked from %q; want hers, of %s", id, st, str(b, "conversation", "owner"), str(b, "conversation", "forked_from", "conversation"), conv)
		}
	}
}
