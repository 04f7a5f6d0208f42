package ops

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// fixture is an ops service over a mesh with no role running: the test
// writes the buckets, streams and events the roles would.
type fixture struct {
	m   *meshtest.Mesh
	c   *core.Core
	s   *Service
	srv *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	m := meshtest.New(t)
	c, err := core.New(core.Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "keeper"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	s, err := New(Config{Core: c, Resources: m.Resources, Tick: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, "ops", s.Run)
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &fixture{m: m, c: c, s: s, srv: srv}
}

func (f *fixture) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// conversation stores a conversation owned by owner whose member (a step
// or group member) asked for call.
func (f *fixture) conversation(t *testing.T, owner, request, member, call string) string {
	t.Helper()
	id := mesh.NewID()
	conv := &mesh.Conversation{ID: id, Agent: "keeper", Owner: owner, Status: mesh.StatusWaitingApproval, Messages: []mesh.Message{
		{ID: mesh.NewID(), Role: mesh.RoleUser, Content: "an earlier message"},
		{ID: mesh.NewID(), Role: mesh.RoleUser, Content: request},
		{ID: mesh.NewID(), Role: mesh.RoleAssistant, Name: member, ToolCalls: []mesh.ToolCall{{ID: call, Name: "resources_add"}}},
	}}
	if err := f.c.Sessions.Create(t.Context(), conv); err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) approval(t *testing.T, conv, call string, at time.Time, policy string) *mesh.Approval {
	t.Helper()
	ap := &mesh.Approval{UUID: mesh.NewID(), ConversationID: conv, Agent: "keeper", ToolCallID: call, ToolName: "resources_add",
		Server: "resources", Tool: "resources_add", ToolArgs: map[string]any{"name": call}, CreatedAt: at, Policy: policy}
	if policy != "" {
		ap.Status = mesh.ApprovalApproved
	}
	if err := store.NewApprovalStore(f.m.Approvals).Create(t.Context(), ap); err != nil {
		t.Fatal(err)
	}
	return ap
}

// The inbox lists pending approvals oldest first with their conversation,
// who asked, the member and the turn's message; decided ones newest first
// with who decided; a policy's decisions not at all.
func TestInboxListsWhatWaitsAndWhatWasDecided(t *testing.T) {
	f := newFixture(t)
	now := time.Now().UTC()
	c1 := f.conversation(t, "uma", "add the left one", "add-left", "call-1")
	c2 := f.conversation(t, "ivy", "add the other", "", "call-2")
	newer := f.approval(t, c1, "call-1", now.Add(-time.Minute), "")
	older := f.approval(t, c2, "call-2", now.Add(-2*time.Minute), "")
	f.approval(t, c2, "call-p", now, mesh.PolicyNonDestructive)
	decided := f.approval(t, c2, "call-3", now.Add(-3*time.Minute), "")
	if _, err := store.NewApprovalStore(f.m.Approvals).Decide(t.Context(), decided.UUID, mesh.Decision{Approved: false, By: "ada", Reason: "not now"}); err != nil {
		t.Fatal(err)
	}

	var in Inbox
	meshtest.Eventually(t, 5*time.Second, func() bool {
		f.get(t, "/ops/approvals", &in)
		return len(in.Pending) == 2 && len(in.Decided) == 1
	}, "the inbox never showed 2 pending and 1 decided")
	if in.Pending[0].UUID != older.UUID || in.Pending[1].UUID != newer.UUID {
		t.Errorf("pending %s, %s; want the older %s first", in.Pending[0].UUID, in.Pending[1].UUID, older.UUID)
	}
	p := in.Pending[1]
	// c1 by uma, member add-left, its request, no seal.
	if p.Conversation == nil {
		t.Errorf("pending item %+v without its conversation, want c1", p)
	} else {
		if p.Conversation.ID != c1 {
			t.Errorf("pending item's conversation %s, want %s", p.Conversation.ID, c1)
		}
		if p.Conversation.Title != "an earlier message" {
			t.Errorf("pending item's conversation title %q, want %q", p.Conversation.Title, "an earlier message")
		}
	}
	if p.AskedBy != "uma" {
		t.Errorf("pending item asked by %q, want uma", p.AskedBy)
	}
	if p.Member != "add-left" {
		t.Errorf("pending item member %q, want add-left", p.Member)
	}
	if p.Request != "add the left one" {
		t.Errorf("pending item request %q, want %q", p.Request, "add the left one")
	}
	if p.Seal != nil {
		t.Errorf("pending item carries a seal %+v, want none", p.Seal)
	}
	if p.WaitedSeconds < 59 || p.WaitedSeconds > 120 {
		t.Errorf("waited %.1fs, want about a minute", p.WaitedSeconds)
	}
	d := in.Decided[0]
	// The rejection by ada with its reason.
	if d.UUID != decided.UUID {
		t.Errorf("decided item %s, want %s", d.UUID, decided.UUID)
	}
	if d.Status != mesh.ApprovalRejected {
		t.Errorf("decided item status %s, want %s", d.Status, mesh.ApprovalRejected)
	}
	if d.Decision == nil {
		t.Error("decided item without its decision")
	} else {
		if d.Decision.By != "ada" {
			t.Errorf("decided by %q, want ada", d.Decision.By)
		}
		if d.Decision.Reason != "not now" {
			t.Errorf("decision reason %q, want %q", d.Decision.Reason, "not now")
		}
	}
	want := map[mesh.ApprovalStatus]int{mesh.ApprovalPending: 2, mesh.ApprovalApproved: 0, mesh.ApprovalRejected: 1}
	for k, n := range want {
		if in.Counts[k] != n {
			t.Errorf("counts %v, want %v", in.Counts, want)
			break
		}
	}
	var none Inbox
	f.get(t, "/ops/approvals?history=0", &none)
	if len(none.Decided) != 0 || len(none.Pending) != 2 {
		t.Errorf("?history=0: %d decided, %d pending", len(none.Decided), len(none.Pending))
	}
}

// The approvals stream sends the inbox at once, then again when an
// approval is created or decided.
func TestApprovalStreamFollowsChanges(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation(t, "", "add it", "", "call-1")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/ops/approvals/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := sseEvents(resp)
	next := func(cond func(map[string]any) bool, what string) {
		t.Helper()
		for ev := range events {
			if ev["type"] == "approvals" && cond(ev) {
				return
			}
		}
		t.Fatalf("the stream ended before %s", what)
	}
	count := func(ev map[string]any, key string) int {
		l, _ := ev[key].([]any)
		return len(l)
	}
	next(func(ev map[string]any) bool { return count(ev, "pending") == 0 }, "an empty inbox")
	ap := f.approval(t, conv, "call-1", time.Now(), "")
	next(func(ev map[string]any) bool { return count(ev, "pending") == 1 }, "the new approval")
	if _, err := store.NewApprovalStore(f.m.Approvals).Decide(t.Context(), ap.UUID, mesh.Decision{Approved: true, By: "ada"}); err != nil {
		t.Fatal(err)
	}
	next(func(ev map[string]any) bool { return count(ev, "pending") == 0 && count(ev, "decided") == 1 }, "the decision")
}

// sseEvents decodes the data lines of an SSE response.
func sseEvents(resp *http.Response) <-chan map[string]any {
	out := make(chan map[string]any)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev map[string]any
			if json.Unmarshal([]byte(data), &ev) == nil {
				out <- ev
			}
		}
	}()
	return out
}

func (f *fixture) beat(t *testing.T, info mesh.NodeInfo) {
	t.Helper()
	data, _ := json.Marshal(info)
	if _, err := f.m.Nodes.Put(t.Context(), info.Key(), data); err != nil {
		t.Fatal(err)
	}
}

// The mesh view: nodes with their state and heartbeat age (a silent one
// late), breakers by kind, the degradation mode, and the work queues from
// the stream and its consumers.
func TestMeshViewShowsNodesBreakersQueues(t *testing.T) {
	f := newFixture(t)
	now := time.Now().UTC()
	f.beat(t, mesh.NodeInfo{Node: "h-agent-0", Role: mesh.RoleAgent, State: mesh.NodeReady, PID: 42, Host: "h", BeatAt: now,
		Serves: []string{"keeper"}, Breakers: map[string]string{"mcp:resources": "open", "a2a:helper": "closed"}})
	f.beat(t, mesh.NodeInfo{Node: "h-agent-1", Role: mesh.RoleAgent, State: mesh.NodeReady, BeatAt: now.Add(-10 * time.Second)})
	f.beat(t, mesh.NodeInfo{Node: "h-toolhost-0", Role: mesh.RoleToolhost, State: mesh.NodeDown, BeatAt: now.Add(-time.Minute), DownAt: now})
	deg, _ := json.Marshal(mesh.Degradation{Since: now, Reason: "too many down", Failed: []string{"h-toolhost-0"}})
	if _, err := f.m.Nodes.Put(t.Context(), mesh.DegradedKey, deg); err != nil {
		t.Fatal(err)
	}
	// keeper: one item taken and one pending; solo: an item and no consumer.
	filter, _ := f.m.NS.WorkFilter(mesh.RoleAgent, "keeper")
	cons, err := f.m.JS.CreateOrUpdateConsumer(t.Context(), f.m.NS.Stream(mesh.StreamWork), jetstream.ConsumerConfig{
		Durable: "agent_keeper", FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ role, name string }{{mesh.RoleAgent, "keeper"}, {mesh.RoleAgent, "keeper"}, {mesh.RoleGroup, "solo"}} {
		subj, _ := f.m.NS.Work(w.role, w.name, mesh.NewID())
		if _, err := f.m.JS.Publish(t.Context(), subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cons.Fetch(1); err != nil {
		t.Fatal(err)
	}

	var v View
	meshtest.Eventually(t, 5*time.Second, func() bool {
		f.get(t, "/ops/mesh", &v)
		return len(v.Nodes) == 3 && v.Degradation != nil && len(v.Queues) == 2 && v.Queues[0].Working == 1
	}, "the view never showed 3 nodes, the degradation and both queues")
	byNode := map[string]NodeView{}
	for _, n := range v.Nodes {
		byNode[n.Node] = n
	}
	live := byNode["h-agent-0"]
	if live.Late {
		t.Errorf("live agent late: %+v", live)
	}
	if live.PID != 42 {
		t.Errorf("live agent pid %d, want 42", live.PID)
	}
	if live.Host != "h" {
		t.Errorf("live agent host %q, want h", live.Host)
	}
	if live.BeatAgeMS > 5000 {
		t.Errorf("live agent's last beat %d ms ago, want 5000 at most", live.BeatAgeMS)
	}
	if len(live.Serves) != 1 {
		t.Errorf("live agent serves %v, want one agent", live.Serves)
	}
	if n := byNode["h-agent-1"]; !n.Late || n.BeatAgeMS < 9000 {
		t.Errorf("silent agent %+v, want late", n)
	}
	if n := byNode["h-toolhost-0"]; n.Late || n.State != mesh.NodeDown {
		t.Errorf("down toolhost %+v, want down, not late", n)
	}
	switch rc := v.Roles[mesh.RoleAgent]; {
	case rc == nil:
		t.Error("no agent role count")
	case rc.Nodes != 2 || rc.Ready != 1 || rc.Late != 1:
		t.Errorf("agent role count: %d nodes, %d ready, %d late; want 2, 1, 1", rc.Nodes, rc.Ready, rc.Late)
	}
	if rc := v.Roles[mesh.RoleToolhost]; rc == nil || rc.Down != 1 {
		t.Errorf("toolhost role count %+v", rc)
	}
	wantB := []Breaker{{Node: "h-agent-0", Role: "agent", Kind: "sub_agent", Name: "a2a:helper", State: "closed"},
		{Node: "h-agent-0", Role: "agent", Kind: "mcp", Name: "mcp:resources", State: "open"}}
	if len(v.Breakers) != 2 || v.Breakers[0] != wantB[0] || v.Breakers[1] != wantB[1] {
		t.Errorf("breakers %+v, want %+v", v.Breakers, wantB)
	}
	wantQ := []Queue{{Role: "agent", Name: "keeper", Consumer: "agent_keeper", Messages: 2, Pending: 1, Working: 1},
		{Role: "group", Name: "solo", Messages: 1, Pending: 1}}
	if v.Queues[0] != wantQ[0] || v.Queues[1] != wantQ[1] || v.QueueError != "" {
		t.Errorf("queues %+v (%s), want %+v", v.Queues, v.QueueError, wantQ)
	}
	if v.DetectionMS != 2500 {
		t.Errorf("detection %d ms, want 2500", v.DetectionMS)
	}
}

// The rates come from the events the hub reads: events and ended runs per
// second, the p95 of run times, the approvals waiting; the mesh's own
// events are listed.
func TestStatsCountEventsAndTimeRuns(t *testing.T) {
	f := newFixture(t)
	var st struct {
		Samples []Sample `json:"samples"`
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		f.get(t, "/ops/stats", &st)
		return len(st.Samples) > 0
	}, "no sample: the service does not run") // and its tap is in place
	pub := bus.NewPublisher(f.m.JS, f.m.NS)
	conv := mesh.NewID()
	for _, ev := range []mesh.Event{{Type: mesh.EventRunStarted, RunID: "r1"}, {Type: mesh.EventTextMessageStart, MessageID: "m"}, {Type: mesh.EventRunFinished, RunID: "r1"}} {
		if _, err := pub.Publish(t.Context(), conv, "r1", "", ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pub.Publish(t.Context(), mesh.SystemSession, "", "", mesh.Custom(mesh.CustomNodeDown,
		map[string]any{"node": mesh.NodeInfo{Node: "h-agent-0", Role: "agent"}, "reason": "missed heartbeats"})); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		f.get(t, "/ops/stats", &st)
		var events, turns float64
		p95 := 0.0
		for _, s := range st.Samples {
			events += s.Events * 0.1
			turns += s.Turns * 0.1
			p95 = max(p95, s.P95MS)
		}
		return events > 3.5 && turns > 0.5 && p95 > 0
	}, "the samples never counted 4 events, 1 run and its time")
	var v View
	f.get(t, "/ops/mesh", &v)
	if len(v.Events) != 1 {
		t.Fatalf("%d system events, want the node_down of h-agent-0: %+v", len(v.Events), v.Events)
	}
	if e := v.Events[0]; e.Name != mesh.CustomNodeDown {
		t.Errorf("system event %s, want %s", e.Name, mesh.CustomNodeDown)
	}
	if e := v.Events[0]; e.Node != "h-agent-0" {
		t.Errorf("system event of node %q, want h-agent-0", e.Node)
	}
	if e := v.Events[0]; e.Reason != "missed heartbeats" {
		t.Errorf("system event reason %q, want %q", e.Reason, "missed heartbeats")
	}
}

func TestP95IsTheNearestRank(t *testing.T) {
	var ended []timed
	for i := 1; i <= 20; i++ {
		ended = append(ended, timed{dur: time.Duration(i) * time.Millisecond})
	}
	if got := p95(ended); got != 19 {
		t.Errorf("p95 of 1..20 ms = %v, want 19", got)
	}
	if got := p95(ended[:1]); got != 1 {
		t.Errorf("p95 of one = %v, want 1", got)
	}
	if got := p95(nil); got != 0 {
		t.Errorf("p95 of none = %v, want 0", got)
	}
}

// Events per second come from the events stream's last sequence: the first
// reading only sets the mark, a sequence that went back starts anew.
func TestEventsCountFromTheStreamSequence(t *testing.T) {
	s := newSampler(10)
	t0 := time.Now()
	s.start(t0)
	s.published(0) // an empty stream
	s.published(5)
	s.take(t0.Add(time.Second), 0)
	s.published(7)
	s.published(2) // made again
	s.published(4)
	s.take(t0.Add(2*time.Second), 0)
	var got []float64
	for _, x := range s.history() {
		got = append(got, x.Events)
	}
	if fmt.Sprint(got) != "[5 4]" {
		t.Errorf("events per second %v, want [5 4]", got)
	}
}
