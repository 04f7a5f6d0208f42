package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// webErrorResult is what web-error.mjs saw.
type webErrorResult struct {
	Error         string   `json:"error"`
	Steps         []string `json:"steps"`
	Screenshots   []string `json:"screenshots"`
	ConsoleErrors []string `json:"consoleErrors"`
	Status        struct {
		Status, Text, Title string
	} `json:"status"`
	SendEnabled bool `json:"sendEnabled"`
	Streaming   bool `json:"streaming"`
}

// TestWebShowsAFailedRun: when the model fails (a provider 500, retries
// off), the page says the run failed and why, stops streaming, and lets the
// person send again.
func TestWebShowsAFailedRun(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	c := llmCases()[0]
	opts, srv := llmMeshOpts(t, c, "  max_retries: -1\n")
	opts.logLevel = "info"
	m := startMesh(t, opts)
	srv.Fail(llmtest.Fault{Status: 500, Message: "the model's backend broke", Times: 100})
	dir := artifactDir(t)

	var res webErrorResult
	runPeer(t, node, "web-error.mjs", 2*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "TIMEOUT_MS=20000",
	}, &res, nil)
	if res.Error != "" {
		t.Fatalf("after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("uncaught errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	if res.Status.Status != "error" || !strings.Contains(res.Status.Text, "error") || !strings.Contains(res.Status.Title, "backend broke") {
		t.Errorf("run status %+v, want error with the model's message", res.Status)
	}
	if !res.SendEnabled || res.Streaming {
		t.Errorf("after the failure: send enabled %t, a message still streaming %t; want a composer that takes a new message", res.SendEnabled, res.Streaming)
	}
}
