package llmtest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

func ptr(v float64) *float64 { return &v }

// TestSamplingOnTheWire: the provider's settings (the llm section) go out
// in each API's own fields, a request's replace them, an explicit 0 is
// sent, and a call without settings sends none (the API's defaults).
func TestSamplingOnTheWire(t *testing.T) {
	// Where each API puts the settings in its body.
	fields := map[llmtest.API][3]string{
		llmtest.OpenAI:    {"", "temperature", "top_p"},
		llmtest.Anthropic: {"", "temperature", "top_p"},
		llmtest.Gemini:    {"generationConfig", "temperature", "topP"},
	}
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Model: tg.wireModel(), Backend: llmtest.Replies(llm.Response{Text: "a"}, llm.Response{Text: "b"}, llm.Response{Text: "c"})})
			p := client(t, srv, tg.model, func(o *llm.Options) {
				o.Sampling = modelspec.Sampling{MaxTokens: 300, Temperature: ptr(0.25), TopP: ptr(0.5)}
			})
			ask := func(s modelspec.Sampling) {
				t.Helper()
				req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Sampling: s}
				if _, err := p.Generate(t.Context(), req); err != nil {
					t.Fatal(err)
				}
			}
			ask(modelspec.Sampling{})
			ask(modelspec.Sampling{MaxTokens: 20, Temperature: ptr(0)})
			p = client(t, srv, tg.model, nil)
			ask(modelspec.Sampling{})

			f := fields[tg.api]
			for i, want := range []struct {
				max          int
				temp, top    *float64
				tRaw, topRaw string
			}{
				{300, ptr(0.25), ptr(0.5), "0.25", "0.5"},
				{20, ptr(0), ptr(0.5), "0", "0.5"},
				{4096, nil, nil, "", ""},
			} {
				rec := srv.Requests()[i]
				got := rec.Request
				if got.MaxTokens != want.max || !sameFloat(got.Temperature, want.temp) || !sameFloat(got.TopP, want.top) {
					t.Errorf("call %d decoded max %d temperature %v top_p %v, want %d %v %v", i, got.MaxTokens, show(got.Temperature), show(got.TopP), want.max, show(want.temp), show(want.top))
				}
				var body map[string]json.RawMessage
				if err := json.Unmarshal(rec.Body, &body); err != nil {
					t.Fatal(err)
				}
				if f[0] != "" {
					body = map[string]json.RawMessage{}
					_ = json.Unmarshal(mustRaw(rec.Body, f[0]), &body)
				}
				if string(body[f[1]]) != want.tRaw || string(body[f[2]]) != want.topRaw {
					t.Errorf("call %d body %s=%s %s=%s, want %q %q", i, f[1], body[f[1]], f[2], body[f[2]], want.tRaw, want.topRaw)
				}
			}
		})
	}
}

func mustRaw(body []byte, key string) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	return m[key]
}

func sameFloat(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(v *float64) any {
	if v == nil {
		return "unset"
	}
	return *v
}

// TestSamplingRefused: each API refuses a setting out of its range, and
// OpenAI's reasoning models any temperature but the default, in the API's
// own words.
func TestSamplingRefused(t *testing.T) {
	for _, c := range []struct {
		api     llmtest.API
		c       rawCase
		wantErr string
	}{
		{llmtest.OpenAI, rawCase{path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":2.5}`}, "Expected a value <= 2"},
		{llmtest.OpenAI, rawCase{path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"top_p":-0.1}`}, "Expected a value >= 0"},
		{llmtest.OpenAI, rawCase{path: oaPath, body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`}, "expected a decimal"},
		{llmtest.OpenAI, rawCase{path: oaPath, body: `{"model":"o3-mini","messages":[{"role":"user","content":"hi"}],"temperature":0.2}`}, "Only the default (1) value is supported"},
		{llmtest.Anthropic, rawCase{path: anPath, body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"temperature":1.5}`}, "less than or equal to 1"},
		{llmtest.Gemini, rawCase{path: gmPath, body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"topP":1.5}}`}, "top_p"},
	} {
		srv := llmtest.Start(t, llmtest.Config{API: c.api, APIKey: testKey, Backend: llmtest.Replies(llm.Response{Text: "a"})})
		status, _, body := send(t, srv, c.api, c.c)
		if status != 400 || !strings.Contains(string(body), c.wantErr) {
			t.Errorf("%s: %d %s, want 400 saying %q", c.c.body, status, body, c.wantErr)
		}
	}
	// The o series at the default is taken.
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, APIKey: testKey, Backend: llmtest.Replies(llm.Response{Text: "a"})})
	if status, _, body := send(t, srv, llmtest.OpenAI, rawCase{path: oaPath, body: `{"model":"o3-mini","messages":[{"role":"user","content":"hi"}],"temperature":1}`}); status != 200 {
		t.Errorf("o3-mini at temperature 1: %d %s", status, body)
	}
}
