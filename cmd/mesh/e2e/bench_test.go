package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkRESTTurn measures a full REST turn with one non-destructive tool
// call (offline planner, sample MCP server over stdio), on `mesh up` with
// every role in its own process: POST /conversations/{id}/messages "list all
// resources" until the answer. It reports p50/p99 latency and turns/s at 1
// and 50 concurrent conversations. Each conversation is replaced by a new one
// every turnsPerConversation turns, so the figures are those of ordinary
// conversations; BenchmarkSessionStore in package mesh measures big ones.
func BenchmarkRESTTurn(b *testing.B) {
	m := startMesh(b, meshOpts{logLevel: "warn"})
	for _, conc := range []int{1, 50} {
		b.Run(fmt.Sprintf("conversations=%d", conc), func(b *testing.B) {
			const turnsPerConversation = 10
			m.send(m.newConversation(), "list all resources") // warm up
			var mu sync.Mutex
			var lat []time.Duration
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					conv, turns := "", 0
					for range work {
						if turns%turnsPerConversation == 0 {
							conv = m.newConversation()
						}
						turns++
						t0 := time.Now()
						status, body := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"})
						d := time.Since(t0)
						if status != http.StatusOK {
							b.Errorf("status %d: %v", status, body)
							return
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			reportLatencies(b, lat)
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "turns/s")
		})
	}
}

func slicesSort(lat []time.Duration) { slices.Sort(lat) }

func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
