package agent

import (
	"context"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// This file counts what a run's model calls cost and holds the budgets.
// The bridge refuses a message past a budget before it is queued; the
// agent checks again before its first model call of every work item, so
// that work reaching it another way (a tree's steps, a group's members, a
// resume, a message queued over NATS) is held to the same budgets. The
// agent is the one writer of the principals' daily spend (mesh_usage).

// spending is what the role needs for usage: the prices and budgets of
// the configuration, and the daily spend when a daily budget is set.
type spending struct {
	prices  modelspec.Prices
	budgets mesh.Budgets
	daily   *limits.Spend
}

// runUsage is what the run's model calls used, with their cost at the
// model's price when it has one.
func (t *turn) runUsage() mesh.Usage {
	u := t.ex.usage
	out := mesh.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens}
	if p, ok := t.a.spend.prices.Of(t.ex.model); ok {
		out.Cost = p.Cost(u.InputTokens, u.OutputTokens, u.CachedTokens, u.CacheWriteTokens)
	}
	return out
}

// countCost adds a model call's cost to mesh_model_cost_total, when its
// model has a price.
func (t *turn) countCost(model string, in, out, cached, written int) {
	p, ok := t.a.spend.prices.Of(model)
	if !ok {
		return
	}
	provider, name, found := strings.Cut(model, ":")
	if !found {
		provider, name = model, model
	}
	telemetry.ModelCost(provider, name, p.Cost(in, out, cached, written))
}

// overBudget ends the run with BUDGET_EXCEEDED, before any model call,
// when the conversation's budget or its owner's daily one is spent; it
// reports whether it did. A daily spend that cannot be read lets the run
// through: a budget must not turn a blip into an outage.
func (t *turn) overBudget(ctx context.Context) bool {
	b := t.a.spend.budgets
	if !b.Any() || t.conv.Direct {
		return false
	}
	err := b.CheckConversation(t.conv.ID, t.conv.Usage)
	if err == nil && t.a.spend.daily != nil {
		now := time.Now()
		tally, rerr := t.a.spend.daily.Of(ctx, mesh.Day(now), t.conv.Owner)
		if rerr != nil {
			t.log.Warn().Err(rerr).Msg("the daily spend could not be read; the turn goes on")
			return false
		}
		if err = b.CheckDaily(t.conv.Owner, tally.Tokens, tally.Cost, now); err != nil {
			t.end.resetAt = mesh.NextDay(now)
		}
	}
	if err == nil {
		return false
	}
	msg := err.Error()
	t.log.Info().Str("budget", msg).Msg("budget spent: the turn is refused")
	t.end.errCode, t.end.errText = mesh.CodeBudgetExceeded, msg
	t.notice("Budget exceeded: " + msg)
	t.end.outcome = mesh.OutcomeError
	return true
}

// addSpend adds what the run's model calls used to its conversation's
// owner's daily spend, when a daily budget is set. It counts what the
// provider billed, so a run whose outcome is dropped, or that runs again
// after a crash, is counted each time it called the model.
func (t *turn) addSpend(ctx context.Context) {
	if t.a.spend.daily == nil || t.ex.usage == (llm.Usage{}) {
		return // nothing to count: no daily budget, or no tokens
	}
	u := t.runUsage()
	if err := t.a.spend.daily.Add(ctx, mesh.Day(time.Now()), t.conv.Owner, limits.Tally{Tokens: u.Tokens(), Cost: u.Cost}); err != nil {
		t.log.Warn().Err(err).Int("tokens", u.Tokens()).Msg("the daily spend could not be counted")
	}
}
