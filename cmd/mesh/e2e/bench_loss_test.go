package e2e

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAgentLoss: turn latency under steady load (10 conversations,
// one tool turn after another, offline planner) on two agent replicas,
// for 5 s before and for 5 s after one replica is killed (SIGKILL; `mesh
// up` starts it again). It reports the p50 and p99 of the turns started in
// each window, the slowest turn after the kill, the ratio of the p50s
// (during / before), and the turns that failed.
// A turn the killed replica held is delivered again, at worst after
// mesh.ack_wait (10 s): the slowest turn shows what that cost.
func BenchmarkAgentLoss(b *testing.B) {
	const workers, window = 10, 5 * time.Second
	m := startMesh(b, meshOpts{logLevel: "warn", args: []string{"--replicas", "agent=2"}})
	convs := make([]string, workers)
	for i := range convs {
		convs[i] = m.newConversation()
	}
	m.send(convs[0], "list all resources") // warm up
	for b.Loop() {
		var mu sync.Mutex
		var before, during []time.Duration
		failed := 0
		var killedAt time.Time
		stop := time.Now().Add(2 * window)
		start := time.Now()
		var wg sync.WaitGroup
		for _, conv := range convs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					t0 := time.Now()
					status, _ := m.try("POST", "/conversations/"+conv+"/messages", map[string]any{"message": "list all resources"})
					d := time.Since(t0)
					mu.Lock()
					switch {
					case status != http.StatusOK:
						failed++
					case killedAt.IsZero() || t0.Before(killedAt):
						before = append(before, d)
					default:
						during = append(during, d)
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Until(start.Add(window)))
		pid := agentPID(m)
		mu.Lock()
		killedAt = time.Now()
		mu.Unlock()
		if pid == 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
			b.Fatal("no agent process to kill")
		}
		wg.Wait()
		q := func(lat []time.Duration, p float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			s := slices.Clone(lat)
			slices.Sort(s)
			return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(q(before, 0.5), "before-p50-ms")
		b.ReportMetric(q(before, 0.99), "before-p99-ms")
		b.ReportMetric(q(during, 0.5), "during-p50-ms")
		b.ReportMetric(q(during, 0.99), "during-p99-ms")
		b.ReportMetric(q(during, 1), "during-max-ms")
		if p := q(before, 0.5); p > 0 {
			b.ReportMetric(q(during, 0.5)/p, "p50-during/before")
		}
		b.ReportMetric(float64(failed), "failed-turns")
	}
	b.ReportMetric(0, "ns/op")
}

// agentPID is the pid of one agent process under m's `mesh up`, or 0.
func agentPID(m *meshProc) int {
	m.mu.Lock()
	up := m.cmd.Process.Pid
	m.mu.Unlock()
	for _, p := range descendants(up) {
		if args := cmdline(p); len(args) >= 2 && strings.HasSuffix(args[0], "/mesh") && args[1] == "agent" {
			return p
		}
	}
	return 0
}
