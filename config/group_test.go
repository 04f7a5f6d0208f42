package config

import (
	"slices"
	"strings"
	"testing"
)

// A participant with enabled: false is not a member and, defined by the
// group, not an agent; the rest keep their capabilities.
func TestDisabledParticipantsLeaveTheGroup(t *testing.T) {
	yaml := minimal + `capabilities: [planning, "infra changes"]
groups:
  - name: desk
    strategy: router
    default: writer
    allowed_transitions:
      writer: [critic, agent-a]
      critic: [writer]
    participants:
      - {agent: writer, prompt: Write., capabilities: [drafting]}
      - {agent: critic, prompt: Criticise., enabled: false}
      - {agent: agent-a}
`
	c, err := Parse("agent.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	var members []string
	for _, p := range c.Group("desk").Participants {
		members = append(members, p.Agent)
	}
	if want := []string{"writer", "agent-a"}; !slices.Equal(members, want) {
		t.Errorf("members = %v, want %v (critic is disabled)", members, want)
	}
	if got, want := c.Group("desk").AllowedTransitions, map[string][]string{"writer": {"agent-a"}}; len(got) != 1 || !slices.Equal(got["writer"], want["writer"]) {
		t.Errorf("allowed_transitions = %v, want %v", got, want)
	}
	if c.AgentNamed("critic") != nil {
		t.Error("the disabled critic is an agent that runs")
	}
	if w := c.AgentNamed("writer"); w == nil || !slices.Equal(w.Capabilities, []string{"drafting"}) {
		t.Errorf("writer = %+v, want capabilities [drafting]", w)
	}
	if !slices.Equal(c.Capabilities, []string{"planning", "infra changes"}) || !c.IsEnabled() {
		t.Errorf("top level: capabilities %v, enabled %v", c.Capabilities, c.IsEnabled())
	}
}

// A disabled top-level agent leaves the groups that name it, and the
// definitions it yields say so.
func TestDisabledTopLevelAgent(t *testing.T) {
	yaml := minimal + "enabled: false\ngroups:\n  - name: desk\n    participants: [{agent: agent-a}, {agent: writer, prompt: Write.}]\n"
	c, err := Parse("agent.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.IsEnabled() {
		t.Error("IsEnabled() = true with enabled: false")
	}
	if ps := c.Group("desk").Participants; len(ps) != 1 || ps[0].Agent != "writer" {
		t.Errorf("members = %+v, want writer alone", ps)
	}
	if w := c.AgentNamed("writer"); w == nil || !w.IsEnabled() {
		t.Errorf("writer = %+v, want an enabled agent (it does not inherit the top level's enabled)", w)
	}
}

func TestDisabledAndCapabilityErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"every member disabled", minimal + "groups:\n  - name: desk\n    participants: [{agent: w, prompt: x, enabled: false}]\n", []string{"groups[0].participants", "no enabled participant"}},
		{"disabled default", minimal + "groups:\n  - name: desk\n    strategy: router\n    default: w\n    participants: [{agent: w, prompt: x, enabled: false}, {agent: agent-a}]\n", []string{"groups[0].default", `"w" is disabled`}},
		{"empty capability", minimal + "capabilities: [\"  \"]\n", []string{"capabilities[0]", "non-empty"}},
		{"long member capability", minimal + "groups:\n  - name: desk\n    participants: [{agent: agent-a, capabilities: [" + strings.Repeat("x", 101) + "]}]\n", []string{"groups[0].participants[0].capabilities[0]", "100 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("agent.yaml", []byte(tt.yaml), env())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
