package config

import "github.com/agentmesh/agentmesh/mesh/llm/modelspec"

// Group is a group chat: several agents in one conversation, the next
// speaker chosen by a strategy after every turn.
type Group struct {
	Name         string        `yaml:"name"`
	Description  string        `yaml:"description"`
	Participants []Participant `yaml:"participants"`
	// Strategy picks the next speaker: round_robin (the default), priority,
	// router or llm.
	Strategy string `yaml:"strategy"`
	// Model plays the selector of the llm strategy; empty means llm.model.
	Model string `yaml:"model"`
	// SelectorPrompt replaces the llm strategy's instructions; the list of
	// participants and the recent history follow it.
	SelectorPrompt string `yaml:"selector_prompt"`
	// MaxTurns bounds the member turns that answer one user message. Zero
	// means 10.
	MaxTurns int `yaml:"max_turns"`
	// MaxConsecutive bounds the turns one member takes in a row. Zero means 1.
	MaxConsecutive int `yaml:"max_consecutive"`
	// MinInterval is the least time between two turns of one member.
	MinInterval Duration `yaml:"min_interval"`
	// TerminationPhrase in a member's answer ends the chat. Empty means
	// TERMINATE.
	TerminationPhrase string `yaml:"termination_phrase"`
	// AllowedTransitions lists, by member, the members that may speak after
	// it; a member not listed may be followed by anyone.
	AllowedTransitions map[string][]string `yaml:"allowed_transitions"`
	// Default is the router strategy's member when no keyword or pattern
	// matches.
	Default string `yaml:"default"`
}

// Group defaults.
const (
	StrategyRoundRobin = "round_robin"
	StrategyPriority   = "priority"
	StrategyRouter     = "router"
	StrategyLLM        = "llm"

	DefaultGroupMaxTurns       = 10
	DefaultGroupMaxConsecutive = 1
	DefaultTerminationPhrase   = "TERMINATE"
)

// Participant is a member of a group: an agent, by name. With a prompt or a
// model it is defined here (an agent of this mesh with the top-level
// tools); without, it is the top-level agent when it has its name, or an
// agent that another process serves (its own agent.yaml).
type Participant struct {
	Agent       string `yaml:"agent"`
	Description string `yaml:"description"`
	// Enabled false leaves the member out of the group (and, when the
	// group defines it, out of the agents that run). Absent means true.
	Enabled *bool `yaml:"enabled"`
	// Capabilities are what the member says it can do: shown in the
	// directory when the group defines it, and as tags of its A2A skill.
	Capabilities []string `yaml:"capabilities"`
	// Priority orders members for the priority and router strategies:
	// higher first.
	Priority int `yaml:"priority"`
	// Keywords (words, case-insensitive) and Patterns (regular
	// expressions) route a message to the member.
	Keywords []string `yaml:"keywords"`
	Patterns []string `yaml:"patterns"`
	// AfterTools (shell patterns of tool names, as path.Match has them:
	// "resources_*") route to the member after a turn whose speaker
	// called a matching tool: what the last turn did, not only what it
	// said, decides who speaks next.
	AfterTools []string `yaml:"after_tools"`
	Prompt     string   `yaml:"prompt"`
	Model      string   `yaml:"model"`
	// Sampling: the member's max_tokens, temperature and top_p, over the
	// llm section, when it is defined here.
	modelspec.Sampling `yaml:",inline"`
}

// Defined reports whether the participant is an agent defined by the group.
func (p Participant) Defined() bool { return p.Prompt != "" || p.Model != "" }

// IsEnabled reports whether the member takes part (enabled is absent or
// true).
func (p Participant) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// Group finds a group by name.
func (c *Definition) Group(name string) *Group {
	for i := range c.Groups {
		if c.Groups[i].Name == name {
			return &c.Groups[i]
		}
	}
	return nil
}
