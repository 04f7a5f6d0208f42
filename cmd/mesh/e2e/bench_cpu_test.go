package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// The CPU a turn costs, process by process, read from /proc/<pid>/stat
// (utime + stime) before and after a batch of turns: unlike latency, it does
// not depend on what else the machine runs. "nats" is the process of
// `mesh up` itself (the embedded server, the monitor and the supervisor);
// the fake model and the load generator (this test) are not counted.

// procStat is what /proc says of one process, and its name.
type procStat struct {
	name string
	meshtest.ProcUsage
}

// usage reads every process of m: `mesh up` and its descendants (role
// processes and their MCP servers), by pid.
func (m *meshProc) usage() map[int]procStat {
	m.t.Helper()
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	return treeUsage(cmd.Process.Pid, "nats")
}

// treeUsage reads process root (named rootName) and its descendants, by
// pid.
func treeUsage(root int, rootName string) map[int]procStat {
	out := map[int]procStat{}
	for _, pid := range append([]int{root}, descendants(root)...) {
		u, ok := meshtest.Proc(pid)
		if !ok {
			continue
		}
		name := rootName
		if pid != root {
			name = procName(pid)
		}
		out[pid] = procStat{name: name, ProcUsage: u}
	}
	return out
}

// procName is a role (mesh <role>), or the base name of another program (an
// MCP server).
func procName(pid int) string {
	args := cmdline(pid)
	if len(args) == 0 {
		return "?"
	}
	if filepath.Base(args[0]) == "mesh" && len(args) > 1 {
		return args[1]
	}
	return filepath.Base(args[0])
}

// cpuByName is the CPU each kind of process spent between two readings.
func cpuByName(before, after map[int]procStat) map[string]time.Duration {
	out := map[string]time.Duration{}
	for pid, a := range after {
		out[a.name] += a.CPU - before[pid].CPU
	}
	return out
}

// rssByName sums the resident sets of each kind of process.
func rssByName(usage map[int]procStat) (map[string]int64, int64) {
	out, total := map[string]int64{}, int64(0)
	for _, u := range usage {
		out[u.name] += u.RSS
		total += u.RSS
	}
	return out, total
}

// pssTotal sums the proportional set sizes of every process: the memory
// they take together, each shared page counted once.
func pssTotal(usage map[int]procStat) int64 {
	var total int64
	for _, u := range usage {
		total += u.PSS
	}
	return total
}

// rssSplitTotal sums the file-mapped and the anonymous parts of the
// processes' resident sets.
func rssSplitTotal(usage map[int]procStat) (file, anon int64) {
	for _, u := range usage {
		file += u.RSSFile
		anon += u.RSSAnon
	}
	return file, anon
}

// turnClient keeps a connection per concurrent conversation, as a load
// generator should (the default transport keeps 2 and opens the rest anew).
func turnClient(conc int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = conc+10, conc+10
	return &http.Client{Transport: t, Timeout: 2 * time.Minute}
}

// post sends a JSON body and returns the status and the answer's bytes.
func post(c *http.Client, url string, body any) (int, []byte, error) {
	data, _ := json.Marshal(body)
	resp, err := c.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// turnLoad is a fixed number of turns sent by conc concurrent clients, each
// turn in a conversation of its own unless perConversation > 1.
type turnLoad struct {
	turns, conc, perConversation int
}

// loadResult is what a load measured.
type loadResult struct {
	lat     []time.Duration
	elapsed time.Duration
	cpu     map[string]time.Duration
	after   map[int]procStat
}

// turnServer is what a load runs against: `mesh up` (meshProc) or the
// single-process baseline (baselineProc).
type turnServer interface {
	url(path string) string
	// usage reads every process of the server.
	usage() map[int]procStat
}

// run sends the load and measures it.
func (l turnLoad) run(b *testing.B, m turnServer) loadResult {
	b.Helper()
	client := turnClient(l.conc)
	defer client.CloseIdleConnections()
	work := make(chan struct{}, l.turns)
	for range l.turns {
		work <- struct{}{}
	}
	close(work)
	var mu sync.Mutex
	res := loadResult{lat: make([]time.Duration, 0, l.turns)}
	before := m.usage()
	start := time.Now()
	var wg sync.WaitGroup
	for range l.conc {
		wg.Go(func() {
			conv, turns := "", 0
			for range work {
				if l.perConversation <= 1 || turns%l.perConversation == 0 {
					status, body, err := post(client, m.url("/conversations"), map[string]any{})
					var created struct{ Conversation struct{ ID string } }
					_ = json.Unmarshal(body, &created)
					if err != nil || status != http.StatusCreated || created.Conversation.ID == "" {
						b.Errorf("create: %d %v %s", status, err, body)
						return
					}
					conv = created.Conversation.ID
				}
				turns++
				t0 := time.Now()
				status, body, err := post(client, m.url("/conversations/"+conv+"/messages"), map[string]any{"message": "list all resources"})
				d := time.Since(t0)
				if err != nil || status != http.StatusOK {
					b.Errorf("turn: %d %v %.300s", status, err, body)
					return
				}
				mu.Lock()
				res.lat = append(res.lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.after = m.usage()
	res.cpu = cpuByName(before, res.after)
	return res
}

// p50 is the median latency in ms, as report prints it.
func (r loadResult) p50() float64 { return quantileMs(r.lat, 0.5) }

func (r loadResult) turnsPerSecond() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }

// cpuPerTurn is the CPU of every process measured, in ms per turn.
func (r loadResult) cpuPerTurn() float64 {
	var total time.Duration
	for _, d := range r.cpu {
		total += d
	}
	return float64(total.Microseconds()) / 1000 / float64(len(r.lat))
}

// report prints the figures of a load as benchmark metrics.
func (r loadResult) report(b *testing.B) {
	b.Helper()
	n := len(r.lat)
	if n == 0 {
		return
	}
	reportLatencies(b, r.lat)
	b.ReportMetric(r.turnsPerSecond(), "turns/s")
	b.ReportMetric(r.cpuPerTurn(), "cpu-ms/turn")
	for _, name := range slices.Sorted(maps.Keys(r.cpu)) {
		b.ReportMetric(r.processCPUPerTurn(name), name+"-ms/turn")
	}
	b.Logf("%d turns in %v: CPU ms per turn %.2f (%s)", n, r.elapsed.Round(time.Millisecond), r.cpuPerTurn(), r.cpuByProcess())
}

// processCPUPerTurn is the CPU of the processes named name, in ms per turn.
func (r loadResult) processCPUPerTurn(name string) float64 {
	return float64(r.cpu[name].Microseconds()) / 1000 / float64(len(r.lat))
}

// cpuByProcess says the CPU per turn of each kind of process, by name:
// "<name> <ms>, …", sorted by name.
func (r loadResult) cpuByProcess() string {
	var line []string
	for _, name := range slices.Sorted(maps.Keys(r.cpu)) {
		line = append(line, fmt.Sprintf("%s %.2f", name, r.processCPUPerTurn(name)))
	}
	return strings.Join(line, ", ")
}

// benchModels are the models a turn is measured with: the offline planner
// in the agent, and the same planner behind a local server speaking
// OpenAI's wire format (the agent then builds requests, streams and parses
// answers as with a cloud model).
func benchModels(b *testing.B) map[string]benchModel {
	base := defaultConfig(b)
	// NoRecords: the fake, in this process, would otherwise keep every
	// request it served, and a long run would measure its memory too.
	srv := llmtest.Start(b, llmtest.Config{API: llmtest.OpenAI, NoRecords: true})
	return map[string]benchModel{
		"offline": {opts: meshOpts{logLevel: "warn", config: base}},
		"openai": {modelURL: srv.BaseURL(), opts: meshOpts{logLevel: "warn", config: strings.Replace(base, "model: offline", "model: gpt-4o-mini", 1),
			env: []string{"OPENAI_API_KEY=k", "OPENAI_BASE_URL=" + srv.BaseURL()}}},
	}
}

// benchModel is a mesh with one model, and the model's URL when it is a
// server.
type benchModel struct {
	opts     meshOpts
	modelURL string
}

// BenchmarkTurnCPU measures a REST turn with one tool call (resources_list
// on the sample MCP server) on `mesh up`, with the offline planner and with
// a local OpenAI-format fake model, at 1, 10 and 50 concurrent
// conversations (10 turns each): turns/s, p50/p99 latency, and the CPU a
// turn costs in each process of the mesh (`<process>-ms/turn`) and in all
// of them (`cpu-ms/turn`). Then the same load on the single-process
// baseline (baseline_test.go) with the same fake model: its figures, and
// the mesh's over the baseline's measured in this run (`mesh-p50-x`,
// `mesh-turns/s-x`, `mesh-cpu-x`), which compare the two on whatever
// machine runs them.
func BenchmarkTurnCPU(b *testing.B) {
	models := benchModels(b)
	meshRuns := map[int]loadResult{} // the mesh's with the OpenAI-format model, by concurrency
	for _, model := range []string{"offline", "openai"} {
		b.Run("model="+model, func(b *testing.B) {
			m := startMesh(b, models[model].opts)
			m.send(m.newConversation(), "list all resources") // warm up
			for _, conc := range []int{1, 10, 50} {
				b.Run(fmt.Sprintf("conversations=%d", conc), func(b *testing.B) {
					turns := max(b.N, conc)
					res := turnLoad{turns: turns, conc: conc, perConversation: 10}.run(b, m)
					res.report(b)
					if model == "openai" {
						meshRuns[conc] = res
					}
				})
			}
		})
	}
	b.Run("baseline", func(b *testing.B) {
		p := startBaseline(b, models["openai"].modelURL)
		p.checkTurn(b) // and warm up
		for _, conc := range []int{1, 10, 50} {
			b.Run(fmt.Sprintf("conversations=%d", conc), func(b *testing.B) {
				turns := max(b.N, conc)
				res := turnLoad{turns: turns, conc: conc, perConversation: 10}.run(b, p)
				res.report(b)
				if m, ok := meshRuns[conc]; ok && len(m.lat) > 0 && len(res.lat) > 0 {
					b.ReportMetric(m.p50()/res.p50(), "mesh-p50-x")
					b.ReportMetric(m.turnsPerSecond()/res.turnsPerSecond(), "mesh-turns/s-x")
					b.ReportMetric(m.cpuPerTurn()/res.cpuPerTurn(), "mesh-cpu-x")
				}
			})
		}
	})
}

// benchScale scales the fixed-size benchmarks: MESH_BENCH_SCALE=1 runs them
// at full size; the default, 0.1, keeps `make bench` short.
func benchScale() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("MESH_BENCH_SCALE"), 64); err == nil && v > 0 {
		return v
	}
	return 0.1
}

// BenchmarkMeshMemory runs 10,000 conversations of one turn each (times
// MESH_BENCH_SCALE, 0.1 by default) at 100 concurrent on `mesh up` with the
// offline planner, and reports the resident memory of every mesh process:
// before, at the end (`rss-at-end-MB`), 15 s later (`rss-MB` the total,
// `<process>-MB` each, and its parts: `rss-file-MB` the pages of the
// programs and libraries each process maps, `rss-anon-MB` the processes'
// own memory) and settled (`rss-settled-MB`), 3 minutes after the end:
// after JetStream's 2-minute timers (it drops a message block's subject
// index 2 minutes after the block's last use, and writes each stream's
// state every 2 minutes) and the releases that follow them (mesh/memory).
// Each reading also has its proportional set size (`pss-…`): RSS counts
// the pages of the mesh binary that every role process maps once per
// process, PSS once in all.
func BenchmarkMeshMemory(b *testing.B) {
	conversations := int(10000 * benchScale())
	m := startMesh(b, meshOpts{logLevel: "warn"})
	m.send(m.newConversation(), "list all resources") // warm up
	usage := m.usage()
	_, before := rssByName(usage)
	pssBefore := pssTotal(usage)
	res := turnLoad{turns: conversations, conc: 100, perConversation: 1}.run(b, m)
	usage = m.usage()
	_, atEnd := rssByName(usage)
	pssAtEnd := pssTotal(usage)
	// JetStream drops the caches of the blocks it wrote after 10 s idle.
	time.Sleep(15 * time.Second)
	usage = m.usage()
	byName, total := rssByName(usage)
	pss := pssTotal(usage)
	file, anon := rssSplitTotal(usage)
	time.Sleep(165 * time.Second)
	usage = m.usage()
	settledByName, settled := rssByName(usage)
	pssSettled := pssTotal(usage)
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(mb(total), "rss-MB")
	b.ReportMetric(mb(atEnd), "rss-at-end-MB")
	b.ReportMetric(mb(before), "rss-before-MB")
	b.ReportMetric(mb(settled), "rss-settled-MB")
	b.ReportMetric(mb(pss), "pss-MB")
	b.ReportMetric(mb(pssAtEnd), "pss-at-end-MB")
	b.ReportMetric(mb(pssBefore), "pss-before-MB")
	b.ReportMetric(mb(pssSettled), "pss-settled-MB")
	b.ReportMetric(mb(file), "rss-file-MB")
	b.ReportMetric(mb(anon), "rss-anon-MB")
	line := func(byName map[string]int64) string {
		out := []string{}
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			out = append(out, fmt.Sprintf("%s %.1f", name, mb(byName[name])))
		}
		return strings.Join(out, ", ")
	}
	for name, n := range byName {
		b.ReportMetric(mb(n), name+"-MB")
	}
	b.ReportMetric(float64(len(res.lat))/res.elapsed.Seconds(), "turns/s")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d conversations at 100 concurrent: RSS %.1f MB before, %.1f MB at the end, %.1f MB 15 s later (%s; files %.1f, own %.1f), %.1f MB settled (%s); PSS %.1f, %.1f, %.1f, %.1f MB",
		len(res.lat), mb(before), mb(atEnd), mb(total), line(byName), mb(file), mb(anon), mb(settled), line(settledByName), mb(pssBefore), mb(pssAtEnd), mb(pss), mb(pssSettled))
}

// BenchmarkLongConversation compares turns 100 and 500 of a conversation
// with turns 1 and 2 (offline planner: no model time). 40 conversations
// are taken to turn 500 together; turns 1, 2, 100 and 500 of each are sent
// one at a time, and their p50 latencies compared. The mesh's CPU per turn
// is compared over turn 1 (of the 40), turns 2-4, 98-100 and 498-500 (a
// single turn is too few clock ticks to read).
func BenchmarkLongConversation(b *testing.B) {
	const convs, window = 40, 3
	m := startMesh(b, meshOpts{logLevel: "warn"})
	client := turnClient(convs)
	defer client.CloseIdleConnections()
	ids := make([]string, convs)
	for i := range ids {
		ids[i] = m.newConversation()
	}
	turn := func(conv string) time.Duration {
		t0 := time.Now()
		status, body, err := post(client, m.url("/conversations/"+conv+"/messages"), map[string]any{"message": "list all resources"})
		if err != nil || status != http.StatusOK {
			b.Fatalf("turn: %d %v %.300s", status, err, body)
		}
		return time.Since(t0)
	}
	// next sends the next window turns of every conversation, one turn at
	// a time: the latencies of each of the window's turns, and the CPU per
	// turn.
	byRole := map[string]map[string]time.Duration{} // window → role → CPU per turn
	next := func(name string) ([window][]time.Duration, time.Duration) {
		before := m.usage()
		var lat [window][]time.Duration
		for i := range window {
			for _, id := range ids {
				lat[i] = append(lat[i], turn(id))
			}
			slices.Sort(lat[i])
		}
		var cpu time.Duration
		byRole[name] = map[string]time.Duration{}
		for role, d := range cpuByName(before, m.usage()) {
			cpu += d
			byRole[name][role] = d / (convs * window)
		}
		return lat, cpu / (convs * window)
	}
	before := m.usage()
	var lat1 []time.Duration
	for _, id := range ids { // turn 1
		lat1 = append(lat1, turn(id))
	}
	var cpu1 time.Duration
	for _, d := range cpuByName(before, m.usage()) {
		cpu1 += d
	}
	cpu1 /= convs
	slices.Sort(lat1)
	early, cpu2 := next("turn2") // turns 2 to 4
	upTo := func(n int) {        // the turns before turn n, concurrently
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				for range n {
					turn(id)
				}
			})
		}
		wg.Wait()
	}
	upTo(93)                        // turns 5 to 97
	late, cpu100 := next("turn100") // turns 98 to 100
	upTo(397)                       // turns 101 to 497
	last, cpu500 := next("turn500") // turns 498 to 500
	lat2, lat100, lat500 := early[0], late[window-1], last[window-1]
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50 := func(l []time.Duration) time.Duration { return l[len(l)/2] }
	b.ReportMetric(ms(p50(lat1)), "turn1-p50-ms")
	b.ReportMetric(ms(p50(lat2)), "turn2-p50-ms")
	b.ReportMetric(ms(p50(lat100)), "turn100-p50-ms")
	b.ReportMetric(ms(p50(lat500)), "turn500-p50-ms")
	b.ReportMetric(ms(p50(lat100))/ms(p50(lat2)), "latency-ratio")
	b.ReportMetric(ms(p50(lat500))/ms(p50(lat1)), "latency-ratio-500")
	b.ReportMetric(ms(cpu1), "turn1-cpu-ms")
	b.ReportMetric(ms(cpu2), "turn2-cpu-ms")
	b.ReportMetric(ms(cpu100), "turn100-cpu-ms")
	b.ReportMetric(ms(cpu500), "turn500-cpu-ms")
	b.ReportMetric(ms(cpu100)/ms(cpu2), "cpu-ratio")
	b.ReportMetric(ms(cpu500)/ms(cpu2), "cpu-ratio-500")
	for _, w := range []string{"turn2", "turn500"} {
		for role, d := range byRole[w] {
			b.ReportMetric(ms(d), w+"-"+role+"-cpu-ms")
		}
	}
	b.ReportMetric(0, "ns/op")
}
