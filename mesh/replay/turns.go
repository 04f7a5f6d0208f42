package replay

import (
	"github.com/agentmesh/agentmesh/mesh"
)

// TurnsOf splits a conversation's messages (the whole log, oldest first)
// into its turns: each user message starts one, which holds the calls of
// the assistant messages after it, in order, and the last text an
// assistant answered before the next user message. Notices (messages meant
// for people) are left out; a call whose result is a stand-in is marked.
func TurnsOf(messages []mesh.Message) []Turn {
	standIn := map[string]bool{}
	for _, m := range messages {
		if m.Role == mesh.RoleTool && m.StandIn {
			standIn[m.ToolCallID] = true
		}
	}
	var out []Turn
	for _, m := range messages {
		switch {
		case m.Role == mesh.RoleUser:
			out = append(out, Turn{User: m.Content})
		case len(out) == 0 || m.Role != mesh.RoleAssistant || m.Notice:
		default:
			t := &out[len(out)-1]
			for _, c := range m.ToolCalls {
				t.Calls = append(t.Calls, Call{Tool: CallName(c), Arguments: c.Arguments, StandIn: standIn[c.ID]})
			}
			if m.Content != "" {
				t.Answer = m.Content
			}
		}
	}
	return out
}

// CallName is how a report names a call's tool: <server>/<tool> for a
// catalog tool, else the function name the model used.
func CallName(c mesh.ToolCall) string {
	if c.Server != "" && c.Tool != "" {
		return c.Server + "/" + c.Tool
	}
	return c.Name
}
