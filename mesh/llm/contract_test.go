package llm_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// The contract every cloud provider keeps, run against each through an
// llmtest server that speaks its API: text, one call, parallel calls, text
// with a call, results sent back as native tool results, streaming, usage.

const contractSystem = "You are a terse weather assistant."

// contractTools are MCP-style tools, with the JSON Schema extras MCP
// servers send ($schema, additionalProperties) and a tool without
// arguments.
func contractTools() []llm.Tool {
	return []llm.Tool{
		{Name: "get_weather", Description: "Current weather of a city", ReadOnly: true, Parameters: json.RawMessage(`{
			"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"location":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},
			"required":["location"],"additionalProperties":false}`)},
		{Name: "list_items", Description: "List every item", ReadOnly: true, Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		{Name: "create_item", Description: "Create an item", Destructive: true, Parameters: json.RawMessage(`{
			"type":"object","properties":{"name":{"type":"string","minLength":1},"tags":{"type":["array","null"],"items":{"type":"string"}},
			"count":{"type":"integer","minimum":0,"default":1}},"required":["name"]}`)},
	}
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
	reply    reply
	// want is the history the request must hold, as the server decoded
	// it (fake.sent).
	want []llm.Message
	// golden names the golden file of the request body, if any.
	golden bool
}

func contractCases() []contractCase {
	ask := "What's the weather in Paris?"
	return []contractCase{
		{
			name: "text", messages: userTurn(ask), golden: true,
			reply: reply{Text: []string{"Paris: ", "18°C ", "and sunny."}, Usage: llm.Usage{InputTokens: 31, OutputTokens: 9}},
			want:  userTurn(ask),
		},
		{
			name: "tool_call", messages: userTurn(ask),
			reply: reply{Calls: []fakeCall{{Name: "get_weather", Args: `{"location":"Paris","unit":"celsius"}`}}, Usage: llm.Usage{InputTokens: 120, OutputTokens: 21}},
			want:  userTurn(ask),
		},
		{
			name: "parallel_tool_calls", messages: userTurn("Weather in Paris and Oslo, and list the items"),
			reply: reply{Calls: []fakeCall{
				{Name: "get_weather", Args: `{"location":"Paris"}`},
				{Name: "get_weather", Args: `{"location":"Oslo","unit":"celsius"}`},
				{Name: "list_items"},
			}, Usage: llm.Usage{InputTokens: 130, OutputTokens: 44}},
			want: userTurn("Weather in Paris and Oslo, and list the items"),
		},
		{
			name: "text_and_tool_call", messages: userTurn("Create an item called lamp"),
			reply: reply{Text: []string{"Creating ", "it now."}, Calls: []fakeCall{{Name: "create_item", Args: `{"name":"lamp","tags":["home"]}`}}, Usage: llm.Usage{InputTokens: 140, OutputTokens: 30}},
			want:  userTurn("Create an item called lamp"),
		},
		{
			name: "tool_result_round_trip", messages: roundTrip(), golden: true,
			reply: reply{Text: []string{"Paris is 18°C and sunny; ", "I could not find Atlantis."}, Usage: llm.Usage{InputTokens: 210, OutputTokens: 17}},
			want:  roundTrip(),
		},
	}
}

func TestProviderContract(t *testing.T) {
	for _, w := range wires() {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []string{"whole", "stream"} {
				t.Run(mode, func(t *testing.T) {
					for _, c := range contractCases() {
						t.Run(c.name, func(t *testing.T) {
							runContractCase(t, w, c, mode == "stream")
						})
					}
				})
			}
		})
	}
}

func runContractCase(t *testing.T, w wire, c contractCase, stream bool) {
	f := newFake(t, w, c.reply)
	p := f.provider(testOptions(nil))
	req := llm.Request{System: contractSystem, Messages: c.messages, Tools: contractTools()}
	var deltas []string
	if stream {
		req.OnText = func(d string) { deltas = append(deltas, d) }
	}
	resp, err := p.Generate(t.Context(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if n := f.Count(); n != 1 {
		t.Errorf("provider sent %d requests, want 1", n)
	}

	// What the provider sent.
	got := f.last()
	if got.Stream != stream {
		t.Errorf("request stream = %v, want %v", got.Stream, stream)
	}
	if got.Request.System != contractSystem {
		t.Errorf("system prompt = %q, want %q", got.Request.System, contractSystem)
	}
	if got.Request.MaxTokens != llm.DefaultMaxTokens {
		t.Errorf("max tokens = %d, want the default %d", got.Request.MaxTokens, llm.DefaultMaxTokens)
	}
	checkTools(t, w, got)
	if sent, want := f.sent(got), neutral(w, c.want); !reflect.DeepEqual(sent, want) {
		t.Errorf("messages sent:\n%s\nwant:\n%s", mustJSON(sent), mustJSON(want))
	}
	if c.golden {
		mode := "whole"
		if stream {
			mode = "stream"
		}
		golden(t, w.name+"_"+c.name+"_"+mode, got.Body)
	}

	// What the provider answered.
	if wantText := strings.Join(c.reply.Text, ""); resp.Text != wantText {
		t.Errorf("Text = %q, want %q", resp.Text, wantText)
	}
	if stream {
		if !reflect.DeepEqual(deltas, nonEmpty(c.reply.Text)) {
			t.Errorf("OnText deltas = %q, want %q in order", deltas, c.reply.Text)
		}
	}
	if resp.Usage != c.reply.Usage {
		t.Errorf("Usage = %+v, want %+v", resp.Usage, c.reply.Usage)
	}
	if resp.StopReason == "" {
		t.Error("StopReason is empty")
	}
	if len(resp.ToolCalls) != len(c.reply.Calls) {
		t.Fatalf("ToolCalls = %+v, want %d calls", resp.ToolCalls, len(c.reply.Calls))
	}
	ids := map[string]bool{}
	for i, call := range resp.ToolCalls {
		wc := c.reply.Calls[i]
		wantArgs := wc.Args
		if wantArgs == "" {
			wantArgs = "{}"
		}
		if call.Name != wc.Name || canonical(call.Arguments) != canonical([]byte(wantArgs)) {
			t.Errorf("ToolCalls[%d] = %s(%s), want %s(%s)", i, call.Name, call.Arguments, wc.Name, wantArgs)
		}
		if call.ID == "" || ids[call.ID] {
			t.Errorf("ToolCalls[%d].ID = %q: want a unique, non-empty id", i, call.ID)
		}
		ids[call.ID] = true
	}
}

// checkTools verifies the declarations of rec: every tool, described, with
// its schema as the API takes it.
func checkTools(t *testing.T, w wire, rec llmtest.Record) {
	t.Helper()
	got := rec.Request.Tools
	tools := contractTools()
	if len(got) != len(tools) {
		t.Fatalf("%d tools declared, want %d", len(got), len(tools))
	}
	declared := geminiDeclared(rec.Body)
	for i, tool := range tools {
		g := got[i]
		if g.Name != tool.Name || g.Description != tool.Description {
			t.Errorf("tool %d = %s %q, want %s %q", i, g.Name, g.Description, tool.Name, tool.Description)
		}
		if w.api != llmtest.Gemini {
			if canonical(g.Parameters) != canonical(tool.Parameters) {
				t.Errorf("tool %s schema = %s, want the MCP schema unchanged %s", tool.Name, g.Parameters, tool.Parameters)
			}
			continue
		}
		// Gemini: same properties, its own subset (the server refuses the rest).
		if wantProps := propertyNames(tool.Parameters); len(wantProps) == 0 {
			if params := declared[tool.Name]; params != nil {
				t.Errorf("tool %s takes no arguments but declares parameters %s", tool.Name, params)
			}
		} else if gotProps := propertyNames(g.Parameters); !reflect.DeepEqual(gotProps, wantProps) {
			t.Errorf("tool %s properties = %v, want %v", tool.Name, gotProps, wantProps)
		}
	}
}

// geminiDeclared is the parameters of each function a Gemini request
// body declares, nil when it declares none.
func geminiDeclared(body []byte) map[string]json.RawMessage {
	var req struct {
		Tools []struct {
			FunctionDeclarations []struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &req)
	out := map[string]json.RawMessage{}
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			out[d.Name] = d.Parameters
		}
	}
	return out
}

func propertyNames(schema json.RawMessage) []string {
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

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
