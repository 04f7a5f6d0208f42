package modelspec

import (
	"fmt"
	"regexp"
	"strings"
)

// Providers of models.
const (
	ProviderOffline   = "offline"
	ProviderGoogle    = "google"
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
	ProviderOllama    = "ollama"
	// ProviderCohere is Cohere through its OpenAI-compatible API.
	ProviderCohere = "cohere"
)

// Environment variables of API keys and base URLs, by provider.
var (
	keyEnv = map[string]string{
		ProviderGoogle:    "GEMINI_API_KEY",
		ProviderAnthropic: "ANTHROPIC_API_KEY",
		ProviderOpenAI:    "OPENAI_API_KEY",
		ProviderCohere:    "COHERE_API_KEY",
	}
	baseURLEnv = map[string]string{
		ProviderGoogle:    "GEMINI_BASE_URL",
		ProviderAnthropic: "ANTHROPIC_BASE_URL",
		ProviderOpenAI:    "OPENAI_BASE_URL",
		ProviderOllama:    "OLLAMA_BASE_URL",
		ProviderCohere:    "COHERE_BASE_URL",
	}
	providerAliases = map[string]string{
		"offline": ProviderOffline, "google": ProviderGoogle, "gemini": ProviderGoogle,
		"anthropic": ProviderAnthropic, "claude": ProviderAnthropic,
		"openai": ProviderOpenAI, "ollama": ProviderOllama, "cohere": ProviderCohere,
	}
	openAISeries = regexp.MustCompile(`^(gpt-|chatgpt-|o[0-9])`)
	// openAIReasoning matches OpenAI's reasoning models (o1, o3, o4-mini,
	// gpt-5 …), wherever they are served.
	openAIReasoning = regexp.MustCompile(`^(o[0-9]|gpt-5)`)
)

// OpenAIReasoning reports whether the model is one of OpenAI's reasoning
// models: they take max_completion_tokens, never max_tokens, and only the
// default temperature and top_p.
func (m Model) OpenAIReasoning() bool {
	return (m.Provider == ProviderOpenAI || m.Provider == ProviderOllama) && openAIReasoning.MatchString(m.Name)
}

// KeyEnv is the environment variable holding provider's API key, or "" when
// the provider needs none.
func KeyEnv(provider string) string { return keyEnv[provider] }

// BaseURLEnv is the environment variable overriding provider's base URL.
func BaseURLEnv(provider string) string { return baseURLEnv[provider] }

// Model is a parsed llm.model value.
type Model struct {
	Provider string
	// Name is the model name the provider's API takes.
	Name string
}

func (m Model) String() string {
	if m.Provider == ProviderOffline {
		return ProviderOffline
	}
	return m.Provider + ":" + m.Name
}

// ParseModel reads a model name: "offline"; provider:model (google:,
// anthropic:, openai:, ollama:, cohere:); or a bare name whose prefix picks
// the provider: claude-… Anthropic, gemini-… Google, gpt-… and the o series
// OpenAI, command-… Cohere.
func ParseModel(s string) (Model, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Model{}, fmt.Errorf("empty model name")
	}
	if s == ProviderOffline {
		return Model{Provider: ProviderOffline, Name: ProviderOffline}, nil
	}
	if p, name, ok := strings.Cut(s, ":"); ok {
		provider, known := providerAliases[strings.ToLower(p)]
		if !known {
			return Model{}, fmt.Errorf("unknown provider %q in %q: use google, anthropic, openai, ollama, cohere or offline", p, s)
		}
		if name == "" && provider != ProviderOffline {
			return Model{}, fmt.Errorf("%q names no model after the provider", s)
		}
		if provider == ProviderOffline {
			name = ProviderOffline
		}
		return Model{Provider: provider, Name: name}, nil
	}
	switch {
	case strings.HasPrefix(s, "claude-"):
		return Model{Provider: ProviderAnthropic, Name: s}, nil
	case strings.HasPrefix(s, "gemini-"):
		return Model{Provider: ProviderGoogle, Name: s}, nil
	case openAISeries.MatchString(s):
		return Model{Provider: ProviderOpenAI, Name: s}, nil
	case strings.HasPrefix(s, "command-"):
		return Model{Provider: ProviderCohere, Name: s}, nil
	}
	return Model{}, fmt.Errorf("cannot tell the provider of model %q: use offline, a claude-…, gemini-…, gpt-… or command-… model, or provider:model (google:, anthropic:, openai:, ollama:, cohere:)", s)
}
