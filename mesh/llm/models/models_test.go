package models_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/models"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
	"github.com/rs/zerolog"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name, model string
		opts        llm.Options
		wantModel   string
		wantErr     string // in the error; "" for success
	}{
		{name: "offline", model: "offline", wantModel: "offline"},
		{name: "offline ignores options", model: "offline", opts: llm.Options{BaseURL: "not a URL"}, wantModel: "offline"},
		{name: "gemini", model: "gemini-2.5-flash", opts: llm.Options{APIKey: "k"}, wantModel: "google:gemini-2.5-flash"},
		{name: "claude without key", model: "anthropic:claude-opus-4-1", wantErr: "ANTHROPIC_API_KEY"},
		{name: "openai", model: "gpt-4o-mini", opts: llm.Options{APIKey: "k"}, wantModel: "openai:gpt-4o-mini"},
		{name: "ollama", model: "ollama:llama3.2", wantModel: "ollama:llama3.2"},
		{name: "bad base URL", model: "ollama:qwen3", opts: llm.Options{BaseURL: "localhost:11434"}, wantErr: "not an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := modelspec.ParseModel(tt.model)
			if err != nil {
				t.Fatal(err)
			}
			p, err := models.New(m, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New(%s) error = %v, want one naming %s", tt.model, err, tt.wantErr)
				}
				if strings.Contains(tt.wantErr, "_API_KEY") && !errors.Is(err, llm.ErrNoAPIKey) {
					t.Errorf("error %v does not wrap llm.ErrNoAPIKey", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%s): %v", tt.model, err)
			}
			if p.Model() != tt.wantModel {
				t.Errorf("Model() = %q, want %q", p.Model(), tt.wantModel)
			}
		})
	}
}

func TestFromConfigKeys(t *testing.T) {
	cfg := &config.Config{}
	cfg.LLM.Model = "gpt-4o-mini"
	if _, err := models.FromConfig(cfg, "gpt-4o-mini"); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("FromConfig without a key: %v, want an error naming OPENAI_API_KEY", err)
	}
	cfg.Keys.OpenAI = "k"
	if p, err := models.FromConfig(cfg, "gpt-4o-mini"); err != nil || p.Model() != "openai:gpt-4o-mini" {
		t.Errorf("FromConfig: %v, %v", p, err)
	}
	if p, err := models.FromConfig(&config.Config{}, "offline"); err != nil || p.Model() != "offline" {
		t.Errorf("FromConfig(offline): %v, %v; want the offline planner with no key", p, err)
	}
	if _, err := models.FromConfig(cfg, "no-such-model"); err == nil {
		t.Error("FromConfig(no-such-model): no error")
	}
}

// TestOptionsFromConfigBreaker: breakers.llm sets the breaker of the
// options, and -1 turns it off.
func TestOptionsFromConfigBreaker(t *testing.T) {
	cfg := &config.Config{}
	cfg.Keys.OpenAI = "k"
	cfg.Breakers.LLM = config.Breaker{Failures: 2, Cooldown: config.Duration(time.Minute)}
	if o := models.OptionsFromConfig(cfg, modelspec.ProviderOpenAI, llm.Options{}); o.BreakerFailures != 2 || o.BreakerCooldown != time.Minute {
		t.Errorf("breaker of %d failures and %s, want breakers.llm's 2 and 1m", o.BreakerFailures, o.BreakerCooldown)
	}
	cfg.Breakers.LLM = config.Breaker{Failures: -1}
	if o := models.OptionsFromConfig(cfg, modelspec.ProviderOpenAI, llm.Options{}); o.BreakerFailures != -1 {
		t.Errorf("breakers.llm.failures -1: %d failures, want -1 (no breaker)", o.BreakerFailures)
	}
}

// TestFromConfigBreaker: breakers.llm reaches the provider: one failed
// call opens the breaker, and the next call fails fast without a request.
func TestFromConfigBreaker(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, APIKey: "k"})
	cfg := &config.Config{Process: config.Process{Keys: modelspec.Keys{OpenAI: "k"}, BaseURLs: map[string]string{modelspec.ProviderOpenAI: srv.BaseURL()}}}
	cfg.LLM.MaxRetries = -1
	cfg.Breakers.LLM = config.Breaker{Failures: 1, Cooldown: config.Duration(time.Minute)}
	p, err := models.FromConfig(cfg, "gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	srv.Fail(llmtest.Fault{Status: 500})
	if _, err := p.Generate(t.Context(), req); err == nil {
		t.Fatal("a 500 with llm.max_retries -1: no error")
	}
	if _, err := p.Generate(t.Context(), req); !errors.Is(err, llm.ErrBreakerOpen) {
		t.Errorf("second call: %v, want llm.ErrBreakerOpen", err)
	}
	if n := srv.Count(); n != 1 {
		t.Errorf("%d requests, want 1: the open breaker sends none", n)
	}
}

// retryKey is the API key of TestFromConfigWithLogsRetries, which no log
// line may show.
const retryKey = "sk-models-Zq8yX3pL0sWv5"

func hello(stream bool) llm.Request {
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}}
	if stream {
		req.OnText = func(string) {}
	}
	return req
}

// TestFromConfigWithLogsRetries: FromConfigWith takes the key, base URL,
// timeout and retries from the configuration and logs retries to the
// logger it is given, without the key.
func TestFromConfigWithLogsRetries(t *testing.T) {
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.Anthropic, APIKey: retryKey, Backend: llmtest.Replies(llm.Response{Text: "ok"})})
	cfg := &config.Config{Process: config.Process{Keys: modelspec.Keys{Anthropic: retryKey}, BaseURLs: map[string]string{modelspec.ProviderAnthropic: srv.BaseURL()}}}
	cfg.LLM.Model = "claude-sonnet-4-5"
	cfg.LLM.MaxRetries = 1
	var logs bytes.Buffer
	p, err := models.FromConfigWith(cfg, cfg.LLM.Model, llm.Options{Log: zerolog.New(&logs), RetryBaseDelay: time.Millisecond, BreakerFailures: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv.Fail(llmtest.Fault{Status: 529})
	if _, err := p.Generate(t.Context(), hello(true)); err != nil {
		t.Fatalf("a 529 then an answer: %v", err)
	}
	if !strings.Contains(logs.String(), "retrying") || !strings.Contains(logs.String(), "overloaded") {
		t.Errorf("logs %q do not show the retry", logs.String())
	}
	if strings.Contains(logs.String(), retryKey) {
		t.Error("the logs show the key")
	}
	// llm.max_retries: 1 is one retry, so two failures fail the call.
	srv.Fail(llmtest.Fault{Status: 500, Times: 2})
	if _, err := p.Generate(t.Context(), hello(false)); err == nil {
		t.Error("two 500s with llm.max_retries 1: no error")
	}
	if n := srv.Count(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	// FromConfig still works, logging nothing; llm.base_url wins over the
	// environment's base URL.
	cfg.BaseURLs[modelspec.ProviderAnthropic] = "http://127.0.0.1:1"
	cfg.LLM.BaseURL = srv.BaseURL()
	p, err = models.FromConfig(cfg, cfg.LLM.Model)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(t.Context(), hello(false)); err != nil {
		t.Errorf("llm.base_url over ANTHROPIC_BASE_URL: %v", err)
	}
}
