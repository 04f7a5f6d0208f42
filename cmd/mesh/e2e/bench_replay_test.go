package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/replay"
)

// BenchmarkReplayBesideLiveTraffic measures what a replay costs live
// traffic: `mesh up` on an OpenAI-format fake model that takes 500 ms a
// call, 50 users sending tool turns (two model calls each), and `mesh
// replay` of 1,000 one-turn conversations (times MESH_BENCH_SCALE, 0.1 by
// default) from a JSONL file with its default concurrency and rate. The
// replay runs in windows: it is paused (SIGSTOP) while the live load runs
// alone and resumed (SIGCONT) while it runs beside it, window after
// window, until the replay ends, so both sides meet the machine in the
// same state. It reports the live p99 of each side, their ratio
// (`p99-with-replay-x`), the live turns of each side, and the replay's own
// p50 and p99 per turn.
func BenchmarkReplayBesideLiveTraffic(b *testing.B) {
	const users, turnsPerUser = 50, 8
	conversations := max(10, int(1000*benchScale()))
	srv := llmtest.Start(b, llmtest.Config{API: llmtest.OpenAI, NoRecords: true, Latency: 500 * time.Millisecond})
	opts := benchModelOpts(b, srv.BaseURL())
	m := startMesh(b, opts)
	m.send(m.newConversation(), "list all resources") // warm up

	dir := b.TempDir()
	file, alt, out := filepath.Join(dir, "convs.jsonl"), filepath.Join(dir, "new.yaml"), filepath.Join(dir, "report.json")
	var lines bytes.Buffer
	for i := range conversations {
		fmt.Fprintf(&lines, "{\"id\":\"bench-%d\",\"messages\":[\"list all resources\"]}\n", i)
	}
	if err := os.WriteFile(file, lines.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(alt, []byte(opts.config), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.Context(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "mesh"), "replay", "--config", alt, "--file", file, "--out", out)
	cmd.Env = m.cliEnv(opts.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	// Paused at once: the first window is the live load's alone.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		b.Fatal(err)
	}
	load := turnLoad{turns: users * turnsPerUser, conc: users, perConversation: 1}
	var alone, beside []time.Duration
	var ratios []float64 // each round's p99 beside over alone
	var replayErr error
	for running := true; running; {
		a := load.run(b, m).lat
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			b.Fatal(err)
		}
		w := load.run(b, m).lat
		alone, beside = append(alone, a...), append(beside, w...)
		ratios = append(ratios, quantileMs(w, 0.99)/quantileMs(a, 0.99))
		select {
		case replayErr = <-ended:
			running = false
		default:
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				b.Fatal(err)
			}
		}
	}
	if replayErr != nil {
		b.Fatalf("mesh replay: %v\n%s", replayErr, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	var rep replay.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		b.Fatal(err)
	}
	if rep.Totals.Turns != conversations || rep.Totals.FailedTurns != 0 {
		b.Fatalf("the replay ran %d turns, %d failed; want %d, none failed", rep.Totals.Turns, rep.Totals.FailedTurns, conversations)
	}
	p99Alone, p99Beside := quantileMs(alone, 0.99), quantileMs(beside, 0.99)
	b.ReportMetric(p99Alone, "live-p99-ms")
	b.ReportMetric(p99Beside, "live-p99-with-replay-ms")
	b.ReportMetric(p99Beside/p99Alone, "p99-with-replay-x")
	// On a shared machine a burst of other work lands in one window or
	// the other: the median of the rounds' ratios says what the replay did.
	b.ReportMetric(replay.Percentile(ratios, 50), "round-p99-with-replay-x-median")
	b.ReportMetric(quantileMs(alone, 0.5), "live-p50-ms")
	b.ReportMetric(quantileMs(beside, 0.5), "live-p50-with-replay-ms")
	b.ReportMetric(rep.Latency.P50, "replay-p50-ms")
	b.ReportMetric(rep.Latency.P99, "replay-p99-ms")
	b.ReportMetric(0, "ns/op")
	var line []string
	for _, r := range ratios {
		line = append(line, fmt.Sprintf("%.2f", r))
	}
	b.Logf("%d conversations replayed in %d rounds; live turns: %d alone, %d beside the replay; each round's p99 beside over alone: %s",
		conversations, len(ratios), len(alone), len(beside), strings.Join(line, " "))
}
