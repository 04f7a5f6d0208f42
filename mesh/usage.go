package mesh

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// This file counts what models cost: the tokens of a run and of a
// conversation, and the budgets that stop a conversation's next turn, or
// a principal's for the rest of the day, once they are spent.

// Usage counts the tokens a run's model calls used. InputTokens counts
// every prompt token, those the provider's prompt cache served
// (CachedTokens) or stored (CacheWriteTokens) included.
type Usage struct {
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	CachedTokens     int `json:"cached_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	// Cost is what the tokens cost at the configured prices (prices:),
	// in the prices' currency; zero without a price for the model.
	Cost float64 `json:"cost,omitempty"`
}

// Tokens is the tokens a budget counts: input and output.
func (u Usage) Tokens() int { return u.InputTokens + u.OutputTokens }

// Add adds v to u.
func (u *Usage) Add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CachedTokens += v.CachedTokens
	u.CacheWriteTokens += v.CacheWriteTokens
	u.Cost += v.Cost
}

// ConversationUsage is a conversation's usage since it began: the totals,
// and the same by model ("provider:model").
type ConversationUsage struct {
	Usage
	Models map[string]Usage `json:"models,omitempty"`
}

// Add counts u, used by model, in c.
func (c *ConversationUsage) Add(model string, u Usage) {
	c.Usage.Add(u)
	if model == "" {
		return
	}
	if c.Models == nil {
		c.Models = map[string]Usage{}
	}
	m := c.Models[model]
	m.Add(u)
	c.Models[model] = m
}

// AddUsage counts u, used by model, in the conversation's usage.
func (c *Conversation) AddUsage(model string, u Usage) {
	if c.Usage == nil {
		c.Usage = &ConversationUsage{}
	}
	c.Usage.Add(model, u)
}

// ErrBudgetExceeded refuses a turn of a conversation, or of a principal,
// whose token or cost budget is spent: no model is called.
var ErrBudgetExceeded = &Error{kind: "budget_exceeded", status: http.StatusTooManyRequests, message: "mesh: budget exceeded"}

// CodeBudgetExceeded is the RUN_ERROR code of a turn an agent refused
// because a budget was spent.
const CodeBudgetExceeded = "BUDGET_EXCEEDED"

// Budgets bound what models may spend: per conversation, over its whole
// life, and per principal per day (UTC). Zero means no budget. The fields
// are the budgets section's (config.Budgets converts to Budgets).
type Budgets struct {
	ConversationTokens   int
	ConversationCost     float64
	PrincipalDailyTokens int
	PrincipalDailyCost   float64
}

// Daily reports whether a per-principal daily budget is set.
func (b Budgets) Daily() bool { return b.PrincipalDailyTokens > 0 || b.PrincipalDailyCost > 0 }

// Any reports whether any budget is set.
func (b Budgets) Any() bool {
	return b.Daily() || b.ConversationTokens > 0 || b.ConversationCost > 0
}

// CheckConversation refuses the next turn of conversation id, which used
// u so far, when one of its budgets is spent ([ErrBudgetExceeded]). A
// conversation's budget never resets: no Retry-After.
func (b Budgets) CheckConversation(id string, u *ConversationUsage) error {
	if u == nil {
		return nil
	}
	if b.ConversationTokens > 0 && u.Tokens() >= b.ConversationTokens {
		return ErrBudgetExceeded.With(fmt.Sprintf("conversation %s has used %d tokens of its budget of %d (budgets.conversation_tokens); the budget does not reset: start a new conversation",
			id, u.Tokens(), b.ConversationTokens))
	}
	if b.ConversationCost > 0 && u.Cost >= b.ConversationCost {
		return ErrBudgetExceeded.With(fmt.Sprintf("conversation %s has cost %s of its budget of %s (budgets.conversation_cost); the budget does not reset: start a new conversation",
			id, money(u.Cost), money(b.ConversationCost)))
	}
	return nil
}

// CheckDaily refuses a turn of principal (empty: the anonymous one), who
// spent tokens and cost on day now (UTC), when a daily budget is spent:
// [ErrBudgetExceeded] with a Retry-After until the next UTC midnight.
func (b Budgets) CheckDaily(principal string, tokens int, cost float64, now time.Time) error {
	who := "principal " + strconv.Quote(principal)
	if principal == "" {
		who = "the anonymous principal"
	}
	reset := NextDay(now)
	var msg string
	switch {
	case b.PrincipalDailyTokens > 0 && tokens >= b.PrincipalDailyTokens:
		msg = fmt.Sprintf("%s has used %d tokens today of a daily budget of %d (budgets.principal_daily_tokens)", who, tokens, b.PrincipalDailyTokens)
	case b.PrincipalDailyCost > 0 && cost >= b.PrincipalDailyCost:
		msg = fmt.Sprintf("%s has spent %s today of a daily budget of %s (budgets.principal_daily_cost)", who, money(cost), money(b.PrincipalDailyCost))
	default:
		return nil
	}
	wait := int(math.Ceil(reset.Sub(now).Seconds()))
	return ErrBudgetExceeded.With(msg + "; it resets at " + reset.Format(time.RFC3339)).WithRetryAfter(max(1, wait))
}

// Day is the UTC day of t, as the daily budgets count it: 2006-01-02.
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// NextDay is the UTC midnight after t: when a daily budget resets.
func NextDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// money prints an amount of the prices' currency, to a millionth.
func money(v float64) string { return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64) }
