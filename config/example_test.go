package config_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/config"
)

// A configuration is agent.yaml's text with the environment on top: here
// MESH_HTTP_ADDR wins over host and port, defaults fill the rest, and a
// mistake names the file, the field and what is expected.
func ExampleParse() {
	yaml := []byte(`
name: resource-manager
prompt: You manage resources.
llm:
  model: offline
host: 0.0.0.0
port: 9000
`)
	env := map[string]string{"MESH_HTTP_ADDR": "127.0.0.1:8080"}
	cfg, err := config.Parse("agent.yaml", yaml, func(k string) string { return env[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Name, cfg.LLM.Model, cfg.HTTPAddr)
	fmt.Println(cfg.Mesh.MaxToolIterations, cfg.Mesh.AckWait.Std())

	_, err = config.Parse("agent.yaml", []byte("name: x\nllm:\n  model: 42\n"), func(string) string { return "" })
	fmt.Println(err)
	// Output:
	// resource-manager offline 127.0.0.1:8080
	// 10 10s
	// config agent.yaml: llm.model: cannot tell the provider of model "42": use offline, a claude-…, gemini-…, gpt-… or command-… model, or provider:model (google:, anthropic:, openai:, ollama:, cohere:)
}
