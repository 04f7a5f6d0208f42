package e2e

import (
	"context"
	"encoding/json"
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

// BenchmarkGroupRound runs whole rounds of group chats of 3 and 5 members
// (round robin, one turn each, one tool call a turn, offline planner) and
// reports the share of rounds that completed (ended by max_turns), the
// p50/p95 of a round, and of each hand-off: from the speaker_selected
// event to the member's first event (its tool call or its text), with the
// share of hand-offs over 750 ms.
func BenchmarkGroupRound(b *testing.B) {
	names := []string{"alice", "bob", "carol", "dave", "erin"}
	groups := ""
	for _, n := range []int{3, 5} {
		groups += fmt.Sprintf("  - name: crew%d\n    strategy: round_robin\n    max_turns: %d\n    participants:\n", n, n)
		for _, name := range names[:n] {
			groups += fmt.Sprintf("      - {agent: %s, description: resource clerk %s, prompt: \"You are %s, a resource clerk.\"}\n", name, name, name)
		}
	}
	m := startMesh(b, meshOpts{logLevel: "warn", config: groupConfig(b, groups)})
	for _, n := range []int{3, 5} {
		b.Run(fmt.Sprintf("members-%d", n), func(b *testing.B) {
			group := fmt.Sprintf("crew%d", n)
			var rounds, handoffs []time.Duration
			completed, total := 0, 0
			for b.Loop() {
				conv := str(m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"group": group}), "conversation", "id")
				t0 := time.Now()
				status, body := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"})
				rounds = append(rounds, time.Since(t0))
				total++
				if status == http.StatusOK && str(body, "conversation", "group", "ended") == "max_turns" {
					completed++
				}
				handoffs = append(handoffs, groupHandoffs(b, m, conv, n)...)
			}
			b.StopTimer()
			q := func(lat []time.Duration, p float64) float64 {
				s := slices.Clone(lat)
				slices.Sort(s)
				return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
			}
			over := 0
			for _, h := range handoffs {
				if h > 750*time.Millisecond {
					over++
				}
			}
			b.ReportMetric(100*float64(completed)/float64(total), "completed-%")
			b.ReportMetric(q(rounds, 0.5), "round-p50-ms")
			b.ReportMetric(q(rounds, 0.95), "round-p95-ms")
			if len(handoffs) > 0 {
				b.ReportMetric(q(handoffs, 0.5), "handoff-p50-ms")
				b.ReportMetric(q(handoffs, 0.95), "handoff-p95-ms")
				b.ReportMetric(100*float64(over)/float64(len(handoffs)), "handoff-over-750ms-%")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// groupHandoffs reads a finished round's events and returns, for each of
// its members' turns, the time from speaker_selected to the member's
// first tool call or text (event timestamps, in milliseconds).
func groupHandoffs(b *testing.B, m *meshProc, conv string, members int) []time.Duration {
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	r := openSSEBench(b, ctx, m.url("/conversations/"+conv+"/events"))
	defer r.close()
	var out []time.Duration
	var selectedAt int64
	for len(out) < members {
		ev, err := r.next()
		if err != nil {
			b.Fatalf("events of %s: %v after %d hand-offs", conv, err, len(out))
		}
		var e struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Timestamp int64  `json:"timestamp"`
		}
		if json.Unmarshal([]byte(ev.data), &e) != nil {
			continue
		}
		switch {
		case e.Type == "CUSTOM" && e.Name == "speaker_selected":
			selectedAt = e.Timestamp
		case selectedAt != 0 && (e.Type == "TOOL_CALL_START" || e.Type == "TEXT_MESSAGE_START"):
			out = append(out, time.Duration(e.Timestamp-selectedAt)*time.Millisecond)
			selectedAt = 0
		}
	}
	return out
}
