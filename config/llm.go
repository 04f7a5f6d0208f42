package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Providers of models.
const (
	ProviderOffline   = "offline"
	ProviderGoogle    = "google"
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
	ProviderOllama    = "ollama"
)

// Environment variables of API keys and base URLs, by provider.
var (
	keyEnv = map[string]string{
		ProviderGoogle:    "GEMINI_API_KEY",
		ProviderAnthropic: "ANTHROPIC_API_KEY",
		ProviderOpenAI:    "OPENAI_API_KEY",
	}
	baseURLEnv = map[string]string{
		ProviderGoogle:    "GEMINI_BASE_URL",
		ProviderAnthropic: "ANTHROPIC_BASE_URL",
		ProviderOpenAI:    "OPENAI_BASE_URL",
		ProviderOllama:    "OLLAMA_BASE_URL",
	}
	providerAliases = map[string]string{
		"offline": ProviderOffline, "google": ProviderGoogle, "gemini": ProviderGoogle,
		"anthropic": ProviderAnthropic, "claude": ProviderAnthropic,
		"openai": ProviderOpenAI, "ollama": ProviderOllama,
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
// anthropic:, openai:, ollama:); or a bare name whose prefix picks the
// provider: claude-… Anthropic, gemini-… Google, gpt-… and the o series OpenAI.
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
			return Model{}, fmt.Errorf("unknown provider %q in %q: use google, anthropic, openai, ollama or offline", p, s)
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
	}
	return Model{}, fmt.Errorf("cannot tell the provider of model %q: use offline, a claude-…, gemini-… or gpt-… model, or provider:model (google:, anthropic:, openai:, ollama:)", s)
}

// Secret is a credential. It prints, marshals and logs as "[redacted]"; only
// Reveal gives the value.
type Secret string

const redacted = "[redacted]"

func (s Secret) String() string { return redacted }

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return redacted }

// MarshalText keeps encoders from writing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Reveal returns the credential, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// Keys are the API keys found in the environment.
type Keys struct {
	Google    Secret
	Anthropic Secret
	OpenAI    Secret
}

// For returns provider's key.
func (k Keys) For(provider string) Secret {
	switch provider {
	case ProviderGoogle:
		return k.Google
	case ProviderAnthropic:
		return k.Anthropic
	case ProviderOpenAI:
		return k.OpenAI
	}
	return ""
}

func keysFromEnv(getenv func(string) string) Keys {
	return Keys{
		Google:    Secret(getenv(keyEnv[ProviderGoogle])),
		Anthropic: Secret(getenv(keyEnv[ProviderAnthropic])),
		OpenAI:    Secret(getenv(keyEnv[ProviderOpenAI])),
	}
}

// BaseURL is the base URL to use for provider: llm.base_url when the agent's
// model is of that provider, else the provider's environment variable, else "".
func (c *Config) BaseURL(provider string) string {
	if m, err := ParseModel(c.LLM.Model); err == nil && m.Provider == provider && c.LLM.BaseURL != "" {
		return c.LLM.BaseURL
	}
	return c.BaseURLs[provider]
}

// Models lists every model the configuration uses, with the field naming
// it: the agents' ([Config.AgentModels]) and the groups'.
func (c *Config) Models() map[string]string {
	out := c.AgentModels()
	for i, g := range c.Groups {
		if g.Model != "" {
			out[fmt.Sprintf("groups[%d].model", i)] = g.Model
		}
	}
	return out
}

// AgentModels lists the models the agent processes call, with the field
// naming each: llm.model, the agent tree's nodes' and the models of the
// group members defined here.
func (c *Config) AgentModels() map[string]string {
	out := map[string]string{"llm.model": c.LLM.Model}
	var walk func(n *Node, path string)
	walk = func(n *Node, path string) {
		if n.Model != "" {
			out[path+".model"] = n.Model
		}
		for i := range n.Agents {
			walk(&n.Agents[i], fmt.Sprintf("%s.agents[%d]", path, i))
		}
	}
	if c.Agent != nil {
		walk(c.Agent, "agent")
	}
	for i, g := range c.Groups {
		for j, p := range g.Participants {
			if p.Model != "" {
				out[fmt.Sprintf("groups[%d].participants[%d].model", i, j)] = p.Model
			}
		}
	}
	return out
}

// SelectorModels lists the models the group processes call, with the
// field naming each: the selector of every group whose strategy is llm
// (its model, else llm.model). A group of another strategy calls none.
func (c *Config) SelectorModels() map[string]string {
	out := map[string]string{}
	for i, g := range c.Groups {
		switch {
		case g.Strategy != StrategyLLM:
		case g.Model != "":
			out[fmt.Sprintf("groups[%d].model", i)] = g.Model
		default:
			out["llm.model"] = c.LLM.Model
		}
	}
	return out
}

// CheckKeys verifies that every provider the configuration uses has its API
// key in the environment ([Config.CheckModelKeys] of every model).
func (c *Config) CheckKeys() error { return c.CheckModelKeys(c.Models()) }

// CheckModelKeys verifies that the providers of models (by field, as
// [Config.Models] lists them) have their API keys in the environment. Only
// roles that call models need this, each for the models it calls; the
// error names the variable to set.
func (c *Config) CheckModelKeys(models map[string]string) error {
	for _, field := range slices.Sorted(maps.Keys(models)) {
		name := models[field]
		m, err := ParseModel(name)
		if err != nil {
			return &Error{File: c.Path, Field: field, Want: err.Error()}
		}
		env := keyEnv[m.Provider]
		if env == "" || c.Keys.For(m.Provider) != "" {
			continue
		}
		// An OpenAI-compatible server at a custom URL (vLLM, llama.cpp, LM
		// Studio) usually needs no key.
		if m.Provider == ProviderOpenAI && c.BaseURL(ProviderOpenAI) != "" {
			continue
		}
		return &Error{File: c.Path, Field: field, Want: fmt.Sprintf("model %q needs the environment variable %s (its API key); set it, or use llm.model: offline", name, env)}
	}
	return nil
}
