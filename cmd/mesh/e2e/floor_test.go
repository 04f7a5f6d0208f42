package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// The floor of a turn: the round trips and stored messages a mesh turn's
// guarantees take, made by processes that do nothing else, on the mesh's
// own embedded server and streams (natsserver.Start, store.Provision). It
// answers what part of a turn's latency and CPU at one conversation is the
// machine's price for the architecture (a wakeup of another process at
// each hop, a stored message at each step) and what part is the mesh's own
// work between them.
//
// Its processes, each the test binary run again (floorRoleEnv), with
// GOMAXPROCS half the host's as `mesh up` gives its roles:
//
//   - server: the embedded server, the mesh's streams and buckets.
//   - bridge: POST /conversations creates a session key; POST
//     /conversations/{id}/messages writes the session by compare-and-set
//     (the revision from its watch of the bucket, as the bridge's cache
//     has it), publishes a CUSTOM event and then the work item, each
//     waited for, and answers when a consumer of the events stream
//     delivers the run's RUN_FINISHED.
//   - agent: a durable pull consumer of the work stream; per item it reads
//     the session, publishes five events without waiting, calls the tool
//     (a request to the tool host), publishes five more (the text in two
//     pieces, as the offline planner sends it), appends the
//     turn's record to the message log and waits, writes the session by
//     compare-and-set, publishes RUN_FINISHED and waits for every event's
//     acknowledgement, then acks the item.
//   - toolhost: answers the tool's requests by a round trip over a pipe to
//     a child that echoes each line (the MCP server's place).
//
// The mesh sends the same messages for such a turn (12 events, the
// bridge's CUSTOM run_queued and the agent's 11; the turn's record; 2
// session writes and 1 read; the work item and its ack; the tool's request
// and reply: counted on the server's subjects), and does
// its own work around them: decoding and checking, its caches and logs,
// the approval and ownership checks, the tool call's acknowledgement, the
// follows that let the bridge answer with a page of the conversation.
const (
	floorRoleEnv = "MESH_TEST_FLOOR_ROLE" // the role a floor process runs
	floorNATSEnv = "MESH_TEST_FLOOR_NATS" // the server's client address
	floorHTTPEnv = "MESH_TEST_FLOOR_HTTP" // the bridge's address
	floorDirEnv  = "MESH_TEST_FLOOR_DIR"  // the server's store
)

// The floor's agent, its durable consumer, and the tool it calls.
const (
	floorAgentName = "floor"
	floorConsumer  = "agent_" + floorAgentName
	floorServer    = "resources"
	floorTool      = "resources_list"
)

// The floor's payloads, about the size of the mesh's: an event, the session as a
// turn's writes leave it, the turn's record, the tool's answer.
var (
	floorEvent  = floorPayload(180)
	floorHead   = floorPayload(1200)
	floorRecord = floorPayload(600)
	floorAnswer = floorPayload(500)
)

// floorPayload is a JSON string of n bytes.
func floorPayload(n int) []byte {
	return []byte(`"` + strings.Repeat("x", n-2) + `"`)
}

// floorProc is the floor's processes.
type floorProc struct {
	addr, natsAddr string
	procs          map[string]*exec.Cmd // by role
}

// startFloor starts the floor's processes and waits until a turn goes
// through.
func startFloor(t testing.TB) *floorProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	natsAddr, dir := freeAddr(t), t.TempDir()
	f := &floorProc{addr: freeAddr(t), natsAddr: natsAddr, procs: map[string]*exec.Cmd{}}
	procs := strconv.Itoa(max(1, runtime.NumCPU()/2))
	start := func(role string) {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), floorRoleEnv+"="+role, floorNATSEnv+"="+natsAddr, floorHTTPEnv+"="+f.addr,
			floorDirEnv+"="+dir, "GOMAXPROCS="+procs)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = meshProcAttr()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.procs[role] = cmd
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		})
	}
	start("server")
	meshtest.Eventually(t, 30*time.Second, func() bool {
		nc, err := nats.Connect("nats://" + natsAddr)
		if err != nil {
			return false
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		_, err = js.KeyValue(t.Context(), mesh.DefaultNamespace().Bucket(mesh.BucketSessions))
		return err == nil
	}, "the floor's server has not provisioned the mesh's streams")
	for _, role := range []string{"toolhost", "agent", "bridge"} {
		start(role)
	}
	client := turnClient(1)
	meshtest.Eventually(t, 30*time.Second, func() bool {
		status, body, err := post(client, f.url("/conversations"), map[string]any{})
		var created struct{ Conversation struct{ ID string } }
		if err != nil || status != http.StatusCreated || json.Unmarshal(body, &created) != nil {
			return false
		}
		status, _, err = post(client, f.url("/conversations/"+created.Conversation.ID+"/messages"), map[string]any{"message": "list all resources"})
		return err == nil && status == http.StatusOK
	}, "no turn goes through the floor on %s", f.addr)
	return f
}

func (f *floorProc) url(path string) string { return "http://" + f.addr + path }

// usage reads every process of the floor, by role (the tool host's echo
// child under its own name).
func (f *floorProc) usage() map[int]procStat {
	out := map[int]procStat{}
	for role, cmd := range f.procs {
		for pid, u := range treeUsage(cmd.Process.Pid, role) {
			if pid != cmd.Process.Pid {
				u.name = "echo"
			}
			out[pid] = u
		}
	}
	return out
}

// BenchmarkTurnFloor measures turns at one conversation on `mesh up`
// (offline planner, one resources_list call) and on the floor (above),
// taking turns over three rounds of b.N turns each, and reports the
// medians of the rounds: p50 and CPU per turn of each (`floor-…`,
// `mesh-…`) and the mesh's over the floor's (`mesh-p50-x`, `mesh-cpu-x`).
// On whatever machine runs it, the floor is what a turn making these
// round trips cannot go under there: at one conversation every hop wakes
// a process from idle, and nothing batches.
func BenchmarkTurnFloor(b *testing.B) {
	m := startMesh(b, meshOpts{logLevel: "warn"})
	m.send(m.newConversation(), "list all resources") // warm up
	f := startFloor(b)
	b.ResetTimer() // b.N grows with the turns' time, not the processes' start
	// The rounds' figures, by round, for the package's median.
	meshP50, meshCPU, floorP50, floorCPU := map[int]float64{}, map[int]float64{}, map[int]float64{}, map[int]float64{}
	turns := max(b.N, 10)
	for round := range 3 {
		mr := turnLoad{turns: turns, conc: 1, perConversation: 10}.run(b, m)
		meshP50[round], meshCPU[round] = mr.p50(), mr.cpuPerTurn()
		fr := turnLoad{turns: turns, conc: 1, perConversation: 10}.run(b, f)
		floorP50[round], floorCPU[round] = fr.p50(), fr.cpuPerTurn()
		b.Logf("%d turns each: mesh p50 %.2f ms, CPU %.2f ms/turn (%s); floor p50 %.2f ms, CPU %.2f ms/turn (%s)",
			turns, mr.p50(), mr.cpuPerTurn(), mr.cpuByProcess(), fr.p50(), fr.cpuPerTurn(), fr.cpuByProcess())
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(meshP50), "mesh-p50-ms")
	b.ReportMetric(median(meshCPU), "mesh-cpu-ms/turn")
	b.ReportMetric(median(floorP50), "floor-p50-ms")
	b.ReportMetric(median(floorCPU), "floor-cpu-ms/turn")
	b.ReportMetric(median(meshP50)/median(floorP50), "mesh-p50-x")
	b.ReportMetric(median(meshCPU)/median(floorCPU), "mesh-cpu-x")
}

// runFloorRole is the main of a floor process (floorRoleEnv).
func runFloorRole() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	role := os.Getenv(floorRoleEnv)
	var err error
	switch role {
	case "server":
		err = floorServe(ctx)
	case "echo":
		err = floorEcho()
	default:
		err = floorClient(ctx, role)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "floor %s: %v\n", role, err)
		return 1
	}
	return 0
}

// floorServe runs the embedded server with the mesh's streams and buckets.
func floorServe(ctx context.Context) error {
	srv, err := natsserver.Start(natsserver.Config{Listen: os.Getenv(floorNATSEnv), StoreDir: os.Getenv(floorDirEnv)})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := store.Provision(ctx, js, mesh.DefaultNamespace(), store.ProvisionConfig{}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// floorEcho writes back every line it reads, until stdin closes.
func floorEcho() error {
	in, out := bufio.NewReader(os.Stdin), bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadSlice('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := out.Write(line); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// floorClient runs the bridge, the agent or the tool host.
func floorClient(ctx context.Context, role string) error {
	nc, err := nats.Connect("nats://"+os.Getenv(floorNATSEnv), nats.Name("floor-"+role))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ns := mesh.DefaultNamespace()
	kv, err := js.KeyValue(ctx, ns.Bucket(mesh.BucketSessions))
	if err != nil {
		return err
	}
	switch role {
	case "bridge":
		return floorBridge(ctx, js, kv)
	case "agent":
		return floorAgent(ctx, nc, js, kv)
	case "toolhost":
		return floorToolhost(ctx, nc)
	}
	return fmt.Errorf("no floor role %q", role)
}

// floorBridge serves the turns' HTTP side (see the file's comment).
func floorBridge(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) error {
	ns := mesh.DefaultNamespace()
	var mu sync.Mutex
	revs := map[string]uint64{}           // session → newest revision known, its watch's or its own
	waiters := map[string]chan struct{}{} // run → its end
	seen := func(id string, rev uint64) {
		mu.Lock()
		revs[id] = max(revs[id], rev)
		mu.Unlock()
	}
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return err
	}
	go func() {
		for e := range w.Updates() {
			if e != nil {
				seen(e.Key(), e.Revision())
			}
		}
	}()
	finished, err := ns.EventsOfType(mesh.EventRunFinished)
	if err != nil {
		return err
	}
	ends, err := js.OrderedConsumer(ctx, ns.Stream(mesh.StreamEvents), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{finished}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return err
	}
	cc, err := ends.Consume(func(msg jetstream.Msg) {
		mu.Lock()
		if run := msg.Headers().Get(mesh.HeaderRun); waiters[run] != nil {
			close(waiters[run])
			delete(waiters, run)
		}
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer cc.Stop()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /conversations", func(w http.ResponseWriter, r *http.Request) {
		id := mesh.NewID()
		rev, err := kv.Create(r.Context(), id, floorHead)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		seen(id, rev)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"conversation":{"id":%q}}`, id)
	})
	mux.HandleFunc("POST /conversations/{id}/messages", func(w http.ResponseWriter, r *http.Request) {
		id, run := r.PathValue("id"), mesh.NewID()
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		done := make(chan struct{})
		mu.Lock()
		rev := revs[id]
		waiters[run] = done
		mu.Unlock()
		defer func() { mu.Lock(); delete(waiters, run); mu.Unlock() }()
		fail := func(err error) { http.Error(w, err.Error(), http.StatusInternalServerError) }
		rev, err := kv.Update(r.Context(), id, floorHead, rev)
		if errors.Is(err, jetstream.ErrKeyExists) {
			// The watch has not yet delivered the agent's last save (it
			// comes apart from RUN_FINISHED): read it, as the bridge's
			// cache does on a conflict.
			var e jetstream.KeyValueEntry
			if e, err = kv.Get(r.Context(), id); err == nil {
				rev, err = kv.Update(r.Context(), id, floorHead, e.Revision())
			}
		}
		if err != nil {
			fail(err)
			return
		}
		seen(id, rev)
		queued, _ := ns.Event(id, mesh.EventCustom)
		m := nats.NewMsg(queued)
		m.Data = floorEvent
		m.Header.Set(mesh.HeaderMsgID, run+":queued")
		m.Header.Set(mesh.HeaderRun, run)
		if _, err := js.PublishMsg(r.Context(), m); err != nil {
			fail(err)
			return
		}
		work, _ := ns.Work(mesh.RoleAgent, floorAgentName, id)
		m = nats.NewMsg(work)
		m.Data = []byte(fmt.Sprintf(`{"session":%q,"turn_id":%q}`, id, run))
		if _, err := js.PublishMsg(r.Context(), m); err != nil {
			fail(err)
			return
		}
		select {
		case <-done:
			fmt.Fprintf(w, `{"result":{"run_id":%q}}`, run)
		case <-r.Context().Done():
		}
	})
	l, err := net.Listen("tcp", os.Getenv(floorHTTPEnv))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// floorAgent runs the work items (see the file's comment).
func floorAgent(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, kv jetstream.KeyValue) error {
	ns := mesh.DefaultNamespace()
	filter, err := ns.WorkFilter(mesh.RoleAgent, floorAgentName)
	if err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, ns.Stream(mesh.StreamWork), jetstream.ConsumerConfig{
		Durable: floorConsumer, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return err
	}
	tool, err := ns.Tool(floorServer, floorTool)
	if err != nil {
		return err
	}
	turn := func(msg jetstream.Msg) error {
		var item struct {
			Session string `json:"session"`
			TurnID  string `json:"turn_id"`
		}
		if err := json.Unmarshal(msg.Data(), &item); err != nil {
			return err
		}
		entry, err := kv.Get(ctx, item.Session)
		if err != nil {
			return err
		}
		var acks []jetstream.PubAckFuture
		emit := func(typ mesh.EventType, msgID string) error {
			subj, err := ns.Event(item.Session, typ)
			if err != nil {
				return err
			}
			m := nats.NewMsg(subj)
			m.Data = floorEvent
			m.Header.Set(mesh.HeaderRun, item.TurnID)
			if msgID != "" {
				m.Header.Set(mesh.HeaderMsgID, msgID)
			}
			f, err := js.PublishMsgAsync(m)
			if err != nil {
				return err
			}
			acks = append(acks, f)
			return nil
		}
		for _, typ := range []mesh.EventType{mesh.EventRunStarted, mesh.EventStateSnapshot, mesh.EventToolCallStart, mesh.EventToolCallArgs, mesh.EventToolCallEnd} {
			if err := emit(typ, ""); err != nil {
				return err
			}
		}
		if _, err := nc.Request(tool, []byte(fmt.Sprintf(`{"call_id":%q,"arguments":{}}`, item.TurnID)), 10*time.Second); err != nil {
			return err
		}
		for _, typ := range []mesh.EventType{mesh.EventToolCallResult, mesh.EventTextMessageStart, mesh.EventTextMessageContent, mesh.EventTextMessageContent, mesh.EventTextMessageEnd} {
			if err := emit(typ, ""); err != nil {
				return err
			}
		}
		record, err := ns.Messages(item.Session)
		if err != nil {
			return err
		}
		if _, err := js.Publish(ctx, record, floorRecord); err != nil {
			return err
		}
		if _, err := kv.Update(ctx, item.Session, floorHead, entry.Revision()); err != nil {
			return err
		}
		if err := emit(mesh.EventRunFinished, "end:"+item.TurnID); err != nil {
			return err
		}
		return bus.AwaitAcks(ctx, acks)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if err := turn(msg); err != nil {
			fmt.Fprintln(os.Stderr, "floor agent:", err)
			_ = msg.Nak()
			return
		}
		_ = msg.Ack()
	})
	if err != nil {
		return err
	}
	defer cc.Stop()
	<-ctx.Done()
	return nil
}

// floorToolhost answers the tool's requests through the echo child.
func floorToolhost(ctx context.Context, nc *nats.Conn) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self)
	child.Env = append(os.Environ(), floorRoleEnv+"=echo")
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = stdin.Close(); _ = child.Wait() }()
	lines := bufio.NewReader(stdout)
	tool, err := mesh.DefaultNamespace().Tool(floorServer, floorTool)
	if err != nil {
		return err
	}
	var mu sync.Mutex // one call on the pipe at a time, as a stdio MCP client's are matched one by one
	sub, err := nc.QueueSubscribe(tool, "toolhost", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := stdin.Write(append(m.Data, '\n')); err != nil {
			return
		}
		if _, err := lines.ReadSlice('\n'); err != nil {
			return
		}
		_ = m.Respond(floorAnswer)
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	<-ctx.Done()
	return nil
}

// TestTurnFloor keeps the floor honest between benchmark runs: its turns
// store what a mesh turn stores (12 events, one record, two session
// writes) and leave no work item behind.
func TestTurnFloor(t *testing.T) {
	t.Parallel()
	f := startFloor(t)
	client := turnClient(1)
	status, body, err := post(client, f.url("/conversations"), map[string]any{})
	var created struct{ Conversation struct{ ID string } }
	if err != nil || status != http.StatusCreated || json.Unmarshal(body, &created) != nil {
		t.Fatalf("create: %d %v %s", status, err, body)
	}
	id := created.Conversation.ID
	nc, err := nats.Connect("nats://" + f.natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ns := mesh.DefaultNamespace()
	kv, err := js.KeyValue(t.Context(), ns.Bucket(mesh.BucketSessions))
	if err != nil {
		t.Fatal(err)
	}
	revision := func() uint64 {
		t.Helper()
		e, err := kv.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	atCreation := revision()
	const turns = 3
	for range turns {
		if status, body, err := post(client, f.url("/conversations/"+id+"/messages"), map[string]any{"message": "list all resources"}); err != nil || status != http.StatusOK {
			t.Fatalf("turn: %d %v %s", status, err, body)
		}
	}
	// Nothing else writes to the bucket meanwhile: the distance between
	// the revisions is the turns' writes.
	if n := revision() - atCreation; n != 2*turns {
		t.Errorf("%d session writes for %d turns, want %d", n, turns, 2*turns)
	}
	stored := func(stream, filter string) int { return storedOn(t, js, ns.Stream(stream), filter) }
	events, _ := ns.EventsOf(id)
	records, _ := ns.Messages(id)
	if n := stored(mesh.StreamEvents, events); n != 12*turns {
		t.Errorf("%d events stored for %d turns, want %d", n, turns, 12*turns)
	}
	if n := stored(mesh.StreamMessages, records); n != turns {
		t.Errorf("%d records stored for %d turns, want %d", n, turns, turns)
	}
	// The agent acks an item after its run's end, which the answer waits
	// for: the last ack may come a moment later.
	meshtest.Eventually(t, 10*time.Second, func() bool { return stored(mesh.StreamWork, ns.WorkAll()) == 0 },
		"work items are left in the work stream")
}
