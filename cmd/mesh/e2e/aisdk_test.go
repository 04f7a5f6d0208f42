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
