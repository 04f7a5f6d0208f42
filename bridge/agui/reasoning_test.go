package agui

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
)

// reasoningRun is a run whose model reasons, then answers.
func reasoningRun() []mesh.Event {
	return []mesh.Event{
		{Type: mesh.EventReasoningStart, MessageID: "t-a1-thinking"},
		{Type: mesh.EventReasoningMessageStart, MessageID: "t-a1-reasoning", Role: mesh.RoleReasoning},
		{Type: mesh.EventReasoningMessageContent, MessageID: "t-a1-reasoning", Delta: "I should look."},
		{Type: mesh.EventReasoningMessageEnd, MessageID: "t-a1-reasoning"},
		{Type: mesh.EventReasoningEnd, MessageID: "t-a1-thinking"},
		{Type: mesh.EventTextMessageStart, MessageID: "t-a1", Role: "assistant"},
		{Type: mesh.EventTextMessageContent, MessageID: "t-a1", Delta: "Here."},
		{Type: mesh.EventTextMessageEnd, MessageID: "t-a1"},
	}
}

func TestAISDKReasoningChunks(t *testing.T) {
	tr := newAITranslator("run")
	var got []string
	for _, ev := range reasoningRun() {
		for _, c := range tr.translate(&ev) {
			got = append(got, c.Type+" "+c.ID+" "+c.Delta)
		}
	}
	want := []string{"reasoning-start t-a1-reasoning ", "reasoning-delta t-a1-reasoning I should look.", "reasoning-end t-a1-reasoning ",
		"text-start t-a1 ", "text-delta t-a1 Here.", "text-end t-a1 "}
	if !slices.Equal(got, want) {
		t.Errorf("chunks\n got %q\nwant %q", got, want)
	}
}

// TestOfficialClosesReasoningOfAnInterruptedAttempt: a redelivered run's
// run_retried closes the reasoning span and message the interrupted
// attempt left open, as the client's verifier wants them closed, and the
// new attempt's copy gets ids of its own.
func TestOfficialClosesReasoningOfAnInterruptedAttempt(t *testing.T) {
	tr := newOfficialTranslator("thread", "run")
	var got []mesh.Event
	for _, ev := range reasoningRun()[:3] {
		got = append(got, tr.translate(&ev)...)
	}
	retried := mesh.Custom(mesh.CustomRunRetried, map[string]any{"attempt": 2, "runId": "run"})
	closed := tr.translate(&retried)
	var ends []string
	for _, e := range closed[1:] {
		ends = append(ends, string(e.Type)+" "+e.MessageID)
	}
	slices.Sort(ends)
	if want := []string{"REASONING_END t-a1-thinking", "REASONING_MESSAGE_END t-a1-reasoning"}; !slices.Equal(ends, want) {
		t.Errorf("run_retried closed %q, want %q", ends, want)
	}
	again := reasoningRun()[0]
	if out := tr.translate(&again); len(out) != 1 || out[0].MessageID != "t-a1-thinking~2" {
		t.Errorf("the new attempt's span %+v, want it under an id of its own", out)
	}
	if len(got) != 3 {
		t.Errorf("first attempt's events %d, want 3 passed through", len(got))
	}
}
