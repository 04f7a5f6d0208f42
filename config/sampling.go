package config

import (
	"fmt"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// The highest temperature every API accepts; Anthropic's stops at 1.
const (
	maxTemperature          = 2.0
	maxAnthropicTemperature = 1.0
)

// checkSamplings checks the sampling settings of the llm section, of the
// tree's llm nodes and of the group members defined here, each against the
// API of the model it is sent to.
func (c *Config) checkSamplings() *fieldErr {
	if err := checkSampling("llm", c.LLM.Model, c.LLM.Sampling); err != nil {
		return err
	}
	var walk func(n *Node, path string) *fieldErr
	walk = func(n *Node, path string) *fieldErr {
		if n.Type != NodeLLM && n.Type != "" && n.Sampling != (modelspec.Sampling{}) {
			return &fieldErr{path, fmt.Sprintf("node %q is a %s node: max_tokens, temperature and top_p belong to llm nodes", n.Name, n.Type)}
		}
		model := n.Model
		if model == "" {
			model = c.LLM.Model
		}
		// A node's settings are sent over the llm section's: check what
		// goes out.
		if err := checkSampling(path, model, c.LLM.Sampling.Over(n.Sampling)); err != nil {
			return err
		}
		for i := range n.Agents {
			if err := walk(&n.Agents[i], fmt.Sprintf("%s.agents[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if c.Agent != nil {
		if err := walk(c.Agent, "agent"); err != nil {
			return err
		}
	}
	for i, g := range c.Groups {
		for j, p := range g.Participants {
			model := p.Model
			if model == "" {
				model = c.LLM.Model
			}
			if err := checkSampling(fmt.Sprintf("groups[%d].participants[%d]", i, j), model, c.LLM.Sampling.Over(p.Sampling)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSampling checks settings sent to the API of model (a valid name:
// checkModels has parsed it).
func checkSampling(field, model string, s modelspec.Sampling) *fieldErr {
	m, err := modelspec.ParseModel(model)
	if err != nil {
		return &fieldErr{field + ".model", err.Error()}
	}
	if s.MaxTokens < 0 {
		return &fieldErr{field + ".max_tokens", "must not be negative"}
	}
	hi := maxTemperature
	if m.Provider == modelspec.ProviderAnthropic {
		hi = maxAnthropicTemperature
	}
	if t := s.Temperature; t != nil && (*t < 0 || *t > hi) {
		return &fieldErr{field + ".temperature", fmt.Sprintf("must be between 0 and %g for %s", hi, m)}
	}
	if p := s.TopP; p != nil && (*p < 0 || *p > 1) {
		return &fieldErr{field + ".top_p", "must be between 0 and 1"}
	}
	switch {
	case m.Provider == modelspec.ProviderAnthropic && s.Temperature != nil && s.TopP != nil:
		// Anthropic's API asks for one or the other, and its newest
		// models refuse a request with both.
		return &fieldErr{field + ".top_p", fmt.Sprintf("cannot be set with temperature for %s: Anthropic takes one or the other", m)}
	case m.OpenAIReasoning() && s.Temperature != nil && *s.Temperature != 1:
		return &fieldErr{field + ".temperature", fmt.Sprintf("%s is a reasoning model: it takes only the default temperature (1); remove the setting", m)}
	case m.OpenAIReasoning() && s.TopP != nil && *s.TopP != 1:
		return &fieldErr{field + ".top_p", fmt.Sprintf("%s is a reasoning model: it takes only the default top_p (1); remove the setting", m)}
	}
	return nil
}
