package llm_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// geminiSignatures are the thoughtSignature of each functionCall part of
// the body's contents[i], in order.
func geminiSignatures(t *testing.T, body []byte, i int) []string {
	t.Helper()
	var req struct {
		Contents []struct {
			Parts []struct {
				FunctionCall     json.RawMessage `json:"functionCall"`
				ThoughtSignature string          `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Contents) <= i {
		t.Fatalf("no contents[%d] in %s (%v)", i, body, err)
	}
	var sigs []string
	for _, p := range req.Contents[i].Parts {
		if p.FunctionCall != nil {
			sigs = append(sigs, p.ThoughtSignature)
		}
	}
	return sigs
}

func TestGeminiThoughtSignatures(t *testing.T) {
	w := wire{"gemini", llmtest.Gemini, "google:gemini-3-flash-preview"}
	f := newFake(t, w, reply{Calls: []fakeCall{{Name: "get_weather", Args: `{"location":"Paris"}`}, {Name: "get_weather", Args: `{"location":"Oslo"}`}}}, okReply)
	p := f.provider(testOptions(nil))
	resp, err := p.Generate(t.Context(), llm.Request{Messages: userTurn("Paris and Oslo?"), Tools: contractTools()})
	if err != nil {
		t.Fatal(err)
	}
	// The history as the agent rebuilds it: its own ids, its own encoding.
	history := userTurn("Paris and Oslo?")
	call := llm.Message{Role: llm.RoleAssistant}
	for i, c := range resp.ToolCalls {
		var args map[string]any
		_ = json.Unmarshal(c.Arguments, &args)
		b, _ := json.Marshal(args)
		call.ToolCalls = append(call.ToolCalls, llm.ToolCall{ID: "run-c1-" + string(rune('0'+i)), Name: c.Name, Arguments: b})
	}
	history = append(history, call,
		llm.Message{Role: llm.RoleTool, ToolCallID: "run-c1-0", ToolName: "get_weather", Content: "18°C"},
		llm.Message{Role: llm.RoleTool, ToolCallID: "run-c1-1", ToolName: "get_weather", Content: "3°C"})
	if _, err := p.Generate(t.Context(), llm.Request{Messages: history, Tools: contractTools()}); err != nil {
		t.Fatal(err)
	}
	// The first call's signature back, as received, and none on the
	// second. The server accepts only the signatures it handed out (one,
	// on the first call of its answer) and the placeholder.
	sigs := geminiSignatures(t, f.last().Body, 1)
	if len(sigs) != 2 {
		t.Fatalf("replayed %d calls, want 2", len(sigs))
	}
	if sigs[0] == "" || sigs[0] == llm.GeminiSkipSignature {
		t.Errorf("first call replayed with signature %q, want the one received", sigs[0])
	}
	if sigs[1] != "" {
		t.Errorf("second call replayed with signature %q, want none", sigs[1])
	}

	// A call this process never saw (another agent replica made it).
	other := []llm.Message{{Role: llm.RoleUser, Content: "Rome?"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "x", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Rome"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "x", Content: "20°C"}}
	if _, err := p.Generate(t.Context(), llm.Request{Messages: other, Tools: contractTools()}); err != nil {
		t.Fatal(err)
	}
	if got := geminiSignatures(t, f.last().Body, 1)[0]; got != llm.GeminiSkipSignature {
		t.Errorf("unknown call replayed with signature %q, want the documented placeholder %q", got, llm.GeminiSkipSignature)
	}
}

func TestGeminiNoAnswer(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"prompt blocked", `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`, "prompt was blocked (SAFETY)"},
		{"reply blocked", `{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}]}`, "no answer (finishReason SAFETY)"},
		{"bad call", `{"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"MALFORMED_FUNCTION_CALL","index":0}]}`, "MALFORMED_FUNCTION_CALL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, geminiWire)
			f.Fail(llmtest.Fault{Body: tt.body})
			p := f.provider(testOptions(nil))
			e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), llm.CodeError)
			if !strings.Contains(e.Message, tt.want) || f.Count() != 1 {
				t.Errorf("error %q after %d requests, want %q, not retried", e.Message, f.Count(), tt.want)
			}
		})
	}
}

func TestGeminiCallIDs(t *testing.T) {
	// Newer models give calls ids; they are kept.
	body := `{"candidates":[{"content":{"parts":[{"functionCall":{"id":"fc-7","name":"list_items","args":{}}},{"functionCall":{"name":"list_items"}}],"role":"model"},"finishReason":"STOP","index":0}],
		"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4,"thoughtsTokenCount":6,"totalTokenCount":15}}`
	f := newFake(t, geminiWire)
	f.Fail(llmtest.Fault{Body: body})
	resp, err := f.provider(testOptions(nil)).Generate(t.Context(), ask())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("%d calls, want 2: %+v", len(resp.ToolCalls), resp.ToolCalls)
	}
	if id := resp.ToolCalls[0].ID; id != "fc-7" {
		t.Errorf("call 0 id %q, want the model's fc-7 kept", id)
	}
	if id := resp.ToolCalls[1].ID; !strings.HasPrefix(id, "call_") {
		t.Errorf("call 1 id %q, want one made up, starting with call_", id)
	}
	if args := string(resp.ToolCalls[1].Arguments); args != "{}" {
		t.Errorf("call 1 arguments %s, want {} for missing args", args)
	}
	if resp.Usage != (llm.Usage{InputTokens: 5, OutputTokens: 10}) {
		t.Errorf("usage %+v, want thinking counted as output", resp.Usage)
	}
}

func TestGeminiVersionedBase(t *testing.T) {
	f := newFake(t, geminiWire)
	p := newProvider(t, "gemini-2.5-flash", testOptions(func(o *llm.Options) { o.BaseURL = f.URL + "/v1beta/" }))
	if _, err := p.Generate(t.Context(), ask()); err != nil {
		t.Fatalf("base URL ending in /v1beta: %v", err)
	}
}

func TestGeminiErrorArray(t *testing.T) {
	f := newFake(t, geminiWire)
	f.Fail(llmtest.Fault{Status: http.StatusNotFound, Body: `[{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}]`})
	e := wantCode(t, fmtErr(f.provider(testOptions(nil)).Generate(t.Context(), ask())), llm.CodeError)
	if !strings.Contains(e.Message, "is not found for API version") || !strings.Contains(e.Message, "check the model name") {
		t.Errorf("message %q", e.Message)
	}
}
