package store_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// bigConversation builds a conversation of turns turns of about size bytes
// in all: each turn a user message, a tool call, its result and a reply.
func bigConversation(turns, size int) *mesh.Conversation {
	c := &mesh.Conversation{ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Agent: "bench", Status: mesh.StatusActive}
	per := size / turns / 4
	filler := strings.Repeat("resource data ", per/14+1)[:per]
	now := time.Now().UTC()
	for i := range turns {
		id := fmt.Sprintf("turn-%d", i)
		c.Messages = append(c.Messages,
			mesh.Message{ID: id, Role: mesh.RoleUser, Content: filler, TurnID: id, CreatedAt: now},
			mesh.Message{ID: id + "-a0", Role: mesh.RoleAssistant, ToolCalls: []mesh.ToolCall{{ID: id + "-c", Name: "resources_list", Server: "resources", Tool: "resources_list", Arguments: map[string]any{"pattern": "x"}}}, TurnID: id, CreatedAt: now},
			mesh.Message{ID: id + "-c-result", Role: mesh.RoleTool, Content: filler, ToolCallID: id + "-c", ToolName: "resources_list", TurnID: id, CreatedAt: now},
			mesh.Message{ID: id + "-a1", Role: mesh.RoleAssistant, Content: filler, TurnID: id, CreatedAt: now},
		)
	}
	return c
}

// BenchmarkSessionStore loads and saves (compare-and-set) a 500 KB,
// 100-turn conversation in the sessions bucket of an embedded JetStream
// server, reporting p50/p95/p99.
func BenchmarkSessionStore(b *testing.B) {
	m := meshtest.New(b)
	sessions := store.NewSessionStore(m.Sessions, m.Messages)
	ctx := b.Context()
	conv := bigConversation(100, 500<<10)
	if err := sessions.Create(ctx, conv); err != nil {
		b.Fatal(err)
	}
	data, _ := json.Marshal(conv)
	b.Logf("session: %d messages, %d KB", len(conv.Messages), len(data)>>10)

	b.Run("load", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := sessions.Get(ctx, conv.ID); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportQuantiles(b, lat)
	})
	// A restore after a restart: a process that has read nothing yet
	// (no record cache), as a bridge or agent just started is.
	b.Run("load-cold", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			fresh := store.NewSessionStore(m.Sessions, store.NewMessageLog(m.JS, m.NS))
			t0 := time.Now()
			c, err := fresh.Get(ctx, conv.ID)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			if len(c.Messages) == 0 {
				b.Fatal("a cold load read no message")
			}
		}
		reportQuantiles(b, lat)
	})
	b.Run("save", func(b *testing.B) {
		cur, err := sessions.Get(ctx, conv.ID)
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		i := 0
		for b.Loop() {
			i++
			t0 := time.Now()
			cur, err = sessions.UpdateLoaded(ctx, cur, func(c *mesh.Conversation) error {
				c.State = map[string]any{"n": i}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportQuantiles(b, lat)
	})
}

func reportQuantiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.95), "p95-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
