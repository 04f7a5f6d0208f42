package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The test in this file drives a group chat exposed as an A2A agent of its
// own (bridge/a2a, /groups/{name}) with the official Go client, a2a-go
// v0.3.3, as a real peer: it resolves the group's card and runs the peer's
// scenario (testdata/peers/a2a-go, without its cancel step, which needs the
// gated items server) against the group.

// a2aPair is a group of two members the configuration defines, who answer
// each message in turn: two turns a round.
const a2aPair = `  - name: pair
    description: Two resource clerks
    strategy: round_robin
    max_turns: 2
    participants:
      - {agent: alice, description: lists resources, prompt: "You are Alice, a resource clerk."}
      - {agent: bob, description: checks resources, prompt: "You are Bob, a resource clerk."}
`

// a2aGroupRPC makes one JSON-RPC call (0.3) on path and returns the answer,
// which must be JSON-RPC 2.0 with HTTP 200.
func a2aGroupRPC(m *meshProc, path, method string, params any) map[string]any {
	m.t.Helper()
	status, out := m.try("POST", path, map[string]any{"jsonrpc": "2.0", "id": "g-1", "method": method, "params": params})
	if status != http.StatusOK || str(out, "jsonrpc") != "2.0" || str(out, "id") != "g-1" {
		m.t.Fatalf("POST %s %s: status %d, answer %v", path, method, status, out)
	}
	return out
}

func TestA2AGroup(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: defaultConfig(t) + "\ngroups:\n" + a2aPair})

	t.Run("a2a-go client", func(t *testing.T) {
		bin := a2aGoPeer(t)
		var res a2aGoResult
		runPeer(t, bin, "all", 3*time.Minute, []string{"A2A_BASE=" + m.url("/groups/pair"), "A2A_TOKEN=Bearer test-token-123", "A2A_SID=a2a-group-peer"}, &res, nil)
		if res.Error != "" {
			t.Fatalf("a2a-go: %s", res.Error)
		}
		if res.Card.Name != "pair" {
			t.Errorf("card name %q, want pair", res.Card.Name)
		}
		checkGoCard(t, res, m.url("/groups/pair/a2a"))
		if want := []string{"alice", "bob"}; !slices.Equal(res.Card.Skills, want) {
			t.Errorf("card skills %q, want %q", res.Card.Skills, want)
		}

		// send: the round's last answer is the artifact; each member answered.
		if res.Send.State != "completed" || res.Send.Artifact == "" || res.Send.ContextID != res.Send.ID {
			t.Fatalf("send = %+v", res.Send)
		}
		conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+res.Send.ID, nil), "conversation")
		if got := speakers(conv); !slices.Equal(got, []string{"alice", "bob"}) {
			t.Errorf("answers by %v, want alice, bob", got)
		}
		var last string
		for _, msg := range list(conv, "messages") {
			if str(msg, "role") == "assistant" && str(msg, "name") == "bob" && str(msg, "content") != "" {
				last = str(msg, "content")
			}
		}
		if res.Send.Artifact != last || str(conv, "group", "name") != "pair" || str(conv, "group", "ended") != "max_turns" {
			t.Errorf("artifact %q, want bob's answer %q; group %v", res.Send.Artifact, last, obj(conv, "group"))
		}
		if str(conv, "session_id") != "a2a-group-peer" {
			t.Errorf("session_id = %q, want the caller's X-Session-ID", str(conv, "session_id"))
		}
		if res.Get.ID != res.Send.ID {
			t.Errorf("get: task %q, want the sent %q", res.Get.ID, res.Send.ID)
		}
		if res.Get.State != "completed" {
			t.Errorf("get: state %q, want completed", res.Get.State)
		}
		if res.Get.Artifacts != 1 {
			t.Errorf("get: %d artifacts, want 1", res.Get.Artifacts)
		}
		if res.Get.History != 3 {
			t.Errorf("get: %d messages of history, want 3 (the user's, alice's, bob's)", res.Get.History)
		}

		// approval: alice's call waits for one; after "approved" it ran, and
		// bob, whose turn comes next, asks for his own.
		if res.Paused.State != "input-required" || res.Paused.Approval == "" || m.resourceRows("go-peer") != 1 {
			t.Errorf("paused %+v, rows of go-peer %d", res.Paused, m.resourceRows("go-peer"))
		}
		if res.Approved.State != "input-required" || res.Approved.Approval == "" || res.Approved.Approval == res.Paused.Approval {
			t.Errorf("approved = %+v, want bob's own approval", res.Approved)
		}

		// stream and resubscribe
		checkGoStream(t, res.Stream)
		if want := []string{"task:completed", "status-update:completed:true"}; !slices.Equal(res.Resub.Events, want) {
			t.Errorf("resubscribe events = %v, want %v", res.Resub.Events, want)
		}
		if !res.NotFoundCoded {
			t.Errorf("unknown task: %q, want a2a.ErrTaskNotFound", res.NotFound)
		}

		// The chat is the group's task, not the agent's.
		out := a2aGroupRPC(m, "/a2a", "tasks/get", map[string]any{"id": res.Send.ID})
		if obj(out, "error")["code"] != -32001.0 {
			t.Errorf("tasks/get of the chat on /a2a: %v, want -32001", out)
		}
		task := obj(a2aGroupRPC(m, "/groups/pair/a2a", "tasks/get", map[string]any{"id": res.Send.ID}), "result")
		if str(task, "status", "state") != "completed" || a2aSrvArtifactText(task) != last {
			t.Errorf("tasks/get on /groups/pair/a2a = %v", task)
		}
	})

	t.Run("unknown group", func(t *testing.T) {
		for _, req := range []struct{ method, path string }{
			{"GET", "/groups/nope/.well-known/agent-card.json"},
			{"GET", "/groups/nope/.well-known/agent.json"},
			{"POST", "/groups/nope/a2a"},
		} {
			var body any
			if req.method == "POST" {
				body = map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": a2aSrvMessage("list all resources", "")}
			}
			status, out := m.try(req.method, req.path, body)
			if status != http.StatusNotFound || str(out, "code") != "group_not_found" || !strings.Contains(str(out, "error"), "nope") {
				t.Errorf("%s %s: %d %v, want 404 group_not_found", req.method, req.path, status, out)
			}
		}
	})
}
