package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkGroupTurn measures what the group role adds to a turn: the same
// request ("list all resources", one tool call, offline planner) sent to
// the agent directly and to a group chat whose only member is that agent
// (max_turns 1), on `mesh up`. The group's part is the round's start, the
// speaker's selection and hand-off, and the round's end: the difference
// between the two p50s.
func BenchmarkGroupTurn(b *testing.B) {
	m := startMesh(b, meshOpts{logLevel: "warn", config: defaultConfig(b) + `
groups:
  - name: solo
    max_turns: 1
    participants:
      - {agent: resource-manager, description: the top-level agent}
`})
	p50 := map[string]time.Duration{}
	for _, target := range []string{"direct", "group"} {
		b.Run(target, func(b *testing.B) {
			newConv := func() string {
				if target == "group" {
					return str(m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"group": "solo"}), "conversation", "id")
				}
				return m.newConversation()
			}
			m.send(newConv(), "list all resources") // warm up
			var lat []time.Duration
			b.ResetTimer()
			for i := range b.N {
				conv := newConv()
				_ = i
				t0 := time.Now()
				status, body := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"})
				lat = append(lat, time.Since(t0))
				if status != http.StatusOK {
					b.Fatalf("status %d: %v", status, body)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			p50[target] = lat[len(lat)/2]
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
	if d, g := p50["direct"], p50["group"]; d > 0 && g > 0 {
		b.Logf("turn p50: direct %v, through the group role %v: the group adds %v", d.Round(10*time.Microsecond), g.Round(10*time.Microsecond), (g - d).Round(10*time.Microsecond))
		fmt.Printf("BenchmarkGroupTurn: direct p50 %v, group p50 %v, overhead %v\n", d.Round(10*time.Microsecond), g.Round(10*time.Microsecond), (g - d).Round(10*time.Microsecond))
	}
}
