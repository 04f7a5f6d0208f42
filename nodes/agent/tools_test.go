package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// A tool server that keeps failing opens its breaker after breakers.tools
// failures: the next call is refused without reaching it, and says why.
func TestToolServerBreakerFollowsTheConfig(t *testing.T) {
	f := newFixture(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if res := toolResults(req); len(res) > 0 {
			return &llm.Response{Text: res[0].Content}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("boom", `{}`)}}, nil
	}), func(c *config.Config) {
		c.Breakers.Tools = config.Breaker{Failures: 2, Cooldown: config.Duration(time.Minute)}
	})
	var reached atomic.Int32
	sub, err := f.m.NC.Subscribe("mesh.tool.flaky.boom", func(msg *nats.Msg) {
		reached.Add(1)
		_ = msg.RespondMsg(&nats.Msg{Header: mesh.ErrorHeaders(mesh.ErrToolUnavailable.With("the MCP server crashed"))})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	entry, _ := json.Marshal(mesh.ToolEntry{Server: "flaky", Name: "boom", Description: "fails", InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnlyHint: true})
	key, _ := mesh.ToolKey("flaky", "boom")
	if _, err := f.m.Tools.Put(t.Context(), key, entry); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return len(f.agent.tools.Load().llm) == 3 }, "boom not in the catalog")

	conv := f.conversation()
	var last string
	for range 3 {
		_, c := f.turn(conv, "boom")
		last = c.Messages[len(c.Messages)-1].Content
	}
	if n := reached.Load(); n != 2 {
		t.Errorf("the server was called %d times, want 2 (then the breaker opened)", n)
	}
	if !strings.Contains(last, "circuit breaker is open after 2 failed calls; retrying in 1m0s") {
		t.Errorf("third answer %q, want the open breaker with the configured settings", last)
	}
	if got := f.agent.Breakers()["mcp:flaky"]; got != "open" {
		t.Errorf("breaker state %q, want open", got)
	}
}

// breakers.a2a tunes the sub-agents' breakers unless the agent's Remote
// config sets them.
func TestSubAgentBreakerFollowsTheConfig(t *testing.T) {
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "ok"}, nil
	}), func(c *config.Config) {
		c.Breakers.A2A = config.Breaker{Failures: 3, Cooldown: config.Duration(2 * time.Minute)}
	})
	if got := f.agent.pool.cfg; got.BreakerFailures != 3 || got.BreakerCooldown != 2*time.Minute {
		t.Errorf("sub-agent breaker %d failures / %s, want breakers.a2a's 3 / 2m", got.BreakerFailures, got.BreakerCooldown)
	}
}

// The caller's token rides on a tool call only to a host that forwards it
// to an HTTP MCP server (ForwardAuth in the catalog): other toolhosts never
// see it.
func TestToolCallCarriesTheTokenOnlyWhereForwarded(t *testing.T) {
	f := newFixture(t, script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if len(toolResults(req)) > 0 {
			return &llm.Response{Text: "done"}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("safe", `{}`)}}, nil
	}), nil)
	hdr := nats.Header{mesh.HeaderAuthorization: {"Bearer tok-1"}}
	lastAuth := func(c *mesh.Conversation) (string, bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i := len(c.Messages) - 1; i >= 0; i-- {
			for _, tc := range c.Messages[i].ToolCalls {
				auth, ok := f.auth[tc.ID]
				return auth, ok
			}
		}
		return "", false
	}
	conv := f.conversation()
	id := mesh.NewID()
	f.enqueueWith(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "go"}, hdr)
	if auth, ok := lastAuth(f.waitApplied(conv, id)); !ok || auth != "" {
		t.Fatalf("a stdio server's call: Authorization %q (called %v), want none", auth, ok)
	}

	e := mesh.ToolEntry{Server: "srv", Name: "safe", InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnlyHint: true, ForwardAuth: true}
	key, _ := mesh.ToolKey(e.Server, e.Name)
	if _, err := f.m.Tools.Put(t.Context(), key, meshtest.JSON(e)); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return f.agent.tools.Load().forwardsAuth("srv", "safe") }, "catalog change not seen")
	id = mesh.NewID()
	f.enqueueWith(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "again"}, hdr)
	if auth, _ := lastAuth(f.waitApplied(conv, id)); auth != "Bearer tok-1" {
		t.Fatalf("an HTTP server's call: Authorization %q, want the caller's", auth)
	}
}
