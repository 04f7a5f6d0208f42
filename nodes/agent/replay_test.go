package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// A replay's agent takes its turns from mesh.work.replay.<name>.*, runs
// the read-only tool, and answers the destructive one with the stand-in:
// never sent to a tool host, no approval asked; the result is marked, its
// event says it was not run, and Settled hears of the item once.
func TestReplayRunsReadOnlyToolsOnly(t *testing.T) {
	var mu sync.Mutex
	var settled []string
	f := newFixtureWith(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if results := toolResults(req); len(results) > 0 {
			var texts []string
			for _, r := range results {
				texts = append(texts, r.Content)
			}
			return &llm.Response{Text: "done: " + strings.Join(texts, " | ")}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("safe", `{"a":1}`), call("danger", `{"b":2}`)}}, nil
	}), nil, func(c *Config) {
		c.Replay = &Replay{StandIn: `{"not_run":"test"}`, Settled: func(item mesh.WorkItem) {
			mu.Lock()
			settled = append(settled, item.TurnID)
			mu.Unlock()
		}}
	})
	conv, live := f.conversation(), f.conversation()
	turn := mesh.NewID()
	// A turn on the live agent's queue, published first: the replay's
	// consumer, which would take it first if its filter matched, never does.
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: live, TurnID: mesh.NewID(), Message: "not for a replay"})
	if err := workloop.Publish(t.Context(), f.m.JS, f.m.NS, mesh.RoleReplay, "tester", mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: turn, Message: "do it all"}, nil); err != nil {
		t.Fatal(err)
	}
	c := f.waitApplied(conv, turn)
	if l, err := f.store.Get(t.Context(), live); err != nil || len(l.RecentTurns) != 0 || l.Turn != nil {
		t.Errorf("the live agent's turn was taken by the replay: %+v %v", l, err)
	}
	if c.Status != mesh.StatusActive || c.PendingApproval != nil || c.LastRun == nil || c.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Fatalf("status %s, pending %+v, last run %+v: want a finished run that waits for nothing", c.Status, c.PendingApproval, c.LastRun)
	}
	var calls []mesh.ToolCall
	results := map[string]mesh.Message{}
	for _, m := range c.Messages {
		calls = append(calls, m.ToolCalls...)
		if m.Role == mesh.RoleTool {
			results[m.ToolCallID] = m
		}
	}
	if len(calls) != 2 {
		t.Fatalf("calls %+v, want safe and danger", calls)
	}
	safe, danger := calls[0], calls[1]
	if f.callCount(safe.ID) != 1 || f.callCount(danger.ID) != 0 {
		t.Errorf("the read-only call ran %d times, the destructive one %d: want 1 and 0", f.callCount(safe.ID), f.callCount(danger.ID))
	}
	if r := results[danger.ID]; !r.StandIn || r.Content != `{"not_run":"test"}` {
		t.Errorf("the destructive call's result %+v: want the stand-in, marked", r)
	}
	if r := results[safe.ID]; r.StandIn || !strings.HasPrefix(r.Content, "ran safe") {
		t.Errorf("the read-only call's result %+v: want what the tool host answered", r)
	}
	if asked := f.askedFor(); len(asked) != 0 {
		t.Errorf("the replay asked for approvals: %+v", asked)
	}
	var notRun []string
	for _, ev := range f.events(conv) {
		if ev.Type == mesh.EventToolCallResult && ev.Metadata["notRun"] == mesh.RoleReplay {
			notRun = append(notRun, ev.ToolCallID)
		}
	}
	if !slices.Equal(notRun, []string{danger.ID}) {
		t.Errorf("TOOL_CALL_RESULTs not run %v, want the destructive call's", notRun)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(settled, []string{turn}) {
		t.Errorf("settled %v, want [%s]", settled, turn)
	}
}
