package group_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/nodes/group"
)

// team is a group of four with keywords, patterns and priorities.
func team(strategy string, edit ...func(*config.Group)) config.Group {
	g := config.Group{
		Name:     "team",
		Strategy: strategy,
		Participants: []config.Participant{
			{Agent: "coder", Description: "writes and fixes Go code", Priority: 1,
				Keywords: []string{"code", "bug", "fix"}, Patterns: []string{`[a-z]+[.]go`}},
			{Agent: "reviewer", Description: "reviews code changes and pull requests", Priority: 2,
				Keywords: []string{"review", "Pull  Request"}, Patterns: []string{`(?i)PR #[0-9]+`}},
			{Agent: "ops", Description: "deploys services to production and handles incidents", Priority: 3,
				Keywords: []string{"deploy", "incident", "rollback"}, Patterns: []string{`(?i)kubectl`}},
			{Agent: "writer", Description: "writes documentation", Priority: 0,
				Keywords: []string{"docs", "readme"}},
		},
		MaxConsecutive: 1,
	}
	for _, e := range edit {
		e(&g)
	}
	return g
}

// fakeLLM is a scripted selector model.
type fakeLLM func(ctx context.Context, req llm.Request) (*llm.Response, error)

func (fakeLLM) Model() string { return "fake" }
func (f fakeLLM) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return f(ctx, req)
}

// answers is a selector model that always answers text.
func answers(text string) fakeLLM {
	return func(context.Context, llm.Request) (*llm.Response, error) { return &llm.Response{Text: text}, nil }
}

func mustSelector(t testing.TB, g config.Group, p llm.Provider) *group.Selector {
	t.Helper()
	s, err := group.NewSelector(g, p)
	if err != nil {
		t.Fatalf("NewSelector: %v", err)
	}
	return s
}

func checkChoice(t *testing.T, got, want group.Choice) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("choice differs:\n got  %+v\n want %+v", got, want)
	}
}

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestNext(t *testing.T) {
	maxConsecutive := func(n int) func(*config.Group) { return func(g *config.Group) { g.MaxConsecutive = n } }
	transitions := func(tr map[string][]string) func(*config.Group) {
		return func(g *config.Group) { g.AllowedTransitions = tr }
	}
	minInterval := func(d time.Duration) func(*config.Group) {
		return func(g *config.Group) { g.MinInterval = config.Duration(d) }
	}
	withDefault := func(name string) func(*config.Group) { return func(g *config.Group) { g.Default = name } }
	solo := func(g *config.Group) { g.Participants = g.Participants[:1] }

	tests := []struct {
		name  string
		group config.Group
		turn  group.Turn
		want  group.Choice
	}{
		// round_robin
		{
			name:  "round robin: first at the start",
			group: team(""),
			want:  group.Choice{Speaker: "coder", Strategy: "round_robin", Reason: "first in turn"},
		},
		{
			name:  "round robin: next after the last speaker",
			group: team("round_robin"),
			turn:  group.Turn{Recent: []string{"coder"}},
			want:  group.Choice{Speaker: "reviewer", Strategy: "round_robin", Reason: "next in turn"},
		},
		{
			name:  "round robin: the last speaker is not listed as skipped",
			group: team("round_robin", maxConsecutive(1)),
			turn:  group.Turn{Recent: []string{"reviewer", "reviewer"}},
			want:  group.Choice{Speaker: "ops", Strategy: "round_robin", Reason: "next in turn"},
		},
		{
			name:  "round robin: wraps around",
			group: team("round_robin"),
			turn:  group.Turn{Recent: []string{"ops", "writer"}},
			want:  group.Choice{Speaker: "coder", Strategy: "round_robin", Reason: "next in turn"},
		},
		{
			name:  "round robin: continues after a user message",
			group: team("round_robin"),
			turn:  group.Turn{Recent: []string{"ops", "user"}},
			want:  group.Choice{Speaker: "writer", Strategy: "round_robin", Reason: "next in turn"},
		},
		{
			name:  "a user message ends a run",
			group: team("round_robin", solo),
			turn:  group.Turn{Recent: []string{"coder", "user"}},
			want:  group.Choice{Speaker: "coder", Strategy: "round_robin", Reason: "next in turn"},
		},
		{
			name:  "nobody may speak",
			group: team("round_robin", solo),
			turn:  group.Turn{Recent: []string{"coder"}},
			want: group.Choice{Strategy: "round_robin",
				Reason:  "no member may speak: coder: took the last turn (max_consecutive 1)",
				Skipped: []group.Skip{{"coder", "took the last turn (max_consecutive 1)"}}},
		},
		{
			name:  "down members are skipped",
			group: team("round_robin"),
			turn:  group.Turn{Recent: []string{"coder"}, Down: map[string]string{"reviewer": "node down", "writer": ""}},
			want: group.Choice{Speaker: "ops", Strategy: "round_robin", Reason: "next in turn",
				Skipped: []group.Skip{{"reviewer", "node down"}, {"writer", "down"}}},
		},
		{
			name:  "every member is down",
			group: team("router"),
			turn: group.Turn{Down: map[string]string{
				"coder": "node down", "reviewer": "node down", "ops": "node down", "writer": "node down"}},
			want: group.Choice{Strategy: "router", Reason: "every member is down",
				Skipped: []group.Skip{{"coder", "node down"}, {"reviewer", "node down"}, {"ops", "node down"}, {"writer", "node down"}}},
		},
		{
			name:  "max_consecutive 2 lets a member speak twice",
			group: team("priority", maxConsecutive(2)),
			turn:  group.Turn{Recent: []string{"coder"}, Message: "fix the bug in main.go"},
			want:  group.Choice{Speaker: "coder", Strategy: "priority", Reason: `keywords "bug", "fix" and pattern "[a-z]+[.]go" matched`},
		},
		{
			name:  "max_consecutive 2 stops the third turn",
			group: team("priority", maxConsecutive(2)),
			turn:  group.Turn{Recent: []string{"writer", "coder", "coder"}, Message: "fix the bug in main.go"},
			want: group.Choice{Speaker: "ops", Strategy: "priority", Reason: "no keyword or pattern matched; highest priority",
				Skipped: []group.Skip{{"coder", "took the last 2 turns (max_consecutive 2)"}}},
		},

		// priority
		{
			name:  "priority: the matching member",
			group: team("priority"),
			turn:  group.Turn{Message: "Please DEPLOY the new build."},
			want:  group.Choice{Speaker: "ops", Strategy: "priority", Reason: `keyword "deploy" matched`},
		},
		{
			name:  "priority: the highest of the matching members",
			group: team("priority"),
			turn:  group.Turn{Message: "review the fix"},
			want:  group.Choice{Speaker: "reviewer", Strategy: "priority", Reason: `keyword "review" matched`},
		},
		{
			name:  "priority: a pattern",
			group: team("priority"),
			turn:  group.Turn{Message: "have a look at pr #42"},
			want:  group.Choice{Speaker: "reviewer", Strategy: "priority", Reason: `pattern "(?i)PR #[0-9]+" matched`},
		},
		{
			name:  "priority: a phrase keyword, whatever the spaces",
			group: team("priority"),
			turn:  group.Turn{Message: "open a pull\n request for it"},
			want:  group.Choice{Speaker: "reviewer", Strategy: "priority", Reason: `keyword "pull request" matched`},
		},
		{
			name:  "priority: whole words only",
			group: team("priority"),
			turn:  group.Turn{Recent: []string{"ops"}, Message: "the debugger shows a deployment of the codebase"},
			want: group.Choice{Speaker: "reviewer", Strategy: "priority", Reason: "no keyword or pattern matched; highest priority",
				Skipped: []group.Skip{{"ops", "took the last turn (max_consecutive 1)"}}},
		},
		{
			name:  "priority: no match, the top one",
			group: team("priority"),
			turn:  group.Turn{Message: "hello there"},
			want:  group.Choice{Speaker: "ops", Strategy: "priority", Reason: "no keyword or pattern matched; highest priority"},
		},

		// router
		{
			name:  "router: the best score",
			group: team("router"),
			turn:  group.Turn{Message: "The deploy failed: rollback, then check kubectl logs."},
			want: group.Choice{Speaker: "ops", Strategy: "router",
				Reason: `keywords "deploy", "rollback" and pattern "(?i)kubectl" matched (score 4)`},
		},
		{
			name: "router: the last turn's tool calls route to the member after them",
			group: team("router", func(g *config.Group) {
				g.Participants[1].AfterTools = []string{"git_*", "open_pull_request"}
			}),
			turn: group.Turn{Recent: []string{"coder"}, Message: "done: main.go fixed", Tools: []string{"read_file", "git_commit", "git_push", "git_commit"}},
			want: group.Choice{Speaker: "reviewer", Strategy: "router",
				Reason: `the last turn's calls "git_commit", "git_push" matched (score 6)`},
		},
		{
			name: "priority: a tool call counts as a match",
			group: team("priority", func(g *config.Group) {
				g.Participants[3].AfterTools = []string{"write_*"}
			}),
			turn: group.Turn{Recent: []string{"coder"}, Message: "all done", Tools: []string{"write_file"}},
			want: group.Choice{Speaker: "writer", Strategy: "priority", Reason: `the last turn's call "write_file" matched`},
		},
		{
			name:  "router: score beats priority",
			group: team("router"),
			turn:  group.Turn{Message: "fix the bug in main.go, then review"},
			want: group.Choice{Speaker: "coder", Strategy: "router",
				Reason: `keywords "bug", "fix" and pattern "[a-z]+[.]go" matched (score 4)`},
		},
		{
			name:  "router: ties by priority",
			group: team("router"),
			turn:  group.Turn{Message: "review the code"},
			want:  group.Choice{Speaker: "reviewer", Strategy: "router", Reason: `keyword "review" matched (score 1)`},
		},
		{
			name:  "router: the default when nothing matches",
			group: team("router", withDefault("writer")),
			turn:  group.Turn{Recent: []string{"coder"}, Message: "hello"},
			want:  group.Choice{Speaker: "writer", Strategy: "router", Reason: "no keyword or pattern matched; default writer"},
		},
		{
			name:  "router: round robin when the default may not speak",
			group: team("router", withDefault("writer")),
			turn:  group.Turn{Recent: []string{"coder"}, Message: "hello", Down: map[string]string{"writer": "node down"}},
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin",
				Reason:  "no keyword or pattern matched and the default writer may not speak now; round robin: next in turn",
				Skipped: []group.Skip{{"writer", "node down"}}},
		},
		{
			name:  "router: round robin without a default",
			group: team("router"),
			turn:  group.Turn{Message: "hello"},
			want:  group.Choice{Speaker: "coder", Strategy: "round_robin", Reason: "no keyword or pattern matched; round robin: first in turn"},
		},
		{
			name:  "router: a down member's keywords do not count",
			group: team("router"),
			turn:  group.Turn{Message: "deploy it", Down: map[string]string{"ops": "node down"}},
			want: group.Choice{Speaker: "coder", Strategy: "round_robin", Reason: "no keyword or pattern matched; round robin: first in turn",
				Skipped: []group.Skip{{"ops", "node down"}}},
		},

		// allowed_transitions
		{
			name:  "transitions: only the allowed members",
			group: team("round_robin", transitions(map[string][]string{"coder": {"writer"}})),
			turn:  group.Turn{Recent: []string{"coder"}},
			want: group.Choice{Speaker: "writer", Strategy: "round_robin", Reason: "next in turn",
				Skipped: []group.Skip{{"reviewer", "not allowed after coder"}}},
		},
		{
			name:  "transitions: the router scores among the allowed",
			group: team("router", transitions(map[string][]string{"coder": {"reviewer", "writer"}})),
			turn:  group.Turn{Recent: []string{"coder"}, Message: "deploy and update the readme"},
			want: group.Choice{Speaker: "writer", Strategy: "router", Reason: `keyword "readme" matched (score 1)`,
				Skipped: []group.Skip{{"ops", "not allowed after coder"}}},
		},
		{
			name:  "transitions: a member not listed may be followed by anyone",
			group: team("round_robin", transitions(map[string][]string{"coder": {"writer"}})),
			turn:  group.Turn{Recent: []string{"reviewer"}},
			want:  group.Choice{Speaker: "ops", Strategy: "round_robin", Reason: "next in turn"},
		},
		{
			name:  "transitions: none after a user message",
			group: team("round_robin", transitions(map[string][]string{"coder": {"writer"}})),
			turn:  group.Turn{Recent: []string{"coder", "user"}},
			want:  group.Choice{Speaker: "reviewer", Strategy: "round_robin", Reason: "next in turn"},
		},
		{
			name:  "transitions: ignored when they leave nobody",
			group: team("round_robin", transitions(map[string][]string{"coder": {"writer"}})),
			turn:  group.Turn{Recent: []string{"coder"}, Down: map[string]string{"writer": "node down"}},
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin",
				Reason:  "next in turn; allowed_transitions after coder leave no member who may speak: ignored",
				Skipped: []group.Skip{{"writer", "node down"}}},
		},
		{
			name:  "transitions: an empty list is ignored too",
			group: team("round_robin", transitions(map[string][]string{"coder": {}})),
			turn:  group.Turn{Recent: []string{"coder"}},
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin",
				Reason: "next in turn; allowed_transitions after coder leave no member who may speak: ignored"},
		},

		// min_interval
		{
			name:  "min_interval: an unthrottled member first",
			group: team("round_robin", minInterval(10*time.Second)),
			turn: group.Turn{Recent: []string{"coder"}, Now: now,
				LastSpoke: map[string]time.Time{"coder": now, "reviewer": now.Add(-3 * time.Second), "ops": now.Add(-10 * time.Second)}},
			want: group.Choice{Speaker: "ops", Strategy: "round_robin", Reason: "next in turn",
				Skipped: []group.Skip{{"reviewer", "spoke 3s ago (min_interval 10s)"}}},
		},
		{
			name:  "min_interval: the priority member waits its turn",
			group: team("priority", minInterval(10*time.Second)),
			turn: group.Turn{Recent: []string{"coder"}, Now: now, Message: "deploy it",
				LastSpoke: map[string]time.Time{"ops": now.Add(-1 * time.Second)}},
			want: group.Choice{Speaker: "reviewer", Strategy: "priority", Reason: "no keyword or pattern matched; highest priority",
				Skipped: []group.Skip{{"ops", "spoke 1s ago (min_interval 10s)"}}},
		},
		{
			name:  "min_interval: all throttled, the strategy's choice waits",
			group: team("round_robin", minInterval(10*time.Second)),
			turn: group.Turn{Recent: []string{"coder"}, Now: now,
				LastSpoke: map[string]time.Time{
					"coder": now, "reviewer": now.Add(-2 * time.Second),
					"ops": now.Add(-9 * time.Second), "writer": now.Add(-4 * time.Second)}},
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin", Wait: 8 * time.Second,
				Reason: "next in turn; every candidate spoke within min_interval 10s: reviewer waits 8s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSelector(t, tt.group, nil)
			got, err := s.Next(t.Context(), tt.turn)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			checkChoice(t, got, tt.want)
			again, err := s.Next(t.Context(), tt.turn)
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("second call: %+v, %v; want the same choice", again, err)
			}
		})
	}
}

func TestRoundRobinOrder(t *testing.T) {
	s := mustSelector(t, team("round_robin"), nil)
	var recent []string
	want := []string{"coder", "reviewer", "ops", "writer"}
	for turn := range 13 {
		c, err := s.Next(t.Context(), group.Turn{Recent: recent})
		if err != nil {
			t.Fatal(err)
		}
		if w := want[turn%len(want)]; c.Speaker != w {
			t.Fatalf("turn %d: %s speaks, want %s (recent %v)", turn, c.Speaker, w, recent)
		}
		recent = append(recent, c.Speaker)
		if turn%5 == 4 {
			recent = append(recent, "user") // a new user message keeps the order
		}
	}
}

func TestLLMStrategy(t *testing.T) {
	history := []group.Message{
		{Role: "user", Content: "the release is broken"},
		{Role: "assistant", Name: "coder", Content: "I found the bug."},
	}
	tests := []struct {
		name  string
		model fakeLLM
		turn  group.Turn
		want  group.Choice
	}{
		{
			name:  "the model chooses",
			model: answers("ops"),
			want:  group.Choice{Speaker: "ops", Strategy: "llm", Reason: "selector chose ops"},
		},
		{
			name:  "markdown, case and punctuation",
			model: answers("  **Ops.**\n"),
			want:  group.Choice{Speaker: "ops", Strategy: "llm", Reason: "selector chose ops"},
		},
		{
			name:  "a name in a sentence",
			model: answers("I think the writer should go next."),
			want:  group.Choice{Speaker: "writer", Strategy: "llm", Reason: "selector chose writer"},
		},
		{
			name:  "not a participant",
			model: answers("xyz"),
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin",
				Reason: `selector answered "xyz": not a participant; round robin`},
		},
		{
			name:  "a member that may not speak",
			model: answers("coder"),
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin",
				Reason: `selector answered "coder": coder may not speak now; round robin`},
		},
		{
			name:  "several names",
			model: answers("reviewer or ops"),
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin",
				Reason: `selector answered "reviewer or ops": names several participants; round robin`},
		},
		{
			name:  "an empty answer",
			model: answers(" "),
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin",
				Reason: `selector answered "": empty answer; round robin`},
		},
		{
			name: "a failed call",
			model: func(context.Context, llm.Request) (*llm.Response, error) {
				return nil, errors.New("rate limited")
			},
			want: group.Choice{Speaker: "reviewer", Strategy: "round_robin", Reason: "selector failed: rate limited; round robin"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSelector(t, team("llm"), tt.model)
			turn := tt.turn
			if turn.Recent == nil {
				turn = group.Turn{Recent: []string{"coder"}, History: history, Message: "I found the bug."}
			}
			got, err := s.Next(t.Context(), turn)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			checkChoice(t, got, tt.want)
		})
	}
}

func TestLLMStrategyCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	model := fakeLLM(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		cancel()
		return nil, fmt.Errorf("call: %w", ctx.Err())
	})
	s := mustSelector(t, team("llm"), model)
	if _, err := s.Next(ctx, group.Turn{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after the model saw its context cancelled: %v, want context.Canceled", err)
	}
	if _, err := s.Next(ctx, group.Turn{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestLLMRequest(t *testing.T) {
	var history []group.Message
	for i := range 25 {
		history = append(history, group.Message{Role: "user", Content: fmt.Sprintf("question %d", i)},
			group.Message{Role: "assistant", Name: "coder", Content: fmt.Sprintf("answer %d", i)})
	}
	tests := []struct {
		name       string
		group      config.Group
		turn       group.Turn
		wantSystem string
		wantMsgs   []llm.Message
	}{
		{
			name:  "the candidates and the last 20 messages",
			group: team("llm"),
			turn:  group.Turn{Recent: []string{"coder"}, History: history, Down: map[string]string{"writer": "node down"}},
			wantSystem: "You choose who speaks next in a group chat. Read the conversation and pick the participant whose description fits the last message best.\n\n" +
				"- reviewer: reviews code changes and pull requests\n" +
				"- ops: deploys services to production and handles incidents\n\n" +
				llm.SelectorInstruction,
			wantMsgs: func() []llm.Message {
				var ms []llm.Message
				for i := 15; i < 25; i++ {
					ms = append(ms, llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("question %d", i)},
						llm.Message{Role: llm.RoleAssistant, Name: "coder", Content: fmt.Sprintf("coder: answer %d", i)})
				}
				return append(ms, llm.Message{Role: llm.RoleUser, Content: llm.SelectorQuestion})
			}(),
		},
		{
			name: "the group's prompt; a history that ends with the user",
			group: team("llm", func(g *config.Group) {
				g.SelectorPrompt = "Pick the expert.\n"
				g.Participants[3].Description = "writes\n  documentation"
				g.Participants = g.Participants[2:]
			}),
			turn:       group.Turn{History: []group.Message{{Role: "user", Content: "deploy"}}},
			wantSystem: "Pick the expert.\n\n- ops: deploys services to production and handles incidents\n- writer: writes documentation\n\n" + llm.SelectorInstruction,
			wantMsgs:   []llm.Message{{Role: llm.RoleUser, Content: "deploy"}},
		},
		{
			name:       "no history: the message",
			group:      team("llm", func(g *config.Group) { g.Participants = g.Participants[:1]; g.Participants[0].Description = "" }),
			turn:       group.Turn{Message: "hello"},
			wantSystem: "You choose who speaks next in a group chat. Read the conversation and pick the participant whose description fits the last message best.\n\n- coder:\n\n" + llm.SelectorInstruction,
			wantMsgs:   []llm.Message{{Role: llm.RoleUser, Content: "hello"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got llm.Request
			model := fakeLLM(func(_ context.Context, req llm.Request) (*llm.Response, error) {
				got = req
				return &llm.Response{Text: "ops"}, nil
			})
			s := mustSelector(t, tt.group, model)
			if _, err := s.Next(t.Context(), tt.turn); err != nil {
				t.Fatal(err)
			}
			if got.System != tt.wantSystem {
				t.Errorf("system prompt:\n%s\nwant:\n%s", got.System, tt.wantSystem)
			}
			if !reflect.DeepEqual(got.Messages, tt.wantMsgs) {
				t.Errorf("messages:\n got  %+v\n want %+v", got.Messages, tt.wantMsgs)
			}
			if len(got.Tools) != 0 {
				t.Errorf("tools %v, want none", got.Tools)
			}
		})
	}
}

func TestLLMStrategyOffline(t *testing.T) {
	s := mustSelector(t, team("llm"), offline.New())
	tests := []struct {
		name string
		turn group.Turn
		want string
	}{
		{
			name: "the description that fits the user's message",
			turn: group.Turn{History: []group.Message{{Role: "user", Content: "please deploy the billing service to production"}}},
			want: "ops",
		},
		{
			name: "the description that fits the last answer",
			turn: group.Turn{Recent: []string{"coder"}, History: []group.Message{
				{Role: "user", Content: "the parser crashes"},
				{Role: "assistant", Name: "coder", Content: "Fixed it; the pull request is ready."},
			}},
			want: "reviewer",
		},
		{
			name: "documentation",
			turn: group.Turn{History: []group.Message{{Role: "user", Content: "the documentation is outdated"}}},
			want: "writer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s.Next(t.Context(), tt.turn)
			if err != nil {
				t.Fatal(err)
			}
			if c.Speaker != tt.want || c.Strategy != "llm" {
				t.Errorf("choice %+v, want %s chosen by the llm strategy", c, tt.want)
			}
		})
	}
}

// TestMaxConsecutive simulates long chats: no member ever takes more than
// max_consecutive turns in a row, whatever the strategy.
func TestMaxConsecutive(t *testing.T) {
	messages := []string{
		"deploy now", "deploy again, rollback if needed", "kubectl get pods",
		"fix the bug in main.go", "hello", "update the readme",
	}
	models := map[string]llm.Provider{
		"":        nil,
		"offline": offline.New(),
		"always ops": fakeLLM(func(context.Context, llm.Request) (*llm.Response, error) {
			return &llm.Response{Text: "ops"}, nil
		}),
	}
	for _, strategy := range []string{"round_robin", "priority", "router", "llm"} {
		for name, model := range models {
			if (strategy == "llm") != (model != nil) {
				continue
			}
			for _, limit := range []int{1, 2, 3} {
				t.Run(fmt.Sprintf("%s %s max %d", strategy, name, limit), func(t *testing.T) {
					s := mustSelector(t, team(strategy, func(g *config.Group) { g.MaxConsecutive = limit }), model)
					var recent []string
					var history []group.Message
					run := 0
					for turn := range 50 {
						msg := messages[turn%len(messages)]
						if turn%10 == 0 {
							history = append(history, group.Message{Role: "user", Content: msg})
						}
						c, err := s.Next(t.Context(), group.Turn{Recent: recent, Message: msg, History: history})
						if err != nil {
							t.Fatal(err)
						}
						if c.Speaker == "" {
							t.Fatalf("turn %d: nobody speaks: %s", turn, c.Reason)
						}
						if len(recent) > 0 && recent[len(recent)-1] == c.Speaker {
							run++
						} else {
							run = 1
						}
						if run > limit {
							t.Fatalf("turn %d: %s takes %d turns in a row (max %d); recent %v", turn, c.Speaker, run, limit, recent)
						}
						recent = append(recent, c.Speaker)
						history = append(history, group.Message{Role: "assistant", Name: c.Speaker, Content: msg})
					}
				})
			}
		}
	}
}

func TestTenMembers(t *testing.T) {
	g := config.Group{Name: "ten", MaxConsecutive: 1}
	for i := range 10 {
		g.Participants = append(g.Participants, config.Participant{
			Agent:       fmt.Sprintf("m%d", i),
			Description: fmt.Sprintf("expert in topic%d", i),
			Priority:    i % 3,
			Keywords:    []string{fmt.Sprintf("topic%d", i)},
			Patterns:    []string{fmt.Sprintf(`ticket-%d\d\d`, i)},
		})
	}
	for _, strategy := range []string{"round_robin", "priority", "router", "llm"} {
		t.Run(strategy, func(t *testing.T) {
			g := g
			g.Strategy = strategy
			s := mustSelector(t, g, offline.New())
			recent := []string{"m9"}
			for i := range 10 {
				msg := fmt.Sprintf("a question about topic%d", i)
				if i%2 == 1 && strategy != "llm" { // the offline planner reads words, not patterns
					msg = fmt.Sprintf("see ticket-%d42", i)
				}
				c, err := s.Next(t.Context(), group.Turn{
					Recent: recent, Message: msg,
					History: []group.Message{{Role: "user", Content: msg}},
				})
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("m%d", i); c.Speaker != want {
					t.Errorf("message %q: %s speaks (%s), want %s", msg, c.Speaker, c.Reason, want)
				}
				recent = append(recent, c.Speaker)
			}
		})
	}
}

func TestConcurrentNext(t *testing.T) {
	s := mustSelector(t, team("router", func(g *config.Group) { g.Default = "writer" }), nil)
	want, err := s.Next(t.Context(), group.Turn{Recent: []string{"coder"}, Message: "deploy now"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c, err := s.Next(t.Context(), group.Turn{Recent: []string{"coder"}, Message: "deploy now"})
				if err != nil || !reflect.DeepEqual(c, want) {
					t.Errorf("concurrent Next: %+v, %v; want %+v", c, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestNewSelectorErrors(t *testing.T) {
	tests := []struct {
		name    string
		group   config.Group
		model   llm.Provider
		wantErr string
	}{
		{name: "llm without a model", group: team("llm"), wantErr: "needs a selector model"},
		{name: "unknown strategy", group: team("loudest"), wantErr: `unknown strategy "loudest"`},
		{name: "no participants", group: team("", func(g *config.Group) { g.Participants = nil }), wantErr: "no participants"},
		{name: "twice", group: team("", func(g *config.Group) { g.Participants[1].Agent = "coder" }), wantErr: "coder is a participant twice"},
		{name: "bad pattern", group: team("", func(g *config.Group) { g.Participants[0].Patterns = []string{"("} }), wantErr: `pattern "("`},
		{name: "bad after_tools", group: team("", func(g *config.Group) { g.Participants[0].AfterTools = []string{"["} }), wantErr: `after_tools "["`},
		{name: "unknown default", group: team("router", func(g *config.Group) { g.Default = "nobody" }), wantErr: "default nobody"},
		{name: "unknown transition", group: team("", func(g *config.Group) {
			g.AllowedTransitions = map[string][]string{"coder": {"nobody"}}
		}), wantErr: "nobody is not a participant"},
		{name: "fine", group: team("llm"), model: offline.New()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := group.NewSelector(tt.group, tt.model)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("NewSelector: %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("NewSelector: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
