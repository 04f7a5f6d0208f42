package agent

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// priced is a script that names a model the price table knows.
type priced struct{ script }

func (priced) Model() string { return "openai:gpt-4o-mini" }

// Work that reaches the agent without the bridge (here, straight on the
// work stream) is held to the budgets too: once the conversation's
// budget, or its owner's for the day, is spent, the next turn ends with
// BUDGET_EXCEEDED and the model is not called. Usage and cost add up in
// the conversation by model, in the save that applies each run.
func TestBudgetSpentStopsTheNextTurnWithoutAModelCall(t *testing.T) {
	var calls atomic.Int32
	p := priced{script(func(context.Context, llm.Request) (*llm.Response, error) {
		calls.Add(1)
		return &llm.Response{Text: "ok", Usage: llm.Usage{InputTokens: 100, OutputTokens: 10, CachedTokens: 40}}, nil
	})}
	f := newFixture(t, p, func(c *config.Config) {
		c.Prices = map[string]modelspec.Price{"gpt-4o-mini": {Input: 1, Output: 2, Cached: 0.5}}
		c.Budgets = config.Budgets{ConversationTokens: 200, PrincipalDailyTokens: 300}
	})
	// 60 plain input, 40 cached, 10 output tokens a turn.
	const turnCost = (60*1 + 40*0.5 + 10*2) / 1e6
	first := f.conversation()
	f.turn(first, "one")
	_, c := f.turn(first, "two")
	u := c.Usage
	if u == nil || u.Tokens() != 220 || u.CachedTokens != 80 || math.Abs(u.Cost-2*turnCost) > 1e-12 {
		t.Fatalf("conversation usage %+v, want 220 tokens, 80 cached, cost %v", u, 2*turnCost)
	}
	if m := u.Models["openai:gpt-4o-mini"]; m.Tokens() != 220 || m.CachedTokens != 80 {
		t.Errorf("usage by model %+v, want it all on openai:gpt-4o-mini", u.Models)
	}
	if lr := c.LastRun.Usage; lr == nil || lr.Tokens() != 110 || math.Abs(lr.Cost-turnCost) > 1e-12 {
		t.Errorf("last run usage %+v, want the one turn's", lr)
	}
	refused := func(conv, budget string) {
		t.Helper()
		before := calls.Load()
		_, c := f.turn(conv, "again")
		if c.LastRun.ErrorCode != mesh.CodeBudgetExceeded || !strings.Contains(c.LastRun.Error, budget) {
			t.Fatalf("last run %+v, want %s naming %s", c.LastRun, mesh.CodeBudgetExceeded, budget)
		}
		if n := calls.Load() - before; n != 0 {
			t.Errorf("the model was called %d times on a spent budget", n)
		}
	}
	refused(first, "budgets.conversation_tokens")

	// Another conversation of the same (anonymous) owner: 220 of the
	// day's 300 spent, one more turn goes, the next is refused until
	// midnight UTC.
	second := f.conversation()
	f.turn(second, "one")
	refused(second, "budgets.principal_daily_tokens")
	var end *mesh.Event
	for _, ev := range f.events(second) {
		if ev.Type == mesh.EventRunError {
			end = &ev
		}
	}
	if end == nil || end.Code != mesh.CodeBudgetExceeded || end.Metadata["resetAt"] != mesh.NextDay(time.Now()).Format(time.RFC3339) {
		t.Errorf("RUN_ERROR %+v, want %s with resetAt the next UTC midnight", end, mesh.CodeBudgetExceeded)
	}
}
