package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

type webReasoning struct {
	Summary, Text, Source string
	Open                  bool
}

// TestWebShowsReasoningCollapsed: with a model that thinks, the web page
// shows each model call's reasoning as a collapsed "Reasoning" disclosure
// that opens on a click, live and after a reload.
func TestWebShowsReasoningCollapsed(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	c := llmCases()[2] // anthropic
	srv := llmtest.Start(t, llmtest.Config{API: c.api, APIKey: c.key(), Model: c.wireModel, Reasoning: reasoningText})
	cfg := strings.Replace(defaultConfig(t), "\n  model: offline\n", "\n  model: "+c.model+"\n  reasoning: {effort: low}\n", 1)
	m := startMesh(t, meshOpts{config: cfg, env: []string{c.keyEnv + "=" + c.key(), c.baseEnv + "=" + srv.BaseURL()}, logLevel: "info"})

	var res struct {
		Error         string         `json:"error"`
		Steps         []string       `json:"steps"`
		ConsoleErrors []string       `json:"consoleErrors"`
		Live          []webReasoning `json:"live"`
		Reloaded      []webReasoning `json:"reloaded"`
		OpenedVisible bool           `json:"openedVisible"`
	}
	runPeer(t, node, "web-reasoning.mjs", 2*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + artifactDir(t), "TIMEOUT_MS=30000",
	}, &res, nil)
	if res.Error != "" {
		t.Fatalf("after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("uncaught errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	check := func(when string, got []webReasoning) {
		if len(got) != 2 {
			t.Fatalf("%s: %d reasoning disclosures %+v, want one per model call (2)", when, len(got), got)
		}
		for _, r := range got {
			if r.Summary != "Reasoning" || r.Open || r.Text != reasoningText {
				t.Errorf("%s: disclosure %+v, want a collapsed \"Reasoning\" holding %q", when, r, reasoningText)
			}
		}
	}
	check("live", res.Live)
	check("after a reload", res.Reloaded)
	if !res.OpenedVisible {
		t.Error("a click on the disclosure did not show the reasoning")
	}
}
