package llmtest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// The Anthropic Messages API, as its reference describes it: POST
// /v1/messages with x-api-key and anthropic-version; the system prompt is
// the top-level system (a string or text blocks); tool calls are tool_use
// blocks of assistant messages, and their results tool_result blocks at
// the start of the next user message; tools carry input_schema, an object
// schema; max_tokens is required. Streams are message_start,
// content_block_start / _delta / _stop per block, message_delta and
// message_stop events, with ping in between.
//
// With thinking enabled (budget_tokens of 1024 or more, below max_tokens,
// no temperature, no forced tool) the answer starts with a thinking block
// signed by the server; a tool use loop must send it back unchanged, first
// in its assistant message, or the request is refused as the API refuses
// it. A tool_choice of type tool makes the answer that tool's call.

type anthropicWire struct{}

const anthropicPath = "/v1/messages"

// anthropicVersions are the anthropic-version values the API knows.
var anthropicVersions = map[string]bool{"2023-06-01": true, "2023-01-01": true}

var anthropicIDRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

var anthropicFields = fieldSet("model", "messages", "max_tokens", "system", "tools", "tool_choice",
	"stream", "temperature", "top_p", "top_k", "stop_sequences", "metadata", "thinking", "service_tier",
	"container", "mcp_servers", "context_management")

func (anthropicWire) route(r *http.Request, c *call) *apiError {
	if r.Method != http.MethodPost || r.URL.Path != anthropicPath {
		return &apiError{status: http.StatusNotFound, message: "Not Found"}
	}
	return nil
}

func (anthropicWire) auth(r *http.Request, key string) *apiError {
	if key != "" {
		switch got := r.Header.Get("x-api-key"); {
		case got == "":
			return &apiError{status: http.StatusUnauthorized, message: "x-api-key header is required"}
		case got != key:
			return &apiError{status: http.StatusUnauthorized, message: "invalid x-api-key"}
		}
	}
	switch v := r.Header.Get("anthropic-version"); {
	case v == "":
		return &apiError{status: http.StatusBadRequest, message: "anthropic-version: header is required"}
	case !anthropicVersions[v]:
		return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("anthropic-version: invalid version %q", v)}
	}
	return nil
}

func (anthropicWire) unknownModel(model string) *apiError {
	return &apiError{status: http.StatusNotFound, message: "model: " + model}
}

type anthropicRequest struct {
	Model       string             `json:"model"`
	Messages    []anthropicMessage `json:"messages"`
	MaxTokens   *int               `json:"max_tokens"`
	System      json.RawMessage    `json:"system"`
	Tools       []json.RawMessage  `json:"tools"`
	Stream      bool               `json:"stream"`
	Temperature json.RawMessage    `json:"temperature"`
	TopP        json.RawMessage    `json:"top_p"`
	// Accepted and not used.
	ToolChoice        json.RawMessage `json:"tool_choice"`
	TopK              json.RawMessage `json:"top_k"`
	StopSequences     json.RawMessage `json:"stop_sequences"`
	Metadata          json.RawMessage `json:"metadata"`
	Thinking          json.RawMessage `json:"thinking"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	Container         json.RawMessage `json:"container"`
	MCPServers        json.RawMessage `json:"mcp_servers"`
	ContextManagement json.RawMessage `json:"context_management"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Content blocks a request may hold.
type (
	anthropicText struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
		Citations    json.RawMessage `json:"citations"`
	}
	anthropicToolUse struct {
		Type         string          `json:"type"`
		ID           string          `json:"id"`
		Name         string          `json:"name"`
		Input        json.RawMessage `json:"input"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	anthropicToolResult struct {
		Type         string          `json:"type"`
		ToolUseID    string          `json:"tool_use_id"`
		Content      json.RawMessage `json:"content"`
		IsError      bool            `json:"is_error"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	anthropicMedia struct {
		Type         string          `json:"type"`
		Source       json.RawMessage `json:"source"`
		Title        json.RawMessage `json:"title"`
		Context      json.RawMessage `json:"context"`
		Citations    json.RawMessage `json:"citations"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	anthropicThinking struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Data      string `json:"data"`
	}
	anthropicTool struct {
		Type         string          `json:"type"`
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
)

func anthropicBad(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

// anthropicStrict decodes one object refusing unknown fields, in the API's
// words.
func anthropicStrict(at string, raw []byte, v any) *apiError {
	if err := strict(raw, v); err != nil {
		p := err.(*jsonProblem)
		switch {
		case p.unknown != "":
			return anthropicBad("%s.%s: Extra inputs are not permitted", at, p.unknown)
		case p.field != "":
			return anthropicBad("%s.%s: Input should be a valid %s", at, p.field, p.want)
		}
		return anthropicBad("%s: %s", at, p.text)
	}
	return nil
}

// anthropicThinkingConfig is the request's thinking.
type anthropicThinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
}

// anthropicChoice is the request's tool_choice.
type anthropicChoice struct {
	Type                   string          `json:"type"`
	Name                   string          `json:"name"`
	DisableParallelToolUse json.RawMessage `json:"disable_parallel_tool_use"`
}

// anthropicThinkingCheck checks thinking and tool_choice together and
// notes in c what they ask for.
func anthropicThinkingCheck(req *anthropicRequest, c *call, tools []llm.Tool) *apiError {
	if len(req.ToolChoice) > 0 && jsonKind(req.ToolChoice) != "null" {
		var ch anthropicChoice
		if e := anthropicStrict("tool_choice", req.ToolChoice, &ch); e != nil {
			return e
		}
		switch ch.Type {
		case "auto", "any", "none":
		case "tool":
			found := false
			for _, t := range tools {
				found = found || t.Name == ch.Name
			}
			if !found {
				return anthropicBad("tool_choice.tool.name: Tool '%s' not found in provided tools", ch.Name)
			}
			c.forced = ch.Name
		default:
			return anthropicBad("tool_choice.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", ch.Type)
		}
	}
	if len(req.Thinking) == 0 || jsonKind(req.Thinking) == "null" {
		return nil
	}
	var th anthropicThinkingConfig
	if e := anthropicStrict("thinking", req.Thinking, &th); e != nil {
		return e
	}
	switch th.Type {
	case "disabled":
		return nil
	case "enabled":
	default:
		return anthropicBad("thinking.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'enabled', 'disabled'", th.Type)
	}
	switch {
	case th.BudgetTokens == nil:
		return anthropicBad("thinking.enabled.budget_tokens: Field required")
	case *th.BudgetTokens < 1024:
		return anthropicBad("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
	case *th.BudgetTokens >= c.req.MaxTokens:
		return anthropicBad("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
	case len(req.Temperature) > 0 && string(req.Temperature) != "1" && string(req.Temperature) != "null":
		return anthropicBad("`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility")
	case c.forced != "":
		return anthropicBad("Thinking may not be enabled when tool_choice forces tool use.")
	}
	c.thinking = true
	return nil
}

func (anthropicWire) decode(s *Server, r *http.Request, body []byte, c *call) *apiError {
	if mediaType(r.Header.Get("Content-Type")) != "application/json" {
		return anthropicBad("Content-Type: expected application/json, got %q", r.Header.Get("Content-Type"))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return anthropicBad("There was an error parsing the body of your request: invalid JSON")
	}
	for k := range top {
		if !anthropicFields[k] {
			return anthropicBad("%s: Extra inputs are not permitted", k)
		}
	}
	var req anthropicRequest
	if e := anthropicStrict("body", body, &req); e != nil {
		return e
	}
	switch {
	case req.Model == "":
		return anthropicBad("model: Field required")
	case req.MaxTokens == nil:
		return anthropicBad("max_tokens: Field required")
	case *req.MaxTokens < 1:
		return anthropicBad("max_tokens: Input should be greater than or equal to 1")
	case req.Messages == nil:
		return anthropicBad("messages: Field required")
	case len(req.Messages) == 0:
		return anthropicBad("messages: at least one message is required")
	}
	c.model, c.stream, c.req.MaxTokens = req.Model, req.Stream, *req.MaxTokens
	if e := anthropicSampling(req.Temperature, req.TopP, c); e != nil {
		return e
	}
	system, e := anthropicSystem(req.System)
	if e != nil {
		return e
	}
	c.req.System = system
	names := map[string]bool{}
	for i, raw := range req.Tools {
		tool, e := anthropicDecodeTool(i, raw)
		if e != nil {
			return e
		}
		if tool == nil {
			continue
		}
		if names[tool.Name] {
			return anthropicBad("tools: Tool names must be unique.")
		}
		names[tool.Name] = true
		c.req.Tools = append(c.req.Tools, *tool)
	}
	if e := anthropicThinkingCheck(&req, c, c.req.Tools); e != nil {
		return e
	}
	if e := anthropicDecodeMessages(req.Messages, &c.req); e != nil {
		return e
	}
	if c.thinking {
		return s.anthropicThoughtsBack(req.Messages, &c.req)
	}
	return nil
}

// anthropicThoughtsBack checks, with thinking enabled, that a request that
// continues a tool use loop (its last message holds tool results) sends
// the assistant message before it with its thinking first, signed by this
// server.
func (s *Server) anthropicThoughtsBack(msgs []anthropicMessage, req *llm.Request) *apiError {
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != llm.RoleTool {
		return nil
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		var blocks []anthropicThinking
		_ = json.Unmarshal(msgs[i].Content, &blocks)
		if len(blocks) == 0 || blocks[0].Type != "thinking" && blocks[0].Type != "redacted_thinking" {
			found := ""
			if len(blocks) > 0 {
				found = blocks[0].Type
			}
			return anthropicBad("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.", i, found)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for j, b := range blocks {
			if b.Type == "thinking" && !s.sigs[b.Signature] {
				return anthropicBad("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
		return nil
	}
	return nil
}

func anthropicSystem(raw json.RawMessage) (string, *apiError) {
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
		for i, b := range blocks {
			var t anthropicText
			if e := anthropicStrict(fmt.Sprintf("system.%d", i), b, &t); e != nil {
				return "", e
			}
			if t.Type != "text" {
				return "", anthropicBad("system.%d.type: Input should be 'text'", i)
			}
			texts = append(texts, t.Text)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", anthropicBad("system: Input should be a valid string or a list of text blocks")
}

func anthropicDecodeTool(i int, raw json.RawMessage) (*llm.Tool, *apiError) {
	var kind struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &kind)
	if kind.Type != "" && kind.Type != "custom" {
		// A server tool (web_search_…, bash_…): not the backend's business.
		return nil, nil
	}
	at := fmt.Sprintf("tools.%d.custom", i)
	var t anthropicTool
	if e := anthropicStrict(at, raw, &t); e != nil {
		return nil, e
	}
	if !toolNameRE.MatchString(t.Name) {
		return nil, anthropicBad("%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", at)
	}
	if len(t.InputSchema) == 0 {
		return nil, anthropicBad("%s.input_schema: Field required", at)
	}
	var schema map[string]any
	if json.Unmarshal(t.InputSchema, &schema) != nil || schema == nil {
		return nil, anthropicBad("%s.input_schema: Input should be a valid dictionary", at)
	}
	if schema["type"] != "object" {
		return nil, anthropicBad("%s.input_schema.type: Input should be 'object'", at)
	}
	return &llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}, nil
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func (anthropicWire) errorBody(e *apiError) []byte {
	kind := e.kind
	if kind == "" {
		kind = anthropicErrorType(e.status)
	}
	return mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": e.message}, "request_id": randomID("req_011", 21)})
}

func (anthropicWire) retryHeaders(h http.Header, e *apiError) {
	h.Set("request-id", randomID("req_011", 21))
	if e.retryAfter > 0 {
		h.Set("retry-after", strconv.Itoa(int(math.Ceil(e.retryAfter.Seconds()))))
	}
}

func anthropicStop(resp *llm.Response) string {
	switch {
	case len(resp.ToolCalls) > 0:
		return "tool_use"
	case stoppedAtLimit(resp.StopReason):
		return "max_tokens"
	}
	return "end_turn"
}

// anthropicUsage is u as Anthropic counts it: input_tokens leaves out the
// tokens read from and written to the prompt cache.
func anthropicUsage(u llm.Usage) map[string]any {
	return map[string]any{"input_tokens": u.InputTokens - u.CachedTokens - u.CacheWriteTokens, "cache_creation_input_tokens": u.CacheWriteTokens,
		"cache_read_input_tokens": u.CachedTokens, "output_tokens": u.OutputTokens, "service_tier": "standard"}
}

func anthropicToolID() string { return randomID("toolu_01", 22) }

func (anthropicWire) whole(s *Server, c *call, resp *llm.Response) []byte {
	content := []any{}
	if resp.Reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": resp.Reasoning, "signature": s.signature()})
	}
	if resp.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": resp.Text})
	}
	for _, tc := range resp.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": anthropicToolID(), "name": tc.Name, "input": objectArgs(tc.Arguments)})
	}
	return mustJSON(map[string]any{
		"id": randomID("msg_01", 22), "type": "message", "role": "assistant", "model": c.model, "content": content,
		"stop_reason": anthropicStop(resp), "stop_sequence": nil, "usage": anthropicUsage(resp.Usage),
	})
}

type anthropicStream struct {
	s         *Server
	c         *call
	out       *eventOut
	started   bool
	textOpen  bool
	thinkOpen bool
	index     int
}

func (anthropicWire) stream(s *Server, c *call, out *eventOut) streamer {
	return &anthropicStream{s: s, c: c, out: out}
}

func (s *anthropicStream) reasoning(delta string) {
	s.start()
	if !s.thinkOpen {
		s.thinkOpen = true
		s.out.send("content_block_start", map[string]any{"type": "content_block_start", "index": s.index, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
	}
	s.out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": s.index, "delta": map[string]any{"type": "thinking_delta", "thinking": delta}})
}

// closeThinking ends the thinking block with its signature.
func (s *anthropicStream) closeThinking() {
	if !s.thinkOpen {
		return
	}
	s.thinkOpen = false
	s.out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": s.index, "delta": map[string]any{"type": "signature_delta", "signature": s.s.signature()}})
	s.out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": s.index})
	s.index++
}

func (s *anthropicStream) start() {
	if s.started {
		return
	}
	s.started = true
	s.out.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": randomID("msg_01", 22), "type": "message", "role": "assistant", "model": s.c.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(s.s.cacheCounts(llm.Usage{InputTokens: estimateTokens(s.c.req), OutputTokens: 1})),
	}})
}

func (s *anthropicStream) text(delta string) {
	s.start()
	s.closeThinking()
	if !s.textOpen {
		s.textOpen = true
		s.out.send("content_block_start", map[string]any{"type": "content_block_start", "index": s.index, "content_block": map[string]any{"type": "text", "text": ""}})
		s.out.send("ping", map[string]any{"type": "ping"})
	}
	s.out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": s.index, "delta": map[string]any{"type": "text_delta", "text": delta}})
}

func (s *anthropicStream) finish(resp *llm.Response) {
	s.start()
	s.closeThinking()
	if s.textOpen {
		s.out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": s.index})
		s.textOpen = false
		s.index++
	}
	for _, tc := range resp.ToolCalls {
		s.out.send("content_block_start", map[string]any{"type": "content_block_start", "index": s.index,
			"content_block": map[string]any{"type": "tool_use", "id": anthropicToolID(), "name": tc.Name, "input": map[string]any{}}})
		s.out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": s.index, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, p := range pieces(string(objectArgs(tc.Arguments)), 8) {
			s.out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": s.index, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
		}
		s.out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": s.index})
		s.index++
	}
	s.out.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": anthropicStop(resp), "stop_sequence": nil},
		"usage": anthropicUsage(resp.Usage)})
	s.out.send("message_stop", map[string]any{"type": "message_stop"})
}

func (s *anthropicStream) fail(e *apiError) {
	s.out.send("error", map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(e.status), "message": e.message}})
}
