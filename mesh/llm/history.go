package llm

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// normalizeHistory makes msgs safe for APIs that pair tool calls and tool
// results strictly (Anthropic and OpenAI reject a call without its result,
// Gemini wants as many function responses as calls):
//
//   - every assistant tool call has an id (call_<message>_<call> when the
//     caller gave none) and a JSON object as arguments;
//   - every tool message names the call it answers: by id, else the first
//     unanswered call of that name, else the first unanswered call of the
//     last assistant message; results follow in the order of the calls
//     (Gemini pairs them by position);
//   - a tool message that answers no call of the last assistant message
//     becomes user text after the results;
//   - a call still unanswered when the conversation moves on gets an error
//     result, so that the model knows it did not run.
func normalizeHistory(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	var calls, pending []ToolCall
	results := map[string]Message{}
	var orphans []Message
	flush := func() {
		for _, c := range calls {
			r, ok := results[c.ID]
			if !ok {
				r = Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name,
					Content: "no result: the call was not completed", IsError: true}
			}
			out = append(out, r)
		}
		out = append(out, orphans...)
		calls, pending, orphans = nil, nil, nil
		clear(results)
	}
	for i, m := range msgs {
		switch m.Role {
		case RoleTool:
			j := answeredCall(pending, m)
			if j < 0 {
				orphans = append(orphans, Message{Role: RoleUser, Content: orphanResult(m)})
				continue
			}
			m.ToolCallID, m.ToolName = pending[j].ID, pending[j].Name
			pending = append(pending[:j:j], pending[j+1:]...)
			results[m.ToolCallID] = m
		case RoleAssistant:
			flush()
			if len(m.ToolCalls) > 0 {
				cs := make([]ToolCall, len(m.ToolCalls))
				for j, c := range m.ToolCalls {
					if c.ID == "" {
						c.ID = fmt.Sprintf("call_%d_%d", i, j)
					}
					c.Arguments = objectArgs(c.Arguments)
					cs[j] = c
				}
				m.ToolCalls = cs
				calls = cs
				pending = append([]ToolCall(nil), cs...)
			}
			out = append(out, m)
		default:
			flush()
			out = append(out, m)
		}
	}
	flush()
	return out
}

// answeredCall finds the call of pending that tool message m answers, or -1.
func answeredCall(pending []ToolCall, m Message) int {
	if m.ToolCallID != "" {
		for j, c := range pending {
			if c.ID == m.ToolCallID {
				return j
			}
		}
		return -1
	}
	for j, c := range pending {
		if m.ToolName != "" && c.Name == m.ToolName {
			return j
		}
	}
	if len(pending) > 0 && m.ToolName == "" {
		return 0
	}
	return -1
}

func orphanResult(m Message) string {
	name := m.ToolName
	if name == "" {
		name = "a tool"
	}
	status := "result"
	if m.IsError {
		status = "error"
	}
	return fmt.Sprintf("[%s of %s]\n%s", status, name, m.Content)
}

// objectArgs returns args when it is a JSON object, else {}.
func objectArgs(args json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(t)
}

// parseArgs checks tool arguments a model sent: a JSON object, or nothing
// (an empty object).
func parseArgs(raw []byte) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if t[0] != '{' || !json.Valid(t) {
		return nil, malformed("tool arguments are not a JSON object: %s", clip(string(t), 200))
	}
	return json.RawMessage(bytes.Clone(t)), nil
}

// errorText marks a failed tool's result for APIs without an error flag.
func errorText(content string) string {
	return "Error: " + content
}

// sampling is the settings of one call: the request's over the
// provider's, with the default cap of a reply when neither sets one.
func sampling(req Request, provider modelspec.Sampling) modelspec.Sampling {
	s := provider.Over(req.Sampling)
	if s.MaxTokens <= 0 {
		s.MaxTokens = defaultMaxTokens
	}
	return s
}
