package offline_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

// The offline planner turns a request into one tool call, then reports
// the tool's result in plain words.
func ExampleNew() {
	ctx := context.Background()
	p := offline.New()
	tools := []llm.Tool{{
		Name:        "resources_add",
		Description: "Add (create) a new resource with a name and an integer value",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"name":{"type":"string"},"value":{"type":"integer"}},"required":["name","value"]}`),
		Destructive: true,
	}}
	history := []llm.Message{{Role: llm.RoleUser, Content: "create a server my-test with value 42"}}

	resp, err := p.Generate(ctx, llm.Request{Messages: history, Tools: tools})
	if err != nil {
		panic(err)
	}
	call := resp.ToolCalls[0]
	fmt.Println(call.Name, string(call.Arguments))

	// The agent runs the tool and sends its result back.
	history = append(history,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls},
		llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, ToolName: call.Name,
			Content: `{"id":"res_0a1b2c3d4e5f","name":"my-test","value":42}`})
	resp, err = p.Generate(ctx, llm.Request{Messages: history, Tools: tools})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Text)
	// Output:
	// resources_add {"name":"my-test","value":42}
	// Created resource my-test (value 42, id res_0a1b2c3d4e5f).
}
