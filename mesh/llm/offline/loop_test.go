package offline

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

func loopTools() []llm.Tool {
	return append(resourceTools(), llm.Tool{
		Name:        exitLoopTool,
		Description: "Exit the enclosing loop. Call this when the goal is reached.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	})
}

// resourceList is a resources_list result with the given names.
func resourceList(names ...string) string {
	items := make([]string, 0, len(names))
	for i, n := range names {
		items = append(items, fmt.Sprintf(`{"id":"res_%012d","name":%q,"value":%d}`, i, n, (i+1)*10))
	}
	return fmt.Sprintf(`{"resources":[%s],"count":%d}`, strings.Join(items, ","), len(names))
}

// loopHistory builds a history: the user's message, then for each step a
// call of tool answered by content, or (tool "") an assistant text.
func loopHistory(user string, steps ...[2]string) []llm.Message {
	msgs := []llm.Message{{Role: llm.RoleUser, Content: user}}
	for i, s := range steps {
		if s[0] == "" {
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: s[1]})
			continue
		}
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: s[0], Arguments: json.RawMessage(`{}`)}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, ToolName: s[0], Content: s[1]},
		)
	}
	return msgs
}

func TestOfflineLoop(t *testing.T) {
	const ensure = "ensure we have at least 3 resources"
	added := `{"id":"res_x","name":"resource-2","value":20}`
	tests := []struct {
		name     string
		system   string
		msgs     []llm.Message
		wantTool string // "" for text
		wantArgs string
		wantText string // substring, for text answers
	}{
		{name: "start lists", msgs: loopHistory(ensure), wantTool: "resources_list", wantArgs: `{}`},
		{name: "short adds next", msgs: loopHistory(ensure, [2]string{"resources_list", resourceList("test-1")}),
			wantTool: "resources_add", wantArgs: `{"name":"resource-2","value":20}`},
		{name: "empty adds first", msgs: loopHistory(ensure, [2]string{"resources_list", resourceList()}),
			wantTool: "resources_add", wantArgs: `{"name":"resource-1","value":10}`},
		{name: "name taken", msgs: loopHistory(ensure, [2]string{"resources_list", resourceList("resource-2")}),
			wantTool: "resources_add", wantArgs: `{"name":"resource-3","value":20}`},
		{name: "added still short ends iteration", msgs: loopHistory(ensure,
			[2]string{"resources_list", resourceList("test-1")}, [2]string{"resources_add", added}),
			wantText: "Added one resource: there are now 2 of the 3 resources wanted."},
		{name: "next iteration lists again", msgs: loopHistory(ensure,
			[2]string{"resources_list", resourceList("test-1")}, [2]string{"resources_add", added}, [2]string{"", "Added one resource."}),
			wantTool: "resources_list", wantArgs: `{}`},
		{name: "last add exits", msgs: loopHistory(ensure,
			[2]string{"resources_list", resourceList("a", "b")}, [2]string{"resources_add", added}),
			wantTool: exitLoopTool, wantArgs: `{}`},
		{name: "enough exits", msgs: loopHistory(ensure, [2]string{"resources_list", resourceList("a", "b", "c")}),
			wantTool: exitLoopTool, wantArgs: `{}`},
		{name: "after exit text", msgs: loopHistory(ensure,
			[2]string{"resources_list", resourceList("a", "b", "c")}, [2]string{exitLoopTool, "exiting loop"}),
			wantText: "The goal is reached: there are at least 3 resources"},
		{name: "goal in system prompt", system: "Make sure there are at least 2 resources. Call exit_loop when done.",
			msgs:     loopHistory("go", [2]string{"resources_list", resourceList("a", "b")}),
			wantTool: exitLoopTool, wantArgs: `{}`},
		{name: "number word", msgs: loopHistory("we need at least two resources", [2]string{"resources_list", resourceList("a")}),
			wantTool: "resources_add", wantArgs: `{"name":"resource-2","value":20}`},
		{name: "add failed", msgs: loopHistory(ensure,
			[2]string{"resources_list", resourceList()}, [2]string{"resources_add", "database is locked"}),
			wantText: "The tool resources_add failed"},
		{name: "uncountable", msgs: loopHistory(ensure, [2]string{"resources_list", "ok"}),
			wantText: "could not count the resources"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs := tc.msgs
			if tc.name == "add failed" {
				msgs[len(msgs)-1].IsError = true
			}
			resp := generate(t, llm.Request{System: tc.system, Messages: msgs, Tools: loopTools()})
			if tc.wantTool == "" {
				if len(resp.ToolCalls) != 0 {
					t.Fatalf("got call %s %s, want text containing %q", resp.ToolCalls[0].Name, resp.ToolCalls[0].Arguments, tc.wantText)
				}
				if !strings.Contains(resp.Text, tc.wantText) {
					t.Errorf("text %q does not contain %q", resp.Text, tc.wantText)
				}
				return
			}
			if len(resp.ToolCalls) != 1 {
				t.Fatalf("got text %q, want a call of %s", resp.Text, tc.wantTool)
			}
			call := resp.ToolCalls[0]
			if call.Name != tc.wantTool {
				t.Errorf("tool = %s, want %s", call.Name, tc.wantTool)
			}
			if got, want := decode(t, string(call.Arguments)), decode(t, tc.wantArgs); !reflect.DeepEqual(got, want) {
				t.Errorf("arguments = %s, want %s", call.Arguments, tc.wantArgs)
			}
		})
	}
}

// TestOfflineLoopRun plays a whole loop against a fake resource store
// until exit_loop, and checks that it ends with three resources, one added
// per iteration. Iterations either start fresh from the user's message or
// continue one history, in which the planner's text ends an iteration.
func TestOfflineLoopRun(t *testing.T) {
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			var store []string
			msgs := []llm.Message{{Role: llm.RoleUser, Content: "ensure we have at least 3 resources"}}
			iterations, exited := 0, false
			for ; iterations < 10 && !exited; iterations++ {
				if fresh {
					msgs = msgs[:1]
				}
				for step := 0; ; step++ {
					if step > 5 {
						t.Fatalf("iteration %d: more than 5 steps", iterations)
					}
					resp := generate(t, llm.Request{Messages: msgs, Tools: loopTools()})
					if len(resp.ToolCalls) == 0 {
						msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Text})
						break
					}
					call := resp.ToolCalls[0]
					var content string
					switch call.Name {
					case "resources_list":
						content = resourceList(store...)
					case "resources_add":
						var args struct{ Name string }
						if err := json.Unmarshal(call.Arguments, &args); err != nil {
							t.Fatal(err)
						}
						store = append(store, args.Name)
						content = fmt.Sprintf(`{"id":"res_%012d","name":%q}`, len(store), args.Name)
					case exitLoopTool:
						exited = true
						content = "loop exited"
					default:
						t.Fatalf("unexpected call %s", call.Name)
					}
					msgs = append(msgs,
						llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
						llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: content})
				}
			}
			if !exited {
				t.Fatal("the loop never called exit_loop")
			}
			if want := []string{"resource-1", "resource-2", "resource-3"}; !reflect.DeepEqual(store, want) {
				t.Errorf("created %v, want %v", store, want)
			}
			if iterations != 3 {
				t.Errorf("took %d iterations, want 3 (one resource each, exit with the last)", iterations)
			}
		})
	}
}

// TestOfflineGoalWithoutExitLoop: without exit_loop the goal rules do not
// apply, and the request is planned like any other (the safe read).
func TestOfflineGoalWithoutExitLoop(t *testing.T) {
	resp := generate(t, llm.Request{Messages: userSays("ensure we have at least 3 resources"), Tools: resourceTools()})
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "resources_list" {
		t.Fatalf("got calls %v, text %q; want resources_list", resp.ToolCalls, resp.Text)
	}
}

func TestFindGoal(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		want   loopGoal
		wantOK bool
	}{
		{"digits", "ensure we have at least 3 resources", loopGoal{3, "resource"}, true},
		{"word", "at least three items please", loopGoal{3, "item"}, true},
		{"filler", "keep at least 2 new servers", loopGoal{2, "server"}, true},
		{"or more", "we want 4 or more entities", loopGoal{4, "entity"}, true},
		{"minimum", "a minimum of 5 nodes", loopGoal{5, "node"}, true},
		{"none", "list all resources", loopGoal{}, false},
		{"zero", "at least 0 resources", loopGoal{0, "resource"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := findGoal(tc.text)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("findGoal(%q) = %+v, %v; want %+v, %v", tc.text, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
