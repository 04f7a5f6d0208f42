package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// openAIWire is Chat Completions (POST /v1/chat/completions); with ollama
// set, an OpenAI-compatible local server that takes no key.
type openAIWire struct{ ollama bool }

func (w openAIWire) Name() string {
	if w.ollama {
		return "ollama"
	}
	return "openai"
}

func (openAIWire) HasIDs() bool { return true }

func (w openAIWire) New(t *testing.T, srvURL string, opts Options) Provider {
	opts.BaseURL = srvURL + "/v1"
	if w.ollama {
		opts.APIKey = ""
		return newProvider(t, "ollama:llama3.2", opts)
	}
	return newProvider(t, "gpt-4o-mini", opts)
}

func (w openAIWire) Parse(r *http.Request, body []byte) (seen, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.URL.RawQuery != "" {
		return seen{}, fmt.Errorf("%s %s, want POST /v1/chat/completions", r.Method, r.URL)
	}
	auth := "Bearer " + testKey
	if w.ollama {
		auth = ""
	}
	if err := checkHeader(r, "Authorization", auth); err != nil {
		return seen{}, err
	}
	if err := checkHeader(r, "Content-Type", "application/json"); err != nil {
		return seen{}, err
	}
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCalls  []toolCall      `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		MaxTokens           int  `json:"max_tokens"`
		MaxCompletionTokens int  `json:"max_completion_tokens"`
		Stream              bool `json:"stream"`
		StreamOptions       *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := strict(body, &req); err != nil {
		return seen{}, err
	}
	if req.Model == "" || len(req.Messages) == 0 {
		return seen{}, errors.New("model and messages are required")
	}
	if req.StreamOptions != nil && !req.Stream {
		return seen{}, errors.New("stream_options is only allowed with stream: true")
	}
	if req.MaxTokens != 0 && req.MaxCompletionTokens != 0 {
		return seen{}, errors.New("max_tokens and max_completion_tokens are exclusive")
	}
	s := seen{Model: req.Model, Stream: req.Stream, MaxTokens: req.MaxTokens + req.MaxCompletionTokens}
	if req.Stream && (req.StreamOptions == nil || !req.StreamOptions.IncludeUsage) {
		return seen{}, errors.New("a stream without stream_options.include_usage reports no usage")
	}
	for _, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return seen{}, fmt.Errorf("tool %+v: want type function with a name", t)
		}
		s.Tools = append(s.Tools, seenTool{Name: t.Function.Name, Description: t.Function.Description, Params: t.Function.Parameters})
	}
	open := map[string]string{} // tool_call ids awaiting a tool message → name
	for i, m := range req.Messages {
		if len(open) > 0 && m.Role != "tool" {
			return seen{}, fmt.Errorf("messages[%d]: tool_call ids %v have no tool message", i, open)
		}
		text, files, err := openAIContent(m.Role, m.Content)
		if err != nil {
			return seen{}, fmt.Errorf("messages[%d]: %v", i, err)
		}
		switch m.Role {
		case "system":
			if i != 0 {
				return seen{}, fmt.Errorf("messages[%d]: system message after the start", i)
			}
			s.System = text
		case "user":
			if m.Content == nil {
				return seen{}, fmt.Errorf("messages[%d]: user message without content", i)
			}
			s.Messages = append(s.Messages, seenMsg{Role: "user", Text: text, Files: files})
		case "assistant":
			if m.Content == nil && len(m.ToolCalls) == 0 {
				return seen{}, fmt.Errorf("messages[%d]: assistant message needs content or tool_calls", i)
			}
			msg := seenMsg{Role: "assistant", Text: text}
			for _, c := range m.ToolCalls {
				if c.ID == "" || c.Type != "function" || c.Function.Name == "" || !json.Valid([]byte(c.Function.Arguments)) {
					return seen{}, fmt.Errorf("messages[%d]: bad tool call %+v (arguments must be a JSON string)", i, c)
				}
				open[c.ID] = c.Function.Name
				msg.Calls = append(msg.Calls, seenCall{ID: c.ID, Name: c.Function.Name, Args: canonical([]byte(c.Function.Arguments))})
			}
			s.Messages = append(s.Messages, msg)
		case "tool":
			name, ok := open[m.ToolCallID]
			if !ok || m.Content == nil {
				return seen{}, fmt.Errorf("messages[%d]: tool message for %q, which no preceding assistant message called", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			res := &seenResult{CallID: m.ToolCallID, Name: name, Content: text}
			if rest, ok := strings.CutPrefix(text, "Error: "); ok {
				res.Content, res.IsError = rest, true
			}
			s.Messages = append(s.Messages, seenMsg{Role: "tool", Result: res})
		default:
			return seen{}, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	if len(open) > 0 {
		return seen{}, fmt.Errorf("tool_call ids %v have no tool message", open)
	}
	return s, nil
}

// openAIContent decodes a message's content: a string, or (user messages)
// an array of text, image_url and file parts. The first text part is the
// message's text; later ones are text files.
func openAIContent(role string, raw json.RawMessage) (string, []seenFile, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var text string
	if raw[0] != '[' {
		err := json.Unmarshal(raw, &text)
		return text, nil, err
	}
	if role != "user" {
		return "", nil, fmt.Errorf("content parts in a %s message", role)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) == 0 {
		return "", nil, fmt.Errorf("content: want a string or a non-empty array of parts (%v)", err)
	}
	var files []seenFile
	sawText := false
	for j, pr := range parts {
		var p struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL *struct {
				URL    string `json:"url"`
				Detail string `json:"detail"`
			} `json:"image_url"`
			File *struct {
				Filename string `json:"filename"`
				FileData string `json:"file_data"`
				FileID   string `json:"file_id"`
			} `json:"file"`
		}
		if err := strict(pr, &p); err != nil {
			return "", nil, fmt.Errorf("content[%d]: %v", j, err)
		}
		switch {
		case p.Type == "text" && p.Text != "" && p.ImageURL == nil && p.File == nil:
			if !sawText && j == 0 {
				text, sawText = p.Text, true
				continue
			}
			files = append(files, seenFile{Kind: "text", Data: p.Text})
		case p.Type == "image_url" && p.ImageURL != nil && p.Text == "" && p.File == nil:
			if strings.HasPrefix(p.ImageURL.URL, "https://") {
				files = append(files, seenFile{Kind: "image", URL: p.ImageURL.URL})
				continue
			}
			mt, data, err := decodeDataURL(p.ImageURL.URL)
			if err != nil || !imageTypes[mt] {
				return "", nil, fmt.Errorf("content[%d]: image_url.url: want an https URL or a base64 data URL of an image (%v)", j, err)
			}
			files = append(files, seenFile{Kind: "image", MediaType: mt, Data: string(data)})
		case p.Type == "file" && p.File != nil && p.Text == "" && p.ImageURL == nil:
			mt, data, err := decodeDataURL(p.File.FileData)
			if err != nil || mt != "application/pdf" || p.File.FileID != "" {
				return "", nil, fmt.Errorf("content[%d]: file.file_data: want a base64 data URL of a PDF (%v)", j, err)
			}
			files = append(files, seenFile{Kind: "document", MediaType: mt, Name: p.File.Filename, Data: string(data)})
		default:
			return "", nil, fmt.Errorf("content[%d]: bad part of type %q", j, p.Type)
		}
	}
	return text, files, nil
}

func (openAIWire) finish(rp reply) string {
	if len(rp.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (openAIWire) usage(u Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens}
}

func (w openAIWire) Whole(s seen, rp reply) []byte {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if text := strings.Join(rp.Text, ""); text != "" {
		msg["content"] = text
	}
	if len(rp.Calls) > 0 {
		var calls []any
		for i, c := range rp.Calls {
			args := c.Args
			if args == "" {
				args = "{}"
			}
			calls = append(calls, map[string]any{"id": fmt.Sprintf("call_abc%d", i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": args}})
		}
		msg["tool_calls"] = calls
	}
	return mustJSON(map[string]any{
		"id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion", "created": 1741570283, "model": s.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": w.finish(rp)}},
		"usage":   w.usage(rp.Usage), "system_fingerprint": "fp_06737a9306",
	})
}

func (w openAIWire) Events(s seen, rp reply) []string {
	chunk := func(delta map[string]any, finish any) string {
		return sse("", map[string]any{
			"id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion.chunk", "created": 1741570283, "model": s.Model,
			"system_fingerprint": "fp_06737a9306", "usage": nil,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		})
	}
	ev := []string{chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)}
	for _, d := range rp.Text {
		ev = append(ev, chunk(map[string]any{"content": d}, nil))
	}
	for i, c := range rp.Calls {
		ev = append(ev, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_abc%d", i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		if c.Args != "" {
			for _, p := range pieces(c.Args, 6) {
				ev = append(ev, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil))
			}
		}
	}
	ev = append(ev, chunk(map[string]any{}, w.finish(rp)))
	ev = append(ev, sse("", map[string]any{
		"id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion.chunk", "created": 1741570283, "model": s.Model,
		"system_fingerprint": "fp_06737a9306", "choices": []any{}, "usage": w.usage(rp.Usage),
	}))
	return append(ev, "data: [DONE]\n\n")
}

func (openAIWire) ErrorBody(status int, message string) []byte {
	kind := map[int]string{400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error", 429: "requests", 500: "server_error"}[status]
	var code any
	switch status {
	case 401:
		code = "invalid_api_key"
	case 429:
		code = "rate_limit_exceeded"
	}
	return mustJSON(map[string]any{"error": map[string]any{"message": message, "type": kind, "param": nil, "code": code}})
}
