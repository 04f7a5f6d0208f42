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

// geminiWire is the Gemini API (generateContent, streamGenerateContent).
type geminiWire struct{ model string }

func (geminiWire) Name() string { return "gemini" }
func (geminiWire) HasIDs() bool { return false }

func (w geminiWire) modelName() string {
	if w.model == "" {
		return "gemini-2.5-flash"
	}
	return w.model
}

func (w geminiWire) New(t *testing.T, srvURL string, opts Options) Provider {
	opts.BaseURL = srvURL
	return newProvider(t, "google:"+w.modelName(), opts)
}

// geminiSchemaKeys are the keys of Gemini's Schema (an OpenAPI subset).
var geminiSchemaKeys = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"maxItems": true, "minItems": true, "properties": true, "required": true, "minProperties": true,
	"maxProperties": true, "minLength": true, "maxLength": true, "pattern": true, "example": true,
	"anyOf": true, "propertyOrdering": true, "default": true, "items": true, "minimum": true, "maximum": true,
}

// checkGeminiSchema refuses what the API refuses: unknown keys, non-string
// enums, objects declared without properties at the top.
func checkGeminiSchema(path string, v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: schema is not an object", path)
	}
	for k, x := range m {
		if !geminiSchemaKeys[k] {
			return fmt.Errorf("%s: unknown schema field %q", path, k)
		}
		switch k {
		case "properties":
			for name, p := range x.(map[string]any) {
				if err := checkGeminiSchema(path+".properties."+name, p); err != nil {
					return err
				}
			}
		case "items":
			if err := checkGeminiSchema(path+".items", x); err != nil {
				return err
			}
		case "anyOf":
			for i, s := range x.([]any) {
				if err := checkGeminiSchema(fmt.Sprintf("%s.anyOf[%d]", path, i), s); err != nil {
					return err
				}
			}
		case "enum":
			for _, e := range x.([]any) {
				if _, ok := e.(string); !ok {
					return fmt.Errorf("%s: enum values must be strings", path)
				}
			}
		case "type":
			if _, ok := x.(string); !ok {
				return fmt.Errorf("%s: type must be one string", path)
			}
		}
	}
	if m["type"] == "array" && m["items"] == nil {
		return fmt.Errorf("%s: array without items", path)
	}
	return nil
}

func (w geminiWire) Parse(r *http.Request, body []byte) (seen, error) {
	prefix := "/v1beta/models/" + w.modelName()
	var stream bool
	switch {
	case r.Method == http.MethodPost && r.URL.Path == prefix+":generateContent" && r.URL.RawQuery == "":
	case r.Method == http.MethodPost && r.URL.Path == prefix+":streamGenerateContent" && r.URL.RawQuery == "alt=sse":
		stream = true
	default:
		return seen{}, fmt.Errorf("%s %s, want POST %s:generateContent or :streamGenerateContent?alt=sse", r.Method, r.URL, prefix)
	}
	if err := checkHeader(r, "x-goog-api-key", testKey); err != nil {
		return seen{}, err
	}
	if r.URL.Query().Get("key") != "" {
		return seen{}, errors.New("key in the URL")
	}
	type part struct {
		Text         string `json:"text"`
		FunctionCall *struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			Name     string          `json:"name"`
			Response json.RawMessage `json:"response"`
		} `json:"functionResponse"`
		ThoughtSignature string `json:"thoughtSignature"`
		InlineData       *struct {
			MimeType string `json:"mimeType"`
			Data     string `json:"data"`
		} `json:"inlineData"`
		FileData *struct {
			MimeType string `json:"mimeType"`
			FileURI  string `json:"fileUri"`
		} `json:"fileData"`
	}
	type content struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	var req struct {
		SystemInstruction *content  `json:"systemInstruction"`
		Contents          []content `json:"contents"`
		Tools             []struct {
			FunctionDeclarations []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig *struct {
			MaxOutputTokens int `json:"maxOutputTokens"`
		} `json:"generationConfig"`
	}
	if err := strict(body, &req); err != nil {
		return seen{}, err
	}
	s := seen{Model: w.modelName(), Stream: stream}
	if req.GenerationConfig != nil {
		s.MaxTokens = req.GenerationConfig.MaxOutputTokens
	}
	if si := req.SystemInstruction; si != nil {
		if len(si.Parts) != 1 || si.Parts[0].Text == "" {
			return seen{}, errors.New("systemInstruction: want one text part")
		}
		s.System = si.Parts[0].Text
	}
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			if d.Name == "" {
				return seen{}, errors.New("function declaration without a name")
			}
			if d.Parameters != nil {
				var schema map[string]any
				if err := json.Unmarshal(d.Parameters, &schema); err != nil {
					return seen{}, err
				}
				if err := checkGeminiSchema(d.Name+".parameters", schema); err != nil {
					return seen{}, err
				}
				if props, _ := schema["properties"].(map[string]any); schema["type"] == "object" && len(props) == 0 {
					return seen{}, fmt.Errorf("%s.parameters.properties: should be non-empty for OBJECT type", d.Name)
				}
			}
			s.Tools = append(s.Tools, seenTool{Name: d.Name, Description: d.Description, Params: d.Parameters})
		}
	}
	if len(req.Contents) == 0 {
		return seen{}, errors.New("contents is required")
	}
	var calls []string // names of the last model content's calls, awaiting responses
	for i, c := range req.Contents {
		if c.Role != "user" && c.Role != "model" {
			return seen{}, fmt.Errorf("contents[%d]: role %q, want user or model", i, c.Role)
		}
		if i > 0 && req.Contents[i-1].Role == c.Role {
			return seen{}, fmt.Errorf("contents[%d]: two %s contents in a row", i, c.Role)
		}
		if len(c.Parts) == 0 {
			return seen{}, fmt.Errorf("contents[%d]: no parts", i)
		}
		var model *seenMsg
		if c.Role == "model" {
			s.Messages = append(s.Messages, seenMsg{Role: "assistant"})
			model = &s.Messages[len(s.Messages)-1]
		}
		responses := 0
		from := len(s.Messages)
		for j, p := range c.Parts {
			set := 0
			for _, b := range []bool{p.Text != "", p.FunctionCall != nil, p.FunctionResponse != nil, p.InlineData != nil, p.FileData != nil} {
				if b {
					set++
				}
			}
			if set != 1 {
				return seen{}, fmt.Errorf("contents[%d].parts[%d]: want exactly one of text, functionCall, functionResponse, inlineData, fileData", i, j)
			}
			switch {
			case p.Text != "" && model != nil:
				model.Text += p.Text
			case p.Text != "":
				s.Messages = addUserText(s.Messages, from, p.Text)
			case p.InlineData != nil && model == nil:
				data, err := base64.StdEncoding.DecodeString(p.InlineData.Data)
				if err != nil || len(data) == 0 || p.InlineData.MimeType == "" {
					return seen{}, fmt.Errorf("contents[%d].parts[%d]: inlineData needs mimeType and base64 data (%v)", i, j, err)
				}
				kind := "document"
				if imageTypes[p.InlineData.MimeType] {
					kind = "image"
				}
				s.Messages = addUserFile(s.Messages, from, seenFile{Kind: kind, MediaType: p.InlineData.MimeType, Data: string(data)})
			case p.FileData != nil && model == nil:
				if p.FileData.MimeType == "" || !strings.HasPrefix(p.FileData.FileURI, "https://") {
					return seen{}, fmt.Errorf("contents[%d].parts[%d]: fileData needs mimeType and an https fileUri", i, j)
				}
				s.Messages = addUserFile(s.Messages, from, seenFile{Kind: "file", MediaType: p.FileData.MimeType, URL: p.FileData.FileURI})
			case p.FunctionCall != nil && model != nil:
				fc := p.FunctionCall
				if fc.Name == "" || !strings.HasPrefix(strings.TrimSpace(string(fc.Args)), "{") {
					return seen{}, fmt.Errorf("contents[%d].parts[%d]: functionCall needs a name and args object", i, j)
				}
				model.Calls = append(model.Calls, seenCall{Name: fc.Name, Args: canonical(fc.Args), Signature: p.ThoughtSignature})
			case p.FunctionResponse != nil && model == nil:
				fr := p.FunctionResponse
				var resp map[string]any
				if err := json.Unmarshal(fr.Response, &resp); err != nil || resp == nil {
					return seen{}, fmt.Errorf("contents[%d].parts[%d]: functionResponse.response must be an object", i, j)
				}
				if responses >= len(calls) || calls[responses] != fr.Name {
					return seen{}, fmt.Errorf("contents[%d].parts[%d]: functionResponse %q does not answer the calls %v", i, j, fr.Name, calls)
				}
				responses++
				res := &seenResult{Name: fr.Name}
				if e, ok := resp["error"].(string); ok {
					res.Content, res.IsError = e, true
				} else {
					res.Content, _ = resp["result"].(string)
				}
				s.Messages = append(s.Messages, seenMsg{Role: "tool", Result: res})
			default:
				return seen{}, fmt.Errorf("contents[%d].parts[%d]: part not allowed in a %s content", i, j, c.Role)
			}
		}
		if c.Role == "user" {
			if responses != len(calls) {
				return seen{}, fmt.Errorf("contents[%d]: %d function responses for %d function calls", i, responses, len(calls))
			}
			calls = nil
		} else {
			calls = nil
			for _, call := range model.Calls {
				calls = append(calls, call.Name)
			}
		}
	}
	if req.Contents[len(req.Contents)-1].Role != "user" {
		return seen{}, errors.New("the last content must be the user's")
	}
	return s, nil
}

// fakeSignature is the thoughtSignature the fake puts on a call.
func fakeSignature(name string) string {
	return base64.StdEncoding.EncodeToString([]byte("sig:" + name))
}

func (w geminiWire) parts(text string, calls []fakeCall) []any {
	var parts []any
	if text != "" {
		parts = append(parts, map[string]any{"text": text})
	}
	for i, c := range calls {
		p := map[string]any{"functionCall": map[string]any{"name": c.Name, "args": argsObject(c.Args)}}
		if i == 0 {
			p["thoughtSignature"] = fakeSignature(c.Name)
		}
		parts = append(parts, p)
	}
	return parts
}

func (geminiWire) usage(u Usage) map[string]any {
	return map[string]any{"promptTokenCount": u.InputTokens, "candidatesTokenCount": u.OutputTokens, "totalTokenCount": u.InputTokens + u.OutputTokens,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": u.InputTokens}}}
}

func (w geminiWire) Whole(s seen, rp reply) []byte {
	return mustJSON(map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"parts": w.parts(strings.Join(rp.Text, ""), rp.Calls), "role": "model"},
			"finishReason": "STOP", "index": 0,
		}},
		"usageMetadata": w.usage(rp.Usage), "modelVersion": s.Model, "responseId": "mfvfaN6LJcWVkdUP0tSH0Qg",
	})
}

// Events are data-only events separated by CRLF, as the API sends them.
func (w geminiWire) Events(s seen, rp reply) []string {
	event := func(parts []any, last bool) string {
		cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
		u := map[string]any{"promptTokenCount": rp.Usage.InputTokens, "totalTokenCount": rp.Usage.InputTokens}
		if last {
			cand["finishReason"] = "STOP"
			u = w.usage(rp.Usage)
		}
		return "data: " + string(mustJSON(map[string]any{"candidates": []any{cand}, "usageMetadata": u, "modelVersion": s.Model, "responseId": "mfvfaN6LJcWVkdUP0tSH0Qg"})) + "\r\n\r\n"
	}
	var ev []string
	for i, d := range rp.Text {
		ev = append(ev, event(w.parts(d, nil), i == len(rp.Text)-1 && len(rp.Calls) == 0))
	}
	if len(rp.Calls) > 0 {
		ev = append(ev, event(w.parts("", rp.Calls), true))
	}
	if len(ev) == 0 {
		ev = append(ev, event([]any{map[string]any{"text": ""}}, true))
	}
	return ev
}

func (geminiWire) ErrorBody(status int, message string) []byte {
	st := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}[status]
	return mustJSON(map[string]any{"error": map[string]any{"code": status, "message": message, "status": st}})
}
