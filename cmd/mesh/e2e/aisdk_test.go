package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

type aisdkPart struct {
	Type       string         `json:"type"`
	Text       string         `json:"text"`
	ToolName   string         `json:"toolName"`
	ToolCallID string         `json:"toolCallId"`
	State      string         `json:"state"`
	Input      map[string]any `json:"input"`
	Output     any            `json:"output"`
	Approval   map[string]any `json:"approval"`
}

type aisdkTurn struct {
	Status  int      `json:"status"`
	Header  string   `json:"header"`
	Chunks  []string `json:"chunks"`
	Body    string   `json:"body"`
	Message struct {
		ID    string      `json:"id"`
		Role  string      `json:"role"`
		Parts []aisdkPart `json:"parts"`
	} `json:"message"`
}

// part finds the first part of a type.
func (t aisdkTurn) part(typ string) (aisdkPart, bool) {
	for _, p := range t.Message.Parts {
		if p.Type == typ {
			return p, true
		}
	}
	return aisdkPart{}, false
}

func (t aisdkTurn) text() string {
	var b strings.Builder
	for _, p := range t.Message.Parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// TestAISDKReader reads POST /api/ai-sdk of the real binary with the npm
// ai package's own reader (aisdk-read.mjs): every chunk passes
// uiMessageChunkSchema, and readUIMessageStream rebuilds the assistant's
// text and tool parts: a tool turn, a tool that waits for approval and the
// answer useChat sends back, which continues the message to the tool's
// output.
func TestAISDKReader(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "ai")
	cfg := defaultConfig(t) + `auth:
  tokens:
    - {name: dana, token: ` + wsToken + `, roles: [user, approver]}
`
	m := startMesh(t, meshOpts{config: cfg, logLevel: "info"})
	var res struct {
		Turns  map[string]aisdkTurn `json:"turns"`
		Errors []string             `json:"errors"`
	}
	runPeer(t, node, "aisdk-read.mjs", 2*time.Minute, []string{"MESH_URL=" + m.url(""), "TOKEN=" + wsToken}, &res, nil)
	if len(res.Errors) > 0 {
		t.Errorf("the ai package's reader: %v", res.Errors)
	}
	for name, turn := range res.Turns {
		if turn.Status != 200 || turn.Header != "v1" {
			t.Errorf("%s: status %d, x-vercel-ai-ui-message-stream %q (%s)", name, turn.Status, turn.Header, turn.Body)
		}
		if len(turn.Chunks) < 2 || turn.Chunks[0] != "start" || !slices.Contains(turn.Chunks, "finish") {
			t.Errorf("%s: chunks %v, want start … finish", name, turn.Chunks)
		}
	}

	tool := res.Turns["tool"]
	p, ok := tool.part("dynamic-tool")
	if !ok {
		t.Errorf("tool turn: parts %+v, want a dynamic-tool part", tool.Message.Parts)
	} else {
		if p.ToolName != "resources_list" {
			t.Errorf("tool turn: tool %q, want resources_list", p.ToolName)
		}
		if p.State != "output-available" {
			t.Errorf("tool turn: state %q, want output-available", p.State)
		}
		if out := toJSON(p.Output); !strings.Contains(out, `"count"`) {
			t.Errorf("tool turn: output %s, want the list's count", out)
		}
	}
	if !strings.Contains(tool.text(), "resource") {
		t.Errorf("tool turn: text %q", tool.text())
	}

	paused := res.Turns["approval"]
	p, ok = paused.part("dynamic-tool")
	if !ok {
		t.Fatalf("approval turn: parts %+v, want a dynamic-tool part", paused.Message.Parts)
	}
	if p.ToolName != "resources_add" {
		t.Fatalf("approval turn: tool %q, want resources_add", p.ToolName)
	}
	if p.State != "approval-requested" {
		t.Fatalf("approval turn: state %q, want approval-requested", p.State)
	}
	if p.Approval["id"] == nil {
		t.Fatalf("approval turn: approval %v without an id", p.Approval)
	}
	if p.Input["name"] != "sdk-1" {
		t.Fatalf("approval turn: input name %v, want sdk-1", p.Input["name"])
	}
	answer := res.Turns["answer"]
	q, ok := answer.part("dynamic-tool")
	if !ok {
		t.Errorf("answer: parts %+v, want a dynamic-tool part", answer.Message.Parts)
	} else {
		if q.ToolCallID != p.ToolCallID {
			t.Errorf("answer: call %q, want the approved one, %q", q.ToolCallID, p.ToolCallID)
		}
		if q.State != "output-available" {
			t.Errorf("answer: state %q, want output-available", q.State)
		}
		if out := toJSON(q.Output); !strings.Contains(out, "sdk-1") {
			t.Errorf("answer: output %s, want the created sdk-1", out)
		}
	}
	if !strings.Contains(answer.text(), "sdk-1") {
		t.Errorf("answer: text %q, want the created resource", answer.text())
	}
}

func toJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// aisdkApprovalResult is what aisdk-approval.mjs prints.
type aisdkApprovalResult struct {
	ChatID      string          `json:"chatId"`
	Errors      []string        `json:"errors"`
	Error       string          `json:"error"`
	Status      string          `json:"status"`
	Asked       []aisdkApproval `json:"asked"`
	Continued   []aisdkApproval `json:"continued"`
	Regenerated []aisdkApproval `json:"regenerated"`
	// Finished are the messages onFinish received, one per answer.
	Finished []aisdkApproval `json:"finished"`
}

type aisdkApproval struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Text  string `json:"text"`
	Parts []struct {
		Type       string `json:"type"`
		ToolCallID string `json:"toolCallId"`
		State      string `json:"state"`
	} `json:"parts"`
}

// TestAISDKChatContinuesAnApprovedMessage drives the `ai` package's own
// chat (AbstractChat, useChat's core) through a tool turn that waits for an
// approval, its approval (addToolApprovalResponse, the continuation sent by
// sendAutomaticallyWhen) and regenerate(): the answer continues the
// assistant message that asked, whose one tool part ends output-available,
// and regenerate() then works.
func TestAISDKChatContinuesAnApprovedMessage(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "ai")
	m := startMesh(t, meshOpts{logLevel: "info"})
	var res aisdkApprovalResult
	runPeer(t, node, "aisdk-approval.mjs", 2*time.Minute, []string{"MESH_URL=" + m.url("")}, &res, nil)
	if res.Error != "" || len(res.Errors) > 0 || res.Status != "ready" {
		t.Fatalf("the ai package's chat: status %q, errors %v, %s", res.Status, res.Errors, res.Error)
	}
	if len(res.Asked) != 2 || len(res.Continued) != 2 {
		t.Fatalf("messages when asked %+v, after the approval %+v: want the user's and one assistant message each time", res.Asked, res.Continued)
	}
	asked, continued := res.Asked[1], res.Continued[1]
	if continued.ID != asked.ID {
		t.Errorf("the approval's answer is message %s, not the continued %s", continued.ID, asked.ID)
	}
	var calls, done int
	for _, p := range continued.Parts {
		if p.ToolCallID != "" {
			calls++
			if p.State == "output-available" {
				done++
			}
		}
	}
	if calls != 1 || done != 1 {
		t.Errorf("the continued message's tool parts: %+v, want one, output-available", continued.Parts)
	}
	if !strings.Contains(continued.Text, "sdk-web-1") {
		t.Errorf("the continued message says %q, want the created resource", continued.Text)
	}
	if n := m.resourceRows("sdk-web-1"); n != 1 {
		t.Errorf("sdk-web-1: %d rows, want 1", n)
	}
	if len(res.Regenerated) != 2 || res.Regenerated[1].Role != "assistant" || res.Regenerated[1].ID == continued.ID {
		t.Errorf("after regenerate(): %+v, want the user's message and a new answer", res.Regenerated)
	}
	// onFinish gets each complete answer: the one that asked, its
	// continuation (the same message, now with the reply) and the
	// regenerated one.
	if n := len(res.Finished); n != 3 {
		t.Fatalf("onFinish ran %d times (%+v), want once per answer: 3", n, res.Finished)
	}
	for i, want := range []aisdkApproval{asked, continued, res.Regenerated[1]} {
		if got := res.Finished[i]; got.ID != want.ID || got.Role != "assistant" || got.Text != want.Text {
			t.Errorf("onFinish %d got %+v, want the chat's message %s %q", i, got, want.ID, want.Text)
		}
	}
}
