package group_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/nodes/group"
)

// labelled is a message (and the tools the turn before it called) with the
// member a person would have chosen to answer it, for the team group.
var labelled = []struct {
	msg   string
	tools []string
	want  string
}{
	{"There is a bug in parser.go: it panics on empty input", nil, "coder"},
	{"Can you fix the failing test in handler.go?", nil, "coder"},
	{"Please review PR #412 before lunch", nil, "reviewer"},
	{"I opened a pull request for the cache change, take a look", nil, "reviewer"},
	{"Deploy the payments service to production", nil, "ops"},
	{"We have an incident: checkout is returning 500s", nil, "ops"},
	{"Roll back yesterday's release, it broke login", nil, "ops"},
	{"kubectl get pods shows CrashLoopBackOff for api", nil, "ops"},
	{"Update the README with the new install steps", nil, "writer"},
	{"The docs for the REST API are out of date", nil, "writer"},
	{"Write the code for the retry helper", nil, "coder"},
	{"Review the diff of main.go and tell me what you think", nil, "reviewer"},
	{"fix the typo in the docs", nil, "writer"},
	{"The deploy pipeline is stuck after the last merge", nil, "ops"},
	{"PR #77 needs a second reviewer", nil, "reviewer"},
	{"there's a bug when the config file is missing", nil, "coder"},
	{"Add a section to the readme about metrics", nil, "writer"},
	{"Incident review: what caused the outage?", nil, "ops"},
	{"done, I changed store.go", []string{"write_file", "git_commit"}, "reviewer"},
	{"pushed the fix", []string{"git_push"}, "reviewer"},
	{"rolled it out", []string{"kubectl_apply"}, "ops"},
	{"the page is updated", []string{"write_docs"}, "writer"},
	{"code compiles now, fix in util.go", nil, "coder"},
	{"Review pull request 19 for style", nil, "reviewer"},
	{"deploy docs site to production", nil, "ops"},
	{"please fix the flaky bug in queue.go", nil, "coder"},
	{"rollback the canary", nil, "ops"},
	{"readme typo", nil, "writer"},
	{"who broke the build? the bug is in build.go", nil, "coder"},
	{"approve PR #5 once the review comments are addressed", nil, "reviewer"},
}

// The keyword, pattern and tool rules of a group choose the member a
// person would have chosen for at least 90 % of a labelled set of
// messages. The figure of each strategy is logged; the llm strategy's
// depends on the model, here the offline planner.
func TestSpeakerChoicesOnALabelledSet(t *testing.T) {
	t.Parallel()
	g := team("", func(g *config.Group) {
		g.Participants[1].AfterTools = []string{"git_*"}
		g.Participants[2].AfterTools = []string{"kubectl_*"}
		g.Participants[3].AfterTools = []string{"write_docs"}
		g.MaxConsecutive = 10
	})
	for _, strategy := range []string{"router", "priority", "llm"} {
		t.Run(strategy, func(t *testing.T) {
			g := g
			g.Strategy = strategy
			s := mustSelector(t, g, offline.New())
			right := 0
			for _, l := range labelled {
				c, err := s.Next(t.Context(), group.Turn{Recent: []string{"user"}, Message: l.msg, Tools: l.tools,
					History: []group.Message{{Role: "user", Content: l.msg}}})
				if err != nil {
					t.Fatal(err)
				}
				if c.Speaker == l.want {
					right++
				} else {
					t.Logf("%q: %s chose %s (%s), a person %s", l.msg, strategy, c.Speaker, c.Reason, l.want)
				}
			}
			share := float64(right) / float64(len(labelled))
			t.Logf("%s: %d of %d choices right (%.0f %%)", strategy, right, len(labelled), 100*share)
			if strategy != "llm" && share < 0.9 {
				t.Errorf("%s chose right %.0f %% of the time, want at least 90 %%", strategy, 100*share)
			}
		})
	}
}
