package store_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// cpuNow is the CPU this process (the embedded server with it) used so far.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStoreTurn does what a turn does to the store (the bridge queues
// it on the head, the agent reads the conversation and claims it with the
// user's message, saves the model's call, the tool's result and the reply,
// the bridge reads the newest page for its answer) on conversations
// already `history` turns long, and reports the CPU a turn costs this
// process, embedded server included. The branch cases run the turns on
// branches forked at the end of such conversations: their history is the
// originals', shared.
func BenchmarkStoreTurn(b *testing.B) {
	for _, bc := range []struct {
		history int
		branch  bool
	}{{1, false}, {100, false}, {500, false}, {100, true}} {
		history := bc.history
		name := fmt.Sprintf("history=%d", history)
		if bc.branch {
			name += ",branch"
		}
		b.Run(name, func(b *testing.B) {
			m := meshtest.New(b)
			sessions := store.NewSessionStore(m.Sessions, m.Messages)
			ctx := b.Context()
			const convs = 8
			ids := make([]string, convs)
			turn := func(id string, n int) {
				tid := fmt.Sprintf("t%d", n)
				if _, err := sessions.UpdateHead(ctx, id, func(c *mesh.Conversation) error {
					c.Queued = &mesh.QueuedTurn{ID: tid, Message: "list all resources", At: time.Now()}
					c.Status = mesh.StatusQueued
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				c, err := sessions.Get(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				c, err = sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
					c.Unqueue(tid)
					c.Messages = append(c.Messages, mesh.Message{ID: tid, Role: mesh.RoleUser, Content: "list all resources", TurnID: tid, CreatedAt: time.Now()})
					c.Turn = &mesh.Turn{ID: tid, StartedAt: time.Now()}
					c.Status = mesh.StatusRunning
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
					now := time.Now()
					c.Messages = append(c.Messages,
						mesh.Message{ID: tid + "-a0", Role: mesh.RoleAssistant, TurnID: tid, CreatedAt: now, ToolCalls: []mesh.ToolCall{{ID: tid + "-c", Name: "resources_list", Arguments: map[string]any{}}}},
						mesh.Message{ID: tid + "-r", Role: mesh.RoleTool, ToolCallID: tid + "-c", Content: `[{"uri":"res://1","name":"one"},{"uri":"res://2","name":"two"}]`, TurnID: tid, CreatedAt: now},
						mesh.Message{ID: tid + "-a1", Role: mesh.RoleAssistant, Content: "There are two resources: one and two.", TurnID: tid, CreatedAt: now})
					c.Turn, c.Status = nil, mesh.StatusActive
					c.MarkTurn(tid)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				if _, err := sessions.GetDoc(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			for i := range ids {
				c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
				if err := sessions.Create(ctx, c); err != nil {
					b.Fatal(err)
				}
				ids[i] = c.ID
				for n := range history {
					turn(c.ID, n)
				}
				if !bc.branch {
					continue
				}
				orig, err := sessions.Get(ctx, c.ID)
				if err != nil {
					b.Fatal(err)
				}
				f, err := sessions.Find(ctx, orig, func(*mesh.Message) bool { return true })
				if err != nil || f == nil {
					b.Fatalf("find the newest message: %v", err)
				}
				br := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
				if err := sessions.Fork(ctx, orig, f.After, br, nil); err != nil {
					b.Fatal(err)
				}
				ids[i] = br.ID
			}
			n := history
			cpu0 := cpuNow(b)
			turns := 0
			for b.Loop() {
				for _, id := range ids {
					turn(id, n)
					turns++
				}
				n++
			}
			b.ReportMetric(float64((cpuNow(b)-cpu0).Microseconds())/1000/float64(turns), "cpu-ms/turn")
		})
	}
}
