package llmtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// A stand-in for OpenAI, answered by the offline planner, called by the
// real OpenAI provider: the planner picks the tool, the server records the
// request as the API received it.
func ExampleNew() {
	srv, err := llmtest.New(llmtest.Config{API: llmtest.OpenAI, APIKey: "test-key"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	model, _ := modelspec.ParseModel("gpt-4o-mini")
	p, err := llm.NewCloud(model, llm.Options{BaseURL: srv.BaseURL(), APIKey: "test-key"})
	if err != nil {
		panic(err)
	}
	resp, err := p.Generate(context.Background(), llm.Request{
		System:   "You manage resources.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "list all resources"}},
		Tools: []llm.Tool{{Name: "resources_list", Description: "List resources",
			Parameters: json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"}}}`)}},
		OnText: func(string) {},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("call:", resp.ToolCalls[0].Name, string(resp.ToolCalls[0].Arguments))

	r := srv.Requests()[0]
	fmt.Println("request:", r.Method, r.Path, "stream", r.Stream, "model", r.Model)
	fmt.Println("system field:", r.Request.System)
	// Output:
	// call: resources_list {}
	// request: POST /v1/chat/completions stream true model gpt-4o-mini
	// system field: You manage resources.
}

// Scripted failures: two rate limits, then the backend's answer; the
// provider retries as the server tells it to.
func ExampleServer_Fail() {
	srv, _ := llmtest.New(llmtest.Config{API: llmtest.Gemini, Backend: llmtest.Replies(llm.Response{Text: "Hello!"})})
	defer srv.Close()
	srv.Fail(llmtest.Fault{Status: 429, RetryAfter: time.Millisecond, Times: 2})

	model, _ := modelspec.ParseModel("gemini-2.5-flash")
	p, _ := llm.NewCloud(model, llm.Options{BaseURL: srv.BaseURL(), APIKey: "k", BreakerFailures: -1})
	resp, err := p.Generate(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	fmt.Println(resp.Text, err)
	for _, r := range srv.Requests() {
		fmt.Println(r.Status)
	}
	// Output:
	// Hello! <nil>
	// 429
	// 429
	// 200
}
