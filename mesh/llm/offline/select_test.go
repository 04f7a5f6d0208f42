package offline

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// selectorSystem is a selector request's system prompt as
// llm.Selection.Request writes it.
func selectorSystem(participants ...string) string {
	var b strings.Builder
	b.WriteString("You choose who speaks next in a group chat.\n\n")
	for _, p := range participants {
		b.WriteString("- " + p + "\n")
	}
	b.WriteString("\n" + llm.SelectorInstruction)
	return b.String()
}

var selectTeam = []string{
	"coder: writes and fixes Go code",
	"reviewer: reviews code changes and pull requests",
	"ops: deploys services to production and handles incidents",
}

func TestOfflineSelectSpeaker(t *testing.T) {
	user := func(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }
	said := func(name, s string) llm.Message {
		return llm.Message{Role: llm.RoleAssistant, Name: name, Content: name + ": " + s}
	}
	ask := user(llm.SelectorQuestion)
	tests := []struct {
		name         string
		participants []string
		msgs         []llm.Message
		want         string
	}{
		{
			name: "description words",
			msgs: []llm.Message{user("please deploy the billing service to production")},
			want: "ops",
		},
		{
			name: "plural and singular alike",
			msgs: []llm.Message{user("any incident right now?")},
			want: "ops",
		},
		{
			name: "name word beats description word",
			msgs: []llm.Message{user("the reviewer should look at the code")},
			want: "reviewer",
		},
		{
			name: "routes the member's answer, not the question",
			msgs: []llm.Message{user("fix the parser"), said("coder", "Fixed; the pull request is ready for review."), ask},
			want: "reviewer",
		},
		{
			name: "the author's own name prefix does not count",
			msgs: []llm.Message{user("hello"), said("ops", "done"), ask},
			want: "coder",
		},
		{
			name: "never the last speaker when another scores",
			msgs: []llm.Message{user("x"), said("coder", "I changed the code; someone please review."), ask},
			want: "reviewer",
		},
		{
			name: "ties by list order, skipping the last speaker",
			msgs: []llm.Message{user("x"), said("coder", "code"), ask},
			want: "reviewer",
		},
		{
			name: "the last speaker when nobody else scores",
			msgs: []llm.Message{user("x"), said("ops", "production incident handled"), ask},
			want: "ops",
		},
		{
			name: "no match: first listed that did not speak last",
			msgs: []llm.Message{user("x"), said("coder", "lorem ipsum"), ask},
			want: "reviewer",
		},
		{
			name: "no match at the start: first listed",
			msgs: []llm.Message{user("lorem ipsum")},
			want: "coder",
		},
		{
			name: "author read from the prefix when Name is empty",
			msgs: []llm.Message{user("x"), {Role: llm.RoleAssistant, Content: "coder: I changed the code"}, ask},
			want: "reviewer",
		},
		{
			name:         "hyphenated names",
			participants: []string{"web-dev: builds pages", "db-admin: tunes queries"},
			msgs:         []llm.Message{user("ask the db admin")},
			want:         "db-admin",
		},
		{
			name:         "empty descriptions",
			participants: []string{"alice:", "bob:"},
			msgs:         []llm.Message{user("bob, your turn")},
			want:         "bob",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := tt.participants
			if ps == nil {
				ps = selectTeam
			}
			resp, err := New().Generate(t.Context(), llm.Request{System: selectorSystem(ps...), Messages: tt.msgs})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tt.want || len(resp.ToolCalls) != 0 {
				t.Errorf("answer %q with %d tool calls, want the bare name %q and no call", resp.Text, len(resp.ToolCalls), tt.want)
			}
		})
	}
}

func TestOfflineSelectIgnoresTools(t *testing.T) {
	req := llm.Request{
		System:   selectorSystem(selectTeam...),
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "list the resources"}},
		Tools:    resourceTools(),
	}
	resp, err := New().Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 0 || resp.Text != "coder" {
		t.Errorf("got text %q, calls %v; want the name coder and no call", resp.Text, resp.ToolCalls)
	}
}

func TestOfflineSelectDeterministic(t *testing.T) {
	req := llm.Request{
		System: selectorSystem(selectTeam...),
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "ship the fix to production after review"},
		},
	}
	first, err := New().Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		resp, err := New().Generate(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Text != first.Text {
			t.Fatalf("answer %q, earlier %q", resp.Text, first.Text)
		}
	}
}
