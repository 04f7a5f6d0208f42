package agui

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/bridge/core/coretest"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

func TestGoldenAISDK(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	coretest.WaitForTools(f.t, f.core)

	check := func(t *testing.T, stream string, want ...string) {
		t.Helper()
		checkFraming(t, stream, false)
		if !strings.HasSuffix(stream, "data: [DONE]\n\n") {
			t.Errorf("stream does not end with [DONE]")
		}
		for _, w := range want {
			if !strings.Contains(stream, w) {
				t.Errorf("stream has no %s", w)
			}
		}
	}
	t.Run("tools", func(t *testing.T) {
		tr := &transcript{t: t}
		body := `{"id":"golden-aisdk-tools","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"list all resources"}]}],"trigger":"submit-message"}`
		tr.request("POST", AISDKPath, body)
		resp, stream := f.stream(AISDKPath, body)
		if got := resp.Header.Get(headerUIMessageStream); got != "v1" {
			t.Errorf("%s: %q", headerUIMessageStream, got)
		}
		tr.stream(resp, stream)
		check(t, stream, `"type":"tool-input-available"`, `"type":"tool-output-available"`, `"type":"text-delta"`, `"finishReason":"stop"`)
		tr.golden("aisdk_tools.sse")
	})
	t.Run("approval", func(t *testing.T) {
		tr := &transcript{t: t}
		const chat = "golden-aisdk-approval"
		body := `{"id":"` + chat + `","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"add resource sdk-1 with value 2"}]}]}`
		tr.request("POST", AISDKPath, body)
		resp, stream := f.stream(AISDKPath, body)
		tr.stream(resp, stream)
		uuid := f.pendingApproval(chat)
		check(t, stream, `"type":"tool-approval-request","toolCallId"`, `"approvalId":"`+uuid+`"`, `"finishReason":"tool-calls"`)

		// useChat's addToolApprovalResponse, sent back with the messages:
		// the assistant message continued, its part of the call that asked.
		// The answer keeps that message (a1), sends the output without the
		// input the part has, and opens the next step only after it.
		call := regexp.MustCompile(`"type":"tool-approval-request","toolCallId":"([^"]+)"`).FindStringSubmatch(stream)
		if call == nil {
			t.Fatalf("no tool-approval-request with a toolCallId in:\n%s", stream)
		}
		body = `{"id":"` + chat + `","messageId":"a1","trigger":"submit-message","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"add resource sdk-1 with value 2"}]},` +
			`{"id":"a1","role":"assistant","parts":[{"type":"step-start"},{"type":"dynamic-tool","toolName":"resources_add","toolCallId":"` + call[1] + `","state":"approval-responded","input":{"name":"sdk-1","value":2},"approval":{"id":"` + uuid + `","approved":true}}]}]}`
		tr.request("POST", AISDKPath, body)
		resp, stream = f.stream(AISDKPath, body)
		tr.stream(resp, stream)
		check(t, stream, `"type":"start","messageId":"a1"`, `"type":"tool-output-available"`, `"finishReason":"stop"`)
		if strings.Contains(stream, `"tool-input-available"`) || strings.Index(stream, `"start-step"`) < strings.Index(stream, `"tool-output-available"`) {
			t.Errorf("the continuation sent the call's input again, or a step before its output:\n%s", stream)
		}
		if c := f.conversation(chat); c.Status != mesh.StatusActive || c.LastRun == nil || c.LastRun.Outcome != mesh.OutcomeSuccess {
			t.Errorf("after the approval: status %s, last run %+v", c.Status, c.LastRun)
		}
		tr.golden("aisdk_approval.sse")
	})
}

func TestAISDKRefusesALastAssistantMessage(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	resp := f.post(t.Context(), AISDKPath, `{"id":"aisdk-last","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hello"}]},{"id":"a1","role":"assistant","parts":[{"type":"text","text":"hi"}]}]}`)
	defer resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("status %d, want 400: the user's message is not sent again", resp.StatusCode)
	}
}
