package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

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

func keysFromEnv(getenv func(string) string) modelspec.Keys {
	return modelspec.Keys{
		Google:    modelspec.Key(getenv(modelspec.KeyEnv(modelspec.ProviderGoogle))),
		Anthropic: modelspec.Key(getenv(modelspec.KeyEnv(modelspec.ProviderAnthropic))),
		OpenAI:    modelspec.Key(getenv(modelspec.KeyEnv(modelspec.ProviderOpenAI))),
		Cohere:    modelspec.Key(getenv(modelspec.KeyEnv(modelspec.ProviderCohere))),
	}
}

// BaseURL is the base URL to use for provider: llm.base_url when the agent's
// model is of that provider, else the provider's environment variable, else "".
func (c *Config) BaseURL(provider string) string {
	if m, err := modelspec.ParseModel(c.LLM.Model); err == nil && m.Provider == provider && c.LLM.BaseURL != "" {
		return c.LLM.BaseURL
	}
	return c.BaseURLs[provider]
}

// Models lists every model the configuration uses, with the field naming
// it: the agents' ([Definition.AgentModels]) and the groups'.
func (c *Definition) Models() map[string]string {
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
func (c *Definition) AgentModels() map[string]string {
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
func (c *Definition) SelectorModels() map[string]string {
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
// [Definition.Models] lists them) have their API keys in the environment. Only
// roles that call models need this, each for the models it calls; the
// error names the variable to set.
func (c *Config) CheckModelKeys(models map[string]string) error {
	for _, field := range slices.Sorted(maps.Keys(models)) {
		name := models[field]
		m, err := modelspec.ParseModel(name)
		if err != nil {
			return &Error{File: c.Path, Field: field, Want: err.Error()}
		}
		env := modelspec.KeyEnv(m.Provider)
		if env == "" || c.Keys.For(m.Provider) != "" {
			continue
		}
		// An OpenAI-compatible server at a custom URL (vLLM, llama.cpp, LM
		// Studio) usually needs no key.
		if m.Provider == modelspec.ProviderOpenAI && c.BaseURL(modelspec.ProviderOpenAI) != "" {
			continue
		}
		return &Error{File: c.Path, Field: field, Want: fmt.Sprintf("model %q needs the environment variable %s (its API key); set it, or use llm.model: offline", name, env)}
	}
	return nil
}
