package group

import (
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// A message to a group chat keeps its files: the round's user message
// lists them, so the members' models get them from the history.
func TestGroupMessageKeepsItsFiles(t *testing.T) {
	h := newHarness(t, trio(1), []*fakeMember{{name: "a"}, {name: "b"}, {name: "c"}})
	id := mesh.NewID()
	c := &mesh.Conversation{ID: id, SessionID: mesh.NewTraceID(), Status: mesh.StatusActive, Group: &mesh.GroupRun{Name: "team"}}
	if err := h.store.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	file := mesh.File{ID: store.NewFileID(), Name: "plan.pdf", MediaType: "application/pdf", Size: 3, SHA256: "ab"}
	turn := mesh.NewID()
	if err := workloop.Publish(t.Context(), h.m.JS, h.m.NS, mesh.RoleGroup, "team", mesh.WorkItem{Kind: mesh.WorkTurn, Session: id, TurnID: turn, Message: "read this", Files: []mesh.File{file}}, nil); err != nil {
		t.Fatal(err)
	}
	c = h.waitRound(id, turn)
	for _, m := range c.Messages {
		if m.Role == mesh.RoleUser {
			if len(m.Files) != 1 || m.Files[0] != file {
				t.Errorf("the user message's files %+v, want %+v", m.Files, file)
			}
			return
		}
	}
	t.Fatal("no user message")
}
