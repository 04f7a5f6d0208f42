package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/models"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// Providers from model names, as a configuration gives them: "offline"
// is the built-in planner, which needs nothing; a cloud model needs its
// key (and here a base URL, llmtest's local stand-in for OpenAI).
func ExampleFromConfig() {
	ctx := context.Background()
	req := llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "list the resources"}},
		Tools: []llm.Tool{{Name: "resources_list", Description: "List resources", ReadOnly: true,
			Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
	}
	cfg := &config.Config{}

	p, err := models.FromConfig(cfg, "offline")
	if err != nil {
		panic(err)
	}
	resp, err := p.Generate(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Model(), "calls", resp.ToolCalls[0].Name)

	_, err = models.FromConfig(cfg, "gpt-4o-mini")
	fmt.Println(errors.Is(err, llm.ErrNoAPIKey), err)

	srv, err := llmtest.New(llmtest.Config{API: llmtest.OpenAI, APIKey: "test-key"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	cfg.Keys.OpenAI = "test-key"                                              // OPENAI_API_KEY
	cfg.BaseURLs = map[string]string{modelspec.ProviderOpenAI: srv.BaseURL()} // OPENAI_BASE_URL
	p, err = models.FromConfig(cfg, "gpt-4o-mini")
	if err != nil {
		panic(err)
	}
	resp, err = p.Generate(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Model(), "calls", resp.ToolCalls[0].Name)
	// Output:
	// offline calls resources_list
	// true llm: no API key: model openai:gpt-4o-mini needs the environment variable OPENAI_API_KEY; set it, or use llm.model: offline
	// openai:gpt-4o-mini calls resources_list
}
