package modelspec

// Sampling are the generation settings sent with a model call, each in the
// provider's own field (OpenAI and Ollama temperature, top_p and
// max_tokens or max_completion_tokens; Anthropic temperature, top_p and
// max_tokens; Gemini generationConfig.temperature, topP and
// maxOutputTokens). Unset means the provider's default. The yaml tags are
// the keys package config reads into it (the llm section, an llm node of
// the agent tree, a group member).
type Sampling struct {
	// MaxTokens caps the reply length where the API needs it. Zero means
	// 4096 for the agent, the agent's value for a node.
	MaxTokens int `yaml:"max_tokens"`
	// Temperature: 0 to 2 (0 to 1 for Anthropic).
	Temperature *float64 `yaml:"temperature"`
	// TopP is nucleus sampling: above 0, at most 1.
	TopP *float64 `yaml:"top_p"`
}

// Over returns s with the settings o sets replacing its own: a node's
// settings over its agent's.
func (s Sampling) Over(o Sampling) Sampling {
	if o.MaxTokens != 0 {
		s.MaxTokens = o.MaxTokens
	}
	if o.Temperature != nil {
		s.Temperature = o.Temperature
	}
	if o.TopP != nil {
		s.TopP = o.TopP
	}
	return s
}
