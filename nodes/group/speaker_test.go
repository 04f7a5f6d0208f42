package group

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
)

// The tools of the last turn are the calls its speaker made since the last
// user message or another member's message, in order.
func TestLastTurnTools(t *testing.T) {
	call := func(names ...string) []mesh.ToolCall {
		var out []mesh.ToolCall
		for _, n := range names {
			out = append(out, mesh.ToolCall{ID: n + "-id", Name: n})
		}
		return out
	}
	msgs := []mesh.Message{
		{Role: mesh.RoleSystem, Content: "be brief"},
		{Role: mesh.RoleUser, Content: "fix it"},
		{Role: mesh.RoleAssistant, Name: "coder", ToolCalls: call("read_file")},
		{Role: mesh.RoleTool, Content: "…"},
		{Role: mesh.RoleAssistant, Name: "coder", Content: "fixed"},
		{Role: mesh.RoleAssistant, Name: "reviewer", ToolCalls: call("git_diff", "git_commit")},
		{Role: mesh.RoleTool, Content: "…"},
		{Role: mesh.RoleTool, Content: "…"},
		{Role: mesh.RoleAssistant, Name: "reviewer", ToolCalls: call("git_push")},
		{Role: mesh.RoleTool, Content: "…"},
		{Role: mesh.RoleAssistant, Name: "reviewer", Content: "pushed"},
	}
	if got := lastTurnTools(msgs, "reviewer"); !slices.Equal(got, []string{"git_diff", "git_commit", "git_push"}) {
		t.Errorf("reviewer's last turn: %v", got)
	}
	if got := lastTurnTools(msgs[:5], "coder"); !slices.Equal(got, []string{"read_file"}) {
		t.Errorf("coder's turn: %v", got)
	}
	if got := lastTurnTools(msgs[:2], "user"); len(got) != 0 {
		t.Errorf("after a user message: %v, want none", got)
	}
}
