package llm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

func TestNewCloud(t *testing.T) {
	tests := []struct {
		name, model string
		opts        Options
		wantModel   string
		wantBase    string
		wantErr     string // in the error; "" for success
	}{
		{name: "offline is no cloud provider", model: "offline", wantErr: "models.New"},
		{name: "gemini", model: "gemini-2.5-flash", opts: Options{APIKey: "k"}, wantModel: "google:gemini-2.5-flash", wantBase: "https://generativelanguage.googleapis.com"},
		{name: "gemini without key", model: "google:gemini-2.5-pro", wantErr: "GEMINI_API_KEY"},
		{name: "claude", model: "claude-sonnet-4-5", opts: Options{APIKey: "k"}, wantModel: "anthropic:claude-sonnet-4-5", wantBase: "https://api.anthropic.com"},
		{name: "claude without key", model: "anthropic:claude-opus-4-1", wantErr: "ANTHROPIC_API_KEY"},
		{name: "gateway", model: "claude-sonnet-4-5", opts: Options{APIKey: "k", BaseURL: "https://gw.example.com/anthropic/"}, wantModel: "anthropic:claude-sonnet-4-5", wantBase: "https://gw.example.com/anthropic"},
		{name: "openai", model: "gpt-4o-mini", opts: Options{APIKey: "k"}, wantModel: "openai:gpt-4o-mini", wantBase: "https://api.openai.com/v1"},
		{name: "openai without key", model: "gpt-4o-mini", wantErr: "OPENAI_API_KEY"},
		{name: "compatible server without key", model: "openai:qwen2.5-7b-instruct", opts: Options{BaseURL: "http://localhost:8000/v1"}, wantModel: "openai:qwen2.5-7b-instruct", wantBase: "http://localhost:8000/v1"},
		{name: "ollama", model: "ollama:llama3.2", wantModel: "ollama:llama3.2", wantBase: "http://localhost:11434/v1"},
		{name: "ollama elsewhere", model: "ollama:qwen3", opts: Options{BaseURL: "http://gpu-box:11434/v1"}, wantModel: "ollama:qwen3", wantBase: "http://gpu-box:11434/v1"},
		{name: "cohere", model: "command-a-03-2025", opts: Options{APIKey: "k"}, wantModel: "cohere:command-a-03-2025", wantBase: "https://api.cohere.ai/compatibility/v1"},
		{name: "cohere by prefix", model: "cohere:command-r7b-12-2024", opts: Options{APIKey: "k", BaseURL: "https://gw.example.com/cohere/v1"}, wantModel: "cohere:command-r7b-12-2024", wantBase: "https://gw.example.com/cohere/v1"},
		{name: "cohere without key", model: "command-r-plus", wantErr: "COHERE_API_KEY"},
		{name: "bad base URL", model: "ollama:qwen3", opts: Options{BaseURL: "localhost:11434"}, wantErr: "not an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewCloud(model(t, tt.model), tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewCloud(%s) error = %v, want one naming %s", tt.model, err, tt.wantErr)
				}
				if strings.Contains(tt.wantErr, "_API_KEY") && !errors.Is(err, ErrNoAPIKey) {
					t.Errorf("error %v does not wrap ErrNoAPIKey", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewCloud(%s): %v", tt.model, err)
			}
			if p.Model() != tt.wantModel {
				t.Errorf("Model() = %q, want %q", p.Model(), tt.wantModel)
			}
			if tt.wantBase != "" {
				if got := endpointOf(t, p).base; got != tt.wantBase {
					t.Errorf("base URL = %q, want %q", got, tt.wantBase)
				}
			}
		})
	}
}

func TestOptionDefaults(t *testing.T) {
	p := newProvider(t, "claude-sonnet-4-5", Options{APIKey: "k"})
	e := endpointOf(t, p)
	if e.timeout != defaultTimeout {
		t.Errorf("default timeout %v, want %v", e.timeout, defaultTimeout)
	}
	if e.retries != 3 {
		t.Errorf("default retries %d, want 3", e.retries)
	}
	if e.failures != 5 {
		t.Errorf("default breaker failures %d, want 5", e.failures)
	}
	if e.cooldown != defaultBreakerCooldown {
		t.Errorf("default breaker cooldown %v, want %v", e.cooldown, defaultBreakerCooldown)
	}
	if want := (backoff{base: defaultRetryBaseDelay, max: defaultRetryMaxDelay}); e.backoff != want {
		t.Errorf("default backoff %+v, want %+v", e.backoff, want)
	}
	if e := endpointOf(t, newProvider(t, "claude-sonnet-4-5", Options{APIKey: "k", MaxRetries: -1, BreakerFailures: -1})); e.retries != 0 {
		t.Errorf("MaxRetries -1: %d retries, want none", e.retries)
	} else if _, ok := e.gate.(noGate); !ok {
		t.Errorf("BreakerFailures -1: gate %T, want none", e.gate)
	}
}

func TestCodesMatchMesh(t *testing.T) {
	for _, c := range [][2]string{{CodeTimeout, mesh.CodeLLMTimeout}, {CodeRateLimit, mesh.CodeRateLimit}, {CodeError, mesh.CodeLLMError}} {
		if c[0] != c[1] {
			t.Errorf("llm code %q != mesh code %q", c[0], c[1])
		}
	}
}

// TestOptionsBreaker: the breaker settings of Options reach the endpoint
// (models.OptionsFromConfig sets them from breakers.llm).
func TestOptionsBreaker(t *testing.T) {
	p, err := NewCloud(model(t, "gpt-4o-mini"), Options{APIKey: "k", BreakerFailures: 2, BreakerCooldown: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if e := endpointOf(t, p); e.failures != 2 || e.cooldown != time.Minute {
		t.Errorf("breaker of %d failures and %s, want breakers.llm's 2 and 1m", e.failures, e.cooldown)
	}
	if p, err = NewCloud(model(t, "gpt-4o-mini"), Options{APIKey: "k", BreakerFailures: -1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := endpointOf(t, p).gate.(noGate); !ok {
		t.Errorf("breakers.llm.failures -1: gate %T, want none", endpointOf(t, p).gate)
	}
}

// model is a parsed model name.
func model(t testing.TB, name string) modelspec.Model {
	t.Helper()
	m, err := modelspec.ParseModel(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newProvider(t *testing.T, name string, opts Options) Provider {
	t.Helper()
	p, err := NewCloud(model(t, name), opts)
	if err != nil {
		t.Fatalf("NewCloud(%s): %v", name, err)
	}
	return p
}

// endpointOf exposes a provider's transport, for tests of its settings and
// for SetSleep.
func endpointOf(t *testing.T, p Provider) *endpoint {
	t.Helper()
	switch p := p.(type) {
	case *geminiProvider:
		return p.ep
	case *anthropicProvider:
		return p.ep
	case *openAIProvider:
		return p.ep
	}
	t.Fatalf("%T has no endpoint", p)
	return nil
}
