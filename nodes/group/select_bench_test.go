package group_test

import (
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/nodes/group"
)

// benchGroup is a group of ten members with keywords and patterns, as a
// real group chat might have.
func benchGroup(strategy string) config.Group {
	roles := []struct {
		name     string
		keywords []string
		patterns []string
	}{
		{"planner", []string{"plan", "roadmap", "milestone", "estimate"}, []string{`(?i)\bq[1-4]\b`}},
		{"coder", []string{"code", "bug", "fix", "refactor"}, []string{`\b\w+\.go\b`, `(?i)stack ?trace`}},
		{"reviewer", []string{"review", "pull request", "approve"}, []string{`(?i)\bPR ?#\d+`}},
		{"tester", []string{"test", "flaky", "coverage", "regression"}, []string{`(?i)\bfail(ed|ing)?\b`}},
		{"ops", []string{"deploy", "rollback", "incident", "outage"}, []string{`(?i)kubectl`, `(?i)\bk8s\b`}},
		{"security", []string{"vulnerability", "cve", "secret", "token"}, []string{`CVE-\d{4}-\d+`}},
		{"dba", []string{"database", "query", "index", "migration"}, []string{`(?i)\b(select|update|insert)\b.*\b(from|into|set)\b`}},
		{"designer", []string{"design", "ui", "ux", "mockup"}, []string{`(?i)figma`}},
		{"writer", []string{"docs", "readme", "changelog", "release notes"}, []string{`(?i)\.md\b`}},
		{"support", []string{"customer", "ticket", "complaint", "refund"}, []string{`(?i)ticket-\d+`}},
	}
	g := config.Group{Name: "bench", Strategy: strategy, MaxConsecutive: 1, Default: "planner"}
	for i, r := range roles {
		g.Participants = append(g.Participants, config.Participant{
			Agent: r.name, Description: "the team's " + r.name, Priority: i % 4,
			Keywords: r.keywords, Patterns: r.patterns,
		})
	}
	return g
}

// benchMessages are realistic messages of about 200 characters.
var benchMessages = []string{
	"The deploy of the payments service failed half way; kubectl shows pods crash looping after the migration. Can someone roll back and check whether the new index on orders is the cause?",
	"I pushed a fix for the nil pointer in handler.go, the stack trace is in the ticket. PR #482 is ready; please review it and tell me if the regression test covers the empty cart case.",
	"Customers report that the checkout page looks broken on mobile since Tuesday. Support opened ticket-9913; we need a quick look at the UI and maybe a mockup for the new layout before Q3.",
	"Before the release, update the changelog and the README with the new configuration flags, and mention the CVE-2024-3094 mitigation so that operators know which version they need to run.",
}

func BenchmarkSelect(b *testing.B) {
	for _, strategy := range []string{config.StrategyRoundRobin, config.StrategyPriority, config.StrategyRouter} {
		b.Run(strategy, func(b *testing.B) {
			s, err := group.NewSelector(benchGroup(strategy), nil)
			if err != nil {
				b.Fatal(err)
			}
			names := make([]string, 10)
			for i, p := range benchGroup(strategy).Participants {
				names[i] = p.Agent
			}
			now := time.Now()
			turns := make([]group.Turn, 16)
			for i := range turns {
				turns[i] = group.Turn{
					Recent:    []string{names[(i+7)%10], "user", names[(i+8)%10], names[i%10]},
					LastSpoke: map[string]time.Time{names[i%10]: now, names[(i+8)%10]: now.Add(-time.Minute)},
					Message:   benchMessages[i%len(benchMessages)],
					Now:       now,
				}
			}
			ctx := b.Context()
			lat := make([]time.Duration, 0, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				start := time.Now()
				c, err := s.Next(ctx, turns[i%len(turns)])
				lat = append(lat, time.Since(start))
				if err != nil || c.Speaker == "" {
					b.Fatalf("Next: %+v, %v", c, err)
				}
				i++
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(percentile(lat, 50), "p50-µs")
			b.ReportMetric(percentile(lat, 95), "p95-µs")
		})
	}
}

// percentile is the p-th percentile of sorted latencies, in microseconds.
func percentile(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	i = min(max(i-1, 0), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Microsecond)
}
