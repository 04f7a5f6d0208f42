package llm

// The Anthropic provider speaks the Messages API: POST {base}/v1/messages
// with the headers x-api-key (ANTHROPIC_API_KEY) and anthropic-version
// 2023-06-01. The system prompt is the top-level "system"; tool calls are
// tool_use blocks of assistant messages and their results tool_result
// blocks (tool_use_id, is_error) of one user message; tools carry their
// JSON Schema as input_schema; max_tokens is required. Streamed answers are
// server-sent events: message_start (input usage), content_block_start
// (text or tool_use), content_block_delta (text_delta or input_json_delta),
// content_block_stop, message_delta (stop_reason, output usage),
// message_stop, with ping and error events in between.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

const (
	anthropicDefaultBase = "https://api.anthropic.com"
	anthropicVersion     = "2023-06-01"
)

type anthropicProvider struct {
	model modelspec.Model
	ep    *endpoint
	// sampling is the settings of every call (llm section).
	sampling modelspec.Sampling
}

func newAnthropic(model modelspec.Model, opts Options) *anthropicProvider {
	base := opts.BaseURL
	if base == "" {
		base = anthropicDefaultBase
	}
	return &anthropicProvider{model: model, ep: newEndpoint(modelspec.ProviderAnthropic, base, opts), sampling: opts.Sampling}
}

func (p *anthropicProvider) Model() string { return p.model.String() }

// Generate sends req to the Messages API, streaming when req.OnText is set.
func (p *anthropicProvider) Generate(ctx context.Context, req Request) (*Response, error) {
	stream := req.OnText != nil
	body, err := json.Marshal(p.request(req, stream))
	if err != nil {
		return nil, &Error{Code: CodeError, Message: "anthropic: encode request: " + err.Error(), Err: err}
	}
	url := p.ep.base + "/v1/messages"
	if strings.HasSuffix(p.ep.base, "/v1") {
		url = p.ep.base + "/messages"
	}
	return p.ep.run(ctx, &exchange{
		url: url, body: body, stream: stream,
		header: func(h http.Header) {
			if p.ep.key != "" {
				h.Set("x-api-key", p.ep.key.Reveal())
			}
			h.Set("anthropic-version", anthropicVersion)
		},
		decodeJSON:   decodeAnthropic,
		decodeStream: decodeAnthropicStream,
		errorDetail:  anthropicErrorDetail,
	}, req.OnText)
}

// Request body.

type anthropicRequest struct {
	Model       string             `json:"model"`
	MaxTokens   int                `json:"max_tokens"`
	Temperature *float64           `json:"temperature,omitempty"`
	TopP        *float64           `json:"top_p,omitempty"`
	System      string             `json:"system,omitempty"`
	Messages    []anthropicMessage `json:"messages"`
	Tools       []anthropicTool    `json:"tools,omitempty"`
	Stream      bool               `json:"stream,omitempty"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

// anthropicBlock is a content block we send: text, tool_use or tool_result.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Source is an image's or a document's: base64 bytes, a URL, or text.
	Source *anthropicSource `json:"source,omitempty"`
	// Title names a document.
	Title string `json:"title,omitempty"`
}

type anthropicSource struct {
	Type      string `json:"type"` // base64, url, text
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// anthropicFiles are a user message's files as image and document blocks.
func anthropicFiles(files []File) []anthropicBlock {
	var out []anthropicBlock
	for _, f := range files {
		b := anthropicBlock{Type: "document", Source: &anthropicSource{Type: "base64", MediaType: f.MediaType, Data: f.base64()}}
		switch {
		case f.MediaType == "text/plain":
			b.Source = &anthropicSource{Type: "text", MediaType: f.MediaType, Data: string(f.Data)}
		case f.URL != "":
			b.Source = &anthropicSource{Type: "url", URL: f.URL}
		}
		if f.IsImage() {
			b.Type = "image"
		} else {
			b.Title = f.Name
		}
		if f.MediaType == "text/plain" && f.URL != "" {
			b = anthropicBlock{Type: "text", Text: f.Placeholder()}
		}
		out = append(out, b)
	}
	return out
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func (p *anthropicProvider) request(req Request, stream bool) anthropicRequest {
	s := sampling(req, p.sampling)
	out := anthropicRequest{
		Model:       p.model.Name,
		MaxTokens:   s.MaxTokens,
		Temperature: s.Temperature,
		TopP:        s.TopP,
		System:      req.System,
		Messages:    anthropicMessages(req.Messages),
		Stream:      stream,
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: objectSchema(t.Parameters)})
	}
	return out
}

// anthropicMessages converts the history: tool results go in user
// messages, consecutive messages of one role merge into one (the API
// alternates roles), and a user message lists its tool_result blocks first.
func anthropicMessages(msgs []Message) []anthropicMessage {
	var out []anthropicMessage
	add := func(role string, blocks []anthropicBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, anthropicMessage{Role: role, Content: blocks})
	}
	for _, m := range normalizeHistory(msgs) {
		switch m.Role {
		case RoleAssistant:
			var blocks []anthropicBlock
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: anthropicID(c.ID), Name: c.Name, Input: c.Arguments})
			}
			add("assistant", blocks)
		case RoleTool:
			add("user", []anthropicBlock{{Type: "tool_result", ToolUseID: anthropicID(m.ToolCallID), Content: m.Content, IsError: m.IsError}})
		default:
			// Files first: the API's advice for images with a question.
			blocks := anthropicFiles(m.Files)
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Content})
			}
			add("user", blocks)
		}
	}
	for i := range out {
		if out[i].Role == "user" {
			sort.SliceStable(out[i].Content, func(a, b int) bool {
				return out[i].Content[a].Type == "tool_result" && out[i].Content[b].Type != "tool_result"
			})
		}
	}
	return out
}

// anthropicID keeps a tool call id within the API's [a-zA-Z0-9_-]+.
func anthropicID(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, id)
}

// Answers.

// anthropicOutBlock is a content block of an answer.
type anthropicOutBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// usage counts cache writes and reads as input: they are input tokens too,
// which Anthropic's input_tokens leaves out.
func (u anthropicUsage) usage() Usage {
	return Usage{InputTokens: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, OutputTokens: u.OutputTokens,
		CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
}

type anthropicResponse struct {
	Type       string              `json:"type"`
	Content    []anthropicOutBlock `json:"content"`
	StopReason string              `json:"stop_reason"`
	Usage      anthropicUsage      `json:"usage"`
}

func decodeAnthropic(body []byte) (*Response, error) {
	var r anthropicResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed("message: %v", err)
	}
	if r.Type != "message" {
		return nil, malformed("answer of type %q, want a message", r.Type)
	}
	out := &Response{StopReason: r.StopReason, Usage: r.Usage.usage()}
	var text strings.Builder
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args, err := parseArgs(b.Input)
			if err != nil {
				return nil, err
			}
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Text = text.String()
	return out, nil
}

// anthropicEvent is any event of a stream.
type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock anthropicOutBlock `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAnthropicStream(r *sseReader, emit func(string)) (*Response, error) {
	type block struct {
		typ, id, name string
		args          strings.Builder
	}
	blocks := map[int]*block{}
	var order []int
	var usage anthropicUsage
	var text strings.Builder
	out := &Response{}
	stopped := false
	for !stopped {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil, errIncomplete
		}
		if err != nil {
			return nil, err
		}
		var e anthropicEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return nil, malformed("event %q: %v", ev.Event, err)
		}
		if e.Type == "" {
			e.Type = ev.Event
		}
		switch e.Type {
		case "message_start":
			usage = e.Message.Usage
		case "content_block_start":
			if _, dup := blocks[e.Index]; dup {
				return nil, malformed("content block %d started twice", e.Index)
			}
			b := &block{typ: e.ContentBlock.Type, id: e.ContentBlock.ID, name: e.ContentBlock.Name}
			blocks[e.Index] = b
			order = append(order, e.Index)
			if b.typ == "text" && e.ContentBlock.Text != "" {
				text.WriteString(e.ContentBlock.Text)
				emit(e.ContentBlock.Text)
			}
		case "content_block_delta":
			b := blocks[e.Index]
			if b == nil {
				return nil, malformed("delta of content block %d, which never started", e.Index)
			}
			switch e.Delta.Type {
			case "text_delta":
				text.WriteString(e.Delta.Text)
				emit(e.Delta.Text)
			case "input_json_delta":
				b.args.WriteString(e.Delta.PartialJSON)
			}
			// thinking_delta, signature_delta, citations_delta: not part of
			// the reply's text.
		case "message_delta":
			if e.Delta.StopReason != "" {
				out.StopReason = e.Delta.StopReason
			}
			if e.Usage != nil {
				// Counts in message_delta are cumulative.
				usage.OutputTokens = e.Usage.OutputTokens
				if e.Usage.InputTokens > 0 {
					usage.InputTokens = e.Usage.InputTokens
				}
				if e.Usage.CacheCreationInputTokens > 0 {
					usage.CacheCreationInputTokens = e.Usage.CacheCreationInputTokens
				}
				if e.Usage.CacheReadInputTokens > 0 {
					usage.CacheReadInputTokens = e.Usage.CacheReadInputTokens
				}
			}
		case "message_stop":
			stopped = true
		case "error":
			return nil, &apiError{status: anthropicErrorStatus(e.Error.Type), kind: e.Error.Type, message: e.Error.Message, inStream: true}
		}
		// content_block_stop, ping and future event types need nothing.
	}
	for _, i := range order {
		b := blocks[i]
		if b.typ != "tool_use" {
			continue
		}
		args, err := parseArgs([]byte(b.args.String()))
		if err != nil {
			if out.StopReason == "max_tokens" {
				return nil, malformed("tool call %s was cut off at max_tokens; raise llm.max_tokens", b.name)
			}
			return nil, err
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: b.id, Name: b.name, Arguments: args})
	}
	out.Text = text.String()
	out.Usage = usage.usage()
	return out, nil
}

// anthropicErrorStatus is the HTTP status an error event's type stands for.
func anthropicErrorStatus(kind string) int {
	switch kind {
	case "overloaded_error":
		return 529
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "api_error":
		return http.StatusInternalServerError
	case "timeout_error":
		return http.StatusGatewayTimeout
	}
	return 0
}

// anthropicErrorDetail reads {"type":"error","error":{"type","message"}}.
func anthropicErrorDetail(body []byte) (string, string) {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	return e.Error.Type, e.Error.Message
}
