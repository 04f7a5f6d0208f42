package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
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
	MaxOutputTokens *int            `json:"maxOutputTokens"`
	Temperature     json.RawMessage `json:"temperature"`
	TopP            json.RawMessage `json:"topP"`
	// Accepted and not used.
	StopSequences              json.RawMessage `json:"stopSequences"`
	ResponseMimeType           json.RawMessage `json:"responseMimeType"`
	ResponseSchema             json.RawMessage `json:"responseSchema"`
	ResponseJSONSchema         json.RawMessage `json:"responseJsonSchema"`
	ResponseModalities         json.RawMessage `json:"responseModalities"`
	CandidateCount             json.RawMessage `json:"candidateCount"`
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
	if g := req.GenerationConfig; g != nil {
		if g.MaxOutputTokens != nil {
			c.req.MaxTokens = *g.MaxOutputTokens
		}
		if e := geminiSampling(g.Temperature, g.TopP, c); e != nil {
			return e
		}
		if e := geminiThinkingAndFormat(g, c, len(req.Tools) > 0); e != nil {
			return e
		}
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

// geminiThinkingAndFormat reads thinkingConfig (includeThoughts asks for
// the thought parts) and the JSON response format, which models before
// Gemini 3 refuse with function calling.
func geminiThinkingAndFormat(g *geminiGenerationConfig, c *call, tools bool) *apiError {
	if len(g.ThinkingConfig) > 0 {
		var tc struct {
			IncludeThoughts bool   `json:"includeThoughts"`
			ThinkingBudget  *int   `json:"thinkingBudget"`
			ThinkingLevel   string `json:"thinkingLevel"`
		}
		if err := strict(g.ThinkingConfig, &tc); err != nil {
			return geminiBad("Invalid JSON payload received. Unknown name in generation_config.thinking_config: %s", err.(*jsonProblem).text)
		}
		switch tc.ThinkingLevel {
		case "", "low", "medium", "high", "minimal":
		default:
			return geminiBad("Invalid value at 'generation_config.thinking_config.thinking_level' (type.googleapis.com/google.ai.generativelanguage.v1beta.GenerationConfig.ThinkingConfig.ThinkingLevel), %q", tc.ThinkingLevel)
		}
		if tc.ThinkingLevel != "" && tc.ThinkingBudget != nil {
			return geminiBad("Thinking level and thinking budget cannot be set at the same time.")
		}
		c.thinking = tc.IncludeThoughts
	}
	var mime string
	if len(g.ResponseMimeType) > 0 {
		_ = json.Unmarshal(g.ResponseMimeType, &mime)
	}
	if len(g.ResponseJSONSchema) > 0 {
		if mime != "application/json" {
			return geminiBad("* GenerateContentRequest.generation_config.response_mime_type: response_mime_type must be application/json when response_json_schema is set.")
		}
		if jsonKind(g.ResponseJSONSchema) != "object" {
			return geminiBad("* GenerateContentRequest.generation_config.response_json_schema: must be a JSON Schema object")
		}
		c.req.Output = &llm.Output{Schema: g.ResponseJSONSchema}
	}
	if mime == "application/json" && tools && !geminiSignatures(c.model) {
		return geminiBad("Function calling with a response mime type: 'application/json' is unsupported")
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
	out := map[string]any{"promptTokenCount": u.InputTokens, "candidatesTokenCount": u.OutputTokens, "totalTokenCount": u.InputTokens + u.OutputTokens,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": u.InputTokens}}}
	if u.CachedTokens > 0 {
		// Part of promptTokenCount, present only when a cache was read.
		out["cachedContentTokenCount"] = u.CachedTokens
		out["cacheTokensDetails"] = []any{map[string]any{"modality": "TEXT", "tokenCount": u.CachedTokens}}
	}
	return out
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
	if resp.Reasoning != "" {
		parts = append(parts, map[string]any{"text": resp.Reasoning, "thought": true})
	}
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

func (g *geminiStream) reasoning(delta string) {
	g.out.send("", map[string]any{"candidates": []any{geminiCandidate([]any{map[string]any{"text": delta, "thought": true}}, "")}, "modelVersion": g.c.model, "responseId": g.id})
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
