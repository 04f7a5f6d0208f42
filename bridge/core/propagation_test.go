package core

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// metricValue is a counter's value, or a histogram's count, of the
// process's registry (0 when absent).
func metricValue(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := telemetry.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		if h := m.GetHistogram(); h != nil {
			return float64(h.GetSampleCount())
		}
		return m.GetCounter().GetValue()
	}
	return 0
}

// A live event handed to a follower is timed from its storing; a replayed
// one is not.
func TestLiveEventPropagationIsTimedAndReplaysAreNot(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 0)
	s := mesh.NewID()
	publish(t, m, s, 3, "old")
	before := metricValue(t, "mesh_event_propagation_seconds")
	f, err := c.Follow(t.Context(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 3 {
		next(t, f)
	}
	publish(t, m, s, 2, "live")
	for range 2 {
		next(t, f)
	}
	// The hub times an event after pushing it: wait for both.
	meshtest.Eventually(t, 5*time.Second, func() bool { return metricValue(t, "mesh_event_propagation_seconds")-before >= 2 }, "the live events were not timed")
	if got := metricValue(t, "mesh_event_propagation_seconds") - before; got != 2 {
		t.Errorf("mesh_event_propagation_seconds counted %v events, want the 2 live ones", got)
	}
}

// An event later than 10 ms is counted each time, and logged at most once
// every 10 s with the count of late events meanwhile.
func TestLateEventsAreCountedAndLoggedSparingly(t *testing.T) {
	var logs bytes.Buffer
	h := newHub(nil, mesh.Namespace{}, 0, zerolog.New(&logs))
	before := metricValue(t, "mesh_event_latency_violations_total")
	h.delivered("s1", time.Now())
	h.delivered("s1", time.Now().Add(-50*time.Millisecond))
	h.delivered("s1", time.Now().Add(-80*time.Millisecond))
	if got := metricValue(t, "mesh_event_latency_violations_total") - before; got != 2 {
		t.Errorf("mesh_event_latency_violations_total went up by %v, want 2", got)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"level":"warn"`) || !strings.Contains(lines[0], `"late_events":1`) {
		t.Errorf("log %q, want one WARN line", logs.String())
	}
	h.lateLog = time.Now().Add(-lateLogEvery)
	h.delivered("s1", time.Now().Add(-20*time.Millisecond))
	if !strings.Contains(logs.String(), `"late_events":2`) {
		t.Errorf("log %q, want a second line counting the 2 late events since the first", logs.String())
	}
}
