package llm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// A model served by Ollama (or any OpenAI-compatible server), streamed. A
// local stand-in answers here; with Ollama running, leave BaseURL empty
// (http://localhost:11434/v1) or set OLLAMA_BASE_URL.
func ExampleNew() {
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"content":" from llama"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`,
			`[DONE]`,
		} {
			_, _ = io.WriteString(w, "data: "+chunk+"\n\n")
		}
	}))
	defer ollama.Close()

	model, _ := config.ParseModel("ollama:llama3.2")
	p, err := llm.New(model, llm.Options{BaseURL: ollama.URL + "/v1"})
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
	// Output:
	// delta "Hello"
	// delta " from llama"
	// ollama:llama3.2 Hello from llama 12 4
}
