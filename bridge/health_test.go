package bridge

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// health reads /health's status.
func health(t *testing.T, b *Role) core.Health {
	t.Helper()
	w := call(b, "GET", "/health", "", "192.0.2.1:1", "")
	var h core.Health
	if err := json.Unmarshal(w.Body.Bytes(), &h); err != nil {
		t.Fatalf("/health: %d %s", w.Code, w.Body)
	}
	return h
}

// startedBridge is a bridge of limitsYAML whose request budgets do not
// stand in the way, with limits added to its limits section, and whose
// core runs; a POST answers 202 after 50 ms rather than wait for an agent.
func startedBridge(t *testing.T, limits string) *Role {
	t.Helper()
	yaml := strings.Replace(limitsYAML, "requests_per_minute: 3", "requests_per_minute: 100", 1)
	yaml = strings.Replace(yaml, "ip_requests_per_minute: 5", "ip_requests_per_minute: 100"+limits, 1)
	yaml += "http:\n  wait_timeout: 50ms\n"
	a, _ := limitedBridges(t, yaml)
	if err := a.core.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.core.Stop)
	return a
}

// Past 80 % of limits.max_active_sessions the mesh is degraded, and the
// mesh_health_status and mesh_conversations gauges say so. Not parallel:
// the gauges read the core started last in the process.
func TestHealthDegradedPastEightyPercentOfCapacity(t *testing.T) {
	a := startedBridge(t, "\n  max_active_sessions: 5\n  conversations_per_principal: 5")
	alice := "alice-token-0123456789"
	busy := func() int {
		c := a.core.SessionCounts()
		return c[string(mesh.StatusQueued)] + c[string(mesh.StatusRunning)]
	}
	for i := range 4 {
		if _, w := convOf(t, a, alice); w.Code != http.StatusAccepted {
			t.Fatalf("conversation %d: %d %s", i, w.Code, w.Body)
		}
	}
	meshtest.Eventually(t, 10*time.Second, func() bool { return busy() == 4 }, "the index did not count 4 queued conversations")
	if h := health(t, a); h.Status != core.Healthy {
		t.Errorf("4 of 5 active: status %q, want healthy", h.Status)
	}
	if _, w := convOf(t, a, alice); w.Code != http.StatusAccepted {
		t.Fatalf("5th conversation: %d %s", w.Code, w.Body)
	}
	meshtest.Eventually(t, 10*time.Second, func() bool { return busy() == 5 }, "the index did not count 5 queued conversations")
	if h := health(t, a); h.Status != core.Degraded {
		t.Errorf("5 of 5 active: status %q, want degraded", h.Status)
	}
	mfs, err := telemetry.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	status, queued := -1.0, -1.0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case mf.GetName() == "mesh_health_status":
				status = m.GetGauge().GetValue()
			case mf.GetName() == "mesh_conversations" && m.GetLabel()[0].GetValue() == string(mesh.StatusQueued):
				queued = m.GetGauge().GetValue()
			}
		}
	}
	if status != 1 {
		t.Errorf("mesh_health_status = %v, want 1 (degraded)", status)
	}
	if queued != 5 {
		t.Errorf("mesh_conversations{status=\"queued\"} = %v, want 5", queued)
	}
}

// In degradation mode a new conversation is refused with 503 degraded and
// Retry-After, /ready fails with checks.mesh "degraded" and /health says
// unhealthy, while a conversation made before takes its message; leaving
// the mode lets new conversations in again.
func TestDegradationPausesNewConversationsAndFailsReadiness(t *testing.T) {
	t.Parallel()
	a := startedBridge(t, "")
	alice := "alice-token-0123456789"
	before := newConversation(t, a, alice)
	deg, _ := json.Marshal(mesh.Degradation{Since: time.Now(), Reason: "4 nodes failed in 30s", Failed: []string{"agent-1"}})
	if _, err := a.cfg.Resources.Nodes.Put(t.Context(), mesh.DegradedKey, deg); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, func() bool { return a.core.Degradation() != nil }, "the bridge did not see the degradation mode")

	w := call(a, "POST", "/conversations", alice, "192.0.2.1:1", "{}")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"code":"degraded"`) {
		t.Errorf("new conversation while degraded: %d %v %s; want 503 degraded with Retry-After", w.Code, w.Header(), w.Body)
	}
	w = call(a, "GET", "/ready", "", "192.0.2.1:1", "")
	var ready struct{ Checks map[string]string }
	_ = json.Unmarshal(w.Body.Bytes(), &ready)
	if w.Code != http.StatusServiceUnavailable || ready.Checks["mesh"] != "degraded" {
		t.Errorf("/ready while degraded: %d %s; want 503 with checks.mesh degraded", w.Code, w.Body)
	}
	if h := health(t, a); h.Status != core.Unhealthy || h.Degradation == nil {
		t.Errorf("/health while degraded: %q (degradation %v), want unhealthy with it", h.Status, h.Degradation)
	}
	if w := call(a, "POST", "/conversations/"+before+"/messages", alice, "192.0.2.1:1", `{"message":"still there?"}`); w.Code != http.StatusAccepted {
		t.Errorf("message to an existing conversation while degraded: %d %s", w.Code, w.Body)
	}

	if err := a.cfg.Resources.Nodes.Delete(t.Context(), mesh.DegradedKey); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, func() bool { return a.core.Degradation() == nil }, "the bridge did not see the mode end")
	if w := call(a, "POST", "/conversations", alice, "192.0.2.1:1", "{}"); w.Code != http.StatusCreated && w.Code != http.StatusOK {
		t.Errorf("new conversation after the mode: %d %s", w.Code, w.Body)
	}
}

// While the bridge drains (its context ended, a connection still held),
// /ready answers 503 with checks.bridge "draining"; Run returns once the
// connection is let go.
func TestReadyFailsWhileDraining(t *testing.T) {
	t.Parallel()
	m := meshtest.New(t)
	cfg, err := config.Parse("agent.yaml", []byte("name: draining\nllm:\n  model: offline\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: cfg, Listener: ln, StreamKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	meshtest.Eventually(t, 10*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run: %v", err)
		default:
		}
		resp, err := http.Get("http://" + ln.Addr().String() + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, "the bridge did not start serving")
	release := b.core.Hold() // a WebSocket, say, still open
	cancel()
	meshtest.Eventually(t, 10*time.Second, func() bool {
		w := call(b, "GET", "/ready", "", "127.0.0.1:1", "")
		return w.Code == http.StatusServiceUnavailable && strings.Contains(w.Body.String(), `"bridge":"draining"`)
	}, "/ready did not answer 503 draining while the bridge drained")
	select {
	case err := <-done:
		t.Fatalf("Run returned while a connection was held: %v", err)
	default:
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after the drain: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the drain")
	}
}
