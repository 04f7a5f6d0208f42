package mesh_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/agentmesh/agentmesh/mesh"
)

func TestMergeState(t *testing.T) {
	tests := []struct {
		name    string
		state   map[string]any
		patch   string
		want    map[string]any
		wantErr error
	}{
		{name: "into nothing", patch: `{"isClockedIn":true}`, want: map[string]any{"isClockedIn": true}},
		{name: "null deletes", state: map[string]any{"a": 1.0, "b": "x"}, patch: `{"a":null,"c":false}`, want: map[string]any{"b": "x", "c": false}},
		{name: "nested merge", state: map[string]any{"user": map[string]any{"name": "ann", "age": 3.0}}, patch: `{"user":{"age":null,"role":"admin"}}`,
			want: map[string]any{"user": map[string]any{"name": "ann", "role": "admin"}}},
		{name: "array replaced whole", state: map[string]any{"l": []any{1.0, 2.0}}, patch: `{"l":[3]}`, want: map[string]any{"l": []any{3.0}}},
		{name: "not an object", patch: `[{"op":"add","path":"/a","value":1}]`, wantErr: mesh.ErrStatePatch},
		{name: "a string", patch: `"x"`, wantErr: mesh.ErrStatePatch},
		{name: "patch too large", patch: `{"a":"` + strings.Repeat("x", mesh.MaxStatePatch) + `"}`, wantErr: mesh.ErrStateTooLarge},
		{name: "state too large", state: map[string]any{"a": strings.Repeat("x", mesh.MaxStateSize-100)}, patch: `{"b":"` + strings.Repeat("y", 200) + `"}`, wantErr: mesh.ErrStateTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := mesh.CloneState(tt.state)
			got, err := mesh.MergeState(tt.state, json.RawMessage(tt.patch))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("state = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(mesh.CloneState(tt.state), before) {
				t.Errorf("MergeState modified its input: %v, was %v", tt.state, before)
			}
		})
	}
}

// TestStateDeltaApplies checks the delta against an independent RFC 6902
// implementation (evanphx/json-patch): applied to the old state it gives
// the new one, nulls and falsy values included.
func TestStateDeltaApplies(t *testing.T) {
	tests := []struct {
		name     string
		from, to map[string]any
		wantOps  int
	}{
		{name: "equal", from: map[string]any{"a": 1.0}, to: map[string]any{"a": 1.0}},
		{name: "clock in", from: map[string]any{"isClockedIn": false, "lastClockOut": "2024-01-01T17:00:00Z"},
			to: map[string]any{"isClockedIn": true, "lastClockIn": "2024-01-02T08:00:00Z", "lastClockOut": nil}, wantOps: 3},
		{name: "falsy values", from: map[string]any{}, to: map[string]any{"f": false, "z": 0.0, "e": "", "n": nil}, wantOps: 4},
		{name: "remove and nest", from: map[string]any{"gone": 1.0, "o": map[string]any{"x": 1.0}}, to: map[string]any{"o": map[string]any{"x": 2.0, "y": []any{"a"}}}, wantOps: 3},
		{name: "key needing escapes", from: nil, to: map[string]any{"a/b": 1.0, "c~d": 2.0}, wantOps: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := mesh.StateDelta(tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != tt.wantOps {
				t.Errorf("ops = %v, want %d of them", ops, tt.wantOps)
			}
			ev, _ := json.Marshal(mesh.Event{Type: mesh.EventStateDelta, Delta: ops})
			var wire struct {
				Delta json.RawMessage `json:"delta"`
			}
			if err := json.Unmarshal(ev, &wire); err != nil {
				t.Fatal(err)
			}
			if len(ops) == 0 {
				return
			}
			patch, err := jsonpatch.DecodePatch(wire.Delta)
			if err != nil {
				t.Fatalf("decode %s: %v", wire.Delta, err)
			}
			from, _ := json.Marshal(mesh.CloneState(tt.from))
			out, err := patch.Apply(from)
			if err != nil {
				t.Fatalf("apply %s to %s: %v", wire.Delta, from, err)
			}
			var got map[string]any
			_ = json.Unmarshal(out, &got)
			if !reflect.DeepEqual(got, mesh.CloneState(tt.to)) {
				t.Errorf("applied %s: %v, want %v", wire.Delta, got, tt.to)
			}
		})
	}
}

func TestPatchOpJSONKeepsFalsyValues(t *testing.T) {
	tests := []struct {
		op   mesh.PatchOp
		want string
	}{
		{mesh.PatchOp{Op: "replace", Path: "/b", Value: false}, `{"op":"replace","path":"/b","value":false}`},
		{mesh.PatchOp{Op: "add", Path: "/n"}, `{"op":"add","path":"/n","value":null}`},
		{mesh.PatchOp{Op: "remove", Path: "/n"}, `{"op":"remove","path":"/n"}`},
		{mesh.PatchOp{Op: "move", Path: "/n", From: "/m"}, `{"op":"move","path":"/n","from":"/m"}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.op)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
}

func TestApplyStateDelta(t *testing.T) {
	state := map[string]any{"a": 1.0}
	got, err := mesh.ApplyStateDelta(state, []mesh.PatchOp{{Op: "replace", Path: "/a", Value: false}, {Op: "add", Path: "/b", Value: nil}})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"a": false, "b": nil}) {
		t.Errorf("ApplyStateDelta = %v, %v", got, err)
	}
	if state["a"] != 1.0 {
		t.Errorf("ApplyStateDelta modified its input: %v", state)
	}
	if _, err := mesh.ApplyStateDelta(state, []any{map[string]any{"op": "remove", "path": "/missing"}}); err == nil {
		t.Error("removing a missing key applied; want an error")
	}
}
