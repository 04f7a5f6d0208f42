package mesh

import (
	"encoding/json"
	"testing"
)

func TestEventJSON(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"run started", RunStarted("t1", "r1"), `{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`},
		{"empty tool result keeps content", Event{Type: EventToolCallResult, MessageID: "m", ToolCallID: "c"}, `{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":""}`},
		{"empty snapshot", Event{Type: EventStateSnapshot}, `{"type":"STATE_SNAPSHOT","snapshot":{}}`},
		{"interrupt", RunFinished("t", "r", Outcome{Type: OutcomeInterrupt, Interrupts: []Interrupt{{ID: "a", Reason: InterruptReasonToolApproval, ToolCallID: "c"}}}, nil),
			`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"a","reason":"tool_approval","toolCallId":"c"}]}}`},
		{"delta patch", Event{Type: EventStateDelta, Delta: []PatchOp{{Op: "add", Path: "/a", Value: 1}}}, `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]}`},
		{"custom", Custom(CustomApprovalDecided, map[string]any{"uuid": "x"}), `{"type":"CUSTOM","name":"approval_decided","value":{"uuid":"x"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			var back Event
			if err := json.Unmarshal(got, &back); err != nil || back.Type != tt.ev.Type {
				t.Errorf("decode: %v, type %q", err, back.Type)
			}
		})
	}
}
