package llm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestGeminiThoughtSignatures(t *testing.T) {
	w := geminiWire{model: "gemini-3-flash-preview"}
	f := newFake(t, w, nil)
	f.set(f.answer(reply{Calls: []fakeCall{{Name: "get_weather", Args: `{"location":"Paris"}`}, {Name: "get_weather", Args: `{"location":"Oslo"}`}}}), f.answer(okReply))
	p := f.provider(testOptions(nil))
	resp, err := p.Generate(t.Context(), Request{Messages: userTurn("Paris and Oslo?"), Tools: contractTools()})
	if err != nil {
		t.Fatal(err)
	}
	// The history as the agent rebuilds it: its own ids, its own encoding.
	history := userTurn("Paris and Oslo?")
	call := Message{Role: RoleAssistant}
	for i, c := range resp.ToolCalls {
		var args map[string]any
		_ = json.Unmarshal(c.Arguments, &args)
		b, _ := json.Marshal(args)
		call.ToolCalls = append(call.ToolCalls, ToolCall{ID: "run-c1-" + string(rune('0'+i)), Name: c.Name, Arguments: b})
	}
	history = append(history, call,
		Message{Role: RoleTool, ToolCallID: "run-c1-0", ToolName: "get_weather", Content: "18°C"},
		Message{Role: RoleTool, ToolCallID: "run-c1-1", ToolName: "get_weather", Content: "3°C"})
	if _, err := p.Generate(t.Context(), Request{Messages: history, Tools: contractTools()}); err != nil {
		t.Fatal(err)
	}
	calls := f.last().Messages[1].Calls
	if len(calls) != 2 || calls[0].Signature != fakeSignature("get_weather") || calls[1].Signature != "" {
		t.Errorf("replayed calls %+v: want the first call's signature back, as received, and none on the second", calls)
	}

	// A call this process never saw (another agent replica made it).
	other := []Message{{Role: RoleUser, Content: "Rome?"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "x", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Rome"}`)}}},
		{Role: RoleTool, ToolCallID: "x", Content: "20°C"}}
	if _, err := p.Generate(t.Context(), Request{Messages: other, Tools: contractTools()}); err != nil {
		t.Fatal(err)
	}
	if got := f.last().Messages[1].Calls[0].Signature; got != geminiSkipSignature {
		t.Errorf("unknown call replayed with signature %q, want the documented placeholder %q", got, geminiSkipSignature)
	}
}

func TestGeminiNoAnswer(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"prompt blocked", `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`, "prompt was blocked (SAFETY)"},
		{"reply blocked", `{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}]}`, "no answer (finishReason SAFETY)"},
		{"bad call", `{"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"MALFORMED_FUNCTION_CALL","index":0}]}`, "MALFORMED_FUNCTION_CALL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, geminiWire{}, raw("application/json", tt.body))
			p := f.provider(testOptions(nil))
			e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), CodeError)
			if !strings.Contains(e.Message, tt.want) || f.count() != 1 {
				t.Errorf("error %q after %d requests, want %q, not retried", e.Message, f.count(), tt.want)
			}
		})
	}
}

func TestGeminiCallIDs(t *testing.T) {
	// Newer models give calls ids; they are kept.
	body := `{"candidates":[{"content":{"parts":[{"functionCall":{"id":"fc-7","name":"list_items","args":{}}},{"functionCall":{"name":"list_items"}}],"role":"model"},"finishReason":"STOP","index":0}],
		"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4,"thoughtsTokenCount":6,"totalTokenCount":15}}`
	f := newFake(t, geminiWire{}, raw("application/json", body))
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
	if resp.Usage != (Usage{InputTokens: 5, OutputTokens: 10}) {
		t.Errorf("usage %+v, want thinking counted as output", resp.Usage)
	}
}

func TestGeminiVersionedBase(t *testing.T) {
	f := newFake(t, geminiWire{}, nil)
	f.set(f.answer(okReply))
	p := newProvider(t, "gemini-2.5-flash", testOptions(func(o *Options) { o.BaseURL = f.srv.URL + "/v1beta/" }))
	if _, err := p.Generate(t.Context(), ask()); err != nil {
		t.Fatalf("base URL ending in /v1beta: %v", err)
	}
}

func TestGeminiErrorArray(t *testing.T) {
	f := newFake(t, geminiWire{}, func(w http.ResponseWriter, r *http.Request, s seen) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`[{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}]`))
	})
	e := wantCode(t, fmtErr(f.provider(testOptions(nil)).Generate(t.Context(), ask())), CodeError)
	if !strings.Contains(e.Message, "is not found for API version") || !strings.Contains(e.Message, "check the model name") {
		t.Errorf("message %q", e.Message)
	}
}
