package agui

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/core/coretest"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// waitForClock waits until the agent offers clock_in: the offline planner's
// help lists the tools it is given.
func (f *fixture) waitForClock() {
	f.t.Helper()
	meshtest.Eventually(f.t, 10*time.Second, func() bool {
		conv, err := f.core.NewConversation(f.t.Context(), core.Caller{})
		if err != nil {
			f.t.Fatal(err)
		}
		run, err := f.core.Send(f.t.Context(), conv.ID, "help", core.Caller{})
		if err != nil {
			f.t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(f.t.Context(), 5*time.Second)
		defer cancel()
		out, err := run.Wait(ctx)
		return err == nil && out.Finished && out.Conversation.LastRun != nil && strings.Contains(out.Conversation.LastRun.Response, "clock_in")
	}, "the agent never offered clock_in")
}

// The state a tool's result sets reaches each dialect: the dotted one as
// state.snapshot then state.delta (the clock's isClockedIn), AG-UI as
// STATE_SNAPSHOT then STATE_DELTA, the AI SDK's as data-state parts;
// applying them gives the saved state.
func TestGoldenState(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	meshtest.StartClock(t, f.m)
	coretest.WaitForTools(f.t, f.core)
	f.waitForClock()
	want := map[string]any{"isClockedIn": true, "lastClockIn": meshtest.ClockInTime}

	t.Run("dotted", func(t *testing.T) {
		tr := &transcript{t: t}
		const conv = "golden-dotted-state"
		body := `{"message":"clock in","sessionId":"` + conv + `"}`
		tr.request("POST", "/api/conversation", body)
		resp, stream := f.stream("/api/conversation", body)
		tr.stream(resp, joinContent(t, stream))
		checkFraming(t, stream, false)
		checkDotted(t, stream)
		if got := f.conversation(conv).State; !reflect.DeepEqual(got, want) {
			t.Errorf("saved state = %v, want %v", got, want)
		}
		if got := applyStream(t, stream, "state.snapshot", "state", "state.delta", "patch"); !reflect.DeepEqual(got, want) {
			t.Errorf("state from the stream = %v, want %v", got, want)
		}
		// The next turn starts from the saved state; clocking in again
		// changes nothing, so no delta follows.
		tr.request("POST", "/api/conversation", body)
		resp, stream = f.stream("/api/conversation", body)
		tr.stream(resp, joinContent(t, stream))
		snap := decode(t, sseEvents(t, stream)[1])
		if snap["type"] != "state.snapshot" || !reflect.DeepEqual(snap["state"], want) || strings.Contains(stream, "state.delta") {
			t.Errorf("second turn: second event %v, want state.snapshot of %v and no state.delta", snap, want)
		}
		tr.golden("dotted_state.sse")
	})

	t.Run("agui", func(t *testing.T) {
		tr := &transcript{t: t}
		body := `{"threadId":"golden-agui-state","runId":"run-state-1","messages":[{"id":"m1","role":"user","content":"clock in"}],"tools":[],"context":[],"forwardedProps":{}}`
		tr.request("POST", "/agui", body)
		resp, stream := f.stream("/agui", body)
		tr.stream(resp, stream)
		checkFraming(t, stream, true)
		if got := applyStream(t, stream, "STATE_SNAPSHOT", "snapshot", "STATE_DELTA", "delta"); !reflect.DeepEqual(got, want) {
			t.Errorf("state from the stream = %v, want %v", got, want)
		}
		tr.golden("agui_state.sse")
	})

	t.Run("aisdk", func(t *testing.T) {
		tr := &transcript{t: t}
		body := `{"id":"golden-aisdk-state","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"clock in"}]}],"trigger":"submit-message"}`
		tr.request("POST", AISDKPath, body)
		resp, stream := f.stream(AISDKPath, body)
		tr.stream(resp, stream)
		checkFraming(t, stream, false)
		var last map[string]any
		for _, data := range sseEvents(t, stream) {
			if data == "[DONE]" {
				continue
			}
			if ev := decode(t, data); ev["type"] == "data-state" {
				if ev["id"] != "state" {
					t.Errorf("data-state id %v, want state", ev["id"])
				}
				last, _ = ev["data"].(map[string]any)
			}
		}
		if !reflect.DeepEqual(last, want) {
			t.Errorf("last data-state = %v, want %v", last, want)
		}
		tr.golden("aisdk_state.sse")
	})
}

// applyStream applies a stream's state events as a client does, with an
// RFC 6902 library of its own; it fails the test when the stream has no
// delta.
func applyStream(t *testing.T, stream, snapshotType, snapshotField, deltaType, deltaField string) map[string]any {
	t.Helper()
	doc := []byte(`{}`)
	deltas := 0
	for _, data := range sseEvents(t, stream) {
		var ev map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		var typ string
		_ = json.Unmarshal(ev["type"], &typ)
		switch typ {
		case snapshotType:
			doc = ev[snapshotField]
		case deltaType:
			deltas++
			patch, err := jsonpatch.DecodePatch(ev[deltaField])
			if err != nil {
				t.Fatalf("%s %s: %v", deltaType, ev[deltaField], err)
			}
			if doc, err = patch.Apply(doc); err != nil {
				t.Fatalf("apply %s to %s: %v", ev[deltaField], doc, err)
			}
		}
	}
	if deltas == 0 {
		t.Errorf("no %s in the stream", deltaType)
	}
	var out map[string]any
	_ = json.Unmarshal(doc, &out)
	return out
}
