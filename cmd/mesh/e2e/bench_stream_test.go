package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// streamBench is a `mesh up` whose events the benchmark publishes itself, as
// an agent would, and follows through the bridge's SSE endpoint.
type streamBench struct {
	m    *meshProc
	nc   *nats.Conn
	js   jetstream.JetStream
	pub  *bus.Publisher
	conv string
}

func newStreamBench(b *testing.B) *streamBench {
	m := startMesh(b, meshOpts{logLevel: "warn"})
	nc := m.adminNATS(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return &streamBench{m: m, nc: nc, js: js, pub: bus.NewPublisher(js, mesh.DefaultNamespace()), conv: m.newConversation()}
}

// stamp is an event whose value carries its publication time.
func stamp() mesh.Event {
	return mesh.Custom("bench", map[string]int64{"t": time.Now().UnixNano()})
}

func sentAt(data []byte) (time.Time, bool) {
	var ev struct {
		Value struct {
			T int64 `json:"t"`
		} `json:"value"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Value.T == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ev.Value.T), true
}

// BenchmarkEventLatency: from an agent publishing an event to an SSE client
// of the bridge receiving it, beside the same events read by a raw
// JetStream ordered consumer.
func BenchmarkEventLatency(b *testing.B) {
	s := newStreamBench(b)
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	r := openSSEBench(b, ctx, s.m.url("/conversations/"+s.conv+"/events"))
	defer r.close()
	subj, _ := mesh.DefaultNamespace().EventsOf(s.conv)
	oc, err := s.js.OrderedConsumer(ctx, "MESH_EVENTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var raw []time.Duration
	rawDone := make(chan struct{}, 1)
	cc, err := oc.Consume(func(msg jetstream.Msg) {
		if t, ok := sentAt(msg.Data()); ok {
			mu.Lock()
			raw = append(raw, time.Since(t))
			mu.Unlock()
		}
		select {
		case rawDone <- struct{}{}:
		default:
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	var sse []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.pub.Publish(ctx, s.conv, "bench", "", stamp()); err != nil {
			b.Fatal(err)
		}
		ev, err := r.next()
		if err != nil {
			b.Fatal(err)
		}
		if t, ok := sentAt([]byte(ev.data)); ok {
			sse = append(sse, time.Since(t))
		}
		// One event in flight at a time: each is measured alone.
		for {
			mu.Lock()
			n := len(raw)
			mu.Unlock()
			if n > i {
				break
			}
			<-rawDone
		}
	}
	b.StopTimer()
	reportQ(b, "sse", sse)
	mu.Lock()
	reportQ(b, "raw", raw)
	mu.Unlock()
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSSEFanOut: events per second through one bridge to 1, 100 and
// 1,000 concurrent SSE clients following one conversation.
func BenchmarkSSEFanOut(b *testing.B) {
	s := newStreamBench(b)
	for _, clients := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			readers := make([]*sseReader, clients)
			for i := range readers {
				readers[i] = openSSEBench(b, ctx, s.m.url("/conversations/"+s.conv+"/events")+"?after="+strconv.FormatUint(s.lastSeq(b), 10))
			}
			defer func() {
				for _, r := range readers {
					r.close()
				}
			}()
			events := max(b.N, 200)
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			start := time.Now()
			for _, r := range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range events {
						if _, err := r.next(); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			b.ResetTimer()
			run := s.pub.Run(s.conv, mesh.NewID())
			for range events {
				run.Emit(stamp())
			}
			if err := run.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(events*clients)/elapsed.Seconds(), "events/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkIdleStreamMemory: the bridge process's memory per idle SSE stream.
func BenchmarkIdleStreamMemory(b *testing.B) {
	s := newStreamBench(b)
	pid := s.m.childPID("bridge")
	const streams = 1000
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	// Warm the bridge up first, so the measure is of the streams alone.
	warm := openSSEBench(b, ctx, s.m.url("/conversations/"+s.conv+"/events"))
	warm.close()
	before := meshtest.MustProc(b, pid).RSS
	var conns []net.Conn
	for range streams {
		conns = append(conns, rawSSE(b, s.m.httpAddr, "/conversations/"+s.conv+"/events"))
	}
	// Let the bridge settle: every stream has its goroutine and follower.
	meshtest.Eventually(b, 30*time.Second, func() bool { return meshtest.MustProc(b, pid).RSS > before }, "rss did not grow")
	time.Sleep(2 * time.Second)
	after := meshtest.MustProc(b, pid).RSS
	for _, c := range conns {
		_ = c.Close()
	}
	b.ReportMetric(float64(after-before)/streams/1024, "KiB/stream")
	b.ReportMetric(0, "ns/op")
}

func (s *streamBench) lastSeq(b *testing.B) uint64 {
	st, err := s.js.Stream(b.Context(), "MESH_EVENTS")
	if err != nil {
		b.Fatal(err)
	}
	info, err := st.Info(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return info.State.LastSeq
}

func openSSEBench(b *testing.B, ctx context.Context, url string) *sseReader {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	return &sseReader{resp: resp, sc: sc}
}

// benchClient keeps one connection per stream.
var benchClient = &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 2000}}

// rawSSE opens a stream over a bare TCP connection and reads its headers.
func rawSSE(b *testing.B, addr, path string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, addr)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, "200") {
		b.Fatalf("stream: %q %v", line, err)
	}
	return c
}

func reportQ(b *testing.B, name string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sorted := append([]time.Duration{}, lat...)
	slicesSort(sorted)
	q := func(p float64) float64 { return float64(sorted[int(p*float64(len(sorted)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
}

// BenchmarkEventReplay: a client that reconnects with Last-Event-ID and
// 1,000 events to catch up on, from its request to the last of them.
func BenchmarkEventReplay(b *testing.B) {
	const backlog = 1000
	s := newStreamBench(b)
	ctx := b.Context()
	from := s.lastSeq(b)
	for range backlog {
		if _, err := s.pub.Publish(ctx, s.conv, "bench", "", mesh.Custom("bench", map[string]string{"pad": strings.Repeat("x", 200)})); err != nil {
			b.Fatal(err)
		}
	}
	url := s.m.url("/conversations/" + s.conv + "/events")
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		rctx, cancel := context.WithCancel(ctx)
		req, err := http.NewRequestWithContext(rctx, "GET", url, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Last-Event-ID", strconv.FormatUint(from, 10))
		resp, err := benchClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %v %v", url, resp, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		r := &sseReader{resp: resp, sc: sc}
		for i := range backlog {
			if _, err := r.next(); err != nil {
				b.Fatalf("event %d of the replay: %v", i+1, err)
			}
		}
		lat = append(lat, time.Since(t0))
		cancel()
		r.close()
	}
	b.StopTimer()
	slicesSort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "replay1000-p50-ms")
	b.ReportMetric(q(0.95), "replay1000-p95-ms")
	b.ReportMetric(0, "ns/op")
}
