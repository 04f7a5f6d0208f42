package llmtest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// OpenAI Chat Completions, as the API reference describes it: POST
// /v1/chat/completions with Authorization: Bearer; the system prompt is a
// system (or developer) message; assistant messages carry tool_calls whose
// arguments are a JSON string; each result is a tool message with its
// tool_call_id. Streams are chat.completion.chunk events ending in
// data: [DONE], with a last chunk of usage and no choices when
// stream_options.include_usage is set.

type openAIWire struct{}

const openAIPath = "/v1/chat/completions"

// openAIReasoning matches the models that refuse max_tokens.
var openAIReasoning = regexp.MustCompile(`^(o1|o3|o4|gpt-5)`)

// openAIFields are the request fields of Chat Completions.
var openAIFields = fieldSet("model", "messages", "tools", "tool_choice", "parallel_tool_calls",
	"max_tokens", "max_completion_tokens", "stream", "stream_options", "temperature", "top_p", "n",
	"stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user",
	"seed", "response_format", "store", "metadata", "reasoning_effort", "service_tier", "modalities",
	"audio", "prediction", "verbosity", "web_search_options", "prompt_cache_key", "safety_identifier",
	"functions", "function_call")

func fieldSet(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func (openAIWire) route(r *http.Request, c *call) *apiError {
	if r.Method != http.MethodPost || r.URL.Path != openAIPath {
		return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)}
	}
	return nil
}

func (openAIWire) auth(r *http.Request, key string) *apiError {
	if key == "" {
		return nil
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return &apiError{status: http.StatusUnauthorized, message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}
	}
	if got, ok := strings.CutPrefix(auth, "Bearer "); !ok || got != key {
		return &apiError{status: http.StatusUnauthorized, code: "invalid_api_key", message: "Incorrect API key provided."}
	}
	return nil
}

func (openAIWire) unknownModel(model string) *apiError {
	return &apiError{status: http.StatusNotFound, code: "model_not_found", param: "model",
		message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)}
}

type openAIRequest struct {
	Model               string          `json:"model"`
	Messages            []openAIMessage `json:"messages"`
	Tools               []openAITool    `json:"tools"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              *bool           `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage       bool  `json:"include_usage"`
		IncludeObfuscation *bool `json:"include_obfuscation"`
	} `json:"stream_options"`
	Temperature json.RawMessage `json:"temperature"`
	TopP        json.RawMessage `json:"top_p"`
	// Accepted and not used.
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
	N                 json.RawMessage `json:"n"`
	Stop              json.RawMessage `json:"stop"`
	PresencePenalty   json.RawMessage `json:"presence_penalty"`
	FrequencyPenalty  json.RawMessage `json:"frequency_penalty"`
	LogitBias         json.RawMessage `json:"logit_bias"`
	Logprobs          json.RawMessage `json:"logprobs"`
	TopLogprobs       json.RawMessage `json:"top_logprobs"`
	User              json.RawMessage `json:"user"`
	Seed              json.RawMessage `json:"seed"`
	ResponseFormat    json.RawMessage `json:"response_format"`
	Store             json.RawMessage `json:"store"`
	Metadata          json.RawMessage `json:"metadata"`
	ReasoningEffort   json.RawMessage `json:"reasoning_effort"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	Modalities        json.RawMessage `json:"modalities"`
	Audio             json.RawMessage `json:"audio"`
	Prediction        json.RawMessage `json:"prediction"`
	Verbosity         json.RawMessage `json:"verbosity"`
	WebSearchOptions  json.RawMessage `json:"web_search_options"`
	PromptCacheKey    json.RawMessage `json:"prompt_cache_key"`
	SafetyIdentifier  json.RawMessage `json:"safety_identifier"`
	Functions         json.RawMessage `json:"functions"`
	FunctionCall      json.RawMessage `json:"function_call"`
}

type openAIMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	Name       string           `json:"name"`
	ToolCalls  []openAIToolCall `json:"tool_calls"`
	ToolCallID string           `json:"tool_call_id"`
	// Accepted and not used (clients echo answers back whole).
	Refusal      json.RawMessage `json:"refusal"`
	Audio        json.RawMessage `json:"audio"`
	FunctionCall json.RawMessage `json:"function_call"`
	Annotations  json.RawMessage `json:"annotations"`
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type openAITool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      json.RawMessage `json:"strict"`
	} `json:"function"`
	Custom json.RawMessage `json:"custom"`
}

// openAIBad is a 400 invalid_request_error.
func openAIBad(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, param: param, message: fmt.Sprintf(format, args...)}
}

func (openAIWire) decode(_ *Server, r *http.Request, body []byte, c *call) *apiError {
	if mediaType(r.Header.Get("Content-Type")) != "application/json" {
		return openAIBad("", "Invalid Content-Type header (%q), expected application/json.", r.Header.Get("Content-Type"))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return openAIBad("", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	for k := range top {
		if !openAIFields[k] {
			return openAIBad(k, "Unrecognized request argument supplied: %s", k)
		}
	}
	var req openAIRequest
	if err := strict(body, &req); err != nil {
		p := err.(*jsonProblem)
		if p.unknown != "" {
			return openAIBad("", "Additional properties are not allowed ('%s' was unexpected)", p.unknown)
		}
		return openAIBad(p.field, "Invalid type for '%s': expected %s.", p.field, p.want)
	}
	if req.Model == "" {
		return openAIBad("model", "you must provide a model parameter")
	}
	if len(req.Messages) == 0 {
		return openAIBad("messages", "[] is too short - 'messages'")
	}
	c.model = req.Model
	c.stream = req.Stream != nil && *req.Stream
	if req.StreamOptions != nil {
		if !c.stream {
			return openAIBad("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		c.includeUsage = req.StreamOptions.IncludeUsage
	}
	if req.MaxTokens != nil && openAIReasoning.MatchString(req.Model) {
		e := openAIBad("max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
		e.code = "unsupported_parameter"
		return e
	}
	switch {
	case req.MaxCompletionTokens != nil:
		c.req.MaxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.req.MaxTokens = *req.MaxTokens
	}
	if e := openAISampling(req.Model, req.Temperature, req.TopP, c); e != nil {
		return e
	}
	if e := openAIReasoningAndFormat(&req, c); e != nil {
		return e
	}
	for i, t := range req.Tools {
		tool, e := openAIDecodeTool(i, t)
		if e != nil {
			return e
		}
		if tool != nil {
			c.req.Tools = append(c.req.Tools, *tool)
		}
	}
	return openAIDecodeMessages(req.Messages, &c.req)
}

// openAIEfforts are the values of reasoning_effort.
var openAIEfforts = map[string]bool{"none": true, "minimal": true, "low": true, "medium": true, "high": true, "xhigh": true}

// openAIReasoningAndFormat checks reasoning_effort and response_format,
// noting the schema asked for in c. Every answer may carry the server's
// reasoning_content, as reasoning servers send it unasked.
func openAIReasoningAndFormat(req *openAIRequest, c *call) *apiError {
	c.thinking = true
	if len(req.ReasoningEffort) > 0 && jsonKind(req.ReasoningEffort) != "null" {
		var effort string
		if json.Unmarshal(req.ReasoningEffort, &effort) != nil || !openAIEfforts[effort] {
			return openAIBad("reasoning_effort", "Invalid value: %s. Supported values are: 'none', 'minimal', 'low', 'medium', 'high' and 'xhigh'.", req.ReasoningEffort)
		}
	}
	if len(req.ResponseFormat) == 0 || jsonKind(req.ResponseFormat) == "null" {
		return nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := strict(req.ResponseFormat, &f); err != nil {
		return openAIBad("response_format", "Invalid 'response_format': %s", err.(*jsonProblem).text)
	}
	switch f.Type {
	case "text", "json_object":
		return nil
	case "json_schema":
	default:
		return openAIBad("response_format.type", "Invalid value: '%s'. Supported values are: 'json_object', 'json_schema', and 'text'.", f.Type)
	}
	switch {
	case f.JSONSchema == nil:
		return openAIBad("response_format.json_schema", "Missing required parameter: 'response_format.json_schema'.")
	case !toolNameRE.MatchString(f.JSONSchema.Name):
		return openAIBad("response_format.json_schema.name", "Invalid 'response_format.json_schema.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
	case jsonKind(f.JSONSchema.Schema) != "object":
		return openAIBad("response_format.json_schema.schema", "Invalid schema for response_format '%s': schema must be a JSON Schema object.", f.JSONSchema.Name)
	}
	c.req.Output = &llm.Output{Name: f.JSONSchema.Name, Schema: f.JSONSchema.Schema}
	return nil
}

func openAIDecodeTool(i int, t openAITool) (*llm.Tool, *apiError) {
	at := fmt.Sprintf("tools[%d]", i)
	switch t.Type {
	case "function":
	case "custom":
		return nil, nil
	default:
		return nil, openAIBad(at+".type", "Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)
	}
	f := t.Function
	if f == nil {
		return nil, openAIBad(at+".function", "Missing required parameter: '%s.function'.", at)
	}
	switch {
	case f.Name == "":
		return nil, openAIBad(at+".function.name", "Missing required parameter: '%s.function.name'.", at)
	case len(f.Name) > 64:
		return nil, openAIBad(at+".function.name", "Invalid '%s.function.name': string too long. Expected a string with maximum length 64, but got a string with length %d instead.", at, len(f.Name))
	case !toolNameRE.MatchString(f.Name):
		return nil, openAIBad(at+".function.name", "Invalid '%s.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", at)
	}
	params := json.RawMessage(`{"type":"object","properties":{}}`)
	if len(f.Parameters) > 0 && jsonKind(f.Parameters) != "null" {
		var schema map[string]any
		if json.Unmarshal(f.Parameters, &schema) != nil || schema == nil {
			return nil, openAIBad(at+".function.parameters", "Invalid schema for function '%s': schema must be a JSON Schema object.", f.Name)
		}
		if typ, ok := schema["type"]; ok && typ != "object" {
			return nil, openAIBad(at+".function.parameters", "Invalid schema for function '%s': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%v\"'.", f.Name, typ)
		}
		params = f.Parameters
	}
	return &llm.Tool{Name: f.Name, Description: f.Description, Parameters: params}, nil
}

// openAIText reads a message's content: a string, null, or content parts
// whose text parts count.
func openAIText(at, role string, raw json.RawMessage) (string, []llm.File, bool, *apiError) {
	switch jsonKind(raw) {
	case "", "null":
		return "", nil, false, nil
	case "string":
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil, true, nil
	case "array":
		var parts []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", nil, false, openAIBad(at+".content", "Invalid type for '%s.content': expected an array of content parts.", at)
		}
		var b strings.Builder
		var files []llm.File
		for j, p := range parts {
			var typ string
			_ = json.Unmarshal(p["type"], &typ)
			switch typ {
			case "text":
				var s string
				if json.Unmarshal(p["text"], &s) != nil {
					return "", nil, false, openAIBad(fmt.Sprintf("%s.content[%d].text", at, j), "Missing required parameter: '%s.content[%d].text'.", at, j)
				}
				b.WriteString(s)
			case "image_url", "file":
				f, e := openAIFilePart(fmt.Sprintf("%s.content[%d]", at, j), role, typ, p)
				if e != nil {
					return "", nil, false, e
				}
				files = append(files, f)
			case "refusal", "input_audio":
			default:
				return "", nil, false, openAIBad(fmt.Sprintf("%s.content[%d].type", at, j), "Invalid value: '%s'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal' and 'file'.", typ)
			}
		}
		return b.String(), files, true, nil
	}
	return "", nil, false, openAIBad(at+".content", "Invalid type for '%s.content': expected one of a string or array of objects, but got %s instead.", at, jsonKind(raw))
}

func openAIDecodeMessages(msgs []openAIMessage, req *llm.Request) *apiError {
	pending := map[string]string{} // tool_call ids awaiting their tool message → name
	var order []string
	missing := func() *apiError {
		var ids []string
		for _, id := range order {
			if _, ok := pending[id]; ok {
				ids = append(ids, id)
			}
		}
		return openAIBad("messages", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(ids, ", "))
	}
	var system []string
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		if len(pending) > 0 && m.Role != "tool" {
			return missing()
		}
		text, files, has, e := openAIText(at, m.Role, m.Content)
		if e != nil {
			return e
		}
		switch m.Role {
		case "system", "developer":
			if !has {
				return openAIBad(at+".content", "Missing required parameter: '%s.content'.", at)
			}
			system = append(system, text)
		case "user":
			if !has {
				return openAIBad(at+".content", "Missing required parameter: '%s.content'.", at)
			}
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: text, Files: files})
		case "assistant":
			if !has && len(m.ToolCalls) == 0 && jsonKind(m.FunctionCall) != "object" {
				return openAIBad(at+".content", "Missing required parameter: '%s.content'.", at)
			}
			msg := llm.Message{Role: llm.RoleAssistant, Content: text, Name: m.Name}
			pending, order = map[string]string{}, nil
			for j, tc := range m.ToolCalls {
				tat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
				switch {
				case tc.ID == "":
					return openAIBad(tat+".id", "Missing required parameter: '%s.id'.", tat)
				case tc.Type != "function":
					return openAIBad(tat+".type", "Invalid value: '%s'. Supported values are: 'function'.", tc.Type)
				case tc.Function.Name == "":
					return openAIBad(tat+".function.name", "Missing required parameter: '%s.function.name'.", tat)
				case jsonKind(tc.Function.Arguments) != "string":
					return openAIBad(tat+".function.arguments", "Invalid type for '%s.function.arguments': expected a string, but got %s instead.", tat, jsonKind(tc.Function.Arguments))
				}
				var args string
				_ = json.Unmarshal(tc.Function.Arguments, &args)
				pending[tc.ID] = tc.Function.Name
				order = append(order, tc.ID)
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: objectArgs([]byte(args))})
			}
			req.Messages = append(req.Messages, msg)
		case "tool":
			name, ok := pending[m.ToolCallID]
			if !ok {
				return openAIBad(at+".role", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			if !has {
				return openAIBad(at+".content", "Missing required parameter: '%s.content'.", at)
			}
			delete(pending, m.ToolCallID)
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Content: text, ToolCallID: m.ToolCallID, ToolName: name})
		case "function":
			return openAIBad(at+".role", "Invalid value: 'function'. The function role is deprecated; use tool messages.")
		default:
			return openAIBad(at+".role", "Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role)
		}
	}
	if len(pending) > 0 {
		return missing()
	}
	req.System = strings.Join(system, "\n\n")
	return nil
}

func (openAIWire) errorBody(e *apiError) []byte {
	kind := e.kind
	if kind == "" {
		switch {
		case e.status == http.StatusTooManyRequests:
			kind = "requests"
		case e.status >= 500:
			kind = "server_error"
		default:
			kind = "invalid_request_error"
		}
	}
	var code, param any
	if e.code != "" {
		code = e.code
	} else if e.status == http.StatusTooManyRequests {
		code = "rate_limit_exceeded"
	}
	if e.param != "" {
		param = e.param
	}
	return mustJSON(map[string]any{"error": map[string]any{"message": e.message, "type": kind, "param": param, "code": code}})
}

func (openAIWire) retryHeaders(h http.Header, e *apiError) {
	h.Set("x-request-id", randomID("req_", 32))
	if e.retryAfter > 0 {
		h.Set("retry-after", strconv.Itoa(int(math.Ceil(e.retryAfter.Seconds()))))
		h.Set("retry-after-ms", strconv.FormatInt(e.retryAfter.Milliseconds(), 10))
	}
}

func openAIFinish(resp *llm.Response) string {
	switch {
	case len(resp.ToolCalls) > 0:
		return "tool_calls"
	case stoppedAtLimit(resp.StopReason):
		return "length"
	}
	return "stop"
}

func openAIUsage(u llm.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CachedTokens, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}

func openAICallIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = randomID("call_", 24)
	}
	return ids
}

func (openAIWire) whole(_ *Server, c *call, resp *llm.Response) []byte {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if resp.Text != "" || len(resp.ToolCalls) == 0 {
		msg["content"] = resp.Text
	}
	if resp.Reasoning != "" {
		msg["reasoning_content"] = resp.Reasoning
	}
	if len(resp.ToolCalls) > 0 {
		var calls []any
		for i, id := range openAICallIDs(len(resp.ToolCalls)) {
			tc := resp.ToolCalls[i]
			calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": string(objectArgs(tc.Arguments))}})
		}
		msg["tool_calls"] = calls
	}
	return mustJSON(map[string]any{
		"id": randomID("chatcmpl-", 29), "object": "chat.completion", "created": time.Now().Unix(), "model": c.model,
		"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": openAIFinish(resp)}},
		"usage":              openAIUsage(resp.Usage),
		"service_tier":       "default",
		"system_fingerprint": "fp_llmtest",
	})
}

type openAIStream struct {
	c       *call
	out     *eventOut
	id      string
	created int64
	started bool
}

func (openAIWire) stream(_ *Server, c *call, out *eventOut) streamer {
	return &openAIStream{c: c, out: out, id: randomID("chatcmpl-", 29), created: time.Now().Unix()}
}

func (s *openAIStream) chunk(delta map[string]any, finish any) {
	ch := map[string]any{
		"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.c.model,
		"service_tier": "default", "system_fingerprint": "fp_llmtest",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
	}
	if s.c.includeUsage {
		ch["usage"] = nil
	}
	s.out.send("", ch)
}

func (s *openAIStream) start() {
	if !s.started {
		s.started = true
		s.chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	}
}

func (s *openAIStream) reasoning(delta string) {
	s.start()
	s.chunk(map[string]any{"reasoning_content": delta}, nil)
}

func (s *openAIStream) text(delta string) {
	s.start()
	s.chunk(map[string]any{"content": delta}, nil)
}

func (s *openAIStream) finish(resp *llm.Response) {
	s.start()
	for i, id := range openAICallIDs(len(resp.ToolCalls)) {
		tc := resp.ToolCalls[i]
		s.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil)
		for _, p := range pieces(string(objectArgs(tc.Arguments)), 8) {
			s.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil)
		}
	}
	s.chunk(map[string]any{}, openAIFinish(resp))
	if s.c.includeUsage {
		s.out.send("", map[string]any{
			"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.c.model,
			"service_tier": "default", "system_fingerprint": "fp_llmtest", "choices": []any{}, "usage": openAIUsage(resp.Usage),
		})
	}
	s.out.write("data: [DONE]\n\n")
}

func (s *openAIStream) fail(e *apiError) {
	body := openAIWire{}.errorBody(e)
	var v any
	_ = json.Unmarshal(body, &v)
	s.out.send("", v)
}
