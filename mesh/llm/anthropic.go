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
//
// With Options.Reasoning the request carries thinking {type: enabled,
// budget_tokens}; the answer's thinking blocks (text and signature, or
// redacted_thinking data) stream as thinking_delta and signature_delta.
// Their text goes to OnReasoning; the blocks themselves come back in
// Response.Thoughts and go back, unchanged and first, in the assistant
// message that carried them, as the API requires within a tool use loop.
// The system prompt and the last tool carry cache_control {type:
// ephemeral} unless Options.NoPromptCache: the prefix up to them is the
// same from call to call.

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
	sampling  modelspec.Sampling
	reasoning modelspec.Reasoning
	noCache   bool
}

func newAnthropic(model modelspec.Model, opts Options) *anthropicProvider {
	base := opts.BaseURL
	if base == "" {
		base = anthropicDefaultBase
	}
	return &anthropicProvider{model: model, ep: newEndpoint(modelspec.ProviderAnthropic, base, opts), sampling: opts.Sampling,
		reasoning: opts.Reasoning, noCache: opts.NoPromptCache}
}

func (p *anthropicProvider) Model() string { return p.model.String() }

// Generate sends req to the Messages API, streaming when req.OnText is set.
func (p *anthropicProvider) Generate(ctx context.Context, req Request) (*Response, error) {
	stream := req.OnText != nil || req.OnReasoning != nil
	r := p.request(req, stream)
	forced := ""
	if r.ToolChoice != nil {
		forced = r.ToolChoice.Name
	}
	body, err := json.Marshal(r)
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
		decodeJSON: func(body []byte) (*Response, error) {
			return answerTool(forced)(decodeAnthropic(body))
		},
		decodeStream: func(r *sseReader, emit, reason func(string)) (*Response, error) {
			return answerTool(forced)(decodeAnthropicStream(r, emit, reason))
		},
		errorDetail: anthropicErrorDetail,
	}, req.OnText, req.OnReasoning)
}

// Request body.

type anthropicRequest struct {
	Model       string   `json:"model"`
	MaxTokens   int      `json:"max_tokens"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	// System is a string, or text blocks when one carries cache_control.
	System     any                  `json:"system,omitempty"`
	Messages   []anthropicMessage   `json:"messages"`
	Tools      []anthropicTool      `json:"tools,omitempty"`
	ToolChoice *anthropicToolChoice `json:"tool_choice,omitempty"`
	Thinking   *anthropicThinking   `json:"thinking,omitempty"`
	Stream     bool                 `json:"stream,omitempty"`
}

type anthropicToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

type anthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// anthropicCache is a cache_control mark: the prompt up to here is cached.
type anthropicCache struct {
	Type string `json:"type"`
}

var ephemeral = &anthropicCache{Type: "ephemeral"}

// anthropicMinBudget is the smallest thinking budget the API takes.
const anthropicMinBudget = 1024

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
	// Thinking and Signature are a thinking block's, Data a
	// redacted_thinking block's.
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
	// CacheControl marks the end of the prefix to cache.
	CacheControl *anthropicCache `json:"cache_control,omitempty"`
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
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *anthropicCache `json:"cache_control,omitempty"`
}

func (p *anthropicProvider) request(req Request, stream bool) anthropicRequest {
	s := sampling(req, p.sampling)
	thinking := p.reasoning.On()
	out := anthropicRequest{
		Model:       p.model.Name,
		MaxTokens:   s.MaxTokens,
		Temperature: s.Temperature,
		TopP:        s.TopP,
		Messages:    anthropicMessages(req.Messages, thinking),
		Stream:      stream,
	}
	if thinking {
		budget := max(p.reasoning.Budget(), anthropicMinBudget)
		out.Thinking = &anthropicThinking{Type: "enabled", BudgetTokens: budget}
		// The reply's cap covers the thinking: keep the configured room
		// for the reply above the budget. Thinking takes no temperature
		// and no top_p below 0.95: the model's own are used.
		if out.MaxTokens <= budget {
			out.MaxTokens += budget
		}
		out.Temperature, out.TopP = nil, nil
	}
	system := req.System
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: objectSchema(t.Parameters)})
	}
	if o := req.Output; o != nil {
		if len(out.Tools) == 0 && !thinking {
			out.Tools = []anthropicTool{{Name: o.name(), Description: "Give your answer: its input is the answer.", InputSchema: objectSchema(o.Schema)}}
			out.ToolChoice = &anthropicToolChoice{Type: "tool", Name: o.name()}
		} else {
			system = outputInstruction(system, o)
		}
	}
	if system != "" {
		out.System = system
		if !p.noCache {
			out.System = []anthropicBlock{{Type: "text", Text: system, CacheControl: ephemeral}}
		}
	}
	if n := len(out.Tools); n > 0 && !p.noCache {
		out.Tools[n-1].CacheControl = ephemeral
	}
	return out
}

// answerTool turns the call of the forced answer tool named forced
// (output.go) into the answer's text; "" forces none.
func answerTool(forced string) func(*Response, error) (*Response, error) {
	return func(resp *Response, err error) (*Response, error) {
		if err != nil || forced == "" || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != forced {
			return resp, err
		}
		resp.Text, resp.ToolCalls = string(resp.ToolCalls[0].Arguments), nil
		return resp, nil
	}
}

// anthropicMessages converts the history: tool results go in user
// messages, consecutive messages of one role merge into one (the API
// alternates roles), and a user message lists its tool_result blocks first.
//
// With thinking on, an assistant message's thoughts go first, unchanged;
// with it off they are left out (the API checks signatures against the
// thinking of the call).
func anthropicMessages(msgs []Message, thinking bool) []anthropicMessage {
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
			if thinking {
				blocks = anthropicThoughts(m.Thoughts)
			}
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

// anthropicThoughts are the thinking and redacted_thinking blocks of
// thoughts.
func anthropicThoughts(thoughts []Thought) []anthropicBlock {
	var out []anthropicBlock
	for _, t := range thoughts {
		if t.Redacted != "" {
			out = append(out, anthropicBlock{Type: "redacted_thinking", Data: t.Redacted})
			continue
		}
		text := t.Text
		out = append(out, anthropicBlock{Type: "thinking", Thinking: &text, Signature: t.Signature})
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
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
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
	var text, reasoning strings.Builder
	for _, b := range r.Content {
		switch b.Type {
		case "thinking":
			reasoning.WriteString(b.Thinking)
			out.Thoughts = append(out.Thoughts, Thought{Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			out.Thoughts = append(out.Thoughts, Thought{Redacted: b.Data})
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
	out.Text, out.Reasoning = text.String(), reasoning.String()
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
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAnthropicStream(r *sseReader, emit, reason func(string)) (*Response, error) {
	type block struct {
		typ, id, name string
		args          strings.Builder // tool_use input, thinking text
		signature     string
		data          string // redacted_thinking
	}
	blocks := map[int]*block{}
	var order []int
	var usage anthropicUsage
	var text, reasoning strings.Builder
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
			b := &block{typ: e.ContentBlock.Type, id: e.ContentBlock.ID, name: e.ContentBlock.Name,
				signature: e.ContentBlock.Signature, data: e.ContentBlock.Data}
			blocks[e.Index] = b
			order = append(order, e.Index)
			switch {
			case b.typ == "text" && e.ContentBlock.Text != "":
				text.WriteString(e.ContentBlock.Text)
				emit(e.ContentBlock.Text)
			case b.typ == "thinking" && e.ContentBlock.Thinking != "":
				b.args.WriteString(e.ContentBlock.Thinking)
				reasoning.WriteString(e.ContentBlock.Thinking)
				reason(e.ContentBlock.Thinking)
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
			case "thinking_delta":
				b.args.WriteString(e.Delta.Thinking)
				reasoning.WriteString(e.Delta.Thinking)
				reason(e.Delta.Thinking)
			case "signature_delta":
				b.signature += e.Delta.Signature
			}
			// citations_delta: not part of the reply's text.
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
		switch b.typ {
		case "thinking":
			out.Thoughts = append(out.Thoughts, Thought{Text: b.args.String(), Signature: b.signature})
			continue
		case "redacted_thinking":
			out.Thoughts = append(out.Thoughts, Thought{Redacted: b.data})
			continue
		case "tool_use":
		default:
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
	out.Text, out.Reasoning = text.String(), reasoning.String()
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
