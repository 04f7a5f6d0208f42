package modelspec

import "fmt"

// Reasoning efforts.
const (
	EffortLow    = "low"
	EffortMedium = "medium"
	EffortHigh   = "high"
)

// Reasoning asks a model to reason before it answers, and how much: an
// effort, a budget of tokens, or both. The zero value asks for nothing (the
// model's default). The yaml tags are the keys of llm.reasoning.
type Reasoning struct {
	// Effort is low, medium or high: OpenAI's reasoning_effort, Gemini 3's
	// thinkingLevel, and a budget for the APIs that take one when
	// BudgetTokens is zero.
	Effort string `yaml:"effort"`
	// BudgetTokens is how many tokens the model may spend reasoning:
	// Anthropic's thinking.budget_tokens (1024 at least), Gemini 2.5's
	// thinkingBudget.
	BudgetTokens int `yaml:"budget_tokens"`
}

// On says r asks for reasoning.
func (r Reasoning) On() bool { return r.Effort != "" || r.BudgetTokens > 0 }

// Check says what is wrong with r, or nil.
func (r Reasoning) Check() error {
	switch r.Effort {
	case "", EffortLow, EffortMedium, EffortHigh:
	default:
		return fmt.Errorf("effort %q: use low, medium or high", r.Effort)
	}
	if r.BudgetTokens < 0 {
		return fmt.Errorf("budget_tokens %d: must not be negative", r.BudgetTokens)
	}
	return nil
}

// Budget is the reasoning budget in tokens: BudgetTokens, else the
// effort's (low 1024, medium 4096, high 16384), else 0.
func (r Reasoning) Budget() int {
	if r.BudgetTokens > 0 {
		return r.BudgetTokens
	}
	switch r.Effort {
	case EffortLow:
		return 1024
	case EffortMedium:
		return 4096
	case EffortHigh:
		return 16384
	}
	return 0
}
