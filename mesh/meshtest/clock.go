package meshtest

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
)

// ClockInTime is the time clock_in of [StartClock] reports, fixed so that
// streams are the same each run.
const ClockInTime = "2024-01-01T08:00:00Z"

// StartClock publishes clock.clock_in to m's catalog and serves it until
// the test ends: a read-only tool whose result carries, under
// _meta[mesh.StateMetaKey] (ToolResult.State), a state patch of the kind
// an AG-UI client shows (whether a person is clocked in):
//
//	{"isClockedIn": true, "lastClockIn": ClockInTime, "lastClockOut": null}
func StartClock(t testing.TB, m *Mesh) {
	t.Helper()
	e := mesh.ToolEntry{
		Server: "clock", Name: "clock_in", Title: "Clock in",
		Description:  "Clock in: start the work shift, setting isClockedIn in the conversation state",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{}}`),
		ReadOnlyHint: true,
	}
	key, err := mesh.ToolKey(e.Server, e.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Tools.Put(t.Context(), key, JSON(e)); err != nil {
		t.Fatal(err)
	}
	patch := JSON(map[string]any{"isClockedIn": true, "lastClockIn": ClockInTime, "lastClockOut": nil})
	sub, err := m.NC.Subscribe("mesh.tool.clock.clock_in", func(msg *nats.Msg) {
		_ = msg.Respond(JSON(mesh.ToolResult{Text: "Clocked in at " + ClockInTime + ".", State: patch}))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}
