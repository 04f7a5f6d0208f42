package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fatih/color"

	"github.com/agentmesh/agentmesh/mesh"
)

func TestSSEStream(t *testing.T) {
	in := ": keep-alive\n\nretry: 1000\n\nid: 7\ndata: {\"type\":\"RUN_STARTED\"}\n\n" +
		"id: 8\r\ndata: a\r\ndata: b\r\n\r\ndata: {\"x\":1}\n\n" + "id: 9\ndata: cut"
	s := &sseStream{body: io.NopCloser(strings.NewReader("")), rd: bufio.NewReader(strings.NewReader(in))}
	want := []sseEvent{{ID: "7", Data: []byte(`{"type":"RUN_STARTED"}`)}, {ID: "8", Data: []byte("a\nb")}, {Data: []byte(`{"x":1}`)}}
	for i, w := range want {
		got, err := s.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got.ID != w.ID || !bytes.Equal(got.Data, w.Data) {
			t.Errorf("event %d = %q %q, want %q %q", i, got.ID, got.Data, w.ID, w.Data)
		}
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("a cut last event: err %v, want EOF", err)
	}
}

func TestChatPrinter(t *testing.T) {
	color.NoColor = true
	var b strings.Builder
	p := newChatPrinter(&b, "agent")
	ap := map[string]any{"uuid": "u-1", "tool_name": "resources_add", "server": "resources", "tool_args": map[string]any{"name": "web-1"}, "status": "pending"}
	for _, ev := range []mesh.Event{
		{Type: mesh.EventTextMessageStart, Role: "assistant"},
		{Type: mesh.EventTextMessageContent, Delta: "Hel"},
		{Type: mesh.EventTextMessageContent, Delta: "lo"},
		{Type: mesh.EventToolCallStart, ToolCallID: "c1", ToolCallName: "resources_list"},
		{Type: mesh.EventToolCallArgs, ToolCallID: "c1", Delta: `{"pattern":`},
		{Type: mesh.EventToolCallArgs, ToolCallID: "c1", Delta: `"web"}`},
		{Type: mesh.EventToolCallEnd, ToolCallID: "c1"},
		{Type: mesh.EventToolCallResult, ToolCallID: "c1", Content: "{\"count\":\n 0}"},
		{Type: mesh.EventCustom, Name: mesh.CustomApprovalRequested, Value: ap},
		{Type: mesh.EventCustom, Name: mesh.CustomApprovalDecided, Value: map[string]any{"uuid": "u-1", "status": "approved", "decision": map[string]any{"approved": true, "by": "ops"}}},
		{Type: mesh.EventRunError, Code: "LLM_ERROR", Message: "down"},
		{Type: mesh.EventRunFinished, Outcome: &mesh.Outcome{Type: mesh.OutcomeCancelled}},
	} {
		p.event(ev)
	}
	want := `agent: Hello
  [call] resources_list {"pattern":"web"}
  [result] {"count": 0}
  [approval needed] resources_add on resources {"name":"web-1"}
    id u-1
  [approved by ops]
  [error LLM_ERROR] down
  [cancelled]
`
	if b.String() != want {
		t.Errorf("chat output:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestTailLine(t *testing.T) {
	color.NoColor = true
	ev := mesh.Event{Type: mesh.EventRunFinished, RunID: "r1", Timestamp: 1, Outcome: &mesh.Outcome{Type: "interrupt", Interrupts: []mesh.Interrupt{{ID: "a1", Reason: "tool_approval"}}}}
	got := tailLine("c1", ev, true)
	if !strings.HasSuffix(got, " c1 RUN_FINISHED run r1 interrupt tool_approval a1") {
		t.Errorf("tail line %q", got)
	}
	if got := tailLine("c1", mesh.Event{Type: mesh.EventTextMessageContent, Delta: "a\nb"}, false); !strings.HasSuffix(got, ` TEXT_MESSAGE_CONTENT "a\nb"`) || strings.Contains(got, "c1") {
		t.Errorf("tail line %q", got)
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("boom"), 1},
		{errQuiet, 1},
		{usageErr("bad"), 2},
		{errConfig, 2},
		{errInterrupted, 130},
		{&apiError{Status: 409, Message: "decided"}, 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
