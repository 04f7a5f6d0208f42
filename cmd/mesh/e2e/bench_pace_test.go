package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// paceLoad is one cell of BenchmarkTurnAtModelPace: a model that takes
// latency per call and users sending at once, each turn (one tool call, so
// two model calls) in a conversation of its own.
type paceLoad struct {
	latency time.Duration
	users   int
}

// turns is the cell's size: about ten seconds of turns at the model's pace
// (a tool turn takes two calls), at least a few per user and 1,000 in all
// where the model answers at once; each of 1,000 users sends one.
func (c paceLoad) turns() int {
	if c.users >= 1000 {
		return c.users
	}
	if c.latency == 0 {
		return max(300, 10*c.users)
	}
	perUser := max(2, int(10*time.Second/(2*c.latency)))
	return c.users * perUser
}

// measurePace runs a load on s while sampling its resident memory every
// 100 ms, and returns the load's figures with the peak RSS over the run
// minus the RSS before it (what the turns in hand cost), in all and by
// process.
func measurePace(b *testing.B, s turnServer, l turnLoad) (loadResult, int64, map[string]int64) {
	b.Helper()
	beforeBy, before := rssByName(s.usage())
	peak, peakBy := before, map[string]int64{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				by, rss := rssByName(s.usage())
				peak = max(peak, rss)
				for name, n := range by {
					peakBy[name] = max(peakBy[name], n-beforeBy[name])
				}
			}
		}
	})
	res := l.run(b, s)
	close(done)
	wg.Wait()
	return res, peak - before, peakBy
}

// kib says each process's bytes in KiB per user: "<name> <KiB>, …".
func kib(by map[string]int64, users int) string {
	var line []string
	for _, name := range slices.Sorted(maps.Keys(by)) {
		line = append(line, fmt.Sprintf("%s %.0f", name, float64(by[name])/1024/float64(users)))
	}
	return strings.Join(line, ", ")
}

// BenchmarkTurnAtModelPace measures a REST turn with one tool call (two
// model calls) on `mesh up` and on the single-process baseline, in the same
// run, against one OpenAI-format fake model that takes 0 ms, 500 ms or 2 s
// a call, with 1, 100 and 1,000 users sending at once. Each side reports
// turns/s, p50 and p99, CPU per turn of all its processes and the RSS its
// turns in hand added at their peak (`added-rss-KiB/user`); the baseline's
// cell also reports the mesh's figures over its own (`mesh-…-x`). The mesh
// runs with its default configuration. Each cell runs the mesh first, then
// the baseline, so that both meet the machine in the same state.
func BenchmarkTurnAtModelPace(b *testing.B) {
	for _, latency := range []time.Duration{0, 500 * time.Millisecond, 2 * time.Second} {
		b.Run("model="+paceName(latency), func(b *testing.B) {
			srv := llmtest.Start(b, llmtest.Config{API: llmtest.OpenAI, NoRecords: true, Latency: latency})
			opts := benchModelOpts(b, srv.BaseURL())
			m := startMesh(b, opts)
			m.send(m.newConversation(), "list all resources") // warm up
			p := startBaseline(b, srv.BaseURL())
			p.checkTurn(b)
			b.Logf("idle CPU: mesh %s; baseline %s", idleCPU(m), idleCPU(p))
			for _, users := range []int{1, 100, 1000} {
				cell := paceLoad{latency: latency, users: users}
				load := turnLoad{turns: cell.turns(), conc: users, perConversation: 1}
				b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
					meshRes, meshAdded, meshBy := measurePace(b, m, load)
					baseRes, baseAdded, _ := measurePace(b, p, load)
					report := func(side string, r loadResult, added int64) {
						if len(r.lat) == 0 {
							return
						}
						reportSide(b, side, r)
						b.ReportMetric(float64(added)/1024/float64(users), side+"-added-rss-KiB/user")
					}
					report("mesh", meshRes, meshAdded)
					report("baseline", baseRes, baseAdded)
					if len(meshRes.lat) > 0 && len(baseRes.lat) > 0 {
						b.ReportMetric(meshRes.turnsPerSecond()/baseRes.turnsPerSecond(), "mesh-turns/s-x")
						b.ReportMetric(meshRes.p50()/baseRes.p50(), "mesh-p50-x")
						b.ReportMetric(meshRes.cpuPerTurn()/baseRes.cpuPerTurn(), "mesh-cpu-x")
					}
					b.ReportMetric(0, "ns/op")
					b.Logf("mesh: %d turns in %v, CPU ms per turn %.2f (%s), peak RSS added KiB per user %s; baseline: %d turns in %v, CPU ms per turn %.2f",
						len(meshRes.lat), meshRes.elapsed.Round(time.Millisecond), meshRes.cpuPerTurn(), meshRes.cpuByProcess(), kib(meshBy, users),
						len(baseRes.lat), baseRes.elapsed.Round(time.Millisecond), baseRes.cpuPerTurn())
				})
			}
		})
	}
}

// reportSide reports one side's figures of a cell under its name.
func reportSide(b *testing.B, side string, r loadResult) {
	b.ReportMetric(r.turnsPerSecond(), side+"-turns/s")
	b.ReportMetric(quantileMs(r.lat, 0.5), side+"-p50-ms")
	b.ReportMetric(quantileMs(r.lat, 0.99), side+"-p99-ms")
	b.ReportMetric(r.cpuPerTurn(), side+"-cpu-ms/turn")
}

// benchModelOpts is `mesh up`'s default configuration on the OpenAI-format
// model at baseURL.
func benchModelOpts(b *testing.B, baseURL string) meshOpts {
	return meshOpts{logLevel: "warn", config: strings.Replace(defaultConfig(b), "model: offline", "model: gpt-4o-mini", 1),
		env: []string{"OPENAI_API_KEY=k", "OPENAI_BASE_URL=" + baseURL}}
}

// paceName names a model latency: 0ms, 500ms, 2s.
func paceName(d time.Duration) string {
	if d == 0 {
		return "0ms"
	}
	return d.String()
}

// idleCPU is the CPU s spends with nothing to do, by process, in ms a
// second over 5 s: what a turn's figures carry in a slow run.
func idleCPU(s turnServer) string {
	const window = 5 * time.Second
	before := s.usage()
	time.Sleep(window)
	var line []string
	for name, d := range cpuByName(before, s.usage()) {
		line = append(line, fmt.Sprintf("%s %.1f", name, float64(d.Microseconds())/1000/window.Seconds()))
	}
	slices.Sort(line)
	return strings.Join(line, ", ")
}

// BenchmarkTurnRateLimited sends 100 users' tool turns (two calls each)
// at once to `mesh up` against a provider that takes 50 requests a second
// and answers 429 with Retry-After past that, its model taking 500 ms a
// call: every turn must complete, and turns/s settle at the provider's
// pace (25 tool turns/s). It reports turns/s and their share of the
// pace, p50 and p99, the provider's 429s per turn, and the most turns
// /agents showed waiting for the provider at once.
func BenchmarkTurnRateLimited(b *testing.B) {
	const users, perSecond, turns = 100, 50, 600
	srv := llmtest.Start(b, llmtest.Config{API: llmtest.OpenAI, NoRecords: true, Latency: 500 * time.Millisecond, RateLimit: perSecond})
	m := startMesh(b, benchModelOpts(b, srv.BaseURL()))
	m.send(m.newConversation(), "list all resources") // warm up
	limitedBefore := srv.Limited()
	done := make(chan struct{})
	var wg sync.WaitGroup
	maxWaiting := 0
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			status, out := m.try("GET", "/agents", nil)
			if status != 200 {
				continue
			}
			for _, a := range list(out, "agents") {
				if w, _ := a.(map[string]any)["waiting"].(float64); int(w) > maxWaiting {
					maxWaiting = int(w)
				}
			}
		}
	})
	res := turnLoad{turns: turns, conc: users, perConversation: 1}.run(b, m)
	close(done)
	wg.Wait()
	if len(res.lat) != turns {
		b.Fatalf("%d of %d turns answered", len(res.lat), turns)
	}
	reportLatencies(b, res.lat)
	b.ReportMetric(res.turnsPerSecond(), "turns/s")
	b.ReportMetric(res.turnsPerSecond()/(perSecond/2), "turns/s-of-pace")
	b.ReportMetric(float64(srv.Limited()-limitedBefore)/float64(turns), "429s/turn")
	b.ReportMetric(float64(maxWaiting), "max-waiting-turns")
	b.ReportMetric(res.cpuPerTurn(), "cpu-ms/turn")
	b.Logf("%d turns in %v at a provider of %d requests/s: %d answered 429, at most %d turns waiting for it at once",
		turns, res.elapsed.Round(time.Millisecond), perSecond, srv.Limited()-limitedBefore, maxWaiting)
}
