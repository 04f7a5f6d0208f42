package llm

// The OpenAI provider speaks Chat Completions: POST {base}/chat/completions,
// base https://api.openai.com/v1 by default, with "Authorization: Bearer"
// (OPENAI_API_KEY) when a key is set. The same code serves every
// OpenAI-compatible server through its base URL (Ollama, vLLM, llama.cpp,
// LM Studio, gateways), which usually need no key; the ollama provider is
// this one with base http://localhost:11434/v1 (OLLAMA_BASE_URL), and the
// cohere provider this one with base https://api.cohere.ai/compatibility/v1
// (COHERE_BASE_URL) and a key (COHERE_API_KEY).
//
// The system prompt is the first message (role system); assistant messages
// carry tool_calls (id, type function, function.name, function.arguments
// as a JSON string) and each result is a message of role tool with its
// tool_call_id. Tools are {type: function, function: {name, description,
// parameters}}. Streamed answers are server-sent events of
// chat.completion.chunk objects whose choices[0].delta holds content and
// tool_calls fragments (keyed by index; id and name come first, arguments in
// pieces), then, with stream_options.include_usage, a chunk with empty
// choices and the usage, then "data: [DONE]".
//
// Options.Reasoning's effort is sent as reasoning_effort (the o series,
// gpt-5, and compatible servers that take it). OpenAI itself returns no
// reasoning text in Chat Completions; compatible servers that stream one
// (DeepSeek, vLLM, SGLang: reasoning_content; Ollama, OpenRouter:
// reasoning) have it passed to OnReasoning, and never sent back. OpenAI
// caches prompts of 1024 tokens or more by itself: nothing is sent for it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

const (
	openAIDefaultBase = "https://api.openai.com/v1"
	ollamaDefaultBase = "http://localhost:11434/v1"
	cohereDefaultBase = "https://api.cohere.ai/compatibility/v1"
)

type openAIProvider struct {
	model modelspec.Model
	ep    *endpoint
	// sampling is the settings of every call (llm section).
	sampling modelspec.Sampling
	// completionTokens sends max_completion_tokens (OpenAI itself, where
	// max_tokens is deprecated, and OpenAI's reasoning models wherever they
	// are served, which refuse max_tokens) instead of max_tokens (what
	// compatible servers read).
	completionTokens bool
	tools            toolsJSON // the last tool list, encoded
	reasoning        modelspec.Reasoning
}

func newOpenAI(model modelspec.Model, opts Options, defaultBase string) *openAIProvider {
	base := opts.BaseURL
	if base == "" {
		base = defaultBase
	}
	p := &openAIProvider{model: model, ep: newEndpoint(model.Provider, base, opts), sampling: opts.Sampling, reasoning: opts.Reasoning}
	if u, err := url.Parse(base); err == nil && u.Host == "api.openai.com" {
		p.completionTokens = true
	}
	// Reasoning models take max_completion_tokens even behind a gateway.
	if model.OpenAIReasoning() {
		p.completionTokens = true
	}
	return p
}

func (p *openAIProvider) Model() string { return p.model.String() }

// noPDF says the server takes no PDF file parts: Ollama's and Cohere's
// compatible APIs read text and images only.
func (p *openAIProvider) noPDF() bool {
	return p.model.Provider == modelspec.ProviderOllama || p.model.Provider == modelspec.ProviderCohere
}

// Generate sends req to Chat Completions, streaming when req.OnText is set.
func (p *openAIProvider) Generate(ctx context.Context, req Request) (*Response, error) {
	stream := req.OnText != nil || req.OnReasoning != nil
	body, err := p.encode(req, stream)
	if err != nil {
		return nil, &Error{Code: CodeError, Message: p.ep.provider + ": encode request: " + err.Error(), Err: err}
	}
	url := p.ep.base + "/chat/completions"
	if strings.HasSuffix(p.ep.base, "/chat/completions") {
		url = p.ep.base
	}
	return p.ep.run(ctx, &exchange{
		url: url, body: body, stream: stream,
		header: func(h http.Header) {
			if p.ep.key != "" {
				h.Set("Authorization", "Bearer "+p.ep.key.Reveal())
			}
		},
		decodeJSON:   decodeOpenAI,
		decodeStream: decodeOpenAIStream,
		errorDetail:  openAIErrorDetail,
	}, req.OnText, req.OnReasoning)
}

// Request body.

type openAIRequest struct {
	Model               string          `json:"model"`
	Messages            []openAIMessage `json:"messages"`
	Tools               []openAITool    `json:"tools,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	ReasoningEffort string                `json:"reasoning_effort,omitempty"`
	ResponseFormat  *openAIResponseFormat `json:"response_format,omitempty"`
}

type openAIResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	} `json:"json_schema"`
}

type openAIMessage struct {
	Role string `json:"role"`
	// Content is a *string, or []openAIPart for a user message with files.
	Content    any              `json:"content,omitempty"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// encode is the request body: appendOpenAIRequest's bytes, the tools
// encoded once per tool list.
func (p *openAIProvider) encode(req Request, stream bool) ([]byte, error) {
	r := p.settings(req, stream)
	tools, err := p.tools.encode(req.Tools)
	if err != nil {
		return nil, err
	}
	history := func(b []byte) ([]byte, error) {
		return appendOpenAIHistory(b, req.System, req.Messages, p.noPDF())
	}
	return appendOpenAIRequest(make([]byte, 0, 4096), &r, history, tools)
}

// request is the request body as a value: what encode writes.
func (p *openAIProvider) request(req Request, stream bool) openAIRequest {
	out := p.settings(req, stream)
	out.Messages = openAIMessages(req.System, req.Messages, p.noPDF())
	out.Tools = openAITools(req.Tools)
	return out
}

func openAITools(tools []Tool) []openAITool {
	var out []openAITool
	for _, t := range tools {
		var tool openAITool
		tool.Type = "function"
		tool.Function.Name, tool.Function.Description = t.Name, t.Description
		tool.Function.Parameters = objectSchema(t.Parameters)
		out = append(out, tool)
	}
	return out
}

// settings is the request but for its messages and tools.
func (p *openAIProvider) settings(req Request, stream bool) openAIRequest {
	s := sampling(req, p.sampling)
	out := openAIRequest{Model: p.model.Name, Stream: stream, Temperature: s.Temperature, TopP: s.TopP}
	if p.completionTokens {
		out.MaxCompletionTokens = s.MaxTokens
	} else {
		out.MaxTokens = s.MaxTokens
	}
	if stream {
		out.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{IncludeUsage: true}
	}
	out.ReasoningEffort = p.reasoning.Effort
	if o := req.Output; o != nil {
		f := &openAIResponseFormat{Type: "json_schema"}
		f.JSONSchema.Name, f.JSONSchema.Schema = o.name(), compactJSON(objectSchema(o.Schema))
		out.ResponseFormat = f
	}
	return out
}

func openAIMessages(system string, msgs []Message, noPDF bool) []openAIMessage {
	var out []openAIMessage
	if system != "" {
		out = append(out, openAIMessage{Role: "system", Content: &system})
	}
	for _, m := range normalizeHistory(msgs) {
		content := m.Content
		switch m.Role {
		case RoleAssistant:
			msg := openAIMessage{Role: "assistant"}
			if content != "" || len(m.ToolCalls) == 0 {
				msg.Content = &content
			}
			for _, c := range m.ToolCalls {
				var tc openAIToolCall
				tc.ID, tc.Type = c.ID, "function"
				tc.Function.Name, tc.Function.Arguments = c.Name, string(c.Arguments)
				msg.ToolCalls = append(msg.ToolCalls, tc)
			}
			if msg.Content == nil && len(msg.ToolCalls) == 0 {
				continue
			}
			out = append(out, msg)
		case RoleTool:
			if m.IsError {
				content = errorText(content)
			}
			out = append(out, openAIMessage{Role: "tool", ToolCallID: m.ToolCallID, Content: &content})
		default:
			if len(m.Files) > 0 {
				out = append(out, openAIMessage{Role: "user", Content: openAIParts(content, m.Files, noPDF)})
				continue
			}
			out = append(out, openAIMessage{Role: "user", Content: &content})
		}
	}
	return out
}

// openAIPart is a part of a user message's content array: text, an image
// (a data: URL or an https URL) or a file (a PDF, as a data: URL).
type openAIPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url,omitempty"`
	File *struct {
		Filename string `json:"filename,omitempty"`
		FileData string `json:"file_data"`
	} `json:"file,omitempty"`
}

// openAIParts is the content array of a user message with files. Chat
// Completions takes a PDF only inline (a file part; Ollama and Cohere
// none: noPDF) and a
// text file as text: a file it cannot take is a placeholder.
func openAIParts(text string, files []File, noPDF bool) []openAIPart {
	var out []openAIPart
	if text != "" {
		out = append(out, openAIPart{Type: "text", Text: text})
	}
	for _, f := range files {
		switch {
		case f.IsImage():
			p := openAIPart{Type: "image_url", ImageURL: &struct {
				URL string `json:"url"`
			}{URL: f.URL}}
			if f.URL == "" {
				p.ImageURL.URL = f.dataURL()
			}
			out = append(out, p)
		case f.MediaType == "text/plain" && f.URL == "":
			out = append(out, openAIPart{Type: "text", Text: f.textOf()})
		case f.MediaType == "application/pdf" && f.URL == "" && !noPDF:
			out = append(out, openAIPart{Type: "file", File: &struct {
				Filename string `json:"filename,omitempty"`
				FileData string `json:"file_data"`
			}{Filename: f.Name, FileData: f.dataURL()}})
		default:
			out = append(out, openAIPart{Type: "text", Text: f.Placeholder()})
		}
	}
	return out
}

// Answers.

type openAIUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		// CachedTokens are the prompt tokens read from the prompt cache
		// (part of prompt_tokens).
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *openAIUsage) usage() Usage {
	out := Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedTokens = d.CachedTokens
	}
	return out
}

// openAIOutCall is a tool call of an answer; in a stream, a fragment.
type openAIOutCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON string; some compatible servers send the
		// object itself.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type openAIError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

type openAIResponse struct {
	Choices []struct {
		Message struct {
			Content   *string         `json:"content"`
			Refusal   *string         `json:"refusal"`
			ToolCalls []openAIOutCall `json:"tool_calls"`
			openAIReasoning
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openAIUsage `json:"usage"`
	Error *openAIError `json:"error"`
}

func decodeOpenAI(body []byte) (*Response, error) {
	var r openAIResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed("chat completion: %v", err)
	}
	if r.Error != nil {
		return nil, &apiError{status: openAIStreamErrorStatus(r.Error), kind: r.Error.Type, message: r.Error.Message, inStream: true}
	}
	if len(r.Choices) == 0 {
		return nil, malformed("chat completion without choices")
	}
	c := r.Choices[0]
	out := &Response{StopReason: c.FinishReason}
	if c.Message.Content != nil {
		out.Text = *c.Message.Content
	} else if c.Message.Refusal != nil {
		out.Text = *c.Message.Refusal
	}
	out.Reasoning = c.Message.text()
	for _, tc := range c.Message.ToolCalls {
		args, err := parseArgs(openAIArgs(tc.Function.Arguments))
		if err != nil {
			return nil, err
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	if r.Usage != nil {
		out.Usage = r.Usage.usage()
	}
	return out, nil
}

// openAIArgs reads function.arguments: a JSON string holding the
// arguments, or (some servers) the arguments object.
func openAIArgs(raw json.RawMessage) []byte {
	t := bytes.TrimSpace(raw)
	if string(t) == "null" {
		return nil
	}
	if len(t) > 0 && t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) == nil {
			return []byte(s)
		}
	}
	return t
}

type openAIChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string         `json:"content"`
			Refusal   *string         `json:"refusal"`
			ToolCalls []openAIOutCall `json:"tool_calls"`
			openAIReasoning
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openAIUsage `json:"usage"`
	Error *openAIError `json:"error"`
}

// openAIReasoning is the reasoning text compatible servers add to a
// message or a delta, under one name or the other. Only a string is
// reasoning text: a gateway that puts something else there (an object of
// settings) is not misread, nor refused.
type openAIReasoning struct {
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
}

func (r openAIReasoning) text() string {
	for _, raw := range []json.RawMessage{r.ReasoningContent, r.Reasoning} {
		var s string
		if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

func decodeOpenAIStream(r *sseReader, emit, reason func(string)) (*Response, error) {
	type call struct {
		id, name string
		args     bytes.Buffer
	}
	var calls []*call
	byIndex := map[int]*call{}
	var text, reasoning strings.Builder
	out := &Response{}
	finished := false
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			// Servers that end the stream without [DONE] after a finish
			// reason gave a complete answer.
			if finished {
				break
			}
			return nil, errIncomplete
		}
		if err != nil {
			return nil, err
		}
		if string(bytes.TrimSpace(ev.Data)) == "[DONE]" {
			break
		}
		var c openAIChunk
		if err := decodeOpenAIChunk(ev.Data, &c); err != nil {
			return nil, malformed("chunk: %v", err)
		}
		if c.Error != nil {
			return nil, &apiError{status: openAIStreamErrorStatus(c.Error), kind: c.Error.Type, message: c.Error.Message, inStream: true}
		}
		if c.Usage != nil {
			out.Usage = c.Usage.usage()
		}
		if len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		if t := ch.Delta.text(); t != "" {
			reasoning.WriteString(t)
			reason(t)
		}
		for _, s := range []*string{ch.Delta.Content, ch.Delta.Refusal} {
			if s != nil && *s != "" {
				text.WriteString(*s)
				emit(*s)
			}
		}
		for _, f := range ch.Delta.ToolCalls {
			var cl *call
			switch {
			case f.Index != nil:
				cl = byIndex[*f.Index]
				if cl == nil {
					cl = &call{}
					byIndex[*f.Index] = cl
					calls = append(calls, cl)
				}
			case len(calls) > 0 && (f.ID == "" || f.ID == calls[len(calls)-1].id):
				// No index (some compatible servers): a fragment of the
				// last call unless it brings a new id.
				cl = calls[len(calls)-1]
			default:
				cl = &call{}
				calls = append(calls, cl)
			}
			if f.ID != "" {
				cl.id = f.ID
			}
			if f.Function.Name != "" {
				cl.name = f.Function.Name
			}
			cl.args.Write(openAIArgs(f.Function.Arguments))
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			out.StopReason = *ch.FinishReason
			finished = true
		}
	}
	for _, c := range calls {
		if c.name == "" {
			return nil, malformed("tool call %q without a function name", c.id)
		}
		args, err := parseArgs(c.args.Bytes())
		if err != nil {
			if out.StopReason == "length" {
				return nil, malformed("tool call %s was cut off at the token limit; raise llm.max_tokens", c.name)
			}
			return nil, err
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	out.Text, out.Reasoning = text.String(), reasoning.String()
	return out, nil
}

// openAIStreamErrorStatus is the HTTP status an error in a stream stands for.
func openAIStreamErrorStatus(e *openAIError) int {
	if e.Code == "rate_limit_exceeded" || e.Type == "rate_limit_exceeded" {
		return http.StatusTooManyRequests
	}
	if e.Type == "server_error" {
		return http.StatusInternalServerError
	}
	return 0
}

// openAIErrorDetail reads {"error":{"message","type","code"}}; some
// compatible servers send {"error":"text"}.
func openAIErrorDetail(body []byte) (string, string) {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 {
		return "", ""
	}
	var oe openAIError
	if json.Unmarshal(e.Error, &oe) == nil && oe.Message != "" {
		return oe.Type, oe.Message
	}
	var s string
	if json.Unmarshal(e.Error, &s) == nil {
		return "", s
	}
	return "", ""
}
