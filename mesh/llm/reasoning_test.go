package llm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

const thought = "The user wants the weather; I should call get_weather for Paris first."

// reasoningFake starts a server of w whose model reasons (thought) before
// answering with rps.
func reasoningFake(t *testing.T, w wire, rps ...reply) *fake {
	t.Helper()
	key := testKey
	if w.name == "ollama" {
		key = ""
	}
	srv := llmtest.Start(t, llmtest.Config{API: w.api, APIKey: key, Backend: answers(rps...), Reasoning: thought})
	llm.ForgetBreakers(srv.URL)
	t.Cleanup(func() { llm.ForgetBreakers(srv.URL) })
	return &fake{Server: srv, t: t, w: w}
}

func reasoningOn(o *llm.Options) { o.Reasoning = modelspec.Reasoning{Effort: modelspec.EffortMedium} }

func TestReasoningReachesTheCaller(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		for _, streamed := range []bool{true, false} {
			name := map[bool]string{true: "stream", false: "whole"}[streamed]
			t.Run(name, func(t *testing.T) {
				f := reasoningFake(t, w, reply{Text: []string{"Sunny ", "in Paris."}})
				req := ask()
				var text, reasoning []string
				req.OnText = func(d string) { text = append(text, d) }
				req.OnReasoning = func(d string) { reasoning = append(reasoning, d) }
				if !streamed {
					req.OnText, req.OnReasoning = nil, nil
				}
				resp, err := f.provider(testOptions(reasoningOn)).Generate(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Text != "Sunny in Paris." || resp.Reasoning != thought {
					t.Errorf("text %q, reasoning %q; want the answer apart from the reasoning %q", resp.Text, resp.Reasoning, thought)
				}
				if streamed && (strings.Join(reasoning, "") != thought || len(reasoning) < 2 || strings.Join(text, "") != resp.Text) {
					t.Errorf("streamed reasoning %q and text %q: want the reasoning in pieces, apart from the text", reasoning, text)
				}
				wantThoughts := 0
				if w.api == llmtest.Anthropic {
					wantThoughts = 1
				}
				if len(resp.Thoughts) != wantThoughts || wantThoughts == 1 && (resp.Thoughts[0].Text != thought || resp.Thoughts[0].Signature == "") {
					t.Errorf("thoughts %+v, want %d (Anthropic's signed thinking block only)", resp.Thoughts, wantThoughts)
				}
			})
		}
	})
}

func TestReasoningRequest(t *testing.T) {
	tests := []struct {
		w      wire
		r      modelspec.Reasoning
		want   string // in the body
		absent string // not in the body
	}{
		{w: anthropicWire, r: modelspec.Reasoning{BudgetTokens: 2048}, want: `"thinking":{"type":"enabled","budget_tokens":2048}`, absent: `"temperature"`},
		{w: anthropicWire, r: modelspec.Reasoning{Effort: "low"}, want: `"budget_tokens":1024`},
		{w: openAIWire, r: modelspec.Reasoning{Effort: "high"}, want: `"reasoning_effort":"high"`},
		{w: geminiWire, r: modelspec.Reasoning{Effort: "medium"}, want: `"thinkingConfig":{"includeThoughts":true,"thinkingBudget":4096}`},
		{w: wire{"gemini 3", llmtest.Gemini, "google:gemini-3-pro-preview"}, r: modelspec.Reasoning{Effort: "low"}, want: `"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"low"}`},
		{w: openAIWire, want: `"model"`, absent: `reasoning_effort`},
		{w: anthropicWire, want: `"model"`, absent: `"thinking"`},
		{w: geminiWire, want: `"model"`, absent: `thinkingConfig`},
	}
	for _, tt := range tests {
		t.Run(tt.w.name+" "+tt.want, func(t *testing.T) {
			f := newFake(t, tt.w)
			temp := 0.3
			p := f.provider(testOptions(func(o *llm.Options) { o.Reasoning, o.Temperature = tt.r, &temp }))
			if _, err := p.Generate(t.Context(), ask()); err != nil {
				t.Fatal(err)
			}
			body := string(f.last().Body)
			if tt.want != `"model"` && !strings.Contains(body, tt.want) || tt.absent != "" && strings.Contains(body, tt.absent) {
				t.Errorf("body %s\nwant %s in it and no %s", body, tt.want, tt.absent)
			}
		})
	}
}

// TestAnthropicThinkingGoesBackWithToolUse: the signed thinking block of a
// tool_use turn is sent back unchanged, first, in the next call; the fake
// refuses the call as the API does when it is missing or altered.
func TestAnthropicThinkingGoesBackWithToolUse(t *testing.T) {
	f := reasoningFake(t, anthropicWire, reply{Calls: []fakeCall{{Name: "get_weather", Args: `{"location":"Paris"}`}}}, reply{Text: []string{"Sunny."}})
	p := f.provider(testOptions(reasoningOn))
	req := ask()
	req.OnText = func(string) {}
	first, err := p.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.ToolCalls) != 1 || len(first.Thoughts) != 1 {
		t.Fatalf("first answer %+v: want one call and its thinking", first)
	}
	next := func(thoughts []llm.Thought) error {
		r := ask()
		r.Messages = append(r.Messages,
			llm.Message{Role: llm.RoleAssistant, ToolCalls: first.ToolCalls, Thoughts: thoughts},
			llm.Message{Role: llm.RoleTool, ToolCallID: first.ToolCalls[0].ID, ToolName: "get_weather", Content: "sunny"})
		_, err := p.Generate(t.Context(), r)
		return err
	}
	if err := next(first.Thoughts); err != nil {
		t.Fatalf("thinking sent back: %v", err)
	}
	got := f.last().Request.Messages[1].Thoughts
	if len(got) != 1 || got[0] != first.Thoughts[0] {
		t.Errorf("thinking sent back %+v, want %+v unchanged", got, first.Thoughts)
	}
	if err := next(nil); err == nil || !strings.Contains(err.Error(), "must start with a thinking block") {
		t.Errorf("without the thinking block: %v, want the API's refusal", err)
	}
	altered := []llm.Thought{{Text: first.Thoughts[0].Text, Signature: "forged"}}
	if err := next(altered); err == nil || !strings.Contains(err.Error(), "Invalid `signature`") {
		t.Errorf("with an altered signature: %v, want the API's refusal", err)
	}
}

func TestThoughtsStayWithAnthropic(t *testing.T) {
	for _, w := range []wire{openAIWire, geminiWire} {
		t.Run(w.name, func(t *testing.T) {
			f := newFake(t, w)
			r := ask()
			r.Messages = append(r.Messages,
				llm.Message{Role: llm.RoleAssistant, Content: "Noted.", Thoughts: []llm.Thought{{Text: "secret plan", Signature: "sig"}}},
				llm.Message{Role: llm.RoleUser, Content: "go on"})
			if _, err := f.provider(testOptions(reasoningOn)).Generate(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			if body := string(f.last().Body); strings.Contains(body, "secret plan") || strings.Contains(body, `"sig"`) {
				t.Errorf("body %s carries the reasoning back", body)
			}
		})
	}
}

func TestAnthropicPromptCache(t *testing.T) {
	tools := []llm.Tool{
		{Name: "a", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "b", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "on by default", true: "off"}[off], func(t *testing.T) {
			f := newFake(t, anthropicWire)
			p := f.provider(testOptions(func(o *llm.Options) { o.NoPromptCache = off }))
			req := ask()
			req.System, req.Tools = "You are terse.", tools
			if _, err := p.Generate(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			var body struct {
				System any `json:"system"`
				Tools  []struct {
					Name         string          `json:"name"`
					CacheControl json.RawMessage `json:"cache_control"`
				} `json:"tools"`
				Messages json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(f.last().Body, &body); err != nil {
				t.Fatal(err)
			}
			marks := strings.Count(string(f.last().Body), `"cache_control"`)
			if off {
				if marks != 0 || body.System != "You are terse." {
					t.Errorf("prompt_cache off: %d cache_control marks, system %v; want none and a plain system", marks, body.System)
				}
				return
			}
			blocks, _ := body.System.([]any)
			if len(blocks) != 1 || !strings.Contains(mustMarshal(blocks[0]), `"cache_control":{"type":"ephemeral"}`) {
				t.Errorf("system %v, want one text block marked ephemeral", body.System)
			}
			if string(body.Tools[1].CacheControl) != `{"type":"ephemeral"}` || body.Tools[0].CacheControl != nil {
				t.Errorf("tools %+v: want the last tool marked, and only it", body.Tools)
			}
			if strings.Contains(string(body.Messages), "cache_control") || marks != 2 {
				t.Errorf("%d marks, messages %s: want the stable prefix marked, not the history", marks, body.Messages)
			}
		})
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestStructuredOutputRequest(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	for _, w := range []wire{openAIWire, anthropicWire, geminiWire} {
		t.Run(w.name, func(t *testing.T) {
			f := newFake(t, w, reply{Text: []string{`{"city":"Paris"}`}})
			req := ask()
			req.Tools = nil
			req.Output = &llm.Output{Name: "place", Schema: schema}
			resp, err := f.provider(testOptions(nil)).Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != `{"city":"Paris"}` || len(resp.ToolCalls) != 0 {
				t.Errorf("answer %q, calls %v; want the object as text", resp.Text, resp.ToolCalls)
			}
			body := string(f.last().Body)
			want := map[llmtest.API]string{
				llmtest.OpenAI:    `"response_format":{"type":"json_schema","json_schema":{"name":"place","schema":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"},"strict":false}}`,
				llmtest.Anthropic: `"tool_choice":{"type":"tool","name":"place"}`,
				llmtest.Gemini:    `"responseMimeType":"application/json","responseJsonSchema":{"properties"`,
			}[w.api]
			if !strings.Contains(body, want) {
				t.Errorf("body %s\nwant %s", body, want)
			}
		})
	}
}

// TestStructuredOutputWithTools: where the API cannot ask for a schema and
// tools in one call, the schema is asked for in the system prompt.
func TestStructuredOutputWithTools(t *testing.T) {
	for _, w := range []wire{anthropicWire, geminiWire} {
		t.Run(w.name, func(t *testing.T) {
			f := newFake(t, w)
			req := ask()
			req.System = "Be terse."
			req.Tools = []llm.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
			req.Output = &llm.Output{Schema: json.RawMessage(`{"type":"object"}`)}
			if _, err := f.provider(testOptions(nil)).Generate(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			sys := f.last().Request.System
			if !strings.HasPrefix(sys, "Be terse.\n\n") || !strings.Contains(sys, `JSON Schema:`+"\n"+`{"type":"object"}`) {
				t.Errorf("system %q, want the prompt then the schema", sys)
			}
		})
	}
}

// TestOpenAIReasoningFieldsOfCompatibleServers: reasoning_content
// (DeepSeek, vLLM) and reasoning (Ollama) are reasoning text; a reasoning
// field that is no string is neither read nor refused.
func TestOpenAIReasoningFieldsOfCompatibleServers(t *testing.T) {
	chunk := func(delta string) string {
		return "data: {\"choices\":[{\"index\":0,\"delta\":" + delta + ",\"finish_reason\":null}]}\n\n"
	}
	end := "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	tests := []struct{ name, body, want string }{
		{"reasoning_content", chunk(`{"reasoning_content":"Think"}`) + chunk(`{"reasoning_content":"ing."}`) + chunk(`{"content":"Hi"}`) + end, "Thinking."},
		{"reasoning", chunk(`{"role":"assistant","content":"","reasoning":"Hmm."}`) + chunk(`{"content":"Hi"}`) + end, "Hmm."},
		{"an object", chunk(`{"reasoning":{"effort":"low"}}`) + chunk(`{"content":"Hi"}`) + end, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, openAIWire)
			f.Fail(stream(tt.body))
			req := ask()
			var got strings.Builder
			req.OnText = func(string) {}
			req.OnReasoning = func(d string) { got.WriteString(d) }
			resp, err := f.provider(testOptions(nil)).Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Hi" || resp.Reasoning != tt.want || got.String() != tt.want {
				t.Errorf("text %q, reasoning %q, streamed %q; want Hi and %q", resp.Text, resp.Reasoning, got.String(), tt.want)
			}
		})
	}
}
