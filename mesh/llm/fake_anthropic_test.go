package llm

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// anthropicWire is the Messages API (POST /v1/messages).
type anthropicWire struct{}

// anthropicFile decodes an image or a document block.
func anthropicFile(raw json.RawMessage) (seenFile, error) {
	var b struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
			URL       string `json:"url"`
		} `json:"source"`
	}
	if err := strict(raw, &b); err != nil {
		return seenFile{}, err
	}
	src := b.Source
	f := seenFile{Kind: b.Type, MediaType: src.MediaType, Name: b.Title}
	switch {
	case src.Type == "url" && strings.HasPrefix(src.URL, "https://") && src.MediaType == "" && src.Data == "":
		f.URL = src.URL
		return f, nil
	case src.Type == "text" && b.Type == "document" && src.MediaType == "text/plain" && src.URL == "":
		f.Data = src.Data
		return f, nil
	case src.Type != "base64" || src.URL != "":
		return seenFile{}, fmt.Errorf("%s source: want base64, url or (documents) text, got %q", b.Type, src.Type)
	case b.Type == "image" && (!imageTypes[src.MediaType] || b.Title != ""):
		return seenFile{}, fmt.Errorf("image media_type %q", src.MediaType)
	case b.Type == "document" && src.MediaType != "application/pdf":
		return seenFile{}, fmt.Errorf("document media_type %q: a base64 document is a PDF", src.MediaType)
	}
	data, err := base64.StdEncoding.DecodeString(src.Data)
	if err != nil || len(data) == 0 {
		return seenFile{}, fmt.Errorf("source.data: not base64 (%v)", err)
	}
	f.Data = string(data)
	return f, nil
}

func (anthropicWire) Name() string { return "anthropic" }
func (anthropicWire) HasIDs() bool { return true }

func (anthropicWire) New(t *testing.T, srvURL string, opts Options) Provider {
	opts.BaseURL = srvURL
	return newProvider(t, "anthropic:claude-sonnet-4-5", opts)
}

func (anthropicWire) Parse(r *http.Request, body []byte) (seen, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" || r.URL.RawQuery != "" {
		return seen{}, fmt.Errorf("%s %s, want POST /v1/messages", r.Method, r.URL)
	}
	for _, h := range [][2]string{{"x-api-key", testKey}, {"anthropic-version", "2023-06-01"}, {"content-type", "application/json"}} {
		if err := checkHeader(r, h[0], h[1]); err != nil {
			return seen{}, err
		}
	}
	if r.Header.Get("Authorization") != "" {
		return seen{}, errors.New("Authorization header sent to Anthropic")
	}
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    string `json:"system"`
		Messages  []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Stream bool `json:"stream"`
	}
	if err := strict(body, &req); err != nil {
		return seen{}, err
	}
	if req.Model == "" || req.MaxTokens <= 0 || len(req.Messages) == 0 {
		return seen{}, errors.New("model, max_tokens and messages are required")
	}
	s := seen{Model: req.Model, System: req.System, Stream: req.Stream, MaxTokens: req.MaxTokens}
	for _, tool := range req.Tools {
		var schema struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(tool.InputSchema, &schema) != nil || schema.Type != "object" {
			return seen{}, fmt.Errorf("tool %s: input_schema must be an object schema", tool.Name)
		}
		s.Tools = append(s.Tools, seenTool{Name: tool.Name, Description: tool.Description, Params: tool.InputSchema})
	}
	var open map[string]string // tool_use ids awaiting their tool_result → name
	for i, m := range req.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			return seen{}, fmt.Errorf("messages[%d] has role %q, want %q (roles alternate, starting with user)", i, m.Role, want)
		}
		if len(m.Content) == 0 {
			return seen{}, fmt.Errorf("messages[%d] has no content", i)
		}
		var assistant *seenMsg
		if m.Role == "assistant" {
			if len(open) > 0 {
				return seen{}, fmt.Errorf("messages[%d]: tool_use ids %v have no tool_result", i, open)
			}
			open = map[string]string{}
			s.Messages = append(s.Messages, seenMsg{Role: "assistant"})
			assistant = &s.Messages[len(s.Messages)-1]
		}
		sawText := false
		from := len(s.Messages)
		for j, raw := range m.Content {
			var kind struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(raw, &kind)
			switch {
			case kind.Type == "text":
				var b struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				if err := strict(raw, &b); err != nil || b.Text == "" {
					return seen{}, fmt.Errorf("messages[%d].content[%d]: bad text block (%v)", i, j, err)
				}
				sawText = true
				if assistant != nil {
					assistant.Text += b.Text
				} else {
					s.Messages = addUserText(s.Messages, from, b.Text)
				}
			case (kind.Type == "image" || kind.Type == "document") && m.Role == "user":
				f, err := anthropicFile(raw)
				if err != nil {
					return seen{}, fmt.Errorf("messages[%d].content[%d]: %v", i, j, err)
				}
				if sawText {
					return seen{}, fmt.Errorf("messages[%d]: files after text (the API advises them first)", i)
				}
				s.Messages = addUserFile(s.Messages, from, f)
			case kind.Type == "tool_use" && assistant != nil:
				var b struct {
					Type  string          `json:"type"`
					ID    string          `json:"id"`
					Name  string          `json:"name"`
					Input json.RawMessage `json:"input"`
				}
				if err := strict(raw, &b); err != nil {
					return seen{}, fmt.Errorf("messages[%d].content[%d]: %v", i, j, err)
				}
				if b.ID == "" || b.Name == "" || !strings.HasPrefix(strings.TrimSpace(string(b.Input)), "{") {
					return seen{}, fmt.Errorf("messages[%d].content[%d]: tool_use needs id, name and an input object", i, j)
				}
				open[b.ID] = b.Name
				assistant.Calls = append(assistant.Calls, seenCall{ID: b.ID, Name: b.Name, Args: canonical(b.Input)})
			case kind.Type == "tool_result" && m.Role == "user":
				var b struct {
					Type      string `json:"type"`
					ToolUseID string `json:"tool_use_id"`
					Content   string `json:"content"`
					IsError   bool   `json:"is_error"`
				}
				if err := strict(raw, &b); err != nil {
					return seen{}, fmt.Errorf("messages[%d].content[%d]: %v", i, j, err)
				}
				if sawText {
					return seen{}, fmt.Errorf("messages[%d]: tool_result blocks must come before text", i)
				}
				name, ok := open[b.ToolUseID]
				if !ok {
					return seen{}, fmt.Errorf("messages[%d]: tool_result for %q, which the previous assistant message did not call", i, b.ToolUseID)
				}
				delete(open, b.ToolUseID)
				s.Messages = append(s.Messages, seenMsg{Role: "tool", Result: &seenResult{CallID: b.ToolUseID, Name: name, Content: b.Content, IsError: b.IsError}})
			default:
				return seen{}, fmt.Errorf("messages[%d].content[%d]: block type %q not allowed in a %s message", i, j, kind.Type, m.Role)
			}
		}
		if m.Role == "user" && len(open) > 0 {
			return seen{}, fmt.Errorf("messages[%d]: tool_use ids %v have no tool_result right after them", i, open)
		}
	}
	if req.Messages[len(req.Messages)-1].Role != "user" {
		return seen{}, errors.New("the last message must be the user's")
	}
	return s, nil
}

func (anthropicWire) stopReason(rp reply) string {
	if len(rp.Calls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

// usage splits the input count between fresh and cached tokens, as real
// answers do once prompt caching kicks in.
func anthropicFakeUsage(u Usage) map[string]any {
	cached := min(u.InputTokens, 3)
	return map[string]any{"input_tokens": u.InputTokens - cached, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached, "output_tokens": u.OutputTokens}
}

func (w anthropicWire) Whole(s seen, rp reply) []byte {
	content := []any{}
	if text := strings.Join(rp.Text, ""); text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for i, c := range rp.Calls {
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_01A%d", i), "name": c.Name, "input": argsObject(c.Args)})
	}
	return mustJSON(map[string]any{
		"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": s.Model,
		"content": content, "stop_reason": w.stopReason(rp), "stop_sequence": nil, "usage": anthropicFakeUsage(rp.Usage),
	})
}

func (w anthropicWire) Events(s seen, rp reply) []string {
	start := anthropicFakeUsage(rp.Usage)
	start["output_tokens"] = 1
	ev := []string{
		sse("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": s.Model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}}),
	}
	index := 0
	if len(rp.Text) > 0 {
		ev = append(ev, sse("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}}),
			sse("ping", map[string]any{"type": "ping"}))
		for _, d := range rp.Text {
			ev = append(ev, sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": d}}))
		}
		ev = append(ev, sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": index}))
		index++
	}
	for i, c := range rp.Calls {
		ev = append(ev, sse("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_01A%d", i), "name": c.Name, "input": map[string]any{}}}),
			sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}}))
		if c.Args != "" {
			for _, p := range pieces(c.Args, 7) {
				ev = append(ev, sse("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}}))
			}
		}
		ev = append(ev, sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": index}))
		index++
	}
	return append(ev,
		sse("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": w.stopReason(rp), "stop_sequence": nil}, "usage": map[string]any{"output_tokens": rp.Usage.OutputTokens}}),
		sse("message_stop", map[string]any{"type": "message_stop"}))
}

func (anthropicWire) ErrorBody(status int, message string) []byte {
	kind := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
		429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}[status]
	if kind == "" {
		kind = "api_error"
	}
	return mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": message}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
}
