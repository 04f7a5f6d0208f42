package store_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// counterValue reads a counter of the process's registry by its labels.
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := telemetry.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// A save that meets a newer revision on every try gives up: a save
// failure with reason conflict, every conflict counted, and a WARN line
// with the revision it read and the one it found.
func TestSessionStoreGivesUpWithAWarningAfterConflicts(t *testing.T) {
	t.Parallel()
	m := meshtest.New(t)
	var logs bytes.Buffer
	sessions := store.NewSessionStore(m.Sessions, m.Messages).WithLogger(zerolog.New(&logs))
	ctx := t.Context()
	conv := &mesh.Conversation{ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Status: mesh.StatusActive}
	if err := sessions.Create(ctx, conv); err != nil {
		t.Fatal(err)
	}
	bucket := map[string]string{"bucket": m.Sessions.Bucket()}
	conflicts := counterValue(t, "mesh_kv_cas_conflicts_total", bucket)
	failures := counterValue(t, "mesh_session_save_failures_total", map[string]string{"reason": "conflict"})

	// Another writer rewrites the head during every try.
	_, err := sessions.UpdateHead(ctx, conv.ID, func(c *mesh.Conversation) error {
		e, err := m.Sessions.Get(ctx, conv.ID)
		if err != nil {
			return err
		}
		if _, err := m.Sessions.Put(ctx, conv.ID, e.Value()); err != nil {
			return err
		}
		c.Title = "mine"
		return nil
	})
	if err == nil || !store.IsSaveFailure(err) {
		t.Fatalf("update under constant conflict: %v, want a save failure", err)
	}
	if got := counterValue(t, "mesh_kv_cas_conflicts_total", bucket) - conflicts; got < 50 {
		t.Errorf("mesh_kv_cas_conflicts_total went up by %v, want at least 50", got)
	}
	if got := counterValue(t, "mesh_session_save_failures_total", map[string]string{"reason": "conflict"}) - failures; got < 1 {
		t.Errorf("mesh_session_save_failures_total{reason=conflict} went up by %v, want at least 1", got)
	}
	var line struct {
		Level         string `json:"level"`
		Session       string `json:"session"`
		RevisionRead  uint64 `json:"revision_read"`
		RevisionFound uint64 `json:"revision_found"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if line.Level != "warn" || line.Session != conv.ID || line.RevisionRead == 0 || line.RevisionFound <= line.RevisionRead {
		t.Errorf("log line %+v, want warn with the revision read and a newer one found", line)
	}
}

// Each read of a conversation is timed in mesh_session_load_duration_seconds.
func TestSessionLoadIsTimed(t *testing.T) {
	m := meshtest.New(t)
	sessions := store.NewSessionStore(m.Sessions, m.Messages)
	conv := &mesh.Conversation{ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Status: mesh.StatusActive}
	if err := sessions.Create(t.Context(), conv); err != nil {
		t.Fatal(err)
	}
	count := func() uint64 {
		mfs, err := telemetry.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "mesh_session_load_duration_seconds" {
				return mf.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		return 0
	}
	before := count()
	for range 3 {
		if _, err := sessions.Get(t.Context(), conv.ID); err != nil {
			t.Fatal(err)
		}
	}
	if got := count() - before; got < 3 {
		t.Errorf("mesh_session_load_duration_seconds counted %d loads, want at least 3", got)
	}
}
