package config

import (
	"errors"
	"strings"
	"testing"
)

// TestSamplingSettings: max_tokens, temperature and top_p are read from the
// llm section, from llm nodes and from group members, a node's and a
// member's over the llm section's.
func TestSamplingSettings(t *testing.T) {
	yaml := `name: a
llm:
  model: gpt-4o-mini
  max_tokens: 800
  temperature: 0.4
agent:
  name: root
  type: sequential
  agents:
    - {name: draft, type: llm, temperature: 1.1, top_p: 0.9}
    - {name: check, type: llm, max_tokens: 100, temperature: 0}
groups:
  - name: g
    participants:
      - {agent: critic, prompt: "Criticise.", top_p: 0.3}
`
	c, err := Parse("a.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM.MaxTokens != 800 {
		t.Errorf("llm section: max tokens = %d, want 800", c.LLM.MaxTokens)
	}
	if c.LLM.Temperature == nil {
		t.Error("llm section: temperature = nil, want 0.4")
	} else if *c.LLM.Temperature != 0.4 {
		t.Errorf("llm section: temperature = %v, want 0.4", *c.LLM.Temperature)
	}
	if c.LLM.TopP != nil {
		t.Errorf("llm section: top_p = %v, want nil (not set)", *c.LLM.TopP)
	}
	draft, check := c.Agent.Agents[0].Sampling, c.Agent.Agents[1].Sampling
	if *draft.Temperature != 1.1 || *draft.TopP != 0.9 || draft.MaxTokens != 0 {
		t.Errorf("draft node read as %+v", draft)
	}
	if got := c.LLM.Sampling.Over(check); got.MaxTokens != 100 || *got.Temperature != 0 || got.TopP != nil {
		t.Errorf("check node over the llm section = %+v, want max 100, temperature 0 (set), top_p unset", got)
	}
	critic := c.AgentNamed("critic")
	if critic == nil {
		t.Fatal("no agent critic")
	}
	if s := critic.LLM.Sampling; s.MaxTokens != 800 || *s.Temperature != 0.4 || *s.TopP != 0.3 {
		t.Errorf("member critic's settings = %+v, want the llm section's with top_p 0.3", s)
	}
	if c.LLM.TopP != nil {
		t.Error("the member's top_p leaked into the main agent's llm section")
	}
}

func TestSamplingRefused(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"temperature too high", "name: a\nllm:\n  model: gpt-4o-mini\n  temperature: 2.5\n", []string{"llm.temperature", "between 0 and 2"}},
		{"anthropic temperature", "name: a\nllm:\n  model: claude-sonnet-4-5\n  temperature: 1.5\n", []string{"llm.temperature", "between 0 and 1", "anthropic:claude-sonnet-4-5"}},
		{"anthropic both", "name: a\nllm:\n  model: claude-sonnet-4-5\n  temperature: 0.5\n  top_p: 0.9\n", []string{"llm.top_p", "one or the other"}},
		{"top_p above 1", minimal + "agent:\n  name: r\n  type: llm\n  top_p: 1.2\n", []string{"agent.top_p", "between 0 and 1"}},
		{"negative max_tokens", "name: a\nllm:\n  model: offline\n  max_tokens: -3\n", []string{"llm.max_tokens", "negative"}},
		{"reasoning model", "name: a\nllm:\n  model: o3-mini\nagent:\n  name: r\n  type: sequential\n  agents:\n    - {name: x, type: llm, temperature: 0.2}\n", []string{"agent.agents[0].temperature", "reasoning model"}},
		{"node on another provider", "name: a\nllm:\n  model: gpt-4o-mini\n  temperature: 1.8\nagent:\n  name: r\n  type: sequential\n  agents:\n    - {name: x, type: llm, model: claude-sonnet-4-5}\n", []string{"agent.agents[0].temperature", "between 0 and 1"}},
		{"composite with settings", minimal + "agent:\n  name: r\n  type: sequential\n  temperature: 0.3\n  agents:\n    - {name: x, type: llm}\n", []string{"agent", `"r"`, "belong to llm nodes"}},
		{"member", "name: a\nllm:\n  model: claude-sonnet-4-5\ngroups:\n  - name: g\n    participants:\n      - {agent: b, prompt: p, temperature: 3}\n", []string{"groups[0].participants[0].temperature"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("conf/agent.yaml", []byte(tt.yaml), env())
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a *config.Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
