package llm_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// redirect sends every request to the server at url, whatever its host.
type redirect struct{ url string }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(r.url, "http://")
	return http.DefaultTransport.RoundTrip(req)
}

func TestOpenAIMaxCompletionTokens(t *testing.T) {
	f := newFake(t, openAIWire)
	p := newProvider(t, "o4-mini", testOptions(func(o *llm.Options) { o.HTTPClient = &http.Client{Transport: redirect{f.URL}} }))
	if _, err := p.Generate(t.Context(), ask()); err != nil {
		t.Fatal(err)
	}
	var sent map[string]any
	_ = json.Unmarshal(f.last().Body, &sent)
	if sent["max_completion_tokens"] != float64(4096) || sent["max_tokens"] != nil {
		t.Errorf("api.openai.com got max_completion_tokens %v, max_tokens %v; want 4096 and none (max_tokens is deprecated there)", sent["max_completion_tokens"], sent["max_tokens"])
	}
}

// Streams of OpenAI-compatible servers that differ from OpenAI's own.
func TestOpenAICompatibleStreams(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	tests := []struct {
		name      string
		events    []string
		wantText  string
		wantCalls string // name(args) joined by " "
		wantErr   string
	}{
		{
			name: "whole call in one chunk, arguments as an object, no [DONE]",
			events: []string{chunk(`{"role":"assistant","content":""}`, "null"),
				chunk(`{"tool_calls":[{"id":"call_x","type":"function","function":{"name":"get_weather","arguments":{"location":"Paris"}}}]}`, "null"),
				chunk(`{}`, `"tool_calls"`)},
			wantCalls: `get_weather({"location":"Paris"})`,
		},
		{
			name: "fragments without index",
			events: []string{chunk(`{"tool_calls":[{"id":"a","function":{"name":"list_items","arguments":""}}]}`, "null"),
				chunk(`{"tool_calls":[{"function":{"arguments":"{}"}}]}`, "null"),
				chunk(`{"tool_calls":[{"id":"b","function":{"name":"get_weather","arguments":"{\"location\":"}}]}`, "null"),
				chunk(`{"tool_calls":[{"function":{"arguments":"\"Oslo\"}"}}]}`, "null"),
				chunk(`{}`, `"tool_calls"`), "data: [DONE]\n\n"},
			wantCalls: `list_items({}) get_weather({"location":"Oslo"})`,
		},
		{
			name: "reasoning content is not text",
			events: []string{chunk(`{"reasoning_content":"hmm"}`, "null"), chunk(`{"content":"Hi"}`, "null"),
				chunk(`{}`, `"stop"`), "data: [DONE]\n\n"},
			wantText: "Hi",
		},
		{
			name:    "error chunk",
			events:  []string{chunk(`{"content":"Hi"}`, "null"), `data: {"error":{"message":"CUDA out of memory","type":"server_error"}}` + "\n\n"},
			wantErr: "CUDA out of memory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, ollamaWire)
			f.Fail(llmtest.Fault{Body: strings.Join(tt.events, ""), ContentType: "text/event-stream"})
			resp, _, err := generateWith(t.Context(), f.provider(testOptions(nil)), ask(), true)
			if tt.wantErr != "" {
				e := wantCode(t, err, llm.CodeError)
				if !strings.Contains(e.Message, tt.wantErr) {
					t.Errorf("error %q, want %q", e.Message, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, c := range resp.ToolCalls {
				calls = append(calls, c.Name+"("+canonical(c.Arguments)+")")
			}
			if resp.Text != tt.wantText || strings.Join(calls, " ") != tt.wantCalls {
				t.Errorf("text %q, calls %q; want %q, %q", resp.Text, calls, tt.wantText, tt.wantCalls)
			}
		})
	}
}

func TestOpenAIStreamAnsweredWhole(t *testing.T) {
	// A server that ignores "stream": true and answers with one JSON body.
	f := newFake(t, openAIWire)
	f.Fail(llmtest.Fault{Body: `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"All good.","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13},"system_fingerprint":"fp_06737a9306"}`})
	resp, deltas, err := generateWith(t.Context(), f.provider(testOptions(nil)), ask(), true)
	if err != nil || resp.Text != "All good." || strings.Join(deltas, "") != "All good." {
		t.Errorf("text %v, deltas %q, err %v: want the whole text, passed to OnText once", resp, deltas, err)
	}
}

// A reasoning model behind a gateway still gets max_completion_tokens; other
// models behind a compatible server get max_tokens.
func TestOpenAITokenFieldByModelBehindGateway(t *testing.T) {
	for _, tt := range []struct {
		model      string
		completion bool
	}{{"o3-mini", true}, {"gpt-5-mini", true}, {"gpt-4o-mini", false}} {
		t.Run(tt.model, func(t *testing.T) {
			f := newFake(t, openAIWire)
			p := newProvider(t, "openai:"+tt.model, testOptions(func(o *llm.Options) { o.BaseURL = f.URL + "/v1" }))
			if _, err := p.Generate(t.Context(), ask()); err != nil {
				t.Fatal(err)
			}
			var sent map[string]any
			_ = json.Unmarshal(f.last().Body, &sent)
			if got := sent["max_completion_tokens"] != nil; got != tt.completion || (sent["max_tokens"] != nil) == tt.completion {
				t.Errorf("sent max_completion_tokens %v, max_tokens %v", sent["max_completion_tokens"], sent["max_tokens"])
			}
		})
	}
}
