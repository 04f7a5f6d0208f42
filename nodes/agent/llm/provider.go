package llm

import (
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/config"
)

// Options configure a cloud provider.
type Options struct {
	// BaseURL overrides the provider's API URL.
	BaseURL string
	// APIKey authenticates; it is sent to the provider and nowhere else.
	APIKey config.Secret
	// Timeout bounds one call. Zero means 60s.
	Timeout time.Duration
	// MaxRetries bounds retries of a failed call. Zero means 3; -1 none.
	MaxRetries int
	// MaxTokens caps replies. Zero means 4096.
	MaxTokens int
}

// New returns the provider of model.
func New(model config.Model, opts Options) (Provider, error) {
	switch model.Provider {
	case config.ProviderOffline:
		return NewOffline(), nil
	}
	return nil, fmt.Errorf("llm: provider %q (model %s) is not available in this build yet; use llm.model: offline", model.Provider, model)
}

// FromConfig returns the provider of a model name of cfg, with its key and
// base URL.
func FromConfig(cfg *config.Config, name string) (Provider, error) {
	m, err := config.ParseModel(name)
	if err != nil {
		return nil, err
	}
	return New(m, Options{
		BaseURL: cfg.BaseURL(m.Provider), APIKey: cfg.Keys.For(m.Provider),
		Timeout: cfg.LLM.Timeout.Std(), MaxRetries: cfg.LLM.MaxRetries, MaxTokens: cfg.LLM.MaxTokens,
	})
}
