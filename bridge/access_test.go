package bridge

import (
	"testing"

	"github.com/agentmesh/agentmesh/config"
)

// TestEveryRouteHasARule: a route registered without a rule in the access
// table fails here (and needs admin at run time).
func TestEveryRouteHasARule(t *testing.T) {
	routes := Routes(Config{Agent: &config.Config{Name: "a"}})
	if len(routes) < 20 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	seen := map[string]bool{}
	for _, r := range routes {
		if !r.Known {
			t.Errorf("route %q has no access rule in access.go", r.Pattern)
		}
		seen[r.Pattern] = true
	}
	for p := range access {
		if !seen[p] {
			t.Errorf("access rule %q names no route", p)
		}
	}
}
