// Package models builds the [llm.Provider] of a model name: the offline
// planner for "offline", a cloud provider for the others. It is what a
// process that runs turns calls with llm.model (and every model name of
// its configuration); it reads nothing itself, starts no goroutine and
// holds no state.
//
// # Quick start
//
//	p, err := models.FromConfigWith(cfg, cfg.LLM.Model, llm.Options{Log: log})
//	if err != nil { … } // e.g. llm.ErrNoAPIKey, naming the variable to set
//	resp, err := p.Generate(ctx, llm.Request{System: …, Messages: …, Tools: …})
//
// Read ExampleFromConfig.
//
// # Why a package of its own
//
// The factory needs both kinds of provider. The offline planner
// (mesh/llm/offline) implements [llm.Provider], so it imports mesh/llm; a
// factory inside mesh/llm that returned the planner would import it back,
// a cycle. This package imports both and nothing imports it but the
// commands and tests that wire providers; mesh/llm keeps the cloud
// providers ([llm.NewCloud]). What needs the whole configuration is here,
// the options a configuration sets ([OptionsFromConfig]) included, so
// that mesh/llm imports no config.
package models

import (
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

// New returns the provider of model: the offline planner (offline.New)
// for offline, else the cloud provider of [llm.NewCloud] with opts:
// google (Gemini), anthropic, openai (and any OpenAI-compatible server
// through BaseURL), or ollama. Google and Anthropic need an API key, and
// so does OpenAI at its default base URL; the error wraps
// [llm.ErrNoAPIKey] and names the environment variable to set.
func New(model modelspec.Model, opts llm.Options) (llm.Provider, error) {
	if model.Provider == modelspec.ProviderOffline {
		return observe(offline.New(), model), nil
	}
	p, err := llm.NewCloud(model, opts)
	if err != nil {
		return nil, err
	}
	return observe(p, model), nil
}

// FromConfig returns the provider of a model name of cfg, with its key and
// base URL. It logs nothing; use [FromConfigWith] to log retries.
func FromConfig(cfg *config.Config, name string) (llm.Provider, error) {
	return FromConfigWith(cfg, name, llm.Options{})
}

// FromConfigWith is [FromConfig] over base options: the configuration sets
// BaseURL and APIKey, and Timeout, MaxRetries, MaxTokens and the breaker when
// llm.timeout, llm.max_retries, llm.max_tokens and breakers.llm are set
// ([OptionsFromConfig]); base gives the rest (Log, HTTPClient, backoff
// settings). A process that runs turns passes its logger, so that retries
// are logged:
//
//	p, err := models.FromConfigWith(cfg, cfg.LLM.Model, llm.Options{Log: log})
func FromConfigWith(cfg *config.Config, name string, base llm.Options) (llm.Provider, error) {
	m, err := modelspec.ParseModel(name)
	if err != nil {
		return nil, err
	}
	return New(m, OptionsFromConfig(cfg, m.Provider, base))
}

// OptionsFromConfig returns base with what cfg sets for a cloud provider
// ([llm.NewCloud]): the BaseURL and APIKey of provider, and Timeout,
// MaxRetries, the provider's capacity (MaxConcurrency, RequestsPerMinute,
// MaxQueueWait), MaxTokens and the breaker when the llm section and
// breakers.llm set them; base gives the rest (Log, HTTPClient, backoff
// settings).
func OptionsFromConfig(cfg *config.Config, provider string, base llm.Options) llm.Options {
	opts := base
	opts.BaseURL = cfg.BaseURL(provider)
	opts.APIKey = cfg.Keys.For(provider)
	if t := cfg.LLM.Timeout.Std(); t != 0 {
		opts.Timeout = t
	}
	if cfg.LLM.MaxRetries != 0 {
		opts.MaxRetries = cfg.LLM.MaxRetries
	}
	if cfg.LLM.MaxConcurrency != 0 {
		opts.MaxConcurrency = cfg.LLM.MaxConcurrency
	}
	if cfg.LLM.RequestsPerMinute != 0 {
		opts.RequestsPerMinute = cfg.LLM.RequestsPerMinute
	}
	if w := cfg.LLM.MaxQueueWait.Std(); w != 0 {
		opts.MaxQueueWait = w
	}
	opts.Sampling = opts.Sampling.Over(cfg.LLM.Sampling)
	if cfg.LLM.Reasoning.On() {
		opts.Reasoning = cfg.LLM.Reasoning
	}
	if !cfg.LLM.PromptCacheOn() {
		opts.NoPromptCache = true
	}
	if b := cfg.Breakers.LLM; b.Failures != 0 {
		opts.BreakerFailures = b.Failures
	}
	if c := cfg.Breakers.LLM.Cooldown.Std(); c != 0 {
		opts.BreakerCooldown = c
	}
	return opts
}
