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

// appendOpenAIRequest appends the JSON of r to b; tools is the encoded
// tools array (empty: none).
func appendOpenAIRequest(b []byte, r *openAIRequest, tools []byte) ([]byte, error) {
	b = append(b, `{"model":`...)
	b = appendJSONString(b, r.Model)
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendOpenAIMessage(b, &r.Messages[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
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
	return append(b, '}'), nil
}

// appendOpenAIMessage appends the JSON of m to b.
func appendOpenAIMessage(b []byte, m *openAIMessage) ([]byte, error) {
	b = append(b, `{"role":`...)
	b = appendJSONString(b, m.Role)
	switch c := m.Content.(type) {
	case nil:
	case *string:
		b = append(b, `,"content":`...)
		if c == nil {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, *c)
		}
	default: // the parts of a user message with files: rare
		v, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"content":`...), v...)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, tc := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, tc.ID)
			b = append(b, `,"type":`...)
			b = appendJSONString(b, tc.Type)
			b = append(b, `,"function":{"name":`...)
			b = appendJSONString(b, tc.Function.Name)
			b = append(b, `,"arguments":`...)
			b = appendJSONString(b, tc.Function.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendJSONString(b, m.ToolCallID)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as encoding/json writes it. A string of
// printable ASCII with nothing to escape, most of them, is copied as it
// is; any other is left to json.Marshal, so that its escapes (HTML
// characters, control characters, invalid UTF-8, U+2028) are exactly
// encoding/json's.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			v, _ := json.Marshal(s) // a string always encodes
			return append(b, v...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
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
