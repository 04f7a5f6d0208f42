package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// A regenerate turn answers the last user message again: it adds no user
// message, keeps the earlier answer marked superseded, and the model gets
// the history without it, then and on later turns.
func TestRegenerate(t *testing.T) {
	var mu sync.Mutex
	var seen [][]llm.Message
	n := 0
	f := newFixture(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, req.Messages)
		n++
		return &llm.Response{Text: fmt.Sprintf("answer %d", n)}, nil
	}), nil)
	conv := f.conversation()
	f.turn(conv, "first question")
	t2, _ := f.turn(conv, "second question")

	r1 := mesh.NewID()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: r1, Message: "second question", Regenerate: true})
	c := f.waitApplied(conv, r1)
	users := 0
	for _, m := range c.Messages {
		if m.Role == mesh.RoleUser {
			users++
		}
	}
	if users != 2 {
		t.Errorf("%d user messages after a regenerate, want 2 (it adds none)", users)
	}
	var old, fresh *mesh.Message
	for i, m := range c.Messages {
		if m.Role == mesh.RoleAssistant && m.TurnID == t2 {
			old = &c.Messages[i]
		}
		if m.Role == mesh.RoleAssistant && m.TurnID == r1 {
			fresh = &c.Messages[i]
		}
	}
	if old == nil || fresh == nil {
		t.Fatalf("messages %+v: want the old answer kept and a new one", c.Messages)
	}
	if c.Superseded[old.ID] != r1 || c.IsSuperseded(fresh.ID) {
		t.Errorf("superseded %v: want %s by %s, and not the new answer", c.Superseded, old.ID, r1)
	}
	if fresh.Content != "answer 3" || old.Content != "answer 2" {
		t.Errorf("old %q, new %q", old.Content, fresh.Content)
	}
	f.turn(conv, "third question")

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("%d model calls, want 4", len(seen))
	}
	for i, want := range []string{
		"user:first question|assistant:answer 1|user:second question",
		"user:first question|assistant:answer 1|user:second question|assistant:answer 3|user:third question",
	} {
		if got := transcript(seen[i+2]); got != want {
			t.Errorf("model call %d got %s\nwant %s", i+3, got, want)
		}
	}
}

// transcript is the user and assistant messages a model got.
func transcript(msgs []llm.Message) string {
	var parts []string
	for _, m := range msgs {
		if m.Role == llm.RoleUser || m.Role == llm.RoleAssistant {
			parts = append(parts, string(m.Role)+":"+m.Content)
		}
	}
	return strings.Join(parts, "|")
}
