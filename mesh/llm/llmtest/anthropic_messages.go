package llmtest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// The messages of an Anthropic request: content blocks, checked as the
// API checks them (tool_use and tool_result pairing included), converted
// to llm messages.

// anthropicResultText reads a tool_result's content: a string or text
// (and image) blocks.
func anthropicResultText(at string, raw json.RawMessage) (string, *apiError) {
	switch jsonKind(raw) {
	case "", "null":
		return "", nil
	case "string":
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil
	case "array":
		var blocks []json.RawMessage
		_ = json.Unmarshal(raw, &blocks)
		var texts []string
		for j, b := range blocks {
			var kind struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(b, &kind)
			switch kind.Type {
			case "text":
				var t anthropicText
				if e := anthropicStrict(fmt.Sprintf("%s.content.%d", at, j), b, &t); e != nil {
					return "", e
				}
				texts = append(texts, t.Text)
			case "image", "document", "search_result":
			default:
				return "", anthropicBad("%s.content.%d: Input tag '%s' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'search_result'", at, j, kind.Type)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", anthropicBad("%s.content: Input should be a valid string or list", at)
}

func anthropicDecodeMessages(msgs []anthropicMessage, req *llm.Request) *apiError {
	d := anthropicDecoder{req: req}
	for i, m := range msgs {
		at := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			return anthropicBad("%s.role: Input should be 'user' or 'assistant'", at)
		}
		blocks, e := anthropicBlocks(m, at, i == len(msgs)-1)
		if e != nil {
			return e
		}
		t := anthropicTurn{at: at, role: m.Role, answered: map[string]bool{}, next: map[string]string{}}
		for j, raw := range blocks {
			if e := d.block(&t, fmt.Sprintf("%s.content.%d", at, j), raw); e != nil {
				return e
			}
		}
		if len(d.open) > 0 {
			var ids []string
			for _, id := range d.openOrder {
				if _, ok := d.open[id]; ok {
					ids = append(ids, id)
				}
			}
			return anthropicBad("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(ids, ", "))
		}
		if m.Role == "assistant" {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: strings.Join(t.texts, "\n"), ToolCalls: t.calls, Thoughts: t.thoughts})
			d.open, d.openOrder = t.next, t.nextOrder
			continue
		}
		if len(t.texts) > 0 || len(t.files) > 0 {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: strings.Join(t.texts, "\n"), Files: t.files})
		}
		d.open, d.openOrder = nil, nil
	}
	if len(d.open) > 0 {
		return anthropicBad("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", len(msgs)-1, strings.Join(d.openOrder, ", "))
	}
	return nil
}

// anthropicDecoder decodes messages in order, pairing each user message's
// tool_result blocks with the tool_use blocks of the assistant message
// before it.
type anthropicDecoder struct {
	req *llm.Request
	// open are the tool_use ids of the previous assistant message still
	// without a result → tool name; openOrder lists them in order.
	open      map[string]string
	openOrder []string
}

// anthropicTurn is what the blocks of one message hold so far.
type anthropicTurn struct {
	at, role string
	// answered are the tool_use ids this message answered.
	answered map[string]bool
	texts    []string
	files    []llm.File
	calls    []llm.ToolCall
	thoughts []llm.Thought
	// next are this message's tool_use ids → tool name, in nextOrder.
	next      map[string]string
	nextOrder []string
}

// anthropicBlocks returns a message's content blocks, a string content
// being one text block. Only the final assistant message may be empty.
func anthropicBlocks(m anthropicMessage, at string, last bool) ([]json.RawMessage, *apiError) {
	var blocks []json.RawMessage
	switch jsonKind(m.Content) {
	case "string":
		var s string
		_ = json.Unmarshal(m.Content, &s)
		if s != "" {
			b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
			blocks = []json.RawMessage{b}
		}
	case "array":
		_ = json.Unmarshal(m.Content, &blocks)
	default:
		return nil, anthropicBad("%s.content: Input should be a valid string or list", at)
	}
	if len(blocks) == 0 && !(m.Role == "assistant" && last) {
		return nil, anthropicBad("%s: all messages must have non-empty content except for the optional final assistant message", at)
	}
	return blocks, nil
}

// block decodes one content block of t's message, at bat.
func (d *anthropicDecoder) block(t *anthropicTurn, bat string, raw json.RawMessage) *apiError {
	var kind struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &kind)
	switch kind.Type {
	case "text":
		var b anthropicText
		if e := anthropicStrict(bat+".text", raw, &b); e != nil {
			return e
		}
		if strings.TrimSpace(b.Text) == "" {
			if b.Text == "" {
				return anthropicBad("messages: text content blocks must be non-empty")
			}
			return anthropicBad("messages: text content blocks must contain non-whitespace text")
		}
		t.texts = append(t.texts, b.Text)
	case "tool_use":
		return t.toolUse(bat, raw)
	case "tool_result":
		return d.toolResult(t, bat, raw)
	case "image", "document":
		f, e := anthropicFile(bat, kind.Type, t.role, raw)
		if e != nil {
			return e
		}
		t.files = append(t.files, f)
	case "thinking", "redacted_thinking":
		if t.role != "assistant" {
			return anthropicBad("%s: %s blocks are only allowed in assistant messages", bat, kind.Type)
		}
		var b anthropicThinking
		if e := anthropicStrict(bat+"."+kind.Type, raw, &b); e != nil {
			return e
		}
		t.thoughts = append(t.thoughts, llm.Thought{Text: b.Thinking, Signature: b.Signature, Redacted: b.Data})
	default:
		return anthropicBad("%s: Input tag '%s' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'", bat, kind.Type)
	}
	return nil
}

// toolUse decodes a tool_use block, a call of an assistant message.
func (t *anthropicTurn) toolUse(bat string, raw json.RawMessage) *apiError {
	if t.role != "assistant" {
		return anthropicBad("%s: tool_use blocks are only allowed in assistant messages", bat)
	}
	var b anthropicToolUse
	if e := anthropicStrict(bat+".tool_use", raw, &b); e != nil {
		return e
	}
	switch {
	case !anthropicIDRE.MatchString(b.ID):
		return anthropicBad("%s.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'", bat)
	case b.Name == "":
		return anthropicBad("%s.tool_use.name: Field required", bat)
	case jsonKind(b.Input) != "object":
		return anthropicBad("%s.tool_use.input: Input should be a valid dictionary", bat)
	}
	t.next[b.ID] = b.Name
	t.nextOrder = append(t.nextOrder, b.ID)
	t.calls = append(t.calls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: objectArgs(b.Input)})
	return nil
}

// toolResult decodes a tool_result block of a user message: it must
// come before any text and answer an open tool_use of the message before.
func (d *anthropicDecoder) toolResult(t *anthropicTurn, bat string, raw json.RawMessage) *apiError {
	if t.role != "user" {
		return anthropicBad("%s: tool_result blocks are only allowed in user messages", bat)
	}
	var b anthropicToolResult
	if e := anthropicStrict(bat+".tool_result", raw, &b); e != nil {
		return e
	}
	if len(t.texts) > 0 {
		return anthropicBad("%s: tool_result blocks must come before any other content in the message", t.at)
	}
	name, ok := d.open[b.ToolUseID]
	if !ok {
		if len(d.open) == 0 && len(t.answered) == 0 {
			return anthropicBad("%s: `tool_result` block(s) provided when previous message does not contain any `tool_use` blocks", t.at)
		}
		return anthropicBad("%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", bat, b.ToolUseID)
	}
	content, e := anthropicResultText(bat+".tool_result", b.Content)
	if e != nil {
		return e
	}
	delete(d.open, b.ToolUseID)
	t.answered[b.ToolUseID] = true
	d.req.Messages = append(d.req.Messages, llm.Message{Role: llm.RoleTool, Content: content, ToolCallID: b.ToolUseID, ToolName: name, IsError: b.IsError})
	return nil
}
