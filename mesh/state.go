package mesh

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/wI2L/jsondiff"
)

// A conversation's state (Conversation.State) is a JSON object its clients
// display and its prompts read ({key} placeholders). Three things write it:
// an agent tree step's output_key, the built-in set_state tool, and an MCP
// tool whose result carries a state patch under _meta[StateMetaKey].
//
// A tool's patch is a JSON merge patch (RFC 7386): an object whose keys are
// set to their values, merged into nested objects, and removed when null.
// Each change reaches clients as a STATE_DELTA whose delta is the RFC 6902
// JSON Patch from the state before to the state after, computed by
// [StateDelta]; a client that starts a run (or reconnects) gets the whole
// state as STATE_SNAPSHOT first.

const (
	// StateMetaKey is the key of an MCP tools/call result's _meta whose value,
	// a JSON object, is a merge patch (RFC 7386) of the conversation's state:
	//
	//	{"content": [...], "_meta": {"agentmesh/state": {"isClockedIn": true, "lastClockOut": null}}}
	//
	// The tool host passes it on as [ToolResult.State]; the agent applies it
	// with the run's other changes.
	StateMetaKey = "agentmesh/state"

	// Bounds of the state, in bytes of JSON.
	// MaxStatePatch bounds one tool result's state patch.
	MaxStatePatch = 16 << 10
	// MaxStateSize bounds the whole state of a conversation: a change that
	// would make it larger is refused.
	MaxStateSize = 64 << 10
)

// CheckStatePatch checks that patch is a JSON object of at most
// MaxStatePatch bytes.
func CheckStatePatch(patch json.RawMessage) error {
	if len(patch) > MaxStatePatch {
		return fmt.Errorf("%w: the patch is %d bytes, more than %d", ErrStateTooLarge, len(patch), MaxStatePatch)
	}
	trimmed := bytes.TrimSpace(patch)
	var obj map[string]json.RawMessage
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &obj) != nil {
		return ErrStatePatch
	}
	return nil
}

// MergeState applies the merge patch (RFC 7386) to state and returns the
// new state; state is not modified. The result is refused with
// ErrStateTooLarge when its JSON is larger than MaxStateSize.
func MergeState(state map[string]any, patch json.RawMessage) (map[string]any, error) {
	if err := CheckStatePatch(patch); err != nil {
		return nil, err
	}
	doc, err := json.Marshal(nonNilState(state))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	merged, err := jsonpatch.MergePatch(doc, patch)
	if err != nil {
		return nil, fmt.Errorf("merge state patch: %w", err)
	}
	if len(merged) > MaxStateSize {
		return nil, fmt.Errorf("%w: it would be %d bytes, more than %d", ErrStateTooLarge, len(merged), MaxStateSize)
	}
	out := map[string]any{}
	if err := json.Unmarshal(merged, &out); err != nil {
		return nil, fmt.Errorf("merged state: %w", err)
	}
	return out, nil
}

// StateDelta is the JSON Patch (RFC 6902) that turns from into to, as a
// STATE_DELTA carries it; empty when they are equal. It is computed by
// github.com/wI2L/jsondiff, whose patches are plain add, remove and
// replace operations any RFC 6902 client applies.
func StateDelta(from, to map[string]any) ([]PatchOp, error) {
	ops, err := jsondiff.Compare(nonNilState(from), nonNilState(to))
	if err != nil {
		return nil, fmt.Errorf("state delta: %w", err)
	}
	out := make([]PatchOp, 0, len(ops))
	for _, op := range ops {
		out = append(out, PatchOp{Op: op.Type, Path: op.Path, From: op.From, Value: op.Value})
	}
	return out, nil
}

// ApplyStateDelta applies a STATE_DELTA's delta (an RFC 6902 JSON Patch,
// as []PatchOp or decoded JSON) to state, as a client does, and returns the
// new state; state is not modified. The patch is applied by
// github.com/evanphx/json-patch, not by the library that computed it.
func ApplyStateDelta(state map[string]any, delta any) (map[string]any, error) {
	raw, err := json.Marshal(delta)
	if err != nil {
		return nil, fmt.Errorf("state delta: %w", err)
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, fmt.Errorf("state delta: %w", err)
	}
	doc, err := json.Marshal(nonNilState(state))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if doc, err = patch.Apply(doc); err != nil {
		return nil, fmt.Errorf("apply state delta: %w", err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(doc, &out); err != nil {
		return nil, fmt.Errorf("state after delta: %w", err)
	}
	return out, nil
}

// CloneState is a deep copy of state, through JSON.
func CloneState(state map[string]any) map[string]any {
	out := map[string]any{}
	if data, err := json.Marshal(nonNilState(state)); err == nil {
		_ = json.Unmarshal(data, &out)
	}
	return out
}

func nonNilState(state map[string]any) map[string]any {
	if state == nil {
		return map[string]any{}
	}
	return state
}
