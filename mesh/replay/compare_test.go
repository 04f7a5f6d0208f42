package replay

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
)

func call(tool string, args map[string]any) Call { return Call{Tool: tool, Arguments: args} }

func kinds(d []CallDiff) string {
	var out []string
	for _, c := range d {
		out = append(out, c.Kind)
	}
	return strings.Join(out, ",")
}

func TestCompareCallsByPositionAndTool(t *testing.T) {
	list, add := "r/list", "r/add"
	for _, tc := range []struct {
		name           string
		original, repl []Call
		want           string
	}{
		{"none", nil, nil, ""},
		{"same, key order and number spelling aside", []Call{call(list, map[string]any{"a": 1.0, "b": "x"})}, []Call{call(list, map[string]any{"b": "x", "a": 1})}, "same"},
		{"empty and absent arguments are the same", []Call{call(list, nil)}, []Call{call(list, map[string]any{})}, "same"},
		{"same tool, other arguments", []Call{call(list, map[string]any{"a": 1.0})}, []Call{call(list, map[string]any{"a": 2.0})}, "different"},
		{"another tool at a position: missing and added", []Call{call(list, nil)}, []Call{call(add, nil)}, "missing,added"},
		{"a call more", []Call{call(list, nil)}, []Call{call(list, nil), call(add, map[string]any{"name": "x"})}, "same,added"},
		{"a call fewer", []Call{call(list, nil), call(add, nil)}, []Call{call(list, nil)}, "same,missing"},
		{"no call at all", []Call{call(list, nil)}, nil, "missing"},
		{"only the replay calls", nil, []Call{call(list, nil)}, "added"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CompareCalls(tc.original, tc.repl)
			if k := kinds(got); k != tc.want {
				t.Errorf("kinds %q, want %q", k, tc.want)
			}
		})
	}
}

func TestCompareTurnCounts(t *testing.T) {
	orig := &Turn{User: "u", Answer: " The answer.\n", Calls: []Call{call("r/list", nil), call("r/list", map[string]any{"n": 1.0})}}
	rep := &Turn{User: "u", Answer: "The answer.", Calls: []Call{call("r/list", nil), call("r/list", map[string]any{"n": 2.0}), {Tool: "r/add", StandIn: true}}}
	tr := CompareTurn(0, orig, rep, true)
	want := Counts{Turns: 1, SameCalls: 1, DifferentCalls: 1, AddedCalls: 1, ProposedCalls: 1, ComparedAnswers: 1}
	if tr.Counts != want {
		t.Errorf("counts %+v, want %+v", tr.Counts, want)
	}
	if tr.AnswerChanged || len(tr.Proposed) != 1 || tr.Proposed[0].Tool != "r/add" {
		t.Errorf("answer changed %v, proposed %v: want unchanged (white space aside) and r/add proposed", tr.AnswerChanged, tr.Proposed)
	}
	// A replay that never got to the turn misses its calls and changes
	// its answer.
	tr = CompareTurn(1, orig, nil, true)
	if want := (Counts{Turns: 1, MissingCalls: 2, ComparedAnswers: 1, ChangedAnswers: 1}); tr.Counts != want {
		t.Errorf("a turn not replayed: counts %+v, want %+v", tr.Counts, want)
	}
	// A conversation of a file has only user messages: nothing compared.
	tr = CompareTurn(0, &Turn{User: "u"}, rep, false)
	if want := (Counts{Turns: 1, ProposedCalls: 1}); tr.Counts != want || tr.Calls != nil {
		t.Errorf("a turn of a file: counts %+v calls %v, want %+v and none compared", tr.Counts, tr.Calls, want)
	}
}

func TestReportFinishChecksThresholds(t *testing.T) {
	c := ConversationReport{Turns: []TurnReport{
		{Counts: Counts{Turns: 1, DifferentCalls: 2, ComparedAnswers: 1, ChangedAnswers: 1}, LatencyMS: 10, Usage: &mesh.Usage{InputTokens: 1000, OutputTokens: 10}},
		{Counts: Counts{Turns: 1, AddedCalls: 1, ComparedAnswers: 1}, LatencyMS: 30},
	}}
	c.Finish(&Prices{Input: 1, Output: 2})
	if c.Usage.InputTokens != 1000 || c.Cost == nil || *c.Cost != 0.00102 || c.Latency.P50 != 10 || c.Latency.P99 != 30 {
		t.Errorf("conversation: usage %+v cost %v latency %+v", c.Usage, c.Cost, c.Latency)
	}
	r := Report{Conversations: []ConversationReport{c}, Thresholds: NoThresholds()}
	r.Finish()
	if r.Exceeded != nil {
		t.Errorf("no thresholds: exceeded %v", r.Exceeded)
	}
	r.Thresholds.MaxDifferentCalls, r.Thresholds.MaxAddedCalls, r.Thresholds.MaxChangedAnswers = 2, 0, 0.5
	r.Finish()
	if want := []string{"added calls: 1 > 0"}; !reflect.DeepEqual(r.Exceeded, want) {
		t.Errorf("exceeded %v, want %v (2 different calls are allowed, 1 of 2 answers changed is 0.5)", r.Exceeded, want)
	}
	r.Thresholds.MaxDifferentCalls, r.Thresholds.MaxChangedAnswers = 1, 0.49
	r.Finish()
	if len(r.Exceeded) != 3 {
		t.Errorf("exceeded %v, want different calls, added calls and changed answers", r.Exceeded)
	}
}

func TestTurnsOfSplitsAtUserMessages(t *testing.T) {
	msgs := []mesh.Message{
		{Role: mesh.RoleSystem, Content: "prompt"},
		{Role: mesh.RoleUser, Content: "one"},
		{Role: mesh.RoleAssistant, ToolCalls: []mesh.ToolCall{{ID: "c1", Name: "resources_list", Server: "resources", Tool: "resources_list"}}},
		{Role: mesh.RoleTool, ToolCallID: "c1", Content: "[]"},
		{Role: mesh.RoleAssistant, ToolCalls: []mesh.ToolCall{{ID: "c2", Name: "resources_add", Server: "resources", Tool: "resources_add", Arguments: map[string]any{"name": "x"}}}},
		{Role: mesh.RoleTool, ToolCallID: "c2", Content: "not run", StandIn: true},
		{Role: mesh.RoleAssistant, Content: "Done."},
		{Role: mesh.RoleAssistant, Content: "Approval needed", Notice: true},
		{Role: mesh.RoleUser, Content: "two"},
		{Role: mesh.RoleAssistant, ToolCalls: []mesh.ToolCall{{ID: "c3", Name: "exit_loop"}}},
	}
	got := TurnsOf(msgs)
	want := []Turn{
		{User: "one", Answer: "Done.", Calls: []Call{{Tool: "resources/resources_list"}, {Tool: "resources/resources_add", Arguments: map[string]any{"name": "x"}, StandIn: true}}},
		{User: "two", Calls: []Call{{Tool: "exit_loop"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("turns\n%+v\nwant\n%+v", got, want)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(100 - i)
	}
	if p := Percentile(v, 50); p != 50 {
		t.Errorf("p50 %v, want 50", p)
	}
	if p := Percentile(v, 99); p != 99 {
		t.Errorf("p99 %v, want 99", p)
	}
	if p := Percentile(nil, 99); p != 0 {
		t.Errorf("p99 of none %v, want 0", p)
	}
}
