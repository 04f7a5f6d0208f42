package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// reasoningText is what the wire fake's model says of its reasoning.
const reasoningText = "The user wants every resource; resources_list gives them, so I call it first."

// TestAGUIReasoningReachesTheOfficialClient runs `mesh up` with an
// Anthropic model that thinks (llm.reasoning) against the wire fake, which
// sends a signed thinking block before each answer and refuses a tool loop
// that does not send it back. The official @ag-ui/client receives the
// reasoning as REASONING_* events, its verifier accepts the stream, and it
// assembles the reasoning messages; the model's second call carried the
// signed thinking back.
func TestAGUIReasoningReachesTheOfficialClient(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@ag-ui/client")
	c := llmCases()[2] // anthropic
	srv := llmtest.Start(t, llmtest.Config{API: c.api, APIKey: c.key(), Model: c.wireModel, Reasoning: reasoningText})
	cfg := defaultConfig(t)
	const offline = "\n  model: offline\n"
	if !strings.Contains(cfg, offline) {
		t.Fatalf("config/agent.yaml has no %q to replace", offline)
	}
	cfg = strings.Replace(cfg, offline, "\n  model: "+c.model+"\n  reasoning: {budget_tokens: 2048}\n", 1)
	m := startMesh(t, meshOpts{config: cfg, env: []string{c.keyEnv + "=" + c.key(), c.baseEnv + "=" + srv.BaseURL()}})

	var res struct {
		Events          []string          `json:"events"`
		ReasoningDeltas []string          `json:"reasoningDeltas"`
		Error           *string           `json:"error"`
		RunFailed       *string           `json:"runFailed"`
		Messages        []json.RawMessage `json:"messages"`
	}
	runPeer(t, node, "agui-reasoning.mjs", 2*time.Minute, []string{"AGUI_URL=" + m.url("/agui"), "THREAD_ID=" + uuid.NewString()}, &res, nil)
	if res.Error != nil || res.RunFailed != nil {
		t.Fatalf("the official AG-UI client rejected the run: %v / %v\nevents %v", deref(res.Error), deref(res.RunFailed), res.Events)
	}
	for _, want := range []string{"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END"} {
		if !slices.Contains(res.Events, want) {
			t.Errorf("events %v: no %s", res.Events, want)
		}
	}
	if i, j := slices.Index(res.Events, "REASONING_MESSAGE_END"), slices.Index(res.Events, "TOOL_CALL_START"); i < 0 || j < 0 || i > j {
		t.Errorf("events %v: want the reasoning before the call it led to", res.Events)
	}
	// Two model calls (the call, then the answer), each with its reasoning.
	if got := strings.Join(res.ReasoningDeltas, ""); got != reasoningText+reasoningText {
		t.Errorf("reasoning deltas joined %q, want the model's reasoning of both calls", got)
	}
	var reasoning []string
	for _, raw := range res.Messages {
		var msg struct{ Role, Content string }
		_ = json.Unmarshal(raw, &msg)
		if msg.Role == "reasoning" {
			reasoning = append(reasoning, msg.Content)
		}
	}
	if len(reasoning) != 2 || reasoning[0] != reasoningText {
		t.Errorf("the client's reasoning messages %q, want two of %q", reasoning, reasoningText)
	}
	recs := srv.Answered()
	if len(recs) != 2 {
		t.Fatalf("%d model calls answered, want 2", len(recs))
	}
	var back bool
	for _, msg := range recs[1].Request.Messages {
		back = back || len(msg.Thoughts) == 1 && msg.Thoughts[0].Text == reasoningText && msg.Thoughts[0].Signature != ""
	}
	if !back {
		t.Errorf("second call's history %+v: want the signed thinking block sent back", recs[1].Request.Messages)
	}
	for _, r := range recs {
		if !strings.Contains(string(r.Body), `"cache_control":{"type":"ephemeral"}`) {
			t.Errorf("request without cache_control on its stable prefix:\n%s", r.Body)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
