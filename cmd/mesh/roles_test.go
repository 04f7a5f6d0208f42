package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/config"
)

// mesh agent serves no agent the configuration disables: asked for one
// by name, or left with none, it refuses to start (before it connects).
func TestAgentRoleRefusesDisabledAgents(t *testing.T) {
	t.Parallel()
	yaml := "name: main\nenabled: false\nllm:\n  model: offline\n"
	cfg, err := config.Parse("agent.yaml", []byte(yaml), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no agent to serve"},
		{[]string{"--agents", "main"}, `"main" has enabled: false`},
	} {
		err := runAgent(t.Context(), cfg, tc.args)
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mesh agent %v: %v, want a configuration error saying %q", tc.args, err, tc.want)
		}
	}
}
