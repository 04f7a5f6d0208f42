package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// BenchmarkListConversations measures GET /conversations?limit=50 (the
// first page, and a page deep in the walk by its cursor), GET /health and
// GET /conversations/{id} of a stored conversation on `mesh up` with
// 1,000 and 10,000 stored conversations, and 100,000 with
// MESH_BENCH_SCALE=1 (or more). The conversations are written straight into
// the sessions bucket as the admin (a system prompt, a user message, an
// answer each), 100 owners; the bridge's listing index learns them from
// its watch. It reports p50/p99 latency and the bridge's resident memory.
func BenchmarkListConversations(b *testing.B) {
	sizes := []int{1000, 10000}
	if benchScale() >= 1 {
		sizes = append(sizes, 100000)
	}
	m := startMesh(b, meshOpts{logLevel: "warn"})
	js, err := jetstream.New(m.adminNATS(b))
	if err != nil {
		b.Fatal(err)
	}
	stored := 0
	for _, n := range sizes {
		fillSessions(b, js, stored, n)
		stored = n
		waitListed(b, m, n)
		b.Run(fmt.Sprintf("conversations=%d", n), func(b *testing.B) {
			deep := m.do(http.StatusOK, "GET", fmt.Sprintf("/conversations?limit=%d", min(500, n/2)), nil)
			cursor := str(deep, "next_cursor")
			// Beside the listing, the other two reads a client makes most:
			// the health check and one conversation (a stored one, whole).
			for _, page := range []struct {
				name, path string
				ok         func(map[string]any) bool
			}{
				{"first", "/conversations?limit=50", func(body map[string]any) bool { return len(list(body, "conversations")) == 50 }},
				{"deep", "/conversations?limit=50&cursor=" + cursor, func(body map[string]any) bool { return len(list(body, "conversations")) == 50 }},
				{"health", "/health", func(body map[string]any) bool { return str(body, "status") != "" }},
				{"get", "/conversations/bench-list-0000000", func(body map[string]any) bool {
					return str(body, "conversation", "id") == "bench-list-0000000" && len(list(obj(body, "conversation"), "messages")) == 3
				}},
			} {
				b.Run(page.name, func(b *testing.B) {
					var lat []time.Duration
					b.ResetTimer()
					for range b.N {
						t0 := time.Now()
						status, body := m.try("GET", page.path, nil)
						lat = append(lat, time.Since(t0))
						if status != http.StatusOK || !page.ok(body) {
							b.Fatalf("GET %s: status %d, %v", page.path, status, body)
						}
					}
					b.StopTimer()
					reportLatencies(b, lat)
					bridge, _ := meshtest.Proc(m.childPID("bridge")) // 0 when gone
					b.ReportMetric(float64(bridge.RSS)/(1<<20), "bridge-rss-MB")
				})
			}
		})
	}
}

// fillSessions stores conversations from..to-1 in the sessions bucket.
func fillSessions(b *testing.B, js jetstream.JetStream, from, to int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	base := time.Now().Add(-time.Duration(to) * time.Second).UTC()
	var futures []jetstream.PubAckFuture
	for i := from; i < to; i++ {
		at := base.Add(time.Duration(i) * time.Second)
		id := fmt.Sprintf("bench-list-%07d", i)
		c := mesh.Conversation{ID: id, SessionID: "0a1b2c3d", Agent: "resource-manager", Owner: fmt.Sprintf("owner-%02d", i%100), Status: mesh.StatusActive,
			Messages: []mesh.Message{
				{ID: id + "-system", Role: mesh.RoleSystem, Content: "You are a resource management agent.", CreatedAt: at},
				{ID: id + "-u1", Role: mesh.RoleUser, Content: "list all resources", CreatedAt: at},
				{ID: id + "-a1", Role: mesh.RoleAssistant, Content: "There are no resources yet.", CreatedAt: at},
			}, Version: 2, CreatedAt: at, UpdatedAt: at}
		data, _ := json.Marshal(c)
		f, err := js.PublishAsync("$KV.mesh_sessions."+id, data)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
		if len(futures) == 4000 {
			waitAcks(ctx, b, futures)
			futures = futures[:0]
		}
	}
	waitAcks(ctx, b, futures)
}

func waitAcks(ctx context.Context, b *testing.B, futures []jetstream.PubAckFuture) {
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
	}
}

// waitListed waits until the bridge lists n conversations.
func waitListed(b *testing.B, m *meshProc, n int) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		status, body := m.try("GET", "/conversations?limit=1", nil)
		if total, _ := obj(body, "summary")["total"].(float64); status == http.StatusOK && total >= float64(n) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the bridge lists %v conversations, want %d", obj(body, "summary")["total"], n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
