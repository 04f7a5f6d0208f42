package agent

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// serveClock adds clock.clock_in to the fixture's catalog: a read-only
// tool whose result carries the state patch patch.
func (f *fixture) serveClock(patch string) {
	f.t.Helper()
	sub, err := f.m.NC.Subscribe("mesh.tool.clock.clock_in", func(msg *nats.Msg) {
		res, _ := json.Marshal(mesh.ToolResult{Text: "clocked in", State: json.RawMessage(patch)})
		_ = msg.Respond(res)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = sub.Unsubscribe() })
	entry, _ := json.Marshal(mesh.ToolEntry{Server: "clock", Name: "clock_in", Description: "clock in", InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnlyHint: true})
	key, _ := mesh.ToolKey("clock", "clock_in")
	if _, err := f.m.Tools.Put(f.t.Context(), key, entry); err != nil {
		f.t.Fatal(err)
	}
	meshtest.Eventually(f.t, 5*time.Second, func() bool { return len(f.agent.tools.Load().llm) == 3 }, "clock_in not in the catalog")
}

// replayState applies a run's state events, as a client does: the
// snapshot, then each delta with an RFC 6902 library of its own.
func replayState(t *testing.T, evs []mesh.Event) map[string]any {
	t.Helper()
	doc := []byte(`{}`)
	for _, e := range evs {
		switch e.Type {
		case mesh.EventStateSnapshot:
			doc, _ = json.Marshal(e.Snapshot)
		case mesh.EventStateDelta:
			raw, _ := json.Marshal(e.Delta)
			patch, err := jsonpatch.DecodePatch(raw)
			if err != nil {
				t.Fatalf("delta %s: %v", raw, err)
			}
			if doc, err = patch.Apply(doc); err != nil {
				t.Fatalf("apply delta %s to %s: %v", raw, doc, err)
			}
		}
	}
	var out map[string]any
	_ = json.Unmarshal(doc, &out)
	return out
}

// A tool's state patch and a set_state call change the conversation's
// state: each publishes a STATE_DELTA after its TOOL_CALL_RESULT, the
// model's next prompt reads the new state, the run saves it, and a client
// applying the events ends with the saved state.
func TestToolsChangeTheState(t *testing.T) {
	var mu sync.Mutex
	var prompts []string
	model := script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		mu.Lock()
		prompts = append(prompts, req.System)
		mu.Unlock()
		switch len(toolResults(req)) {
		case 0:
			if !slices.Contains(toolNames(req.Tools), setStateTool) {
				return &llm.Response{Text: "no set_state offered"}, nil
			}
			return &llm.Response{ToolCalls: []llm.ToolCall{call("clock_in", `{}`)}}, nil
		case 1:
			return &llm.Response{ToolCalls: []llm.ToolCall{call(setStateTool, `{"key":"note","value":{"text":"on shift","n":0}}`)}}, nil
		}
		return &llm.Response{Text: "done"}, nil
	})
	f := newFixture(t, model, func(c *config.Config) {
		c.StateTool = true
		c.Prompt = "Clocked in: {isClockedIn}."
	})
	f.serveClock(`{"isClockedIn":true,"lastClockOut":null}`)
	conv := f.conversation()
	if _, err := f.store.Update(t.Context(), conv, func(c *mesh.Conversation) error {
		c.State = map[string]any{"isClockedIn": false, "lastClockOut": "2024-01-01T17:00:00Z"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, c := f.turn(conv, "clock me in")

	want := map[string]any{"isClockedIn": true, "note": map[string]any{"text": "on shift", "n": 0.0}}
	if !reflect.DeepEqual(c.State, want) {
		t.Errorf("saved state = %v, want %v", c.State, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(prompts) != 3 || prompts[0] != "Clocked in: false." || prompts[2] != "Clocked in: true." {
		t.Errorf("system prompts = %q, want the state as it stood at each call (false, then true)", prompts)
	}
	evs := f.events(conv)
	got := types(evs, mesh.EventToolCallResult, mesh.EventStateSnapshot, mesh.EventStateDelta, mesh.EventRunFinished)
	wantTypes := []string{"STATE_SNAPSHOT", "TOOL_CALL_RESULT", "STATE_DELTA", "TOOL_CALL_RESULT", "STATE_DELTA", "RUN_FINISHED"}
	if !slices.Equal(got, wantTypes) {
		t.Errorf("events:\n got %v\nwant %v", got, wantTypes)
	}
	if replayed := replayState(t, evs); !reflect.DeepEqual(replayed, c.State) {
		t.Errorf("a client applying the events has %v, the conversation %v", replayed, c.State)
	}
	var results []string
	for _, m := range toolMessages(c) {
		results = append(results, m.Content)
	}
	if len(results) != 2 || results[0] != "clocked in" || !strings.Contains(results[1], `"note"`) {
		t.Errorf("tool results = %q", results)
	}
	if info := f.agent.Info(); !slices.Contains(info.Tools, setStateTool) {
		t.Errorf("Info().Tools = %v, want set_state listed", info.Tools)
	}
}

// Without state_tool, set_state is neither offered nor run, and is not in
// the agent's tools; a tool's state patch still applies.
func TestSetStateOnlyWhenEnabled(t *testing.T) {
	var offered []string
	model := script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		offered = toolNames(req.Tools)
		if res := toolResults(req); len(res) > 0 {
			return &llm.Response{Text: res[0].Content}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call(setStateTool, `{"key":"a","value":1}`)}}, nil
	})
	f := newFixture(t, model, nil)
	conv := f.conversation()
	_, c := f.turn(conv, "set a")
	if slices.Contains(offered, setStateTool) || slices.Contains(f.agent.Info().Tools, setStateTool) {
		t.Errorf("set_state offered (%v) or listed (%v) without state_tool", offered, f.agent.Info().Tools)
	}
	if len(c.State) != 0 || !strings.Contains(c.LastRun.Response, "unknown tool") {
		t.Errorf("state %v, answer %q; want no change and an unknown tool", c.State, c.LastRun.Response)
	}
}

// A change that would make the state too large is refused, and the tool's
// answer says so; nothing is published or saved.
func TestStateChangeTooLargeIsRefused(t *testing.T) {
	big := strings.Repeat("x", mesh.MaxStateSize-1000)
	tr := &turn{conv: &mesh.Conversation{State: map[string]any{"big": big}}}
	patch, _ := json.Marshal(map[string]any{"more": strings.Repeat("y", 2000)})
	delta, err := tr.changeState(patch)
	if !errors.Is(err, mesh.ErrStateTooLarge) || delta != nil || len(tr.ex.state.patches) != 0 {
		t.Errorf("changeState = %v, %v, %d patches kept; want ErrStateTooLarge and nothing kept", delta, err, len(tr.ex.state.patches))
	}
	delta, err = tr.changeState(json.RawMessage(`{"big":null}`))
	if err != nil {
		t.Fatalf("changeState(big: null): %v", err)
	}
	if len(delta) != 1 {
		t.Fatalf("changeState(big: null) = %v, want one remove", delta)
	}
	if delta[0].Op != "remove" {
		t.Errorf("changeState(big: null) op = %q, want remove", delta[0].Op)
	}
	if s := tr.state(); len(s) != 0 {
		t.Errorf("state after the remove = %v, want empty", s)
	}
}

// Saving the run's patches onto a state that moved meanwhile (a parallel
// branch wrote it) keeps both writes, and the plan carries a snapshot for
// clients, whose live deltas started from the old state.
func TestApplyStateResyncsAMovedState(t *testing.T) {
	tests := []struct {
		name         string
		saved        map[string]any
		want         map[string]any
		wantSnapshot bool
	}{
		{name: "unchanged", saved: map[string]any{"a": 1.0}, want: map[string]any{"a": 1.0, "b": true}},
		{name: "moved", saved: map[string]any{"a": 1.0, "branch": "x"}, want: map[string]any{"a": 1.0, "b": true, "branch": "x"}, wantSnapshot: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &turn{conv: &mesh.Conversation{State: map[string]any{"a": 1.0}}}
			if _, err := tr.changeState(json.RawMessage(`{"b":true}`)); err != nil {
				t.Fatal(err)
			}
			c := &mesh.Conversation{State: tt.saved}
			var p plan
			tr.applyState(c, &p)
			if !reflect.DeepEqual(c.State, tt.want) {
				t.Errorf("saved state = %v, want %v", c.State, tt.want)
			}
			if (p.snapshot != nil) != tt.wantSnapshot || tt.wantSnapshot && !reflect.DeepEqual(p.snapshot, tt.want) {
				t.Errorf("snapshot = %v, want one: %v", p.snapshot, tt.wantSnapshot)
			}
		})
	}
}
