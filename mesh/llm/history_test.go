package llm

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestNormalizeHistory(t *testing.T) {
	call := func(id, name, args string) ToolCall {
		return ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	tests := []struct {
		name string
		in   []Message
		want []Message
	}{
		{
			name: "complete history unchanged",
			in:   roundTrip(),
			want: roundTrip(),
		},
		{
			name: "ids and arguments filled in",
			in: []Message{
				{Role: RoleUser, Content: "go"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("", "a", ""), call("", "b", "[1]")}},
				{Role: RoleTool, Content: "ra"},
				{Role: RoleTool, ToolName: "b", Content: "rb"},
			},
			want: []Message{
				{Role: RoleUser, Content: "go"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("call_1_0", "a", "{}"), call("call_1_1", "b", "{}")}},
				{Role: RoleTool, ToolCallID: "call_1_0", ToolName: "a", Content: "ra"},
				{Role: RoleTool, ToolCallID: "call_1_1", ToolName: "b", Content: "rb"},
			},
		},
		{
			name: "results matched by name, put in call order",
			in: []Message{
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("x", "a", "{}"), call("y", "b", "{}")}},
				{Role: RoleTool, ToolName: "b", Content: "rb"},
				{Role: RoleTool, ToolName: "a", Content: "ra"},
			},
			want: []Message{
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("x", "a", "{}"), call("y", "b", "{}")}},
				{Role: RoleTool, ToolCallID: "x", ToolName: "a", Content: "ra"},
				{Role: RoleTool, ToolCallID: "y", ToolName: "b", Content: "rb"},
			},
		},
		{
			name: "unanswered call gets an error result",
			in: []Message{
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("x", "a", "{}"), call("y", "b", "{}")}},
				{Role: RoleTool, ToolCallID: "x", Content: "ra"},
				{Role: RoleUser, Content: "never mind"},
			},
			want: []Message{
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("x", "a", "{}"), call("y", "b", "{}")}},
				{Role: RoleTool, ToolCallID: "x", ToolName: "a", Content: "ra"},
				{Role: RoleTool, ToolCallID: "y", ToolName: "b", Content: "no result: the call was not completed", IsError: true},
				{Role: RoleUser, Content: "never mind"},
			},
		},
		{
			name: "orphan result becomes user text after the results",
			in: []Message{
				{Role: RoleUser, Content: "go"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("x", "a", "{}")}},
				{Role: RoleTool, ToolCallID: "zzz", ToolName: "c", Content: "rc", IsError: true},
				{Role: RoleTool, ToolCallID: "x", Content: "ra"},
			},
			want: []Message{
				{Role: RoleUser, Content: "go"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{call("x", "a", "{}")}},
				{Role: RoleTool, ToolCallID: "x", ToolName: "a", Content: "ra"},
				{Role: RoleUser, Content: "[error of c]\nrc"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeHistory(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("normalizeHistory:\n got %s\nwant %s", mustJSON(got), mustJSON(tt.want))
			}
		})
	}
}

// Every provider sends histories that would otherwise break the APIs'
// pairing rules; the fakes enforce them.
func TestBrokenHistoriesAccepted(t *testing.T) {
	history := []Message{
		{Role: RoleUser, Content: "first"},
		{Role: RoleUser, Content: "second"},
		{Role: RoleAssistant, Content: ""},
		{Role: RoleAssistant, Content: "Let me look.", ToolCalls: []ToolCall{{Name: "list_items"}, {ID: "b", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Rome"}`)}}},
		{Role: RoleTool, ToolCallID: "b", Content: "20°C"},
		{Role: RoleTool, ToolCallID: "gone", ToolName: "create_item", Content: "created"},
		{Role: RoleUser, Content: "and?"},
	}
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(f.answer(okReply))
		p := f.provider(testOptions(nil))
		if _, err := p.Generate(t.Context(), Request{Messages: history, Tools: contractTools()}); err != nil {
			t.Fatalf("Generate: %v", err)
		}
		got := f.last().Messages
		var results []string
		for _, m := range got {
			if m.Result != nil {
				results = append(results, m.Result.Name+":"+m.Result.Content)
			}
		}
		want := []string{"list_items:no result: the call was not completed", "get_weather:20°C"}
		if !reflect.DeepEqual(results, want) {
			t.Errorf("results sent %q, want %q", results, want)
		}
	})
}
