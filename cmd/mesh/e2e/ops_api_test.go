package e2e

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// TestOpsAPIFieldsMatchTheMesh checks every field of the read-only ops API
// against the real state, read as the mesh's admin straight from NATS: the
// approvals bucket and the conversations for /ops/approvals; the nodes
// bucket, the role processes, the work stream and its consumers for
// /ops/mesh; the events stream for /ops/stats. Viewers read the mesh view,
// not the inbox.
func TestOpsAPIFieldsMatchTheMesh(t *testing.T) {
	t.Parallel()
	m := parallelApprovalsMesh(t)
	nc := m.adminNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	convA := m.pauseOn("add resource api-1 with value 1", 2)
	convB := m.pauseOn("list all resources", 1)
	// One decided, with a reason.
	pendingB := list(m.do(http.StatusOK, "GET", "/ops/approvals", nil, asApprover...), "pending")
	var rejected string
	for _, p := range pendingB {
		if str(p, "conversation_id") == convB {
			rejected = str(p, "uuid")
		}
	}
	m.do(http.StatusOK, "POST", "/approvals/"+rejected, map[string]any{"approved": false, "reason": "api check"}, asApprover...)

	t.Run("approvals", func(t *testing.T) {
		in := m.do(http.StatusOK, "GET", "/ops/approvals", nil, asApprover...)
		kv, err := js.KeyValue(ctx, "mesh_approvals")
		if err != nil {
			t.Fatal(err)
		}
		sessions, err := js.KeyValue(ctx, "mesh_sessions")
		if err != nil {
			t.Fatal(err)
		}
		// The conversation as stored: its head, and its messages from the
		// message log.
		convs := store.NewSessionStore(sessions, store.NewMessageLog(js, mesh.DefaultNamespace()))
		pending, decided := list(in, "pending"), list(in, "decided")
		if len(pending) != 2 || len(decided) != 1 || str(decided[0], "uuid") != rejected {
			t.Fatalf("pending %d, decided %v; want A's two pending, B's rejected", len(pending), decided)
		}
		if c := obj(in, "counts"); c["pending"] != 2.0 || c["approved"] != 0.0 || c["rejected"] != 1.0 {
			t.Errorf("counts %v", c)
		}
		now := time.Now()
		for _, it := range append(pending, decided...) {
			item := obj(it)
			var ap mesh.Approval
			getJSON(t, kv, str(item, "uuid"), &ap)
			stored, err := convs.Get(ctx, ap.ConversationID)
			if err != nil {
				t.Fatal(err)
			}
			conv := *stored
			want := map[string]any{
				"uuid": ap.UUID, "conversation_id": ap.ConversationID, "agent": ap.Agent, "run_id": ap.RunID, "tool_call_id": ap.ToolCallID,
				"tool_name": ap.ToolName, "server": ap.Server, "tool": ap.Tool, "call_id": ap.CallID, "args_hash": ap.ArgsHash,
				"description": ap.Description, "status": string(ap.Status), "tool_args": roundTrip(ap.ToolArgs),
				"created_at": ap.CreatedAt.Format(time.RFC3339Nano), "asked_by": conv.Owner,
				"conversation": map[string]any{"id": conv.ID, "title": conv.Summary().Title, "agent": conv.Agent, "owner": conv.Owner},
			}
			for k, v := range want {
				if !reflect.DeepEqual(item[k], v) {
					t.Errorf("%s %s = %v, the mesh has %v", ap.UUID, k, item[k], v)
				}
			}
			if item["seal"] != nil {
				t.Errorf("%s shows its seal", ap.UUID)
			}
			// The member whose call waits, and the message of its turn.
			var member, request string
			for _, msg := range conv.Messages {
				if msg.Role == mesh.RoleUser {
					request = msg.Content
				}
				for _, c := range msg.ToolCalls {
					if c.ID == ap.ToolCallID {
						member = msg.Name
					}
				}
			}
			if str(item, "member") != member || member == "" || str(item, "request") != request {
				t.Errorf("%s member %q request %q, the conversation says %q and %q", ap.UUID, str(item, "member"), str(item, "request"), member, request)
			}
			waited, _ := item["waited_seconds"].(float64)
			wantWait := now.Sub(ap.CreatedAt).Seconds()
			if ap.Status != mesh.ApprovalPending {
				wantWait = ap.DecidedAt.Sub(ap.CreatedAt).Seconds()
				d := obj(item, "decision")
				if str(d, "by") != ap.Decision.By {
					t.Errorf("%s decided by %q, the mesh has %q", ap.UUID, str(d, "by"), ap.Decision.By)
				}
				checkStrs(t, ap.UUID+" decision", d, map[string]string{"by": "ada", "reason": "api check"})
				if got, want := str(item, "decided_at"), ap.DecidedAt.Format(time.RFC3339Nano); got != want {
					t.Errorf("%s decided_at %s, the mesh has %s", ap.UUID, got, want)
				}
			}
			if math.Abs(waited-wantWait) > 5 {
				t.Errorf("%s waited %.1f s, want about %.1f", ap.UUID, waited, wantWait)
			}
		}
		if str(pending[0], "created_at") > str(pending[1], "created_at") {
			t.Errorf("pending not oldest first: %s then %s", str(pending[0], "created_at"), str(pending[1], "created_at"))
		}
		if str(pending[0], "conversation_id") != convA {
			t.Errorf("pending of %s, want A's", str(pending[0], "conversation_id"))
		}
	})

	t.Run("mesh", func(t *testing.T) {
		kv, err := js.KeyValue(ctx, "mesh_nodes")
		if err != nil {
			t.Fatal(err)
		}
		// A node adds a breaker when it first uses what it guards, and the
		// view is a moment older than the bucket read after it: compare
		// once both have the same breakers.
		var view map[string]any
		meshtest.Eventually(t, 10*time.Second, func() bool {
			view = m.do(http.StatusOK, "GET", "/ops/mesh", nil, asViewer...)
			reported := 0
			for _, n := range list(view, "nodes") {
				var info mesh.NodeInfo
				getJSON(t, kv, str(n, "role")+"."+str(n, "node"), &info)
				reported += len(info.Breakers)
			}
			return len(list(view, "breakers")) == reported
		}, "the breakers of /ops/mesh and of the nodes' beats differ")
		if v, _ := view["detection_ms"].(float64); v != 2500 || view["degradation"] != nil {
			t.Errorf("detection %v ms, degradation %v; want 2500 and none", view["detection_ms"], view["degradation"])
		}
		if _, err := kv.Get(ctx, mesh.DegradedKey); err == nil {
			t.Error("the mesh is degraded")
		}
		nodes := list(view, "nodes")
		keys, err := kv.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != len(keys) {
			t.Errorf("%d nodes shown, the bucket has keys %v", len(nodes), keys)
		}
		breakers := 0
		for _, n := range nodes {
			var info mesh.NodeInfo
			getJSON(t, kv, str(n, "role")+"."+str(n, "node"), &info)
			pid := m.upPID() // the monitor runs inside mesh up
			if info.Role != mesh.RoleMonitor {
				pid = m.childPID(info.Role)
			}
			if int(obj(n)["pid"].(float64)) != pid || info.PID != pid {
				t.Errorf("node %s pid %v, the bucket %d, the process %d", info.Node, obj(n)["pid"], info.PID, pid)
			}
			for k, v := range map[string]any{"state": info.State, "host": info.Host, "version": info.Version, "started_at": info.StartedAt.Format(time.RFC3339Nano)} {
				if obj(n)[k] != v {
					t.Errorf("node %s %s = %v, the bucket %v", info.Node, k, obj(n)[k], v)
				}
			}
			if age, _ := obj(n)["beat_age_ms"].(float64); age > 3000 || obj(n)["late"] != false {
				t.Errorf("node %s: beat %v ms ago, late %v; want a fresh beat", info.Node, age, obj(n)["late"])
			}
			if !reflect.DeepEqual(obj(n)["serves"], roundTrip(info.Serves)) && len(info.Serves) > 0 {
				t.Errorf("node %s serves %v, the bucket %v", info.Node, obj(n)["serves"], info.Serves)
			}
			breakers += len(info.Breakers)
			for name, state := range info.Breakers {
				found := false
				for _, b := range list(view, "breakers") {
					found = found || str(b, "node") == info.Node && str(b, "name") == name && str(b, "state") == state
				}
				if !found {
					t.Errorf("breaker %s of %s (%s) not shown: %v", name, info.Node, state, list(view, "breakers"))
				}
			}
			ready := 0.0
			if info.State == mesh.NodeReady {
				ready = 1
			}
			if rc := obj(view, "roles", info.Role); rc["nodes"] != 1.0 || rc["ready"] != ready || rc["down"] != 0.0 {
				t.Errorf("role %s counts %v, its one node is %s", info.Role, rc, info.State)
			}
		}
		if len(list(view, "breakers")) != breakers {
			t.Errorf("%d breakers shown, the nodes report %d", len(list(view, "breakers")), breakers)
		}
		// The work queue: the stream and the consumer, read as admin.
		stream, err := js.Stream(ctx, "MESH_WORK")
		if err != nil {
			t.Fatal(err)
		}
		cons, err := stream.Consumer(ctx, "agent_resource-manager")
		if err != nil {
			t.Fatal(err)
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var q map[string]any
		for _, e := range list(view, "queues") {
			if str(e, "name") == "resource-manager" {
				q = obj(e)
			}
		}
		want := map[string]any{"role": "agent", "consumer": ci.Name, "messages": float64(storedOn(t, js, "MESH_WORK", "mesh.work.agent.resource-manager.*")), "pending": float64(ci.NumPending),
			"working": float64(ci.NumAckPending), "redelivered": float64(ci.NumRedelivered), "pulling": float64(ci.NumWaiting)}
		for k, v := range want {
			if q[k] != v {
				t.Errorf("queue %s = %v, the stream and consumer say %v", k, q[k], v)
			}
		}
		if q["pulling"] == 0.0 {
			t.Error("no worker pulls: the agent runs, its pull requests wait")
		}
	})

	t.Run("stats", func(t *testing.T) {
		// Runs that ended, in the events stream, against the sampled rates.
		runsEnded := storedOn(t, js, "MESH_EVENTS", "mesh.evt.*.RUN_FINISHED") + storedOn(t, js, "MESH_EVENTS", "mesh.evt.*.RUN_ERROR")
		kv, err := js.KeyValue(ctx, "mesh_approvals")
		if err != nil {
			t.Fatal(err)
		}
		waiting := 0
		keys, _ := kv.Keys(ctx)
		for _, k := range keys {
			var ap mesh.Approval
			if !strings.HasPrefix(k, "_") {
				getJSON(t, kv, k, &ap)
				if ap.Status == mesh.ApprovalPending {
					waiting++
				}
			}
		}
		var samples []any
		meshtest.Eventually(t, 10*time.Second, func() bool {
			samples = list(m.do(http.StatusOK, "GET", "/ops/stats", nil, asViewer...), "samples")
			if len(samples) == 0 {
				return false
			}
			last := obj(samples[len(samples)-1])
			return math.Round(integrate(samples, "turns_per_s")) == float64(runsEnded) && last["approvals_waiting"] == float64(waiting)
		}, "the samples never counted the mesh's %d runs ended and %d approvals waiting", runsEnded, waiting)
		// Every event of the conversations was counted; the mesh's own
		// (node_up at start) may come before the bridge reads the stream.
		all, own := storedOn(t, js, "MESH_EVENTS", "mesh.evt.>"), storedOn(t, js, "MESH_EVENTS", "mesh.evt._mesh.>")
		if n := math.Round(integrate(samples, "events_per_s")); n < float64(all-own) || n > float64(all) {
			t.Errorf("the samples count %v events, the stream holds %d (%d of the mesh itself)", n, all, own)
		}
		p95 := 0.0
		for _, s := range samples {
			p95 = math.Max(p95, obj(s)["p95_turn_ms"].(float64))
		}
		if p95 <= 0 || p95 > 30000 {
			t.Errorf("p95 turn time %v ms, want a real run's", p95)
		}
	})

	// The inbox is the approvers' and admins'.
	m.do(http.StatusForbidden, "GET", "/ops/approvals", nil, asViewer...)
	m.do(http.StatusOK, "GET", "/ops/stats", nil, asUser...)
	m.do(http.StatusUnauthorized, "GET", "/ops/mesh", nil)
}

// upPID is the pid of `mesh up`.
func (m *meshProc) upPID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd.Process.Pid
}

// integrate sums a rate of the samples over their ticks: the count it was
// taken from.
func integrate(samples []any, metric string) float64 {
	sum := 0.0
	var prev time.Time
	for _, s := range samples {
		at, _ := time.Parse(time.RFC3339Nano, str(s, "at"))
		dt := 1.0
		if !prev.IsZero() {
			dt = at.Sub(prev).Seconds()
		}
		prev = at
		v, _ := obj(s)[metric].(float64)
		sum += v * dt
	}
	return sum
}

// storedOn counts the messages stream stores on subject (a filter).
func storedOn(t testing.TB, js jetstream.JetStream, stream, subject string) int {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

func getJSON(t *testing.T, kv jetstream.KeyValue, key string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	e, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		t.Fatal(err)
	}
}

// roundTrip is v as a JSON answer decodes it.
func roundTrip(v any) any {
	data, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}
