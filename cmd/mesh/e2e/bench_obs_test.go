package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// obsVariant is one way of running the mesh for BenchmarkTelemetry.
type obsVariant struct {
	name string
	// metrics serves every role's /metrics, scraped every second.
	metrics bool
	// sampling is OTEL_TRACES_SAMPLER_ARG, the ratio of traces sampled;
	// "" leaves tracing off.
	sampling string
}

// obsVariants: everything off (no metrics endpoint, no exporter: the
// counters still count, as they always do), then metrics scraped and
// traces exported at 100 % and at 1 %.
var obsVariants = []obsVariant{
	{name: "off"},
	{name: "metrics+traces=100%", metrics: true, sampling: "1"},
	{name: "metrics+traces=1%", metrics: true, sampling: "0.01"},
}

// otlpSink is an OTLP/HTTP endpoint that reads what it is sent and
// answers success, counting bytes: cheaper than decoding, since it shares
// the machine with the meshes it measures.
type otlpSink struct {
	srv   *httptest.Server
	bytes atomic.Int64
}

func startOTLPSink(b *testing.B) *otlpSink {
	s := &otlpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(s.srv.Close)
	return s
}

// env starts a mesh of the variant: the exporter's defaults (a batch every
// 5 s) but for the sampler, parent-based on a ratio as an operator would
// set it (the benchmark's requests carry no traceparent).
func (v obsVariant) env(sink *otlpSink) []string {
	var env []string
	if v.metrics {
		env = append(env, "MESH_METRICS_ADDR=127.0.0.1:0")
	}
	if v.sampling != "" {
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG="+v.sampling)
	}
	return env
}

// scrapeEvery reads every metrics endpoint of m (the roles' and the
// bridge's) each period until the benchmark ends, as Prometheus would
// (more often than its default of 15 s).
func scrapeEvery(b *testing.B, m *meshProc, period time.Duration) {
	urls := []string{m.url("/metrics")}
	for _, u := range m.metricsEndpoints(b, 5) {
		urls = append(urls, u)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	b.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, u := range urls {
				if resp, err := http.Get(u); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}
		}
	}()
}

// BenchmarkTelemetry is the cost of metrics and tracing, measured in one
// run: the REST turn of BenchmarkRESTTurn (one read-only tool call, one at
// a time) and the event path of BenchmarkEventLatency (an event published
// as an agent publishes it, to an SSE client of the bridge), with each
// variant of obsVariants. Every variant's mesh runs from the start and the
// variants take turns, five rounds each begun by another variant, so that
// a machine whose load drifts weighs on all alike. It prints each variant's turn p50, CPU per turn
// (all the mesh's processes, from /proc) and event p99, the medians of the
// rounds, against "off".
func BenchmarkTelemetry(b *testing.B) {
	const rounds = 5
	sink := startOTLPSink(b)
	meshes := make([]*meshProc, len(obsVariants))
	for i, v := range obsVariants {
		meshes[i] = startMesh(b, meshOpts{logLevel: "warn", env: v.env(sink)})
		if v.metrics {
			scrapeEvery(b, meshes[i], time.Second)
		}
	}
	// By variant and measure, by round: the last run of a round (the one
	// with the final b.N) overwrites the first.
	got := map[string]map[int]float64{}
	put := func(v obsVariant, what string, round int, x float64) {
		if got[v.name+" "+what] == nil {
			got[v.name+" "+what] = map[int]float64{}
		}
		got[v.name+" "+what][round] = x
	}
	for round := 1; round <= rounds; round++ {
		for _, what := range []string{"turn", "event"} {
			// Each round starts with another variant: the one measured
			// after another follows its exporter's flushes and the
			// machine's drift alike.
			for k := range obsVariants {
				i := (k + round) % len(obsVariants)
				v, m := obsVariants[i], meshes[i]
				b.Run(fmt.Sprintf("%s/%s/round=%d", v.name, what, round), func(b *testing.B) {
					if what == "turn" {
						p50, cpu := benchObsTurn(b, m)
						put(v, "turn p50", round, p50)
						put(v, "CPU per turn", round, cpu)
						return
					}
					lat := benchTrustEvent(b, m, trustVariant{})
					put(v, "event p99", round, quantileMs(lat, 0.99))
				})
			}
		}
	}
	if sink.bytes.Load() == 0 {
		b.Error("no span reached the OTLP endpoint: tracing was not on")
	}
	for _, what := range []string{"turn p50", "CPU per turn", "event p99"} {
		ref := median(got["off "+what])
		var line []string
		for _, v := range obsVariants {
			x := median(got[v.name+" "+what])
			if ref == 0 {
				continue
			}
			line = append(line, v.name+" "+formatMs(x)+" ("+formatPct(x/ref-1)+")")
		}
		// Printed, not logged: make bench runs without -v.
		fmt.Printf("BenchmarkTelemetry %s (median of %d rounds): %s\n", what, rounds, strings.Join(line, ", "))
	}
	fmt.Printf("BenchmarkTelemetry: %.1f MB of spans exported\n", float64(sink.bytes.Load())/(1<<20))
}

// benchObsTurn sends b.N turns one at a time (a new conversation every
// ten) and returns their p50 and the CPU the mesh's processes spent per
// turn, in milliseconds.
func benchObsTurn(b *testing.B, m *meshProc) (p50, cpu float64) {
	conv := m.newConversation()
	m.send(conv, "list all resources") // warm up
	lat := make([]time.Duration, 0, b.N)
	before := m.usage()
	b.ResetTimer()
	for i := range b.N {
		if i%10 == 0 {
			conv = m.newConversation()
		}
		t0 := time.Now()
		status, body := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"})
		if status != http.StatusOK {
			b.Fatalf("status %d: %v", status, body)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	var total time.Duration
	for _, d := range cpuByName(before, m.usage()) {
		total += d
	}
	cpu = float64(total.Microseconds()) / 1000 / float64(b.N)
	b.ReportMetric(cpu, "cpu-ms/turn")
	reportLatencies(b, lat)
	return p50ms(lat), cpu
}

// quantileMs is the q quantile of lat in milliseconds.
func quantileMs(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	sorted := append([]time.Duration{}, lat...)
	slicesSort(sorted)
	return float64(sorted[int(q*float64(len(sorted)-1))].Microseconds()) / 1000
}
