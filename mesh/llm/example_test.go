package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

// A cloud provider in OpenAI's wire format, streamed. llmtest's local
// stand-in for the API answers here with a scripted reply; against
// OpenAI, leave BaseURL empty and set OPENAI_API_KEY.
func ExampleNewCloud() {
	srv, err := llmtest.New(llmtest.Config{API: llmtest.OpenAI, APIKey: "test-key", Backend: llmtest.Replies(
		llm.Response{Text: "Hello from the stand-in", Usage: llm.Usage{InputTokens: 12, OutputTokens: 4}})})
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
		System:   "You are friendly.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Say hello"}},
		OnText:   func(delta string) { fmt.Printf("delta %q\n", delta) },
	})
	var coded interface{ RunErrorCode() string }
	if errors.As(err, &coded) {
		fmt.Println("failed:", coded.RunErrorCode(), err)
		return
	}
	fmt.Println(p.Model(), resp.Text, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	r := srv.Requests()[0]
	fmt.Println(r.Method, r.Path, "stream", r.Stream)
	// Output:
	// delta "Hello "
	// delta "from "
	// delta "the "
	// delta "stand-in"
	// openai:gpt-4o-mini Hello from the stand-in 12 4
	// POST /v1/chat/completions stream true
}

// A model served by Ollama (or any OpenAI-compatible server) needs no key.
// The stand-in answers with the offline planner, which calls a tool; with
// Ollama running, leave BaseURL empty (http://localhost:11434/v1) or set
// OLLAMA_BASE_URL.
func ExampleNewCloud_ollama() {
	srv, err := llmtest.New(llmtest.Config{API: llmtest.OpenAI})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	model, _ := modelspec.ParseModel("ollama:llama3.2")
	p, err := llm.NewCloud(model, llm.Options{BaseURL: srv.BaseURL()})
	if err != nil {
		panic(err)
	}
	resp, err := p.Generate(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "show the weather in Paris"}},
		Tools: []llm.Tool{{Name: "get_weather", Description: "Current weather of a city", ReadOnly: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Model(), resp.ToolCalls[0].Name, string(resp.ToolCalls[0].Arguments))
	// Output:
	// ollama:llama3.2 get_weather {"city":"Paris"}
}

// A speaker selection asks a model who speaks next in a multi-party chat;
// the offline planner answers by matching the last message with the
// participants' descriptions.
func ExampleSelection_Request() {
	sel := llm.Selection{
		Participants: []llm.Participant{
			{Name: "coder", Description: "writes and fixes Go code"},
			{Name: "ops", Description: "deploys services to production"},
		},
		History: []llm.Message{
			{Role: llm.RoleUser, Content: "fix the parser"},
			{Role: llm.RoleAssistant, Name: "coder", Content: "Fixed; ready to deploy."},
		},
	}
	req := sel.Request("You choose who speaks next in a group chat.")
	fmt.Println(req.System)
	for _, m := range req.Messages {
		fmt.Printf("%s: %s\n", m.Role, m.Content)
	}
	resp, err := offline.New().Generate(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Println("next:", resp.Text)
	// Output:
	// You choose who speaks next in a group chat.
	//
	// - coder: writes and fixes Go code
	// - ops: deploys services to production
	//
	// Reply with the name of the next speaker only.
	// user: fix the parser
	// assistant: coder: Fixed; ready to deploy.
	// user: Who speaks next?
	// next: ops
}
