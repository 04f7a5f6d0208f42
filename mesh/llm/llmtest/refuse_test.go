package llmtest_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// rawCase is a request sent as it is, and the answer the API gives it.
type rawCase struct {
	name    string
	method  string // POST when empty
	path    string
	header  map[string]string // over the API's valid headers; "" deletes
	body    string
	want    int
	wantErr string // in the error message
}

// send makes the request of c to srv with the valid headers of api.
func send(t *testing.T, srv *llmtest.Server, api llmtest.API, c rawCase) (int, http.Header, []byte) {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch api {
	case llmtest.OpenAI:
		req.Header.Set("Authorization", "Bearer "+testKey)
	case llmtest.Anthropic:
		req.Header.Set("x-api-key", testKey)
		req.Header.Set("anthropic-version", "2023-06-01")
	case llmtest.Gemini:
		req.Header.Set("x-goog-api-key", testKey)
	}
	for k, v := range c.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// errorMessage reads the API's error body; "" when body is not one.
func errorMessage(api llmtest.API, body []byte) string {
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Status  string `json:"status"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	switch api {
	case llmtest.OpenAI:
		if e.Error.Type == "" {
			return ""
		}
	case llmtest.Anthropic:
		if e.Type != "error" || e.Error.Type == "" {
			return ""
		}
	case llmtest.Gemini:
		if e.Error.Status == "" || e.Error.Code == nil {
			return ""
		}
	}
	return e.Error.Message
}

const (
	oaPath = "/v1/chat/completions"
	anPath = "/v1/messages"
	gmPath = "/v1beta/models/gemini-2.5-flash:generateContent"
)

func TestRefusals(t *testing.T) {
	tests := []struct {
		api   llmtest.API
		cases []rawCase
	}{
		{llmtest.OpenAI, []rawCase{
			{name: "valid", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, want: 200},
			{name: "content parts", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"system","content":[{"type":"text","text":"be brief"}]},{"role":"user","content":[{"type":"text","text":"hi"}]}],"temperature":0.2}`, want: 200},
			{name: "path without /v1", path: "/chat/completions", body: `{}`, want: 404, wantErr: "Invalid URL"},
			{name: "GET", method: "GET", path: oaPath, want: 404, wantErr: "Invalid URL"},
			{name: "no key", path: oaPath, header: map[string]string{"Authorization": ""}, body: `{}`, want: 401, wantErr: "didn't provide an API key"},
			{name: "wrong key", path: oaPath, header: map[string]string{"Authorization": "Bearer nope"}, body: `{}`, want: 401, wantErr: "Incorrect API key"},
			{name: "not JSON", path: oaPath, body: `{"model":`, want: 400, wantErr: "could not parse the JSON body"},
			{name: "form content type", path: oaPath, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: `{}`, want: 400, wantErr: "Content-Type"},
			{name: "unknown argument", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"system":"x"}`, want: 400, wantErr: "Unrecognized request argument supplied: system"},
			{name: "unknown message field", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi","tool_use_id":"x"}]}`, want: 400, wantErr: "'tool_use_id' was unexpected"},
			{name: "no model", path: oaPath, body: `{"messages":[{"role":"user","content":"hi"}]}`, want: 400, wantErr: "model parameter"},
			{name: "no messages", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[]}`, want: 400, wantErr: "too short"},
			{name: "bad role", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"model","content":"hi"}]}`, want: 400, wantErr: "Invalid value: 'model'"},
			{name: "stream_options without stream", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, want: 400, wantErr: "only allowed when 'stream' is enabled"},
			{name: "max_tokens to a reasoning model", path: oaPath, body: `{"model":"o3-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`, want: 400, wantErr: "Use 'max_completion_tokens' instead"},
			{name: "max_completion_tokens to a reasoning model", path: oaPath, body: `{"model":"o3-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100}`, want: 200},
			{name: "tool name too long", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `","parameters":{"type":"object","properties":{}}}}]}`, want: 400, wantErr: "maximum length 64"},
			{name: "tool name with a dot", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"fs.read"}}]}`, want: 400, wantErr: "does not match pattern"},
			{name: "tool schema not an object", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]}`, want: 400, wantErr: "type: \\\"object\\\""},
			{name: "arguments as an object", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{}}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`, want: 400, wantErr: "expected a string"},
			{name: "tool message without its call", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`, want: 400, wantErr: "must be a response to a preceeding message with 'tool_calls'"},
			{name: "call without its result", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"},{"role":"user","content":"and?"}]}`, want: 400, wantErr: "did not have response messages: c2"},
			{name: "parallel results", path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c2","content":"ok"},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`, want: 200},
		}},
		{llmtest.Anthropic, []rawCase{
			{name: "valid", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":100,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`, want: 200},
			{name: "unknown path", path: "/v1/complete", body: `{}`, want: 404, wantErr: "Not Found"},
			{name: "no key", path: anPath, header: map[string]string{"x-api-key": ""}, body: `{}`, want: 401, wantErr: "x-api-key header is required"},
			{name: "bearer instead of x-api-key", path: anPath, header: map[string]string{"x-api-key": "", "Authorization": "Bearer " + testKey}, body: `{}`, want: 401, wantErr: "x-api-key"},
			{name: "wrong key", path: anPath, header: map[string]string{"x-api-key": "nope"}, body: `{}`, want: 401, wantErr: "invalid x-api-key"},
			{name: "no version", path: anPath, header: map[string]string{"anthropic-version": ""}, body: `{}`, want: 400, wantErr: "anthropic-version: header is required"},
			{name: "unknown version", path: anPath, header: map[string]string{"anthropic-version": "2024-01-01"}, body: `{}`, want: 400, wantErr: "anthropic-version"},
			{name: "not JSON", path: anPath, body: `{`, want: 400, wantErr: "parsing the body"},
			{name: "no max_tokens", path: anPath, body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, want: 400, wantErr: "max_tokens: Field required"},
			{name: "system as a message", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`, want: 400, wantErr: "Input should be 'user' or 'assistant'"},
			{name: "extra field", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools_choice":{}}`, want: 400, wantErr: "tools_choice: Extra inputs are not permitted"},
			{name: "extra block field", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"hi","name":"x"}]}]}`, want: 400, wantErr: "Extra inputs are not permitted"},
			{name: "empty text", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, want: 400, wantErr: "text content blocks must be non-empty"},
			{name: "empty content", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[]}]}`, want: 400, wantErr: "non-empty content"},
			{name: "tool schema not an object", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"string"}}]}`, want: 400, wantErr: "input_schema.type: Input should be 'object'"},
			{name: "tool without schema", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f"}]}`, want: 400, wantErr: "input_schema: Field required"},
			{name: "tool name too long", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"` + strings.Repeat("a", 65) + `","input_schema":{"type":"object"}}]}`, want: 400, wantErr: "{1,64}"},
			{name: "duplicate tools", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"name":"f","input_schema":{"type":"object"}}]}`, want: 400, wantErr: "unique"},
			{name: "tool_use without result", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":"go on"}]}`, want: 400, wantErr: "without `tool_result` blocks immediately after: toolu_1"},
			{name: "result after text", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":[{"type":"text","text":"here"},{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}]}`, want: 400, wantErr: "must come before"},
			{name: "result of an unknown call", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"},{"type":"tool_result","tool_use_id":"toolu_2","content":"ok"}]}]}`, want: 400, wantErr: "unexpected `tool_use_id`"},
			{name: "tool result as user text is fine", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"},{"role":"user","content":"tool said ok"}]}`, want: 200},
			{name: "bad tool_use id", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"call.1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call.1","content":"ok"}]}]}`, want: 400, wantErr: "tool_use.id: String should match pattern"},
			{name: "parallel results with blocks", path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"both"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"tool_use","id":"toolu_2","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"two"}]},{"type":"tool_result","tool_use_id":"toolu_1","content":"one","is_error":true},{"type":"text","text":"thanks"}]}]}`, want: 200},
		}},
		{llmtest.Gemini, []rawCase{
			{name: "valid", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, want: 200},
			{name: "snake_case fields", path: gmPath, body: `{"system_instruction":{"parts":[{"text":"be brief"}]},"contents":[{"parts":[{"text":"hi"}]}],"generation_config":{"max_output_tokens":20},"tools":[{"function_declarations":[{"name":"f","parameters":{"type":"OBJECT","properties":{"max_items":{"type":"INTEGER"}}}}]}]}`, want: 200},
			{name: "v1 path", path: "/v1/models/gemini-2.5-flash:generateContent", body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, want: 200},
			{name: "key in the URL", path: gmPath + "?key=" + testKey, header: map[string]string{"x-goog-api-key": ""}, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, want: 200},
			{name: "unknown method", path: "/v1beta/models/gemini-2.5-flash:predict", body: `{}`, want: 404},
			{name: "no key", path: gmPath, header: map[string]string{"x-goog-api-key": ""}, body: `{}`, want: 403, wantErr: "unregistered callers"},
			{name: "wrong key", path: gmPath, header: map[string]string{"x-goog-api-key": "nope"}, body: `{}`, want: 400, wantErr: "API key not valid"},
			{name: "bearer key", path: gmPath, header: map[string]string{"x-goog-api-key": "", "Authorization": "Bearer " + testKey}, body: `{}`, want: 403},
			{name: "unknown query parameter", path: gmPath + "?foo=1", body: `{}`, want: 400, wantErr: "Cannot bind query parameter"},
			{name: "not JSON", path: gmPath, body: `{"contents":`, want: 400, wantErr: "Invalid JSON payload"},
			{name: "unknown field", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"system":"x"}`, want: 400, wantErr: `Unknown name \"system\"`},
			{name: "no contents", path: gmPath, body: `{"contents":[]}`, want: 400, wantErr: "contents is not specified"},
			{name: "assistant role", path: gmPath, body: `{"contents":[{"role":"assistant","parts":[{"text":"hi"}]}]}`, want: 400, wantErr: "valid role"},
			{name: "empty parts", path: gmPath, body: `{"contents":[{"role":"user","parts":[]}]}`, want: 400, wantErr: "must not be empty"},
			{name: "two data fields in a part", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi","functionResponse":{"name":"f","response":{}}}]}]}`, want: 400, wantErr: "oneof field 'data' is already set"},
			{name: "additionalProperties", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}]}]}`, want: 400, wantErr: `Unknown name \"additionalProperties\"`},
			{name: "$schema", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"$schema":"x","type":"object","properties":{"a":{"type":"string"}}}}]}]}`, want: 400, wantErr: `Unknown name \"$schema\"`},
			{name: "type list", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object","properties":{"a":{"type":["string","null"]}}}}]}]}`, want: 400, wantErr: "Invalid value at"},
			{name: "object without properties", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object","properties":{}}}]}]}`, want: 400, wantErr: "should be non-empty for OBJECT type"},
			{name: "array without items", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array"}}}}]}]}`, want: 400, wantErr: "items: missing field"},
			{name: "declaration without parameters", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"list_all"}]}]}`, want: 200},
			{name: "function name starting with a digit", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"3d"}]}]}`, want: 400, wantErr: "Invalid function name"},
			{name: "function name too long", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"` + strings.Repeat("a", 65) + `"}]}]}`, want: 400, wantErr: "maximum length of 64"},
			{name: "fewer responses than calls", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}},{"functionCall":{"name":"g","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"result":"ok"}}}]}]}`, want: 400, wantErr: "number of function response parts is equal"},
			{name: "response without a call", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"x"}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"result":"ok"}}}]}]}`, want: 400, wantErr: "function response turn comes immediately after a function call turn"},
			{name: "call after a model turn", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"x"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"result":"ok"}}}]}]}`, want: 400, wantErr: "function call turn comes immediately after a user turn"},
			{name: "response not an object", path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":"ok"}}]}]}`, want: 400, wantErr: "google.protobuf.Struct"},
			{name: "gemini 3 call without signature", path: "/v1beta/models/gemini-3-pro-preview:generateContent", body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"result":"ok"}}}]}]}`, want: 400, wantErr: "missing a thought_signature"},
			{name: "gemini 3 call with a made-up signature", path: "/v1beta/models/gemini-3-pro-preview:generateContent", body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}},"thoughtSignature":"bm9wZQ=="}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"result":"ok"}}}]}]}`, want: 400, wantErr: "did not produce"},
			{name: "gemini 3 call with the placeholder", path: "/v1beta/models/gemini-3-pro-preview:generateContent", body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"name":"g","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"g","response":{"result":"ok"}}},{"functionResponse":{"name":"f","response":{"error":"no"}}}]}]}`, want: 200},
			{name: "gemini 3 earlier turns need no signature", path: "/v1beta/models/gemini-3-pro-preview:generateContent", body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"result":"ok"}}}]},{"role":"model","parts":[{"text":"done"}]},{"role":"user","parts":[{"text":"thanks"}]}]}`, want: 200},
		}},
	}
	for _, tt := range tests {
		for _, c := range tt.cases {
			t.Run(string(tt.api)+"/"+c.name, func(t *testing.T) {
				srv := llmtest.Start(t, llmtest.Config{API: tt.api, APIKey: testKey, Backend: llmtest.Replies()})
				// A queued fault is for valid requests: a refused one leaves it.
				srv.Fail(llmtest.Fault{Status: 503})
				status, _, body := send(t, srv, tt.api, c)
				if c.want == 200 {
					status, _, body = send(t, srv, tt.api, c)
				}
				if status != c.want {
					t.Fatalf("status %d, want %d; body %s", status, c.want, body)
				}
				if c.want == 200 {
					return
				}
				msg := errorMessage(tt.api, body)
				if msg == "" {
					t.Fatalf("body %s is not the API's error format", body)
				}
				if !strings.Contains(string(body), c.wantErr) {
					t.Errorf("error %q does not say %q", msg, c.wantErr)
				}
				recs := srv.Requests()
				if last := recs[len(recs)-1]; last.Status != c.want || last.Request != nil || last.Error == "" {
					t.Errorf("record: status %d request %v error %q, want %d, none, the message", last.Status, last.Request, last.Error, c.want)
				}
				status, _, _ = send(t, srv, tt.api, validCase(tt.api))
				if status != 503 {
					t.Errorf("the next valid request got %d, want the queued 503", status)
				}
			})
		}
	}
}

func validCase(api llmtest.API) rawCase {
	switch api {
	case llmtest.OpenAI:
		return rawCase{path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`}
	case llmtest.Anthropic:
		return rawCase{path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`}
	}
	return rawCase{path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`}
}

func TestUnknownModel(t *testing.T) {
	for _, api := range []llmtest.API{llmtest.OpenAI, llmtest.Anthropic, llmtest.Gemini} {
		t.Run(string(api), func(t *testing.T) {
			srv := llmtest.Start(t, llmtest.Config{API: api, APIKey: testKey, Model: "the-only-model"})
			status, _, body := send(t, srv, api, validCase(api))
			if status != 404 || errorMessage(api, body) == "" {
				t.Errorf("status %d body %s, want the API's 404", status, body)
			}
		})
	}
}

func TestNoKeyConfigured(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI})
	c := validCase(llmtest.OpenAI)
	c.header = map[string]string{"Authorization": ""}
	if status, _, body := send(t, srv, llmtest.OpenAI, c); status != 200 {
		t.Errorf("without a key configured: status %d %s, want 200", status, body)
	}
	if _, err := llmtest.New(llmtest.Config{API: "cohere"}); !errors.Is(err, llmtest.ErrUnknownAPI) {
		t.Errorf("New with an unknown API: %v, want ErrUnknownAPI", err)
	}
}

// TestDecodedRequest: what a raw request becomes for the backend.
func TestDecodedRequest(t *testing.T) {
	c := rawCase{path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"system":"sys","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"both"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"tool_use","id":"toolu_2","name":"g","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"two"}]},{"type":"tool_result","tool_use_id":"toolu_1","content":"one","is_error":true},{"type":"text","text":"thanks"}]}]}`}
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.Anthropic, APIKey: testKey, Backend: llmtest.Replies()})
	if status, _, body := send(t, srv, llmtest.Anthropic, c); status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	got := srv.Requests()[0].Request
	want := `{"System":"sys","Messages":[` +
		`{"Role":"user","Content":"hi","Name":"","ToolCalls":null,"ToolCallID":"","ToolName":"","IsError":false,"Files":null},` +
		`{"Role":"assistant","Content":"both","Name":"","ToolCalls":[{"ID":"toolu_1","Name":"f","Arguments":{}},{"ID":"toolu_2","Name":"g","Arguments":{"a":1}}],"ToolCallID":"","ToolName":"","IsError":false,"Files":null},` +
		`{"Role":"tool","Content":"two","Name":"","ToolCalls":null,"ToolCallID":"toolu_2","ToolName":"g","IsError":false,"Files":null},` +
		`{"Role":"tool","Content":"one","Name":"","ToolCalls":null,"ToolCallID":"toolu_1","ToolName":"f","IsError":true,"Files":null},` +
		`{"Role":"user","Content":"thanks","Name":"","ToolCalls":null,"ToolCallID":"","ToolName":"","IsError":false,"Files":null}],"Tools":null,"MaxTokens":10}`
	got.OnText = nil
	type plain struct {
		System    string
		Messages  any
		Tools     any
		MaxTokens int
	}
	if g := string(mustJSON(plain{got.System, got.Messages, got.Tools, got.MaxTokens})); g != want {
		t.Errorf("decoded:\n%s\nwant:\n%s", g, want)
	}
}
