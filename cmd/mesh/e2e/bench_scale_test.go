package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// concurrently calls do(i) for i in [0, n) from conc goroutines and
// returns how long each call took (in no order) and the time it all took.
// A call that fails fails the benchmark and ends its goroutine.
func concurrently(b *testing.B, n, conc int, do func(i int) error) ([]time.Duration, time.Duration) {
	var next atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := do(i); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, time.Since(start)
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// BenchmarkManyConversations: 100,000 conversations (times
// MESH_BENCH_SCALE, 0.1 by default: 10,000) are created, then each gets
// one turn (one read-only tool call, offline planner), both at 100
// concurrent on `mesh up`. It reports the time of each phase and in all,
// the p50 and p99 of a create and of a turn, the resident memory of each
// process after the turns (and 15 s later, once JetStream dropped its
// caches), and the JetStream store: the account's bytes, each stream's,
// and the size of the store directory on disk.
func BenchmarkManyConversations(b *testing.B) {
	const conc = 100
	n := int(100000 * benchScale())
	m := startMesh(b, meshOpts{logLevel: "warn"})
	m.send(m.newConversation(), "list all resources") // warm up
	client := turnClient(conc)
	defer client.CloseIdleConnections()

	ids := make([]string, n)
	createLat, createTime := concurrently(b, n, conc, func(i int) error {
		status, body, err := post(client, m.url("/conversations"), map[string]any{})
		var created struct{ Conversation struct{ ID string } }
		_ = json.Unmarshal(body, &created)
		if err != nil || status != http.StatusCreated || created.Conversation.ID == "" {
			return fmt.Errorf("create %d of %d: %d %v %.300s", i, n, status, err, body)
		}
		ids[i] = created.Conversation.ID
		return nil
	})
	fmt.Printf("BenchmarkManyConversations: %d conversations created in %v\n", n, createTime.Round(time.Millisecond))
	turnLat, turnTime := concurrently(b, n, conc, func(i int) error {
		status, body, err := post(client, m.url("/conversations/"+ids[i]+"/messages"), map[string]any{"message": "list all resources"})
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("turn %d of %d: %d %v %.300s", i, n, status, err, body)
		}
		return nil
	})
	if b.Failed() {
		return
	}
	atEnd, totalAtEnd := rssByName(m.usage())
	time.Sleep(15 * time.Second)
	idle, totalIdle := rssByName(m.usage())

	js, err := jetstream.New(m.adminNATS(b))
	if err != nil {
		b.Fatal(err)
	}
	acct, err := js.AccountInfo(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	var streams []string
	for s := range js.ListStreams(b.Context()).Info() {
		streams = append(streams, fmt.Sprintf("%s %.1f MB (%d msgs)", s.Config.Name, mb(int64(s.State.Bytes)), s.State.Msgs))
	}
	slices.Sort(streams)
	onDisk := dirSize(filepath.Join(m.dataDir, "jetstream"))

	b.ReportMetric((createTime + turnTime).Seconds(), "total-s")
	b.ReportMetric(createTime.Seconds(), "create-s")
	b.ReportMetric(turnTime.Seconds(), "turns-s")
	b.ReportMetric(quantileMs(createLat, 0.99), "create-p99-ms")
	b.ReportMetric(quantileMs(turnLat, 0.50), "turn-p50-ms")
	b.ReportMetric(quantileMs(turnLat, 0.99), "turn-p99-ms")
	b.ReportMetric(float64(n)/turnTime.Seconds(), "turns/s")
	b.ReportMetric(mb(totalIdle), "rss-MB")
	b.ReportMetric(mb(int64(acct.Store)), "js-store-MB")
	b.ReportMetric(mb(onDisk), "js-disk-MB")
	b.ReportMetric(0, "ns/op")
	byRole := func(rss map[string]int64) string {
		var line []string
		for _, name := range slices.Sorted(maps.Keys(rss)) {
			line = append(line, fmt.Sprintf("%s %.1f", name, mb(rss[name])))
		}
		return strings.Join(line, ", ")
	}
	// Printed, not logged: make bench runs without -v.
	fmt.Printf("BenchmarkManyConversations: %d conversations at %d concurrent: created in %v (p50 %.2f ms, p99 %.2f ms), one turn each in %v (%.0f turns/s, p50 %.2f ms, p99 %.2f ms), %v in all\n",
		n, conc, createTime.Round(time.Millisecond), quantileMs(createLat, 0.5), quantileMs(createLat, 0.99),
		turnTime.Round(time.Millisecond), float64(n)/turnTime.Seconds(), quantileMs(turnLat, 0.5), quantileMs(turnLat, 0.99), (createTime + turnTime).Round(time.Millisecond))
	fmt.Printf("BenchmarkManyConversations: RSS MB at the end %.1f (%s); 15 s later %.1f (%s)\n", mb(totalAtEnd), byRole(atEnd), mb(totalIdle), byRole(idle))
	fmt.Printf("BenchmarkManyConversations: JetStream store %.1f MB (account), %.1f MB on disk; streams: %s\n", mb(int64(acct.Store)), mb(onDisk), strings.Join(streams, ", "))
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }
