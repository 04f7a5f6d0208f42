package mesh_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
)

func TestBudgetsRefuseOnceSpent(t *testing.T) {
	b := mesh.Budgets{ConversationTokens: 1000, ConversationCost: 2, PrincipalDailyTokens: 5000, PrincipalDailyCost: 10}
	at := time.Date(2026, 12, 7, 21, 30, 0, 0, time.UTC)
	tests := []struct {
		name      string
		err       error
		want      string // in the message; "" for no refusal
		retryWant int
	}{
		{name: "nothing used", err: b.CheckConversation("c1", nil)},
		{name: "under", err: b.CheckConversation("c1", &mesh.ConversationUsage{Usage: mesh.Usage{InputTokens: 900, OutputTokens: 99, Cost: 1.99}})},
		{name: "tokens spent", err: b.CheckConversation("c1", &mesh.ConversationUsage{Usage: mesh.Usage{InputTokens: 900, OutputTokens: 100}}), want: "conversation c1 has used 1000 tokens of its budget of 1000 (budgets.conversation_tokens)"},
		{name: "cost spent", err: b.CheckConversation("c1", &mesh.ConversationUsage{Usage: mesh.Usage{InputTokens: 1, Cost: 2.0000001}}), want: "has cost 2 of its budget of 2 (budgets.conversation_cost)"},
		{name: "day under", err: b.CheckDaily("alice", 4999, 9.99, at)},
		{name: "day tokens", err: b.CheckDaily("alice", 5000, 0, at), want: `principal "alice" has used 5000 tokens today of a daily budget of 5000 (budgets.principal_daily_tokens); it resets at 2026-12-08T00:00:00Z`, retryWant: 9000},
		{name: "day cost, anonymous", err: b.CheckDaily("", 0, 10, at), want: "the anonymous principal has spent 10 today of a daily budget of 10 (budgets.principal_daily_cost)", retryWant: 9000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == "" {
				if tt.err != nil {
					t.Fatalf("refused: %v", tt.err)
				}
				return
			}
			if !errors.Is(tt.err, mesh.ErrBudgetExceeded) || mesh.HTTPStatus(tt.err) != 429 || mesh.ErrorKind(tt.err) != "budget_exceeded" {
				t.Fatalf("error %v: want 429 budget_exceeded", tt.err)
			}
			if !strings.Contains(tt.err.Error(), tt.want) {
				t.Errorf("message %q, want it to say %q", tt.err, tt.want)
			}
			if got := mesh.RetryAfter(tt.err); got != tt.retryWant {
				t.Errorf("Retry-After %d, want %d", got, tt.retryWant)
			}
		})
	}
	if (mesh.Budgets{}).Any() || !(mesh.Budgets{PrincipalDailyCost: 1}).Daily() {
		t.Error("Any and Daily: no budget is none, a daily cost is daily")
	}
}

func TestConversationUsageAddsUpByModel(t *testing.T) {
	var c mesh.Conversation
	c.AddUsage("openai:gpt-4o", mesh.Usage{InputTokens: 100, OutputTokens: 10, CachedTokens: 60, Cost: 0.5})
	c.AddUsage("anthropic:claude-sonnet-4-5", mesh.Usage{InputTokens: 50, OutputTokens: 5, CacheWriteTokens: 20, Cost: 0.25})
	c.AddUsage("openai:gpt-4o", mesh.Usage{InputTokens: 100, OutputTokens: 10, CachedTokens: 90, Cost: 0.5})
	u := c.Usage
	if u.Tokens() != 275 || u.CachedTokens != 150 || u.CacheWriteTokens != 20 || u.Cost != 1.25 {
		t.Errorf("total %+v, want 275 tokens, 150 cached, 20 written, cost 1.25", u.Usage)
	}
	if g := u.Models["openai:gpt-4o"]; g.InputTokens != 200 || g.CachedTokens != 150 || g.Cost != 1 {
		t.Errorf("gpt-4o %+v, want its two runs", g)
	}
	if got := mesh.NextDay(time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("x", -3600))); !got.Equal(time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("NextDay = %v: want the UTC midnight after (00:59:59 UTC on Jan 1 → Jan 2)", got)
	}
}
