package llm

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
)

// This file encodes a Chat Completions request by hand: the same bytes
// json.Marshal writes for openAIRequest (TestOpenAIEncoding compares
// them), without its reflection over every message of the history on
// every call. The tools, the same from call to call until the catalog
// changes, are encoded once (toolsJSON).

// appendOpenAIRequest appends the JSON of r to b, its messages written by
// history (r.Messages is not read) and its tools array tools (empty:
// none).
func appendOpenAIRequest(b []byte, r *openAIRequest, history func([]byte) ([]byte, error), tools []byte) ([]byte, error) {
	b = append(b, `{"model":`...)
	b = appendJSONString(b, r.Model)
	b = append(b, `,"messages":`...)
	b, err := history(b)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		b = append(append(b, `,"tools":`...), tools...)
	}
	if r.MaxTokens != 0 {
		b = strconv.AppendInt(append(b, `,"max_tokens":`...), int64(r.MaxTokens), 10)
	}
	if r.MaxCompletionTokens != 0 {
		b = strconv.AppendInt(append(b, `,"max_completion_tokens":`...), int64(r.MaxCompletionTokens), 10)
	}
	for _, f := range []struct {
		key string
		v   *float64
	}{{`,"temperature":`, r.Temperature}, {`,"top_p":`, r.TopP}} {
		if f.v == nil {
			continue
		}
		// encoding/json's own float format (it differs from strconv's 'g').
		v, err := json.Marshal(*f.v)
		if err != nil {
			return nil, err
		}
		b = append(append(b, f.key...), v...)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	if r.StreamOptions != nil {
		b = append(b, `,"stream_options":{"include_usage":`...)
		b = strconv.AppendBool(b, r.StreamOptions.IncludeUsage)
		b = append(b, '}')
	}
	if r.ReasoningEffort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = appendJSONString(b, r.ReasoningEffort)
	}
	if r.ResponseFormat != nil {
		f, err := json.Marshal(r.ResponseFormat)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"response_format":`...), f...)
	}
	return append(b, '}'), nil
}

// appendOpenAIHistory appends the messages array openAIMessages makes of
// system and msgs, as json.Marshal writes it, without making it.
func appendOpenAIHistory(b []byte, system string, msgs []Message, noPDF bool) ([]byte, error) {
	start := len(b)
	b = append(b, '[')
	if system != "" {
		b = appendOpenAIText(b, "system", system, "")
	}
	for _, m := range normalizeHistory(msgs) {
		switch m.Role {
		case RoleAssistant:
			b = openOpenAIMessage(b, "assistant")
			if m.Content != "" || len(m.ToolCalls) == 0 {
				b = append(b, `,"content":`...)
				b = appendJSONString(b, m.Content)
			}
			if len(m.ToolCalls) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for i, c := range m.ToolCalls {
					if i > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"id":`...)
					b = appendJSONString(b, c.ID)
					b = append(b, `,"type":"function","function":{"name":`...)
					b = appendJSONString(b, c.Name)
					b = append(b, `,"arguments":`...)
					b = appendJSONString(b, string(c.Arguments))
					b = append(b, "}}"...)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		case RoleTool:
			content := m.Content
			if m.IsError {
				content = errorText(content)
			}
			b = appendOpenAIText(b, "tool", content, m.ToolCallID)
		default:
			if len(m.Files) == 0 {
				b = appendOpenAIText(b, "user", m.Content, "")
				continue
			}
			parts, err := json.Marshal(openAIParts(m.Content, m.Files, noPDF))
			if err != nil {
				return nil, err
			}
			b = openOpenAIMessage(b, "user")
			b = append(append(append(b, `,"content":`...), parts...), '}')
		}
	}
	if len(b) == start+1 {
		return append(b[:start], "null"...), nil // openAIMessages' nil
	}
	return append(b, ']'), nil
}

// openOpenAIMessage appends the start of a message, {"role":role, after a
// comma unless it is the array's first.
func openOpenAIMessage(b []byte, role string) []byte {
	if b[len(b)-1] != '[' {
		b = append(b, ',')
	}
	b = append(b, `{"role":`...)
	return appendJSONString(b, role)
}

// appendOpenAIText appends {"role","content","tool_call_id"?}, the content
// always present.
func appendOpenAIText(b []byte, role, content, toolCallID string) []byte {
	b = openOpenAIMessage(b, role)
	b = append(b, `,"content":`...)
	b = appendJSONString(b, content)
	if toolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendJSONString(b, toolCallID)
	}
	return append(b, '}')
}

// appendJSONString appends s as encoding/json writes it (FuzzJSONString
// compares the two). ASCII is escaped here as encoding/json does it (the
// quote, the backslash, \n \r \t \b \f, and \u00XX for the other
// control characters and for <, > and &); a string with any byte past
// ASCII is left whole to json.Marshal, so that its handling of invalid
// UTF-8 and of U+2028 and U+2029 stays exactly its own.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			v, _ := json.Marshal(s) // a string always encodes
			return append(b, v...)
		}
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// toolsJSON keeps the encoded tools array of the last tool list sent: the
// list is the same from one call to the next until the catalog changes.
type toolsJSON struct {
	mu    sync.Mutex
	tools []Tool // the list last encoded, a copy
	json  []byte
}

// encode is the tools array of tools as json.Marshal writes it
// (openAIRequest.Tools), nil for none.
func (c *toolsJSON) encode(tools []Tool) ([]byte, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sameTools(c.tools, tools) {
		return c.json, nil
	}
	data, err := json.Marshal(openAITools(tools))
	if err != nil {
		return nil, err
	}
	// A copy of the list and its schemas: the caller's may be reused.
	kept := make([]Tool, len(tools))
	for i, t := range tools {
		t.Parameters = bytes.Clone(t.Parameters)
		kept[i] = t
	}
	c.tools, c.json = kept, data
	return data, nil
}

// sameTools says a and b offer the same tools, in the same order.
func sameTools(a, b []Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].Parameters, b[i].Parameters) {
			return false
		}
	}
	return true
}
