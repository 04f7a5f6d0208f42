package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// A save of a run's outcome that fails is tried again after each pause of
// sessions.save_retry, the outcome kept meanwhile; the third failure in a row
// raises the alert (the CUSTOM event and the counter) and the fourth try
// saves the turn once.
func TestSaveRetriedThenAlert(t *testing.T) {
	var mu sync.Mutex
	var tries []time.Time
	f := newFixtureWith(t, offline.New(), func(c *config.Config) {
		c.Sessions.SaveRetry = []config.Duration{config.Duration(20 * time.Millisecond), config.Duration(60 * time.Millisecond), config.Duration(100 * time.Millisecond)}
	}, func(c *Config) {
		c.saveFault = func(n int) error {
			mu.Lock()
			defer mu.Unlock()
			tries = append(tries, time.Now())
			if n <= 3 {
				return errors.New("injected: the server lost its disk")
			}
			return nil
		}
	})
	alerts := make(chan map[string]any, 4)
	sub, err := f.m.NC.Subscribe("mesh.evt._mesh.CUSTOM", func(msg *nats.Msg) {
		var ev mesh.Event
		if json.Unmarshal(msg.Data, &ev) == nil && ev.Name == mesh.CustomSessionSaveFailed {
			v, _ := ev.Value.(map[string]any)
			alerts <- v
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	before := counterValue(t, "mesh_session_save_alerts_total")

	conv := f.conversation()
	id, c := f.turn(conv, "list resources")
	select {
	case v := <-alerts:
		if v["conversation"] != conv || v["runId"] != id || v["failures"] != 3.0 {
			t.Errorf("alert = %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no alert after three failed saves")
	}
	if got := counterValue(t, "mesh_session_save_alerts_total") - before; got != 1 {
		t.Errorf("alerts counted %v, want 1", got)
	}
	mu.Lock()
	n := len(tries)
	var waits []time.Duration
	for i := 1; i < n; i++ {
		waits = append(waits, tries[i].Sub(tries[i-1]))
	}
	mu.Unlock()
	if n != 4 {
		t.Fatalf("%d tries, want 4", n)
	}
	for i, min := range []time.Duration{20, 60, 100} {
		if waits[i] < min*time.Millisecond {
			t.Errorf("pause %d was %v, want %v at least", i+1, waits[i], min*time.Millisecond)
		}
	}
	// The outcome was kept: the turn is applied once, with its answer.
	if c.LastRun == nil {
		t.Fatal("no last run, want the turn's")
	}
	if c.LastRun.ID != id {
		t.Fatalf("last run %s, want the turn's %s", c.LastRun.ID, id)
	}
	if c.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Fatalf("last run outcome %s, want %s", c.LastRun.Outcome, mesh.OutcomeSuccess)
	}
	if c.Status != mesh.StatusActive {
		t.Fatalf("status %s, want %s", c.Status, mesh.StatusActive)
	}
	seen := map[string]int{}
	for _, m := range c.Messages {
		seen[m.ID]++
		if seen[m.ID] > 1 {
			t.Errorf("message %s twice", m.ID)
		}
	}
	if seen[id] != 1 || c.LastAssistantText() == "" {
		t.Errorf("messages %+v", c.Messages)
	}
}

// counterValue is the value of the process's counter name (no labels).
func counterValue(t *testing.T, name string) float64 {
	t.Helper()
	families, err := telemetry.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			sum := 0.0
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

// TestResumeSavedAfterAFailedFirstTry: the first try of a resume's save
// fails after its change applied to the claimed conversation (the tree run
// completed in it); the retry still applies the outcome to the run the
// claim found. (It was dropped as "the tree moved on": the retry named the
// run from the changed conversation, and a resume's work item names
// another — a conversation stuck running in the cluster chaos test.)
func TestResumeSavedAfterAFailedFirstTry(t *testing.T) {
	var armed atomic.Bool
	var failed atomic.Int32
	f := newFixtureWith(t, calling("danger", `{"b":2}`, "done: "), nil, func(c *Config) {
		c.SaveRetry = []time.Duration{10 * time.Millisecond}
		c.saveFault = func(n int) error {
			if armed.Load() && n == 1 {
				failed.Add(1)
				return errors.New("injected: the write timed out")
			}
			return nil
		}
	})
	conv := f.conversation()
	_, c := f.turn(conv, "do the dangerous thing")
	if c.Status != mesh.StatusWaitingApproval || c.PendingApproval == nil {
		t.Fatalf("status %s, want waiting for an approval", c.Status)
	}
	armed.Store(true)
	done := f.decide(conv, c.PendingApproval.UUID, true)
	if failed.Load() == 0 {
		t.Fatal("no save failed: the test tested nothing")
	}
	if done.Status != mesh.StatusActive {
		t.Fatalf("after the resume: status %s, want %s", done.Status, mesh.StatusActive)
	}
	if done.LastRun == nil {
		t.Fatal("after the resume: no last run")
	}
	if done.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Fatalf("after the resume: last run outcome %s, want %s", done.LastRun.Outcome, mesh.OutcomeSuccess)
	}
	if !strings.HasPrefix(done.LastRun.Response, "done: ran danger") {
		t.Fatalf("after the resume: last run response %q, want it to start with %q", done.LastRun.Response, "done: ran danger")
	}
}
