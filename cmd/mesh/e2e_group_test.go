package main

import (
	"net/http"
	"strings"
	"testing"
)

// groupConfig is the default agent plus the groups given (YAML under
// groups:).
func groupConfig(t testing.TB, groups string) string {
	return defaultConfig(t) + "\ngroups:\n" + groups
}

// newGroupChat creates a chat of group and returns its id.
func (m *meshProc) newGroupChat(group string) string {
	m.t.Helper()
	out := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"group": group})
	id := str(out, "conversation", "id")
	if id == "" || str(out, "conversation", "group", "name") != group {
		m.t.Fatalf("no group chat in %v", out)
	}
	return id
}

// speakers lists the authors of a conversation's assistant answers.
func speakers(conv map[string]any) []string {
	var out []string
	for _, msg := range list(conv, "messages") {
		if str(msg, "role") == "assistant" && obj(msg)["notice"] != true && len(list(msg, "tool_calls")) == 0 {
			out = append(out, str(msg, "name"))
		}
	}
	return out
}

const teamGroup = `  - name: team
    description: Three resource clerks
    strategy: round_robin
    max_turns: 3
    participants:
      - {agent: alice, description: lists resources, prompt: "You are Alice, a resource clerk."}
      - {agent: bob, description: checks resources, prompt: "You are Bob, a resource clerk."}
      - {agent: carol, description: reports resources, prompt: "You are Carol, a resource clerk."}
`

func TestGroupRoundRobinReachesMaxTurns(t *testing.T) {
	m := startMesh(t, meshOpts{config: groupConfig(t, teamGroup)})
	conv := m.newGroupChat("team")
	out := m.send(conv, "list all resources")
	c := obj(out, "conversation")
	if str(c, "status") != "active" || str(out, "result", "outcome") != "success" {
		t.Fatalf("answer = %v", out)
	}
	if got := strings.Join(speakers(c), ","); got != "alice,bob,carol" {
		t.Errorf("speakers %s, want alice,bob,carol", got)
	}
	if str(c, "group", "ended") != "max_turns" {
		t.Errorf("group = %v, want ended by max_turns", obj(c, "group"))
	}
	evs := turnEvents(t, m, conv, "RUN_FINISHED")
	var selected []string
	for _, ev := range evs {
		if str(ev, "type") == "CUSTOM" && str(ev, "name") == "speaker_selected" {
			selected = append(selected, str(ev, "value", "speaker"))
		}
	}
	if strings.Join(selected, ",") != "alice,bob,carol" {
		t.Errorf("speaker_selected %v", selected)
	}
}
