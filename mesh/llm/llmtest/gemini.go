package llmtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// The Gemini API, as its reference describes it: POST
// /v1beta/models/{model}:generateContent, or :streamGenerateContent with
// alt=sse for server-sent events (without it, a JSON array of the chunks);
// the key in x-goog-api-key (or ?key=); fields in lowerCamelCase or
// snake_case (proto JSON takes both). The system prompt is
// systemInstruction; contents are user and model turns; a model turn asks
// for calls with functionCall parts and the next user turn answers each
// with a functionResponse part; tools are functionDeclarations whose
// parameters are a Schema (an OpenAPI 3.0 subset). Gemini 3 models attach a
// thoughtSignature to the first function call of a turn and require it
// back.

type geminiWire struct{}

// geminiSkipSignatures are the documented placeholders for signatures of
// function calls the model did not produce.
var geminiSkipSignatures = map[string]bool{"skip_thought_signature_validator": true, "context_engineering_is_the_way_to_go": true}

var (
	geminiPathRE  = regexp.MustCompile(`^/(v1beta|v1)/models/([^/:]+):(generateContent|streamGenerateContent)$`)
	geminiNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`)
	geminiMajorRE = regexp.MustCompile(`^gemini-(\d+)`)
)

func (geminiWire) route(r *http.Request, c *call) *apiError {
	m := geminiPathRE.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || m == nil {
		return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("Method not found: %s %s", r.Method, r.URL.Path)}
	}
	c.model = m[2]
	c.stream = m[3] == "streamGenerateContent"
	for k, v := range r.URL.Query() {
		switch k {
		case "key":
		case "alt":
			if !c.stream {
				continue
			}
			switch v[0] {
			case "sse":
			case "json", "proto":
				c.sseless = true
			default:
				return geminiBad("Invalid value at 'alt' (type.googleapis.com/system_parameters.Alt), %q", v[0])
			}
		default:
			return geminiBad("Invalid JSON payload received. Unknown name %q: Cannot bind query parameter. Field %q could not be found in request message.", k, k)
		}
	}
	if c.stream && r.URL.Query().Get("alt") == "" {
		c.sseless = true
	}
	return nil
}

func (geminiWire) auth(r *http.Request, key string) *apiError {
	if key == "" {
		return nil
	}
	got := r.Header.Get("x-goog-api-key")
	if got == "" {
		got = r.URL.Query().Get("key")
	}
	switch {
	case got == "":
		return &apiError{status: http.StatusForbidden, message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}
	case got != key:
		return &apiError{status: http.StatusBadRequest, reason: "API_KEY_INVALID", message: "API key not valid. Please pass a valid API key."}
	}
	return nil
}

func (geminiWire) unknownModel(model string) *apiError {
	return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("models/%s is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", model)}
}

func geminiBad(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

type geminiRequest struct {
	Model             json.RawMessage         `json:"model"`
	Contents          []geminiContent         `json:"contents"`
	SystemInstruction *geminiContent          `json:"systemInstruction"`
	Tools             []geminiTool            `json:"tools"`
	GenerationConfig  *geminiGenerationConfig `json:"generationConfig"`
	// Accepted and not used.
	ToolConfig     json.RawMessage `json:"toolConfig"`
	SafetySettings json.RawMessage `json:"safetySettings"`
	CachedContent  json.RawMessage `json:"cachedContent"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID           string          `json:"id"`
		Name         string          `json:"name"`
		Response     json.RawMessage `json:"response"`
		WillContinue json.RawMessage `json:"willContinue"`
		Scheduling   json.RawMessage `json:"scheduling"`
		Parts        json.RawMessage `json:"parts"`
	} `json:"functionResponse"`
	// Accepted and not used.
	InlineData          json.RawMessage `json:"inlineData"`
	FileData            json.RawMessage `json:"fileData"`
	ExecutableCode      json.RawMessage `json:"executableCode"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult"`
	VideoMetadata       json.RawMessage `json:"videoMetadata"`
	MediaResolution     json.RawMessage `json:"mediaResolution"`
	PartMetadata        json.RawMessage `json:"partMetadata"`
}

// data names the part's data fields that are set (the API wants one).
func (p *geminiPart) data() []string {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"text", p.Text != nil}, {"functionCall", p.FunctionCall != nil}, {"functionResponse", p.FunctionResponse != nil},
		{"inlineData", len(p.InlineData) > 0}, {"fileData", len(p.FileData) > 0},
		{"executableCode", len(p.ExecutableCode) > 0}, {"codeExecutionResult", len(p.CodeExecutionResult) > 0},
	} {
		if f.on {
			set = append(set, f.name)
		}
	}
	return set
}

type geminiTool struct {
	FunctionDeclarations []geminiDeclaration `json:"functionDeclarations"`
	// Accepted and not used.
	GoogleSearch          json.RawMessage `json:"googleSearch"`
	GoogleSearchRetrieval json.RawMessage `json:"googleSearchRetrieval"`
	CodeExecution         json.RawMessage `json:"codeExecution"`
	URLContext            json.RawMessage `json:"urlContext"`
	ComputerUse           json.RawMessage `json:"computerUse"`
	FileSearch            json.RawMessage `json:"fileSearch"`
	GoogleMaps            json.RawMessage `json:"googleMaps"`
}

type geminiDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
	// Accepted and not used.
	Response           json.RawMessage `json:"response"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	Behavior           json.RawMessage `json:"behavior"`
}

type geminiGenerationConfig struct {
	MaxOutputTokens *int `json:"maxOutputTokens"`
	// Accepted and not used.
	StopSequences              json.RawMessage `json:"stopSequences"`
	ResponseMimeType           json.RawMessage `json:"responseMimeType"`
	ResponseSchema             json.RawMessage `json:"responseSchema"`
	ResponseJSONSchema         json.RawMessage `json:"responseJsonSchema"`
	ResponseModalities         json.RawMessage `json:"responseModalities"`
	CandidateCount             json.RawMessage `json:"candidateCount"`
	Temperature                json.RawMessage `json:"temperature"`
	TopP                       json.RawMessage `json:"topP"`
	TopK                       json.RawMessage `json:"topK"`
	Seed                       json.RawMessage `json:"seed"`
	PresencePenalty            json.RawMessage `json:"presencePenalty"`
	FrequencyPenalty           json.RawMessage `json:"frequencyPenalty"`
	ResponseLogprobs           json.RawMessage `json:"responseLogprobs"`
	Logprobs                   json.RawMessage `json:"logprobs"`
	EnableEnhancedCivicAnswers json.RawMessage `json:"enableEnhancedCivicAnswers"`
	SpeechConfig               json.RawMessage `json:"speechConfig"`
	ThinkingConfig             json.RawMessage `json:"thinkingConfig"`
	ImageConfig                json.RawMessage `json:"imageConfig"`
	MediaResolution            json.RawMessage `json:"mediaResolution"`
}

func (geminiWire) decode(s *Server, r *http.Request, body []byte, c *call) *apiError {
	if mediaType(r.Header.Get("Content-Type")) != "application/json" {
		return geminiBad("Invalid Content-Type %q: the request body must be application/json.", r.Header.Get("Content-Type"))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return geminiBad("Invalid JSON payload received. %s", describeJSON(err).text)
	}
	if _, ok := raw.(map[string]any); !ok {
		return geminiBad("Invalid JSON payload received. Expected an object.")
	}
	var req geminiRequest
	if err := strict(mustJSON(protoKeys(raw)), &req); err != nil {
		p := err.(*jsonProblem)
		switch {
		case p.unknown != "":
			return geminiBad("Invalid JSON payload received. Unknown name %q: Cannot find field.", p.unknown)
		case p.field != "":
			return geminiBad("Invalid value at '%s' (%s)", p.field, p.want)
		}
		return geminiBad("Invalid JSON payload received. %s", p.text)
	}
	if req.GenerationConfig != nil && req.GenerationConfig.MaxOutputTokens != nil {
		c.req.MaxTokens = *req.GenerationConfig.MaxOutputTokens
	}
	if si := req.SystemInstruction; si != nil {
		var texts []string
		for i, p := range si.Parts {
			if d := p.data(); len(d) != 1 || d[0] != "text" {
				return geminiBad("* GenerateContentRequest.system_instruction.parts[%d]: only text parts are supported in system instructions", i)
			}
			texts = append(texts, *p.Text)
		}
		c.req.System = strings.Join(texts, "\n")
	}
	for i, t := range req.Tools {
		for j, d := range t.FunctionDeclarations {
			tool, e := geminiDecodeDeclaration(i, j, d)
			if e != nil {
				return e
			}
			c.req.Tools = append(c.req.Tools, *tool)
		}
	}
	if len(req.Contents) == 0 {
		return geminiBad("* GenerateContentRequest.contents: contents is not specified")
	}
	if e := geminiDecodeContents(req.Contents, &c.req); e != nil {
		return e
	}
	if geminiSignatures(c.model) {
		return s.checkSignatures(req.Contents)
	}
	return nil
}

// geminiSignatures tells whether model uses thought signatures (Gemini 3
// and later).
func geminiSignatures(model string) bool {
	m := geminiMajorRE.FindStringSubmatch(model)
	if m == nil {
		return false
	}
	n, _ := strconv.Atoi(m[1])
	return n >= 3
}

func geminiDecodeDeclaration(i, j int, d geminiDeclaration) (*llm.Tool, *apiError) {
	at := fmt.Sprintf("tools[%d].function_declarations[%d]", i, j)
	if !geminiNameRE.MatchString(d.Name) {
		return nil, geminiBad("* GenerateContentRequest.%s.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.", at)
	}
	tool := &llm.Tool{Name: d.Name, Description: d.Description, Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
	switch {
	case len(d.Parameters) > 0 && len(d.ParametersJSONSchema) > 0:
		return nil, geminiBad("* GenerateContentRequest.%s: parameters and parameters_json_schema are mutually exclusive", at)
	case len(d.ParametersJSONSchema) > 0:
		if jsonKind(d.ParametersJSONSchema) != "object" {
			return nil, geminiBad("* GenerateContentRequest.%s.parameters_json_schema: must be a JSON Schema object", at)
		}
		tool.Parameters = d.ParametersJSONSchema
	case len(d.Parameters) > 0:
		var schema any
		dec := json.NewDecoder(bytes.NewReader(d.Parameters))
		dec.UseNumber()
		_ = dec.Decode(&schema)
		if e := checkGeminiSchema(at+".parameters", schema); e != nil {
			return nil, e
		}
		tool.Parameters = mustJSON(jsonSchemaOf(schema))
	}
	return tool, nil
}

// geminiDecodeContents checks the turns and converts them.
func geminiDecodeContents(contents []geminiContent, req *llm.Request) *apiError {
	var calls []llm.ToolCall // the previous model turn's calls
	for i, ct := range contents {
		at := fmt.Sprintf("contents[%d]", i)
		role := ct.Role
		switch role {
		case "", "user":
			role = "user"
		case "model":
		default:
			return geminiBad("Please use a valid role: user, model.")
		}
		if len(ct.Parts) == 0 {
			return geminiBad("* GenerateContentRequest.%s.parts: contents.parts must not be empty.", at)
		}
		var texts []string
		var newCalls []llm.ToolCall
		var results []llm.Message
		answered := make([]bool, len(calls))
		for j, p := range ct.Parts {
			pat := fmt.Sprintf("%s.parts[%d]", at, j)
			switch d := p.data(); {
			case len(d) == 0:
				return geminiBad("* GenerateContentRequest.%s.data: required oneof field 'data' must have one initialized field", pat)
			case len(d) > 1:
				return geminiBad("Invalid JSON payload received. Invalid value at '%s': oneof field 'data' is already set. Cannot set '%s'", pat, d[1])
			}
			switch {
			case p.Text != nil:
				if !p.Thought {
					texts = append(texts, *p.Text)
				}
			case p.FunctionCall != nil:
				fc := p.FunctionCall
				if role != "model" {
					return geminiBad("* GenerateContentRequest.%s.function_call: function calls are only allowed in model turns", pat)
				}
				if fc.Name == "" {
					return geminiBad("* GenerateContentRequest.%s.function_call.name: Name cannot be empty.", pat)
				}
				if k := jsonKind(fc.Args); k != "" && k != "object" {
					return geminiBad("Invalid JSON payload received. Invalid value at '%s.function_call.args' (type.googleapis.com/google.protobuf.Struct), %s", pat, fc.Args)
				}
				id := fc.ID
				if id == "" {
					id = fmt.Sprintf("gemini-call-%d-%d", i, j)
				}
				newCalls = append(newCalls, llm.ToolCall{ID: id, Name: fc.Name, Arguments: objectArgs(fc.Args)})
			case p.FunctionResponse != nil:
				fr := p.FunctionResponse
				if role != "user" {
					return geminiBad("* GenerateContentRequest.%s.function_response: function responses are only allowed in user turns", pat)
				}
				if len(calls) == 0 {
					return geminiBad("Please ensure that function response turn comes immediately after a function call turn.")
				}
				if fr.Name == "" {
					return geminiBad("* GenerateContentRequest.%s.function_response.name: Name cannot be empty.", pat)
				}
				if jsonKind(fr.Response) != "object" {
					return geminiBad("Invalid JSON payload received. Invalid value at '%s.function_response.response' (type.googleapis.com/google.protobuf.Struct), %s", pat, fr.Response)
				}
				k := answer(calls, answered, fr.ID, fr.Name)
				if k < 0 {
					return geminiBad("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
				}
				answered[k] = true
				content, isErr := geminiResult(fr.Response)
				results = append(results, llm.Message{Role: llm.RoleTool, Content: content, ToolCallID: calls[k].ID, ToolName: fr.Name, IsError: isErr})
			}
		}
		if role == "model" {
			if len(newCalls) > 0 && (i == 0 || contentRole(contents[i-1]) != "user") {
				return geminiBad("Please ensure that function call turn comes immediately after a user turn or after a function response turn.")
			}
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: strings.Join(texts, ""), ToolCalls: newCalls})
			calls = newCalls
			continue
		}
		if len(calls) > 0 {
			if len(results) != len(calls) {
				return geminiBad("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
			}
			// Results in the order of the calls.
			sort.SliceStable(results, func(a, b int) bool {
				return callIndex(calls, results[a].ToolCallID) < callIndex(calls, results[b].ToolCallID)
			})
		}
		req.Messages = append(req.Messages, results...)
		if len(texts) > 0 {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: strings.Join(texts, "")})
		}
		calls = nil
	}
	return nil
}

func contentRole(c geminiContent) string {
	if c.Role == "" {
		return "user"
	}
	return c.Role
}

// answer finds the call a function response answers: by id, else the
// first unanswered call of that name, else the first unanswered call.
func answer(calls []llm.ToolCall, answered []bool, id, name string) int {
	if id != "" {
		for k, c := range calls {
			if c.ID == id && !answered[k] {
				return k
			}
		}
	}
	for k, c := range calls {
		if c.Name == name && !answered[k] {
			return k
		}
	}
	for k := range calls {
		if !answered[k] {
			return k
		}
	}
	return -1
}

func callIndex(calls []llm.ToolCall, id string) int {
	for k, c := range calls {
		if c.ID == id {
			return k
		}
	}
	return len(calls)
}

// geminiResult reads a function response: {"result": …} or
// {"output": …}, {"error": …}, else the whole object.
func geminiResult(raw json.RawMessage) (string, bool) {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	text := func(v json.RawMessage) string {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	if len(m) == 1 {
		for _, k := range []string{"result", "output", "content"} {
			if v, ok := m[k]; ok {
				return text(v), false
			}
		}
		if v, ok := m["error"]; ok {
			return text(v), true
		}
	}
	return string(raw), false
}

// checkSignatures requires, in the current turn (the contents after the
// last user text), a thought signature this server handed out (or a
// documented placeholder) on the first function call of every model turn.
func (s *Server) checkSignatures(contents []geminiContent) *apiError {
	start := 0
	for i, c := range contents {
		if contentRole(c) != "user" {
			continue
		}
		for _, p := range c.Parts {
			if p.Text != nil {
				start = i + 1
				break
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := start; i < len(contents); i++ {
		c := contents[i]
		if c.Role != "model" {
			continue
		}
		for j, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			if sig := p.ThoughtSignature; sig == "" || !(s.sigs[sig] || geminiSkipSignatures[sig]) {
				what := "is missing a thought_signature"
				if sig != "" {
					what = "has a thought_signature this model did not produce"
				}
				return geminiBad("Function call %s in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", what, p.FunctionCall.Name, j+1)
			}
			break // only the first call of a turn carries one
		}
	}
	return nil
}

// signature makes up a thought signature and remembers it.
func (s *Server) signature() string {
	sig := base64.StdEncoding.EncodeToString([]byte(randomID("llmtest-thought-", 24)))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sigs[sig] = true
	return sig
}

func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

func geminiErrorObject(e *apiError) map[string]any {
	kind := e.kind
	if kind == "" {
		kind = geminiStatus(e.status)
	}
	out := map[string]any{"code": e.status, "message": e.message, "status": kind}
	var details []any
	if e.reason != "" {
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.reason, "domain": "googleapis.com",
			"metadata": map[string]any{"service": "generativelanguage.googleapis.com"}})
	}
	if e.retryAfter > 0 {
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": strconv.FormatFloat(e.retryAfter.Seconds(), 'f', -1, 64) + "s"})
	}
	if details != nil {
		out["details"] = details
	}
	return out
}

func (geminiWire) errorBody(e *apiError) []byte {
	return mustJSON(map[string]any{"error": geminiErrorObject(e)})
}

// retryHeaders: Gemini says when to retry in the body (RetryInfo).
func (geminiWire) retryHeaders(http.Header, *apiError) {}

func geminiFinish(resp *llm.Response) string {
	if len(resp.ToolCalls) == 0 && stoppedAtLimit(resp.StopReason) {
		return "MAX_TOKENS"
	}
	return "STOP"
}

func geminiUsage(u llm.Usage) map[string]any {
	return map[string]any{"promptTokenCount": u.InputTokens, "candidatesTokenCount": u.OutputTokens, "totalTokenCount": u.InputTokens + u.OutputTokens,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": u.InputTokens}}}
}

// callParts are the functionCall parts of calls; for Gemini 3 the first
// carries a thought signature.
func (s *Server) callParts(c *call, calls []llm.ToolCall) []any {
	var parts []any
	for i, tc := range calls {
		p := map[string]any{"functionCall": map[string]any{"name": tc.Name, "args": objectArgs(tc.Arguments)}}
		if i == 0 && geminiSignatures(c.model) {
			p["thoughtSignature"] = s.signature()
		}
		parts = append(parts, p)
	}
	return parts
}

func geminiCandidate(parts []any, finish string) map[string]any {
	content := map[string]any{"role": "model"}
	if len(parts) > 0 {
		content["parts"] = parts
	}
	cand := map[string]any{"content": content, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	return cand
}

func (geminiWire) whole(s *Server, c *call, resp *llm.Response) []byte {
	var parts []any
	if resp.Text != "" {
		parts = append(parts, map[string]any{"text": resp.Text})
	}
	parts = append(parts, s.callParts(c, resp.ToolCalls)...)
	return mustJSON(map[string]any{
		"candidates":    []any{geminiCandidate(parts, geminiFinish(resp))},
		"usageMetadata": geminiUsage(resp.Usage), "modelVersion": c.model, "responseId": randomID("", 22),
	})
}

type geminiStream struct {
	s   *Server
	c   *call
	out *eventOut
	id  string
}

func (geminiWire) stream(s *Server, c *call, out *eventOut) streamer {
	out.eol = "\r\n"
	return &geminiStream{s: s, c: c, out: out, id: randomID("", 22)}
}

func (g *geminiStream) text(delta string) {
	g.out.send("", map[string]any{"candidates": []any{geminiCandidate([]any{map[string]any{"text": delta}}, "")}, "modelVersion": g.c.model, "responseId": g.id})
}

func (g *geminiStream) finish(resp *llm.Response) {
	parts := g.s.callParts(g.c, resp.ToolCalls)
	if len(parts) == 0 {
		parts = []any{map[string]any{"text": ""}}
	}
	g.out.send("", map[string]any{"candidates": []any{geminiCandidate(parts, geminiFinish(resp))},
		"usageMetadata": geminiUsage(resp.Usage), "modelVersion": g.c.model, "responseId": g.id})
}

func (g *geminiStream) fail(e *apiError) {
	g.out.send("", map[string]any{"error": geminiErrorObject(e)})
}
