package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

// slowModel is the offline planner behind a model that takes delay to
// answer, as a cloud model would.
type slowModel struct {
	llm.Provider
	delay time.Duration
}

func (s slowModel) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Provider.Generate(ctx, req)
}

// parallelTree is an agent whose tree is one parallel node of n branches,
// each one model call (no tools).
func parallelTree(n int) string {
	var b strings.Builder
	b.WriteString("name: fan-out\nllm:\n  model: gpt-4o-mini\nagent:\n  name: fan\n  type: parallel\n  agents:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - {name: branch-%d, type: llm, tools: [], prompt: \"Branch %d.\"}\n", i, i)
	}
	return b.String()
}

// BenchmarkTreeParallel runs a parallel node of 1 and of 10 branches, each
// calling a model that takes 200 ms (a local fake speaking OpenAI's wire
// format), on `mesh up --replicas agent=2`: a branch is a work item of its
// own, so the 10 branches share the two replicas and the turn takes about
// one branch's time, not ten. It reports the turn's wall time and how the
// branches were shared between the replicas (from the run summary's nodes).
func BenchmarkTreeParallel(b *testing.B) {
	const delay = 200 * time.Millisecond
	srv := llmtest.Start(b, llmtest.Config{API: llmtest.OpenAI, Backend: slowModel{offline.New(), delay}})
	for _, branches := range []int{1, 10} {
		b.Run(fmt.Sprintf("branches=%d", branches), func(b *testing.B) {
			m := startMesh(b, meshOpts{config: parallelTree(branches), logLevel: "warn", args: []string{"--replicas", "agent=2"},
				env: []string{"OPENAI_API_KEY=k", "OPENAI_BASE_URL=" + srv.BaseURL()}})
			m.send(m.newConversation(), "go") // warm up
			var walls []time.Duration
			shares := map[string]int{}
			b.ResetTimer()
			for range b.N {
				conv := m.newConversation()
				t0 := time.Now()
				out := m.do(http.StatusOK, "POST", "/conversations/"+conv+"/messages", map[string]any{"message": "go"})
				walls = append(walls, time.Since(t0))
				nodes := list(out, "conversation", "last_run", "nodes")
				if len(nodes) != branches {
					b.Fatalf("%d node runs in the summary, want %d: %v", len(nodes), branches, obj(out, "conversation", "last_run"))
				}
				for _, n := range nodes {
					shares[str(n, "worker")]++
				}
			}
			b.StopTimer()
			slices.Sort(walls)
			p50 := walls[len(walls)/2]
			b.ReportMetric(float64(p50.Microseconds())/1000, "ms/turn")
			b.ReportMetric(0, "ns/op")
			workers := make([]string, 0, len(shares))
			for w, n := range shares {
				workers = append(workers, fmt.Sprintf("%s: %d", w, n))
			}
			slices.Sort(workers)
			b.Logf("%d branches × %v model: wall time p50 %v over %d turns (10 × %v would be %v); branches per replica: %s",
				branches, delay, p50.Round(time.Millisecond), len(walls), delay, 10*delay, strings.Join(workers, ", "))
		})
	}
}
