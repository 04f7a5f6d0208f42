package llm

// The Gemini provider speaks the Gemini API (Google AI Studio keys):
// POST {base}/v1beta/models/{model}:generateContent, or
// :streamGenerateContent?alt=sse to stream, with the header x-goog-api-key
// (GEMINI_API_KEY). The system prompt is systemInstruction; the history is
// contents of role user or model; tools are functionDeclarations whose
// parameters are the MCP input schema converted to Gemini's OpenAPI subset
// (see geminiParameters). The model asks for calls with functionCall parts
// and gets results as functionResponse parts of a user content, the result
// wrapped in an object ({"result": text} or {"error": text}). A streamed
// answer is server-sent events whose data are whole GenerateContentResponse
// chunks; the last one carries finishReason and usageMetadata.
//
// Gemini gives calls no ids (newer models may): the provider makes them up,
// and results find their call by name and position. Gemini 3 also requires
// the thoughtSignature it attached to a functionCall back with that call: the
// provider remembers recent signatures by call, and for a call it does not
// know (another process made it) it sends the placeholder signature the
// Gemini documentation gives for histories the model did not produce.
//
// With Options.Reasoning the request's generationConfig carries
// thinkingConfig: includeThoughts, and thinkingLevel (Gemini 3: low, or
// high for medium and high) or thinkingBudget (earlier models). Parts with
// thought: true are thought summaries: their text goes to OnReasoning, and
// they are never sent back. Gemini caches repeated prompt prefixes
// implicitly (2.5 and later): nothing is sent for it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

const (
	geminiDefaultBase = "https://generativelanguage.googleapis.com"
	// geminiSkipSignature is the documented placeholder thoughtSignature
	// for function calls whose real signature is unknown.
	geminiSkipSignature = "skip_thought_signature_validator"
	// geminiSignatures bounds the signatures a provider remembers.
	geminiSignatures = 1024
)

// geminiMajor reads the major version of a model name (gemini-3-pro → 3).
var geminiMajor = regexp.MustCompile(`gemini-(\d+)`)

type geminiProvider struct {
	model modelspec.Model
	ep    *endpoint
	// sampling is the settings of every call (llm section).
	sampling modelspec.Sampling
	sigs     *signatureCache
	// needsSignature: the model validates thought signatures on replayed
	// function calls (Gemini 3 and later).
	needsSignature bool
	reasoning      modelspec.Reasoning
}

func newGemini(model modelspec.Model, opts Options) *geminiProvider {
	base := opts.BaseURL
	if base == "" {
		base = geminiDefaultBase
	}
	p := &geminiProvider{model: model, ep: newEndpoint(modelspec.ProviderGoogle, base, opts), sampling: opts.Sampling, sigs: newSignatureCache(geminiSignatures), reasoning: opts.Reasoning}
	p.ep.provider = "gemini"
	if m := geminiMajor.FindStringSubmatch(model.Name); m != nil {
		n, _ := strconv.Atoi(m[1])
		p.needsSignature = n >= 3
	}
	return p
}

func (p *geminiProvider) Model() string { return p.model.String() }

// Generate sends req to generateContent, or streamGenerateContent when
// req.OnText is set.
func (p *geminiProvider) Generate(ctx context.Context, req Request) (*Response, error) {
	stream := req.OnText != nil || req.OnReasoning != nil
	body, err := json.Marshal(p.request(req))
	if err != nil {
		return nil, &Error{Code: CodeError, Message: "gemini: encode request: " + err.Error(), Err: err}
	}
	base := p.ep.base
	if !strings.HasSuffix(base, "/v1beta") && !strings.HasSuffix(base, "/v1") {
		base += "/v1beta"
	}
	u := base + "/models/" + url.PathEscape(strings.TrimPrefix(p.model.Name, "models/"))
	if stream {
		u += ":streamGenerateContent?alt=sse"
	} else {
		u += ":generateContent"
	}
	ids := newCallIDs()
	return p.ep.run(ctx, &exchange{
		url: u, body: body, stream: stream,
		header: func(h http.Header) {
			if p.ep.key != "" {
				h.Set("x-goog-api-key", p.ep.key.Reveal())
			}
		},
		decodeJSON: func(body []byte) (*Response, error) { return p.decodeJSON(ids, body) },
		decodeStream: func(r *sseReader, emit, reason func(string)) (*Response, error) {
			return p.decodeStream(ids, r, emit, reason)
		},
		errorDetail: geminiErrorDetail,
	}, req.OnText, req.OnReasoning)
}

// Request body.

type geminiRequest struct {
	SystemInstruction *geminiContent  `json:"systemInstruction,omitempty"`
	Contents          []geminiContent `json:"contents"`
	Tools             []geminiTool    `json:"tools,omitempty"`
	GenerationConfig  geminiGenConfig `json:"generationConfig"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             string                  `json:"text,omitempty"`
	Thought          bool                    `json:"thought,omitempty"`
	FunctionCall     *geminiFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *geminiFunctionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string                  `json:"thoughtSignature,omitempty"`
	// InlineData is a file's bytes, FileData a file by URL.
	InlineData *geminiBlob     `json:"inlineData,omitempty"`
	FileData   *geminiFileData `json:"fileData,omitempty"`
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type geminiFileData struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

// geminiFiles are a user message's files as inlineData (bytes) and
// fileData (URLs) parts.
func geminiFiles(files []File) []geminiPart {
	var out []geminiPart
	for _, f := range files {
		if f.URL != "" {
			out = append(out, geminiPart{FileData: &geminiFileData{MimeType: f.MediaType, FileURI: f.URL}})
			continue
		}
		out = append(out, geminiPart{InlineData: &geminiBlob{MimeType: f.MediaType, Data: f.base64()}})
	}
	return out
}

type geminiFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type geminiFunctionResponse struct {
	Name     string            `json:"name"`
	Response map[string]string `json:"response"`
}

type geminiTool struct {
	FunctionDeclarations []geminiFunctionDeclaration `json:"functionDeclarations"`
}

type geminiFunctionDeclaration struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

type geminiGenConfig struct {
	MaxOutputTokens    int                   `json:"maxOutputTokens"`
	Temperature        *float64              `json:"temperature,omitempty"`
	TopP               *float64              `json:"topP,omitempty"`
	ThinkingConfig     *geminiThinkingConfig `json:"thinkingConfig,omitempty"`
	ResponseMimeType   string                `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage       `json:"responseJsonSchema,omitempty"`
}

type geminiThinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts"`
	ThinkingBudget  int    `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

func (p *geminiProvider) request(req Request) geminiRequest {
	s := sampling(req, p.sampling)
	out := geminiRequest{
		Contents:         p.contents(req.Messages),
		GenerationConfig: geminiGenConfig{MaxOutputTokens: s.MaxTokens, Temperature: s.Temperature, TopP: s.TopP},
	}
	if r := p.reasoning; r.On() {
		tc := &geminiThinkingConfig{IncludeThoughts: true}
		switch {
		case p.needsSignature && r.Effort == modelspec.EffortLow:
			tc.ThinkingLevel = "low"
		case p.needsSignature && r.Effort != "":
			tc.ThinkingLevel = "high"
		default:
			tc.ThinkingBudget = r.Budget()
		}
		out.GenerationConfig.ThinkingConfig = tc
	}
	system := req.System
	if o := req.Output; o != nil {
		if len(req.Tools) == 0 {
			out.GenerationConfig.ResponseMimeType = "application/json"
			out.GenerationConfig.ResponseJSONSchema = compactJSON(objectSchema(o.Schema))
		} else {
			system = outputInstruction(system, o)
		}
	}
	if system != "" {
		out.SystemInstruction = &geminiContent{Parts: []geminiPart{{Text: system}}}
	}
	if len(req.Tools) > 0 {
		var decls []geminiFunctionDeclaration
		for _, t := range req.Tools {
			decls = append(decls, geminiFunctionDeclaration{Name: t.Name, Description: t.Description, Parameters: geminiParameters(t.Parameters)})
		}
		out.Tools = []geminiTool{{FunctionDeclarations: decls}}
	}
	return out
}

// contents converts the history: assistant messages are model contents,
// tool results functionResponse parts of user contents, and consecutive
// contents of one role merge.
func (p *geminiProvider) contents(msgs []Message) []geminiContent {
	var out []geminiContent
	add := func(role string, parts []geminiPart) {
		if len(parts) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			return
		}
		out = append(out, geminiContent{Role: role, Parts: parts})
	}
	for _, m := range normalizeHistory(msgs) {
		switch m.Role {
		case RoleAssistant:
			var parts []geminiPart
			if strings.TrimSpace(m.Content) != "" {
				parts = append(parts, geminiPart{Text: m.Content})
			}
			for i, c := range m.ToolCalls {
				part := geminiPart{FunctionCall: &geminiFunctionCall{Name: c.Name, Args: c.Arguments}}
				part.ThoughtSignature = p.sigs.get(c.Name, c.Arguments)
				if part.ThoughtSignature == "" && i == 0 && p.needsSignature {
					part.ThoughtSignature = geminiSkipSignature
				}
				parts = append(parts, part)
			}
			add("model", parts)
		case RoleTool:
			key := "result"
			if m.IsError {
				key = "error"
			}
			add("user", []geminiPart{{FunctionResponse: &geminiFunctionResponse{Name: m.ToolName, Response: map[string]string{key: m.Content}}}})
		default:
			parts := geminiFiles(m.Files)
			if strings.TrimSpace(m.Content) != "" {
				parts = append(parts, geminiPart{Text: m.Content})
			}
			add("user", parts)
		}
	}
	return out
}

// Answers.

type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Parts []geminiPart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int `json:"thoughtsTokenCount"`
		// CachedContentTokenCount are the prompt tokens read from the
		// cache (part of promptTokenCount).
		CachedContentTokenCount int `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

func (p *geminiProvider) decodeJSON(ids *callIDs, body []byte) (*Response, error) {
	var r geminiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed("GenerateContentResponse: %v", err)
	}
	acc := p.newAccumulator(ids)
	if err := acc.add(&r, func(string) {}, func(string) {}); err != nil {
		return nil, err
	}
	return acc.response()
}

// decodeStream reads chunks until the end of the body: the usage may come
// after the finish reason.
func (p *geminiProvider) decodeStream(ids *callIDs, r *sseReader, emit, reason func(string)) (*Response, error) {
	acc := p.newAccumulator(ids)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var chunk geminiResponse
		if err := json.Unmarshal(ev.Data, &chunk); err != nil {
			return nil, malformed("GenerateContentResponse chunk: %v", err)
		}
		if err := acc.add(&chunk, emit, reason); err != nil {
			return nil, err
		}
	}
	if !acc.finished {
		return nil, errIncomplete
	}
	return acc.response()
}

// geminiAccumulator gathers an answer from one or more chunks.
type geminiAccumulator struct {
	p        *geminiProvider
	ids      *callIDs
	text     strings.Builder
	thoughts strings.Builder
	calls    []ToolCall
	usage    Usage
	stop     string
	finished bool
}

func (p *geminiProvider) newAccumulator(ids *callIDs) *geminiAccumulator {
	return &geminiAccumulator{p: p, ids: ids}
}

func (a *geminiAccumulator) add(r *geminiResponse, emit, reason func(string)) error {
	if r.Error != nil {
		return &apiError{status: r.Error.Code, kind: r.Error.Status, message: r.Error.Message, inStream: true}
	}
	if f := r.PromptFeedback; f != nil && f.BlockReason != "" {
		msg := fmt.Sprintf("gemini: the prompt was blocked (%s)", f.BlockReason)
		if f.BlockReasonMessage != "" {
			msg += ": " + f.BlockReasonMessage
		}
		return &Error{Code: CodeError, Status: http.StatusOK, Message: msg}
	}
	if u := r.UsageMetadata; u != nil {
		// Counts are cumulative; thinking is billed as output.
		a.usage = Usage{InputTokens: u.PromptTokenCount, OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount, CachedTokens: u.CachedContentTokenCount}
	}
	if len(r.Candidates) == 0 {
		return nil
	}
	c := r.Candidates[0]
	for _, part := range c.Content.Parts {
		switch {
		case part.FunctionCall != nil:
			fc := part.FunctionCall
			if fc.Name == "" {
				return malformed("functionCall without a name")
			}
			args, err := parseArgs(fc.Args)
			if err != nil {
				return err
			}
			id := fc.ID
			if id == "" {
				id = a.ids.next()
			}
			if part.ThoughtSignature != "" {
				a.p.sigs.put(fc.Name, args, part.ThoughtSignature)
			}
			a.calls = append(a.calls, ToolCall{ID: id, Name: fc.Name, Arguments: args})
		case part.Thought:
			// A thought summary: for people, not part of the reply.
			a.thoughts.WriteString(part.Text)
			reason(part.Text)
		case part.Text != "":
			a.text.WriteString(part.Text)
			emit(part.Text)
		}
	}
	if c.FinishReason != "" {
		a.stop = c.FinishReason
		a.finished = true
	}
	return nil
}

func (a *geminiAccumulator) response() (*Response, error) {
	out := &Response{Text: a.text.String(), ToolCalls: a.calls, Usage: a.usage, StopReason: a.stop, Reasoning: a.thoughts.String()}
	if out.Text == "" && len(out.ToolCalls) == 0 {
		switch a.stop {
		case "", "STOP", "MAX_TOKENS":
		default:
			return nil, &Error{Code: CodeError, Status: http.StatusOK, Message: fmt.Sprintf("gemini: no answer (finishReason %s)", a.stop)}
		}
	}
	return out, nil
}

// geminiErrorDetail reads {"error":{"code","message","status"}}, alone or
// as the first element of an array.
func geminiErrorDetail(body []byte) (string, string) {
	type detail struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	var one detail
	if json.Unmarshal(body, &one) == nil && one.Error.Message != "" {
		return one.Error.Status, one.Error.Message
	}
	var many []detail
	if json.Unmarshal(body, &many) == nil && len(many) > 0 {
		return many[0].Error.Status, many[0].Error.Message
	}
	return "", ""
}

// callIDs makes up ids for one answer's calls: a random prefix, then the
// call's position.
type callIDs struct {
	prefix string
	n      int
}

func newCallIDs() *callIDs {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &callIDs{prefix: "call_" + hex.EncodeToString(b[:])}
}

func (c *callIDs) next() string {
	c.n++
	return fmt.Sprintf("%s_%d", c.prefix, c.n)
}

// signatureCache remembers thought signatures by call (name and
// arguments), the oldest forgotten first.
type signatureCache struct {
	mu    sync.Mutex
	max   int
	sigs  map[string]string
	order []string
}

func newSignatureCache(max int) *signatureCache {
	return &signatureCache{max: max, sigs: map[string]string{}}
}

func signatureKey(name string, args json.RawMessage) string {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return name + "\x00" + string(args)
	}
	b, _ := json.Marshal(v)
	return name + "\x00" + string(b)
}

func (c *signatureCache) put(name string, args json.RawMessage, sig string) {
	k := signatureKey(name, args)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sigs[k]; !ok {
		c.order = append(c.order, k)
	}
	c.sigs[k] = sig
	for len(c.order) > c.max {
		delete(c.sigs, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *signatureCache) get(name string, args json.RawMessage) string {
	k := signatureKey(name, args)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sigs[k]
}
