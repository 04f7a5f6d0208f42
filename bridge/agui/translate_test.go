package agui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
)

// runEvents is a run that uses every event the translators know, as an
// agent would publish it (timestamps 1, 2, 3 …).
func runEvents(end mesh.Event) []mesh.Event {
	evs := []mesh.Event{
		{Type: mesh.EventRunStarted, ThreadID: "conv", RunID: "run"},
		{Type: mesh.EventStateSnapshot, Snapshot: map[string]any{"n": 1}},
		{Type: mesh.EventStepStarted, StepName: "plan"},
		{Type: mesh.EventTextMessageStart, MessageID: "m1", Role: "assistant"},
		{Type: mesh.EventTextMessageContent, MessageID: "m1", Delta: "Let me look."},
		{Type: mesh.EventTextMessageEnd, MessageID: "m1"},
		{Type: mesh.EventStateDelta, Delta: []mesh.PatchOp{{Op: "replace", Path: "/n", Value: 2}}},
		{Type: mesh.EventToolCallStart, ToolCallID: "c1", ToolCallName: "resources_add"},
		{Type: mesh.EventToolCallArgs, ToolCallID: "c1", Delta: `{"name":`},
		{Type: mesh.EventToolCallArgs, ToolCallID: "c1", Delta: `"x"}`},
		{Type: mesh.EventToolCallEnd, ToolCallID: "c1"},
		{Type: mesh.EventToolCallResult, MessageID: "c1-result", ToolCallID: "c1", Content: "rejected: the approver rejected this call; it was not run"},
		{Type: mesh.EventToolCallStart, ToolCallID: "c2", ToolCallName: "fetch"},
		{Type: mesh.EventToolCallArgs, ToolCallID: "c2", Delta: "not json"},
		{Type: mesh.EventToolCallEnd, ToolCallID: "c2"},
		{Type: mesh.EventToolCallResult, MessageID: "c2-result", ToolCallID: "c2", Content: "error: tool fetch could not run: timeout"},
		{Type: mesh.EventToolCallResult, MessageID: "c3-result", ToolCallID: "c3", Content: "quota exceeded", Metadata: map[string]any{"isError": true}},
		// The resume of an approval: the call was started by an earlier run.
		mesh.Custom(mesh.CustomApprovalDecided, map[string]any{"uuid": "ap-1", "status": "approved", "tool_call_id": "c4", "tool_name": "resources_list"}),
		{Type: mesh.EventToolCallResult, MessageID: "c4-result", ToolCallID: "c4", Content: "42"},
		mesh.Custom(mesh.CustomApprovalRequested, map[string]any{"uuid": "ap-2", "status": "pending", "tool_call_id": "c2", "tool_name": "fetch", "tool_args": map[string]any{"url": "https://example.com"}, "description": "fetch url=\"https://example.com\""}),
		{Type: mesh.EventStepFinished, StepName: "plan"},
		{Type: mesh.EventTextMessageStart, MessageID: "m2", Role: "assistant"},
		{Type: mesh.EventTextMessageContent, MessageID: "m2", Delta: "Done."},
		{Type: mesh.EventTextMessageEnd, MessageID: "m2"},
		end,
	}
	for i := range evs {
		evs[i].Timestamp = int64(i + 1)
	}
	return evs
}

func dottedLines(t *testing.T, evs []mesh.Event) string {
	t.Helper()
	return dottedLinesOf(t, newDottedTranslator("run"), evs)
}

// dottedOneMessageLines is dottedLines with the turn sent as one message.
func dottedOneMessageLines(t *testing.T, evs []mesh.Event) string {
	t.Helper()
	tr := newDottedTranslator("run")
	tr.oneMessage = true
	return dottedLinesOf(t, tr, evs)
}

func dottedLinesOf(t *testing.T, tr *dottedTranslator, evs []mesh.Event) string {
	t.Helper()
	var b strings.Builder
	for _, d := range tr.begin(0) {
		data, _ := json.Marshal(d)
		b.Write(data)
		b.WriteByte('\n')
	}
	for i := range evs {
		// Events reach the translator as decoded from the stream.
		data, _ := json.Marshal(evs[i])
		var ev mesh.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		for _, d := range tr.translate(&ev) {
			data, _ := json.Marshal(d)
			b.Write(data)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func simpleLines(t *testing.T, evs []mesh.Event) string {
	t.Helper()
	tr := newSimpleTranslator("run", time.Now())
	var b strings.Builder
	for i := range evs {
		data, _ := json.Marshal(evs[i])
		var ev mesh.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		for _, d := range tr.translate(&ev) {
			if d.Stats != nil {
				d.Stats.ExecutionTime = 0
			}
			data, _ := json.Marshal(d)
			b.Write(data)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// runEnd is one way a run ends.
type runEnd struct {
	name string
	ev   mesh.Event
}

// translatorEnds are the ways a run ends that the translators tell apart.
func translatorEnds(result map[string]any) []runEnd {
	return []runEnd{
		{"success", mesh.RunFinished("conv", "run", mesh.Outcome{Type: mesh.OutcomeSuccess}, result)},
		{"interrupt", mesh.RunFinished("conv", "run", mesh.Outcome{Type: mesh.OutcomeInterrupt, Interrupts: []mesh.Interrupt{{ID: "ap-2", Reason: mesh.InterruptReasonToolApproval, ToolCallID: "c2", Message: "fetch it"}}}, nil)},
		{"cancelled", mesh.RunFinished("conv", "run", mesh.Outcome{Type: mesh.OutcomeCancelled}, result)},
		{"error", mesh.RunError(mesh.CodeLLMTimeout, "the model did not answer in time")},
		// A run error without a code is the dialects' internal error.
		{"internal", mesh.RunError("", "the agent failed")},
		// The model provider's rate limit, with when to try again.
		{"rate limit", func() mesh.Event {
			ev := mesh.RunError(mesh.CodeRateLimit, "openai: rate limited; the provider asks to retry after 30s")
			ev.Metadata = map[string]any{"retryAfter": 30, "resetAt": "2026-01-02T03:04:05Z"}
			return ev
		}()},
	}
}

// TestTranslators records what both dialects make of a run that uses every
// event, for each way a run ends, in testdata/translate.txt.
func TestTranslators(t *testing.T) {
	result := map[string]any{"response": "Done.", "usage": map[string]any{"input_tokens": 3, "output_tokens": 4}, "intent": "create"}
	tr := &transcript{t: t}
	for _, end := range translatorEnds(result) {
		tr.note("%s: dotted", end.name)
		tr.b.WriteString(dottedLines(t, runEvents(end.ev)))
		tr.note("%s: dotted, one message", end.name)
		tr.b.WriteString(dottedOneMessageLines(t, runEvents(end.ev)))
		tr.note("%s: simple", end.name)
		tr.b.WriteString(simpleLines(t, runEvents(end.ev)))
	}
	tr.golden("translate.txt")
}

func TestSimpleTotalCandidates(t *testing.T) {
	tests := []struct {
		name, content string
		want          int
	}{
		{name: "array", content: `[{"id":1},{"id":2},{"id":3}]`, want: 3},
		{name: "object with a list", content: `{"count":2,"resources":[{"id":"a"},{"id":"b"}]}`, want: 2},
		{name: "longest list of an object", content: `{"tags":["x"],"items":[1,2,3,4]}`, want: 4},
		{name: "object without a list", content: `{"id":"a","value":3}`, want: 1},
		{name: "empty list", content: `{"resources":[]}`, want: 0},
		{name: "text", content: "42", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newSimpleTranslator("run", time.Now())
			var done simpleEvent
			for _, ev := range []mesh.Event{
				{Type: mesh.EventToolCallStart, ToolCallID: "c1", ToolCallName: "search"},
				{Type: mesh.EventToolCallEnd, ToolCallID: "c1"},
				{Type: mesh.EventToolCallResult, MessageID: "c1-result", ToolCallID: "c1", Content: tt.content},
				// A failed call returned nothing.
				{Type: mesh.EventToolCallStart, ToolCallID: "c2", ToolCallName: "search"},
				{Type: mesh.EventToolCallEnd, ToolCallID: "c2"},
				{Type: mesh.EventToolCallResult, MessageID: "c2-result", ToolCallID: "c2", Content: `error: [1,2]`},
				mesh.RunFinished("conv", "run", mesh.Outcome{Type: mesh.OutcomeSuccess}, nil),
			} {
				for _, out := range tr.translate(&ev) {
					if out.Type == "done" {
						done = out
					}
				}
			}
			if done.Stats == nil || done.Stats.TotalCandidates != tt.want {
				t.Errorf("done %+v, want totalCandidates %d", done.Stats, tt.want)
			}
		})
	}
}

func TestSimpleErrorCodes(t *testing.T) {
	tests := []struct {
		mesh, want string
		details    bool
	}{
		{mesh.CodeLLMTimeout, "LLM_TIMEOUT", false},
		{mesh.CodeRateLimit, "RATE_LIMIT", false},
		{mesh.CodeLLMError, "LLM_ERROR", false},
		{mesh.CodeWaitingApprove, "VALIDATION_ERROR", true},
		{mesh.CodeConflict, "VALIDATION_ERROR", true},
		{mesh.CodeMaxDeliveries, "TIMEOUT", true},
		{mesh.CodeCancelled, "UNKNOWN", true},
		{mesh.CodeInternal, "UNKNOWN", true},
		{"", "UNKNOWN", false},
	}
	for _, tt := range tests {
		got := simpleError(tt.mesh, "text")
		if got.Code != tt.want || (got.Details != nil) != tt.details || got.Message != "text" {
			t.Errorf("simpleError(%q) = %+v, want code %s, details %t", tt.mesh, got, tt.want, tt.details)
		}
	}
}

// officialTypes runs evs through the official translator, as decoded from
// the stream, and lists what comes out: type, and step name or item id.
func officialTypes(t *testing.T, evs []mesh.Event) []string {
	t.Helper()
	tr := newOfficialTranslator("thread", "run")
	var out []string
	for i := range evs {
		data, _ := json.Marshal(evs[i])
		var ev mesh.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		for _, e := range tr.translate(&ev) {
			s := string(e.Type)
			switch {
			case e.StepName != "":
				s += " " + e.StepName
			case e.MessageID != "":
				s += " " + e.MessageID
			case e.ToolCallID != "":
				s += " " + e.ToolCallID
			}
			out = append(out, s)
		}
	}
	return out
}

// TestOfficialStepsPairUp: a tree's run that pauses ends with its steps
// open, its resume finishes steps it never started, and a retried node
// starts its step again; clients (the @ag-ui/client verifier) refuse all
// three, so the translator pairs the steps up.
func TestOfficialStepsPairUp(t *testing.T) {
	paused := officialTypes(t, []mesh.Event{
		{Type: mesh.EventRunStarted},
		{Type: mesh.EventStepStarted, StepName: "pipeline"},
		{Type: mesh.EventStepStarted, StepName: "executor"},
		{Type: mesh.EventStepStarted, StepName: "executor"}, // retried
		mesh.RunFinished("conv", "run", mesh.Outcome{Type: mesh.OutcomeInterrupt}, nil),
	})
	want := []string{"STEP_STARTED pipeline", "STEP_STARTED executor", "STEP_FINISHED executor", "STEP_FINISHED pipeline", "RUN_FINISHED"}
	if strings.Join(paused, ",") != strings.Join(want, ",") {
		t.Errorf("paused run:\n got %v\nwant %v", paused, want)
	}
	resumed := officialTypes(t, []mesh.Event{
		{Type: mesh.EventRunStarted},
		{Type: mesh.EventStepStarted, StepName: "executor"},
		{Type: mesh.EventStepFinished, StepName: "executor"},
		{Type: mesh.EventStepFinished, StepName: "pipeline"},
		mesh.RunFinished("conv", "run", mesh.Outcome{Type: mesh.OutcomeSuccess}, nil),
	})
	want = []string{"STEP_STARTED executor", "STEP_FINISHED executor", "RUN_FINISHED"}
	if strings.Join(resumed, ",") != strings.Join(want, ",") {
		t.Errorf("resumed run:\n got %v\nwant %v", resumed, want)
	}
}

// TestOfficialRetryOfOneBranch: a retried tree node closes and renames
// only its own open items; a parallel branch streaming beside it goes on.
func TestOfficialRetryOfOneBranch(t *testing.T) {
	got := officialTypes(t, []mesh.Event{
		{Type: mesh.EventTextMessageStart, MessageID: "t-r_0g1-a1", Role: "assistant"},
		{Type: mesh.EventTextMessageStart, MessageID: "t-r_1g1-a1", Role: "assistant"},
		mesh.Custom(mesh.CustomRunRetried, map[string]any{"attempt": 2, "prefixes": []string{"t-r_0g1-"}}),
		{Type: mesh.EventTextMessageContent, MessageID: "t-r_1g1-a1", Delta: "b"},
		{Type: mesh.EventTextMessageStart, MessageID: "t-r_0g1-a1", Role: "assistant"},
		{Type: mesh.EventTextMessageEnd, MessageID: "t-r_0g1-a1"},
		{Type: mesh.EventTextMessageEnd, MessageID: "t-r_1g1-a1"},
	})
	want := []string{
		"TEXT_MESSAGE_START t-r_0g1-a1", "TEXT_MESSAGE_START t-r_1g1-a1",
		"CUSTOM", "TEXT_MESSAGE_END t-r_0g1-a1",
		"TEXT_MESSAGE_CONTENT t-r_1g1-a1",
		"TEXT_MESSAGE_START t-r_0g1-a1~2", "TEXT_MESSAGE_END t-r_0g1-a1~2",
		"TEXT_MESSAGE_END t-r_1g1-a1",
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
