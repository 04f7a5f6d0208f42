package config

import (
	"math"
	"testing"
)

func TestBudgetsSettings(t *testing.T) {
	prices := "prices:\n  gpt-4o: {input: 2.5, output: 10, cached: 1.25}\n  anthropic:claude-sonnet-4-5: {input: 3, output: 15, cached: 0.3, cache_write: 3.75}\n"
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{name: "none", yaml: minimal},
		{name: "tokens", yaml: minimal + "budgets:\n  conversation_tokens: 100000\n  principal_daily_tokens: 1000000\n"},
		{name: "cost with prices", yaml: minimal + prices + "budgets:\n  conversation_cost: 2\n  principal_daily_cost: 20\n"},
		{name: "cost without prices", yaml: minimal + "budgets:\n  principal_daily_cost: 20\n", wantErr: "needs prices"},
		{name: "negative tokens", yaml: minimal + "budgets:\n  conversation_tokens: -1\n", wantErr: "budgets.conversation_tokens"},
		{name: "negative cost", yaml: minimal + prices + "budgets:\n  conversation_cost: -0.5\n", wantErr: "budgets.conversation_cost"},
		{name: "unknown model", yaml: minimal + "prices:\n  mystery-7b: {input: 1, output: 1}\n", wantErr: "prices.mystery-7b"},
		{name: "negative price", yaml: minimal + "prices:\n  gpt-4o: {input: -1, output: 1}\n", wantErr: "prices.gpt-4o"},
		{name: "one model twice", yaml: minimal + "prices:\n  gpt-4o: {input: 1, output: 1}\n  openai:gpt-4o: {input: 2, output: 2}\n", wantErr: "one price per model"},
		{name: "unknown field", yaml: minimal + "prices:\n  gpt-4o: {input: 1, outptu: 1}\n", wantErr: "outptu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parseCase(t, tt.yaml, tt.wantErr)
		})
	}
	c := parseCase(t, minimal+prices, "")
	table := c.PriceTable()
	p, ok := table.Of("openai:gpt-4o")
	if !ok || p.Input != 2.5 {
		t.Fatalf("price of openai:gpt-4o = %+v, %v; want the one given for gpt-4o", p, ok)
	}
	// 1M input of which 400k cached, 100k output: 0.6M×2.5 + 0.4M×1.25 + 0.1M×10.
	if got := p.Cost(1_000_000, 100_000, 400_000, 0); math.Abs(got-3.0) > 1e-9 {
		t.Errorf("cost %v, want 3", got)
	}
	a, _ := table.Of("anthropic:claude-sonnet-4-5")
	// 1,000 plain + 2,000 read + 1,000 written in, 1,000 out.
	want := (1000*3 + 2000*0.3 + 1000*3.75 + 1000*15) / 1e6
	if got := a.Cost(4000, 1000, 2000, 1000); math.Abs(got-want) > 1e-12 {
		t.Errorf("anthropic cost %v, want %v", got, want)
	}
}
