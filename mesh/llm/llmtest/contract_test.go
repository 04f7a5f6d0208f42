package llmtest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// The package's own contract: the real providers of package llm, pointed at
// each server, send what the server decodes into the same llm.Request, and
// get back exactly what the backend answered — text, one call, parallel
// calls, text with a call, a tool result round trip — whole and streamed.

const testKey = "sk-llmtest-Zq8yX3pL0sWv5"

// target is one API and the model a client asks it for.
type target struct {
	name  string
	api   llmtest.API
	model string
}

// wireModel is the model name the client sends: model without its
// provider prefix.
func (tg target) wireModel() string {
	m, err := modelspec.ParseModel(tg.model)
	if err != nil {
		panic(err)
	}
	return m.Name
}

func targets() []target {
	return []target{
		{"openai", llmtest.OpenAI, "gpt-4o-mini"},
		{"anthropic", llmtest.Anthropic, "claude-sonnet-4-5"},
		{"gemini", llmtest.Gemini, "gemini-2.5-flash"},
		{"gemini3", llmtest.Gemini, "gemini-3-pro-preview"},
		{"ollama", llmtest.OpenAI, "ollama:llama3.2"},
	}
}

// client is the real provider of package llm for srv, with fast retries
// and no circuit breaker (ports, and so breakers, are reused across tests).
func client(t testing.TB, srv *llmtest.Server, model string, mod func(*llm.Options)) llm.Provider {
	t.Helper()
	m, err := modelspec.ParseModel(model)
	if err != nil {
		t.Fatal(err)
	}
	opts := llm.Options{BaseURL: srv.BaseURL(), APIKey: testKey, Timeout: 10 * time.Second, MaxRetries: 2,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond, BreakerFailures: -1}
	if mod != nil {
		mod(&opts)
	}
	p, err := llm.NewCloud(m, opts)
	if err != nil {
		t.Fatalf("llm.NewCloud(%s): %v", model, err)
	}
	return p
}

const contractSystem = "You are a terse weather assistant."

// contractTools are MCP-style tools, with the JSON Schema extras MCP servers
// send and a tool without arguments.
func contractTools() []llm.Tool {
	return []llm.Tool{
		{Name: "get_weather", Description: "Current weather of a city", Parameters: json.RawMessage(`{
			"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"location":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},
			"required":["location"],"additionalProperties":false}`)},
		{Name: "list_items", Description: "List every item", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		{Name: "create_item", Description: "Create an item", Parameters: json.RawMessage(`{
			"type":"object","properties":{"name":{"type":"string","minLength":1},"tags":{"type":["array","null"],"items":{"type":"string"}}},
			"required":["name"]}`)},
	}
}

func call(name, args string) llm.ToolCall {
	return llm.ToolCall{Name: name, Arguments: json.RawMessage(args)}
}

// roundTrip is a history where the model called two tools in parallel and
// one failed.
func roundTrip() []llm.Message {
	return []llm.Message{
		{Role: llm.RoleUser, Content: "Weather in Paris and in Atlantis?"},
		{Role: llm.RoleAssistant, Content: "Checking both.", ToolCalls: []llm.ToolCall{
			{ID: "run1-c1-0", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)},
			{ID: "run1-c1-1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Atlantis","unit":"celsius"}`)},
		}},
		{Role: llm.RoleTool, ToolCallID: "run1-c1-0", ToolName: "get_weather", Content: "18°C, sunny"},
		{Role: llm.RoleTool, ToolCallID: "run1-c1-1", ToolName: "get_weather", Content: "unknown city: Atlantis", IsError: true},
	}
}

type contractCase struct {
	name     string
	messages []llm.Message
	reply    llm.Response
}

func contractCases() []contractCase {
	ask := []llm.Message{{Role: llm.RoleUser, Content: "What's the weather in Paris?"}}
	return []contractCase{
		{"text", ask, llm.Response{Text: "Paris: 18°C and sunny.", Usage: llm.Usage{InputTokens: 31, OutputTokens: 9}}},
		{"tool_call", ask, llm.Response{ToolCalls: []llm.ToolCall{call("get_weather", `{"location":"Paris","unit":"celsius"}`)}, Usage: llm.Usage{InputTokens: 120, OutputTokens: 21}}},
		{"parallel_tool_calls", ask, llm.Response{ToolCalls: []llm.ToolCall{
			call("get_weather", `{"location":"Paris"}`), call("get_weather", `{"location":"Oslo","unit":"celsius"}`), call("list_items", `{}`),
		}, Usage: llm.Usage{InputTokens: 130, OutputTokens: 44}}},
		{"text_and_tool_call", ask, llm.Response{Text: "Creating it now.", ToolCalls: []llm.ToolCall{call("create_item", `{"name":"lamp","tags":["home"]}`)}, Usage: llm.Usage{InputTokens: 140, OutputTokens: 30}}},
		{"tool_result_round_trip", roundTrip(), llm.Response{Text: "Paris is 18°C and sunny; I could not find Atlantis.", Usage: llm.Usage{InputTokens: 210, OutputTokens: 17}}},
	}
}

func TestContract(t *testing.T) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []string{"whole", "stream"} {
				for _, c := range contractCases() {
					t.Run(mode+"/"+c.name, func(t *testing.T) {
						srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Model: tg.wireModel(), Backend: llmtest.Replies(c.reply)})
						runContract(t, srv, tg, c, mode == "stream")
					})
				}
			}
		})
	}
}

func runContract(t *testing.T, srv *llmtest.Server, tg target, c contractCase, stream bool) {
	p := client(t, srv, tg.model, nil)
	req := llm.Request{System: contractSystem, Messages: c.messages, Tools: contractTools()}
	var deltas []string
	if stream {
		req.OnText = func(d string) { deltas = append(deltas, d) }
	}
	resp, err := p.Generate(t.Context(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	recs := srv.Requests()
	if len(recs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(recs))
	}
	rec := recs[0]
	if rec.Status != 200 || rec.Stream != stream || rec.Model != tg.wireModel() {
		t.Errorf("record: status %d stream %v model %q, want 200 %v %q", rec.Status, rec.Stream, rec.Model, stream, tg.wireModel())
	}

	// What the server decoded is what the client meant.
	got := rec.Request
	if got.System != contractSystem {
		t.Errorf("system = %q, want %q", got.System, contractSystem)
	}
	if got.MaxTokens != 4096 {
		t.Errorf("max tokens = %d, want the provider's default 4096", got.MaxTokens)
	}
	if got.Temperature != nil || got.TopP != nil {
		t.Errorf("temperature %v top_p %v sent with no settings, want the API's defaults", got.Temperature, got.TopP)
	}
	checkTools(t, got.Tools)
	checkMessages(t, tg, got.Messages, c.messages)

	// What the client got is what the backend answered.
	if resp.Text != c.reply.Text {
		t.Errorf("Text = %q, want %q", resp.Text, c.reply.Text)
	}
	if stream && strings.Join(deltas, "") != c.reply.Text {
		t.Errorf("deltas %q do not join into %q", deltas, c.reply.Text)
	}
	if stream && c.reply.Text != "" && len(deltas) < 2 {
		t.Errorf("deltas %q: want the text streamed in pieces", deltas)
	}
	if resp.Usage != c.reply.Usage {
		t.Errorf("Usage = %+v, want %+v", resp.Usage, c.reply.Usage)
	}
	if len(resp.ToolCalls) != len(c.reply.ToolCalls) {
		t.Fatalf("ToolCalls = %+v, want %d", resp.ToolCalls, len(c.reply.ToolCalls))
	}
	ids := map[string]bool{}
	for i, tc := range resp.ToolCalls {
		want := c.reply.ToolCalls[i]
		if tc.Name != want.Name || canonical(tc.Arguments) != canonical(want.Arguments) {
			t.Errorf("ToolCalls[%d] = %s(%s), want %s(%s)", i, tc.Name, tc.Arguments, want.Name, want.Arguments)
		}
		if tc.ID == "" || ids[tc.ID] {
			t.Errorf("ToolCalls[%d].ID = %q, want unique and non-empty", i, tc.ID)
		}
		ids[tc.ID] = true
	}
	if len(c.reply.ToolCalls) > 0 && tg.api != llmtest.Gemini {
		// The server makes up ids in the API's shape.
		prefix := map[llmtest.API]string{llmtest.OpenAI: "call_", llmtest.Anthropic: "toolu_"}[tg.api]
		if !strings.HasPrefix(resp.ToolCalls[0].ID, prefix) {
			t.Errorf("call id %q, want one starting with %s", resp.ToolCalls[0].ID, prefix)
		}
	}
}

// checkTools: every tool declared, with its properties.
func checkTools(t *testing.T, got []llm.Tool) {
	t.Helper()
	want := contractTools()
	if len(got) != len(want) {
		t.Fatalf("%d tools, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Description != want[i].Description {
			t.Errorf("tool %d = %s %q, want %s %q", i, got[i].Name, got[i].Description, want[i].Name, want[i].Description)
		}
		if g, w := properties(got[i].Parameters), properties(want[i].Parameters); !reflect.DeepEqual(g, w) {
			t.Errorf("tool %s properties = %v, want %v", want[i].Name, g, w)
		}
	}
}

// checkMessages compares the decoded history with what the client sent:
// roles, texts, calls, and results linked to their calls.
func checkMessages(t *testing.T, tg target, got, sent []llm.Message) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("decoded %d messages, want %d:\n%s", len(got), len(sent), mustJSON(got))
	}
	var calls []llm.ToolCall
	for i, m := range got {
		w := sent[i]
		if tg.api == llmtest.OpenAI && w.Role == llm.RoleTool && w.IsError {
			// No error flag on the wire: the provider says it in the text.
			w.Content, w.IsError = "Error: "+w.Content, false
		}
		if m.Role != w.Role || m.Content != w.Content || m.IsError != w.IsError {
			t.Errorf("message %d = %s %q (error %v), want %s %q (error %v)", i, m.Role, m.Content, m.IsError, w.Role, w.Content, w.IsError)
		}
		if len(m.ToolCalls) != len(w.ToolCalls) {
			t.Fatalf("message %d: %d calls, want %d", i, len(m.ToolCalls), len(w.ToolCalls))
		}
		for j, c := range m.ToolCalls {
			if c.Name != w.ToolCalls[j].Name || canonical(c.Arguments) != canonical(w.ToolCalls[j].Arguments) {
				t.Errorf("message %d call %d = %s(%s), want %s(%s)", i, j, c.Name, c.Arguments, w.ToolCalls[j].Name, w.ToolCalls[j].Arguments)
			}
			if tg.api != llmtest.Gemini && c.ID != w.ToolCalls[j].ID {
				t.Errorf("message %d call %d id = %q, want %q", i, j, c.ID, w.ToolCalls[j].ID)
			}
		}
		if len(m.ToolCalls) > 0 {
			calls = m.ToolCalls
		}
		if m.Role == llm.RoleTool {
			k := slicesIndex(calls, m.ToolCallID)
			if k < 0 || calls[k].Name != m.ToolName || m.ToolName != w.ToolName {
				t.Errorf("message %d: result of %q (%s) answers no call of %s", i, m.ToolCallID, m.ToolName, mustJSON(calls))
			}
		}
	}
}

func slicesIndex(calls []llm.ToolCall, id string) int {
	for k, c := range calls {
		if c.ID == id {
			return k
		}
	}
	return -1
}

func properties(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	var names []string
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func canonical(raw []byte) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "INVALID JSON: " + string(raw)
	}
	return string(mustJSON(v))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestOfflineBackend: the default backend plans tool calls from the
// request, and reports their results, over every API.
func TestOfflineBackend(t *testing.T) {
	tools := []llm.Tool{
		{Name: "resources_list", Description: "List resources", ReadOnly: true, Parameters: json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"}}}`)},
		{Name: "resources_add", Description: "Add a resource", Destructive: true, Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"value":{"type":"integer"}},"required":["name","value"]}`)},
	}
	for _, tg := range targets() {
		for _, stream := range []bool{false, true} {
			t.Run(tg.name+map[bool]string{false: "/whole", true: "/stream"}[stream], func(t *testing.T) {
				t.Parallel()
				srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey})
				p := client(t, srv, tg.model, nil)
				gen := func(msgs []llm.Message) *llm.Response {
					req := llm.Request{System: "You manage resources.", Messages: msgs, Tools: tools}
					if stream {
						req.OnText = func(string) {}
					}
					resp, err := p.Generate(t.Context(), req)
					if err != nil {
						t.Fatalf("Generate: %v", err)
					}
					return resp
				}
				msgs := []llm.Message{{Role: llm.RoleUser, Content: "create a server my-test with value 42"}}
				resp := gen(msgs)
				if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "resources_add" || canonical(resp.ToolCalls[0].Arguments) != `{"name":"my-test","value":42}` {
					t.Fatalf("calls = %+v, want resources_add my-test 42", resp.ToolCalls)
				}
				if resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
					t.Errorf("usage = %+v, want counts", resp.Usage)
				}
				tc := resp.ToolCalls[0]
				msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "turn1-c1-0", Name: tc.Name, Arguments: tc.Arguments}}},
					llm.Message{Role: llm.RoleTool, ToolCallID: "turn1-c1-0", ToolName: tc.Name, Content: `{"id":"res_1","name":"my-test","value":42}`})
				resp = gen(msgs)
				if len(resp.ToolCalls) != 0 || !strings.Contains(resp.Text, "my-test") {
					t.Errorf("answer = %q %+v, want a report naming my-test", resp.Text, resp.ToolCalls)
				}
			})
		}
	}
}

// TestConcurrentRequests: one server answers many clients at once.
func TestConcurrentRequests(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.Anthropic, APIKey: testKey})
	p := client(t, srv, "claude-haiku-4-5", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := p.Generate(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}, OnText: func(string) {}})
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := len(srv.Answered()); n != 16 {
		t.Errorf("%d answered, want 16", n)
	}
}

// TestNoRecords: a server that keeps no records answers as any other,
// whole, streamed and refused, and counts what it received.
func TestNoRecords(t *testing.T) {
	for _, tg := range targets()[:3] {
		t.Run(tg.name, func(t *testing.T) {
			srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, NoRecords: true, Backend: llmtest.Replies(llm.Response{Text: "Hello there!"})})
			p := client(t, srv, tg.model, nil)
			for _, stream := range []bool{false, true} {
				resp, err := p.Generate(t.Context(), hello(stream))
				if err != nil || resp.Text != "Hello there!" {
					t.Fatalf("stream %v: %+v, %v; want the backend's text", stream, resp, err)
				}
			}
			bad := client(t, srv, tg.model, func(o *llm.Options) { o.APIKey = "wrong" })
			if _, err := bad.Generate(t.Context(), hello(false)); err == nil {
				t.Fatal("a wrong key was answered")
			}
			if n := srv.Count(); n != 3 {
				t.Errorf("Count = %d, want 3", n)
			}
			if r := srv.Requests(); len(r) != 0 {
				t.Errorf("Requests = %d records, want none", len(r))
			}
		})
	}
}

// TestBaseURLForms: a base URL with the version path works for every API,
// and a model the server does not serve is a 404 naming the base URL.
func TestBaseURLForms(t *testing.T) {
	for _, tc := range []struct {
		target
		suffix string
	}{
		{targets()[1], "/v1"}, {targets()[2], "/v1beta"}, {targets()[2], "/v1"}, {targets()[0], "/chat/completions"},
	} {
		t.Run(tc.name+tc.suffix, func(t *testing.T) {
			srv := llmtest.Start(t, llmtest.Config{API: tc.api, APIKey: testKey, Backend: llmtest.Replies()})
			p := client(t, srv, tc.model, func(o *llm.Options) { o.BaseURL += tc.suffix })
			if tc.api != llmtest.OpenAI {
				p = client(t, srv, tc.model, func(o *llm.Options) { o.BaseURL = srv.URL + tc.suffix })
			}
			if _, err := p.Generate(t.Context(), hello(true)); err != nil {
				t.Errorf("base URL with %s: %v", tc.suffix, err)
			}
		})
	}
	for _, tg := range targets()[:3] {
		srv := llmtest.Start(t, llmtest.Config{API: tg.api, APIKey: testKey, Model: "another-model"})
		_, err := client(t, srv, tg.model, nil).Generate(t.Context(), hello(false))
		if e := llmError(t, err); e.Status != http.StatusNotFound || !strings.Contains(e.Message, "check the model name and the base URL") {
			t.Errorf("%s: unknown model: %v, want a 404 naming the base URL", tg.name, err)
		}
	}
}
