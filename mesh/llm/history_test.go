package llm_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

func TestNormalizeHistory(t *testing.T) {
	call := func(id, name, args string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	tests := []struct {
		name string
		in   []llm.Message
		want []llm.Message
	}{
		{
			name: "complete history unchanged",
			in:   roundTrip(),
			want: roundTrip(),
		},
		{
			name: "ids and arguments filled in",
			in: []llm.Message{
				{Role: llm.RoleUser, Content: "go"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("", "a", ""), call("", "b", "[1]")}},
				{Role: llm.RoleTool, Content: "ra"},
				{Role: llm.RoleTool, ToolName: "b", Content: "rb"},
			},
			want: []llm.Message{
				{Role: llm.RoleUser, Content: "go"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("call_1_0", "a", "{}"), call("call_1_1", "b", "{}")}},
				{Role: llm.RoleTool, ToolCallID: "call_1_0", ToolName: "a", Content: "ra"},
				{Role: llm.RoleTool, ToolCallID: "call_1_1", ToolName: "b", Content: "rb"},
			},
		},
		{
			name: "results matched by name, put in call order",
			in: []llm.Message{
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("x", "a", "{}"), call("y", "b", "{}")}},
				{Role: llm.RoleTool, ToolName: "b", Content: "rb"},
				{Role: llm.RoleTool, ToolName: "a", Content: "ra"},
			},
			want: []llm.Message{
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("x", "a", "{}"), call("y", "b", "{}")}},
				{Role: llm.RoleTool, ToolCallID: "x", ToolName: "a", Content: "ra"},
				{Role: llm.RoleTool, ToolCallID: "y", ToolName: "b", Content: "rb"},
			},
		},
		{
			name: "unanswered call gets an error result",
			in: []llm.Message{
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("x", "a", "{}"), call("y", "b", "{}")}},
				{Role: llm.RoleTool, ToolCallID: "x", Content: "ra"},
				{Role: llm.RoleUser, Content: "never mind"},
			},
			want: []llm.Message{
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("x", "a", "{}"), call("y", "b", "{}")}},
				{Role: llm.RoleTool, ToolCallID: "x", ToolName: "a", Content: "ra"},
				{Role: llm.RoleTool, ToolCallID: "y", ToolName: "b", Content: "no result: the call was not completed", IsError: true},
				{Role: llm.RoleUser, Content: "never mind"},
			},
		},
		{
			name: "orphan result becomes user text after the results",
			in: []llm.Message{
				{Role: llm.RoleUser, Content: "go"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("x", "a", "{}")}},
				{Role: llm.RoleTool, ToolCallID: "zzz", ToolName: "c", Content: "rc", IsError: true},
				{Role: llm.RoleTool, ToolCallID: "x", Content: "ra"},
			},
			want: []llm.Message{
				{Role: llm.RoleUser, Content: "go"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("x", "a", "{}")}},
				{Role: llm.RoleTool, ToolCallID: "x", ToolName: "a", Content: "ra"},
				{Role: llm.RoleUser, Content: "[error of c]\nrc"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := llm.NormalizeHistory(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("normalizeHistory:\n got %s\nwant %s", mustJSON(got), mustJSON(tt.want))
			}
		})
	}
}

// Every provider sends histories that would otherwise break the APIs'
// pairing rules; the servers and checkRequest enforce them.
func TestBrokenHistoriesAccepted(t *testing.T) {
	history := []llm.Message{
		{Role: llm.RoleUser, Content: "first"},
		{Role: llm.RoleUser, Content: "second"},
		{Role: llm.RoleAssistant, Content: ""},
		{Role: llm.RoleAssistant, Content: "Let me look.", ToolCalls: []llm.ToolCall{{Name: "list_items"}, {ID: "b", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Rome"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "b", Content: "20°C"},
		{Role: llm.RoleTool, ToolCallID: "gone", ToolName: "create_item", Content: "created"},
		{Role: llm.RoleUser, Content: "and?"},
	}
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		p := f.provider(testOptions(nil))
		if _, err := p.Generate(t.Context(), llm.Request{Messages: history, Tools: contractTools()}); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		var results []string
		for _, m := range f.sent(f.last()) {
			if m.Role == llm.RoleTool {
				results = append(results, m.ToolName+":"+m.Content)
			}
		}
		want := []string{"list_items:no result: the call was not completed", "get_weather:20°C"}
		if !reflect.DeepEqual(results, want) {
			t.Errorf("results sent %q, want %q", results, want)
		}
	})
}
