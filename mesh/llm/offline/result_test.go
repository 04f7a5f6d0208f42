package offline

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// afterCall is a history in which the user asked, the planner called tool
// with id "call_1", and the tool answered content.
func afterCall(user, tool, content string, isError bool) []llm.Message {
	return []llm.Message{
		{Role: llm.RoleUser, Content: user},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: tool, Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleTool, ToolCallID: "call_1", ToolName: tool, Content: content, IsError: isError},
	}
}

func TestOfflineReport(t *testing.T) {
	longList := `{"resources":[` + strings.Repeat(`{"id":"res_000000000000","name":"padding","value":1},`, 60) + `{"id":"res_1","name":"last","value":2}],"count":61}`
	tests := []struct {
		name        string
		tools       []llm.Tool
		msgs        []llm.Message
		contains    []string
		notContains []string
	}{
		{
			name:  "list",
			tools: resourceTools(),
			msgs: afterCall("list all resources", "resources_list",
				`{"resources":[{"id":"res_0a1b2c3d4e5f","name":"test-1","value":10,"created_at":"2025-01-01T00:00:00Z"},{"id":"res_1","name":"test-2","value":20}],"count":2}`, false),
			contains: []string{
				"Found 2 resources:",
				"- test-1 (value 10, id res_0a1b2c3d4e5f)",
				"- test-2 (value 20, id res_1)",
			},
			notContains: []string{"Result of", `{"resources"`},
		},
		{
			name:        "empty list",
			tools:       resourceTools(),
			msgs:        afterCall("list", "resources_list", `{"resources":[],"count":0}`, false),
			contains:    []string{"There are no resources."},
			notContains: []string{`{"resources"`},
		},
		{
			name:     "bare array",
			tools:    resourceTools(),
			msgs:     afterCall("list", "resources_list", `[{"name":"a","value":1}]`, false),
			contains: []string{"Found 1 resource:", "- a (value 1)"},
		},
		{
			name:        "created",
			tools:       resourceTools(),
			msgs:        afterCall("create a server my-test with value 42", "resources_add", `{"id":"res_0a1b2c3d4e5f","name":"my-test","value":42}`, false),
			contains:    []string{"Created resource my-test (value 42, id res_0a1b2c3d4e5f)."},
			notContains: []string{"Result of", `{"id"`},
		},
		{
			name:     "created wrapped",
			tools:    resourceTools(),
			msgs:     afterCall("add resource x value 1", "resources_add", `{"resource":{"id":"res_9","name":"x","value":1},"message":"created"}`, false),
			contains: []string{"Created resource x (value 1, id res_9)."},
		},
		{
			name:     "removed count",
			tools:    resourceTools(),
			msgs:     afterCall("remove test-1", "resources_remove", `{"removed":2}`, false),
			contains: []string{"Removed 2 resources."},
		},
		{
			name:     "removed one",
			tools:    resourceTools(),
			msgs:     afterCall("remove test-1", "resources_remove", `{"removed":1}`, false),
			contains: []string{"Removed 1 resource."},
		},
		{
			name:     "removed none",
			tools:    resourceTools(),
			msgs:     afterCall("remove test-9", "resources_remove", `{"removed":0}`, false),
			contains: []string{"Nothing was removed: no resource matched."},
		},
		{
			name:     "removed list",
			tools:    resourceTools(),
			msgs:     afterCall("remove test-1", "resources_remove", `{"removed":[{"id":"res_1","name":"test-1","value":10}]}`, false),
			contains: []string{"Removed 1 resource:", "- test-1 (value 10, id res_1)"},
		},
		{
			name:        "error",
			tools:       resourceTools(),
			msgs:        afterCall("add resource x value 1", "resources_add", "database is locked", true),
			contains:    []string{"The tool resources_add failed: database is locked"},
			notContains: []string{"cancelled"},
		},
		{
			name:        "rejected",
			tools:       resourceTools(),
			msgs:        afterCall("add resource x value 1", "resources_add", "rejected: the approver rejected this call", true),
			contains:    []string{"The operation was cancelled: resources_add was not approved."},
			notContains: []string{"failed"},
		},
		{
			name:     "cancelled",
			tools:    resourceTools(),
			msgs:     afterCall("remove x", "resources_remove", "Cancelled by the user", true),
			contains: []string{"The operation was cancelled: resources_remove was not approved."},
		},
		{
			name:     "plain text",
			tools:    resourceTools(),
			msgs:     afterCall("list", "resources_list", "no resources yet", false),
			contains: []string{"resources_list returned: no resources yet"},
		},
		{
			name:  "tool name from call id",
			tools: resourceTools(),
			msgs: []llm.Message{
				{Role: llm.RoleUser, Content: "add resource x value 1"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_9", Name: "resources_add", Arguments: json.RawMessage(`{}`)}}},
				{Role: llm.RoleTool, ToolCallID: "call_9", Content: `{"id":"res_9","name":"x","value":1}`},
			},
			contains: []string{"Created resource x (value 1, id res_9)."},
		},
		{
			name:     "MCP result",
			tools:    resourceTools(),
			msgs:     afterCall("list", "resources_list", `{"content":[{"type":"text","text":"{\"resources\":[{\"name\":\"a\",\"value\":1}],\"count\":1}"}]}`, false),
			contains: []string{"Found 1 resource:", "- a (value 1)"},
		},
		{
			name:  "graph",
			tools: memoryTools(),
			msgs: afterCall("show the graph", "read_graph",
				`{"entities":[{"type":"entity","name":"alice","entityType":"person","observations":["likes tea"]},{"type":"entity","name":"acme","entityType":"company","observations":[]}],"relations":[{"type":"relation","from":"alice","to":"acme","relationType":"works_at"}]}`, false),
			contains: []string{"Found 2 entities and 1 relation.", "Entities:", "- alice (type entity, entityType person, observations 1)", "Relations:", "- alice works_at acme"},
		},
		{
			name:        "long result",
			tools:       resourceTools(),
			msgs:        afterCall("list", "resources_list", longList, false),
			contains:    []string{"Found 61 resources:", "- … and 11 more"},
			notContains: []string{"Result of resources_list:", "full result"},
		},
		{
			name:  "two results",
			tools: resourceTools(),
			msgs: []llm.Message{
				{Role: llm.RoleUser, Content: "add resource x value 1 and list"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "resources_add"}, {ID: "c2", Name: "resources_list"}}},
				{Role: llm.RoleTool, ToolCallID: "c1", ToolName: "resources_add", Content: `{"id":"res_9","name":"x","value":1}`},
				{Role: llm.RoleTool, ToolCallID: "c2", ToolName: "resources_list", Content: `{"resources":[{"id":"res_9","name":"x","value":1}],"count":1}`},
			},
			contains: []string{"Created resource x (value 1, id res_9).", "\n\nFound 1 resource:"},
		},
		{
			name:     "unknown tool",
			tools:    nil,
			msgs:     afterCall("x", "other_tool", `{"ok":true,"message":"done"}`, false),
			contains: []string{"other_tool returned message done, ok true."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := generate(t, llm.Request{Messages: tc.msgs, Tools: tc.tools})
			if len(resp.ToolCalls) != 0 {
				t.Fatalf("got call %s %s after a tool result, want text", resp.ToolCalls[0].Name, resp.ToolCalls[0].Arguments)
			}
			for _, want := range tc.contains {
				if !strings.Contains(resp.Text, want) {
					t.Errorf("text %q does not contain %q", resp.Text, want)
				}
			}
			for _, bad := range tc.notContains {
				if strings.Contains(resp.Text, bad) {
					t.Errorf("text %q contains %q", resp.Text, bad)
				}
			}
		})
	}
}

// TestOfflineTurnBoundary: results before the last user message, or
// before an assistant text (the end of a loop iteration), are history,
// not this turn's progress.
func TestOfflineTurnBoundary(t *testing.T) {
	done := afterCall("list", "resources_list", `{"resources":[],"count":0}`, false)
	tests := []struct {
		name     string
		msgs     []llm.Message
		wantTool string
	}{
		{"new user message", append(done, llm.Message{Role: llm.RoleAssistant, Content: "There are no resources."}, llm.Message{Role: llm.RoleUser, Content: "add resource alpha value 1"}), "resources_add"},
		{"after assistant text", append(done, llm.Message{Role: llm.RoleAssistant, Content: "There are no resources."}), "resources_list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := generate(t, llm.Request{Messages: tc.msgs, Tools: resourceTools()})
			if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != tc.wantTool {
				t.Fatalf("got calls %v, text %q; want a call of %s", resp.ToolCalls, resp.Text, tc.wantTool)
			}
		})
	}
}

func TestListCount(t *testing.T) {
	tests := []struct {
		name      string
		content   string
		wantN     int
		wantNames []string
		wantOK    bool
	}{
		{"count field", `{"resources":[{"name":"a"},{"name":"b"}],"count":5}`, 5, []string{"a", "b"}, true},
		{"array field", `{"resources":[{"name":"a"},{"name":"b"}]}`, 2, []string{"a", "b"}, true},
		{"bare array", `[{"name":"a"}]`, 1, []string{"a"}, true},
		{"text", "There are 4 resources.", 4, nil, true},
		{"text count", "count: 7", 7, nil, true},
		{"other noun", "3 servers", 0, nil, false},
		{"nothing", "ok", 0, nil, false},
		{"object without list", `{"ok":true}`, 0, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, names, ok := listCount(tc.content, "resource")
			if n != tc.wantN || ok != tc.wantOK {
				t.Errorf("listCount(%q) = %d, %v; want %d, %v", tc.content, n, ok, tc.wantN, tc.wantOK)
			}
			for _, name := range tc.wantNames {
				if !names[name] {
					t.Errorf("listCount(%q) names %v lack %q", tc.content, names, name)
				}
			}
		})
	}
}
