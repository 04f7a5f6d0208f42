package config

import (
	"fmt"
	"math"
	"sort"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// Budgets bound what the models may spend, in tokens (input and output)
// or, with prices, in cost. A budget spent stops the next turn with 429
// budget_exceeded before any model is called: the bridge refuses the
// message, and an agent refuses work that reaches it another way. A turn
// under way is not cut short, so a budget can be overrun by one turn.
//
// For each number, zero means no budget.
type Budgets struct {
	// ConversationTokens bounds the tokens of one conversation over its
	// whole life.
	ConversationTokens int `yaml:"conversation_tokens"`
	// ConversationCost bounds the cost of one conversation (needs prices).
	ConversationCost float64 `yaml:"conversation_cost"`
	// PrincipalDailyTokens bounds the tokens of the conversations one
	// principal owns, per day (UTC); the anonymous principal is one.
	PrincipalDailyTokens int `yaml:"principal_daily_tokens"`
	// PrincipalDailyCost bounds their cost per day (needs prices).
	PrincipalDailyCost float64 `yaml:"principal_daily_cost"`
}

// PriceTable is the prices section by canonical model name
// ("openai:gpt-4o"), as models name themselves.
func (c *Config) PriceTable() modelspec.Prices {
	if len(c.Prices) == 0 {
		return nil
	}
	out := make(modelspec.Prices, len(c.Prices))
	for name, p := range c.Prices {
		if m, err := modelspec.ParseModel(name); err == nil {
			out[m.String()] = p
		}
	}
	return out
}

func (c *Config) checkBudgets() *fieldErr {
	names := make([]string, 0, len(c.Prices))
	for name := range c.Prices {
		names = append(names, name)
	}
	sort.Strings(names)
	seen := map[string]string{}
	for _, name := range names {
		m, err := modelspec.ParseModel(name)
		if err != nil {
			return &fieldErr{"prices." + name, "a model name as llm.model takes it (gpt-4o, claude-sonnet-4-5, openai:gpt-4o): " + err.Error()}
		}
		if other, dup := seen[m.String()]; dup {
			return &fieldErr{"prices." + name, fmt.Sprintf("one price per model: %s and %s both name %s", other, name, m)}
		}
		seen[m.String()] = name
		if err := c.Prices[name].Check(); err != nil {
			return &fieldErr{"prices." + name, err.Error()}
		}
	}
	b := c.Budgets
	for field, n := range map[string]int{"conversation_tokens": b.ConversationTokens, "principal_daily_tokens": b.PrincipalDailyTokens} {
		if n < 0 {
			return &fieldErr{"budgets." + field, fmt.Sprintf("%d: a number of tokens, or 0 for no budget", n)}
		}
	}
	for field, v := range map[string]float64{"conversation_cost": b.ConversationCost, "principal_daily_cost": b.PrincipalDailyCost} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return &fieldErr{"budgets." + field, fmt.Sprintf("%v: an amount in the prices' currency, or 0 for no budget", v)}
		}
		if v > 0 && len(c.Prices) == 0 {
			return &fieldErr{"budgets." + field, "a cost budget needs prices: add a prices section with the models' input and output prices per million tokens"}
		}
	}
	return nil
}
