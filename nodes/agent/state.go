package agent

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file holds the conversation state a run changes: the state patches
// of tool results (mesh.StateMetaKey) and of the built-in set_state tool.
// Each change is applied at once to the run's own view of the state, which
// its later prompts read, and published as a STATE_DELTA after the call's
// TOOL_CALL_RESULT; the patches are saved with the run's other changes when
// it settles (apply), by the same compare-and-set.

// setStateTool is the built-in tool offered to llm steps with state_tool:
// it never leaves the agent, and needs no approval.
const setStateTool = "set_state"

var setStateSpec = llm.Tool{
	Name: setStateTool,
	Description: "Set a key of the conversation's state, which the user's app displays and the prompts read. " +
		"value is any JSON value; null removes the key; an object is merged into the key's current object (RFC 7386).",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"key":{"type":"string","description":"the top-level key of the state to set"},` +
		`"value":{"description":"the new value (any JSON); null removes the key"}},` +
		`"required":["key","value"]}`),
}

// toolAnswer is what a tool call answered: the text the model and the user
// read, and the state patch its result carried.
type toolAnswer struct {
	content string
	isError bool
	state   json.RawMessage
	// took is how long the call took, as the agent waited for it (its
	// policy approval included); timed says it was measured: a tool the
	// mesh did not call (refused, rejected, built in) has no duration.
	took  time.Duration
	timed bool
	// standIn: the call was not run (a replay), content is the stand-in.
	standIn bool
}

// stateChange is the run's changes of the conversation state: the patches
// in the order they were made, the state they were made from and the state
// they led to.
type stateChange struct {
	patches []json.RawMessage
	base    map[string]any
	now     map[string]any
}

// state is the conversation state as the run sees it: as claimed, with the
// run's own changes.
func (t *turn) state() map[string]any {
	if t.ex.state.now != nil {
		return t.ex.state.now
	}
	return stateOf(t.conv)
}

// answer records a tool's answer (see decidedResult), then applies the
// state patch it carried and publishes the change. A change that cannot be
// applied (too large) is refused, and the answer says so.
func (t *turn) answer(call mesh.ToolCall, a toolAnswer, by string) {
	delta, err := t.changeState(a.state)
	if err != nil {
		t.log.Warn().Err(err).Str("tool", call.Name).Msg("state change refused")
		a.content += fmt.Sprintf("\n\n(The state change of %s was refused: %v.)", call.Name, err)
	}
	t.decidedResult(call, a, by)
	if len(delta) > 0 {
		t.emit(mesh.Event{Type: mesh.EventStateDelta, Delta: delta})
	}
}

// changeState applies patch to the run's view of the state; delta is the
// JSON Patch from the view before to the view after.
func (t *turn) changeState(patch json.RawMessage) (delta []mesh.PatchOp, err error) {
	if len(patch) == 0 {
		return nil, nil
	}
	before := t.state()
	after, err := mesh.MergeState(before, patch)
	if err != nil {
		return nil, err
	}
	if delta, err = mesh.StateDelta(before, after); err != nil {
		return nil, err
	}
	if t.ex.state.base == nil {
		t.ex.state.base = mesh.CloneState(before)
	}
	t.ex.state.patches = append(t.ex.state.patches, patch)
	t.ex.state.now = after
	return delta, nil
}

// setState runs a call of set_state: {key, value} is the merge patch
// {key: value}.
func (t *turn) setState(call mesh.ToolCall) {
	key, _ := call.Arguments["key"].(string)
	value, ok := call.Arguments["value"]
	if key == "" || !ok {
		t.result(call, `error: set_state needs "key" (a non-empty string) and "value" (any JSON value, null to remove the key)`, true)
		return
	}
	patch, err := json.Marshal(map[string]any{key: value})
	if err != nil {
		t.result(call, "error: set_state: "+err.Error(), true)
		return
	}
	v, _ := json.Marshal(value)
	a := toolAnswer{content: fmt.Sprintf("The state's %q is now %s.", key, v), state: patch}
	if value == nil {
		a.content = fmt.Sprintf("The state's %q is removed.", key)
	}
	if len(patch) > mesh.MaxStatePatch {
		a = toolAnswer{content: fmt.Sprintf("error: set_state: the value is %d bytes, more than %d", len(patch), mesh.MaxStatePatch), isError: true}
	}
	t.answer(call, a, "")
}

// applyState saves the run's state changes to c, the conversation the
// compare-and-set read. When c's state is not the one the run's deltas
// started from (a parallel branch changed it meanwhile), the plan carries
// a snapshot of the saved state for clients to start again from. A patch
// that no longer fits is dropped.
func (t *turn) applyState(c *mesh.Conversation, p *plan) {
	sc := t.ex.state
	if len(sc.patches) == 0 {
		return
	}
	base := stateOf(c)
	resync := !reflect.DeepEqual(mesh.CloneState(base), sc.base)
	state := base
	for _, patch := range sc.patches {
		next, err := mesh.MergeState(state, patch)
		if err != nil {
			t.log.Warn().Err(err).Msg("a state change no longer applies; dropped")
			resync = true
			continue
		}
		state = next
	}
	c.State = state
	if resync {
		p.snapshot = mesh.CloneState(state)
	}
}
