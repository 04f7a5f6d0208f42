package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOpenAPIPassesRedoclyLint lints the document a running bridge serves
// at /openapi.json with redocly's own CLI (npm @redocly/cli) and its
// recommended rules: no error and no warning (servers, summaries, every
// operation's 4XX answers with the error body …).
func TestOpenAPIPassesRedoclyLint(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@redocly/cli")
	m := startMesh(t, meshOpts{config: defaultConfig(t)})
	resp, err := http.Get(m.url("/openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %v", resp.StatusCode, err)
	}
	path := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cli, err := filepath.Abs(filepath.Join(peersDir, "node_modules", "@redocly", "cli", "bin", "cli.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, cli, "lint", "--config", "redocly.yaml", "--format", "json", path)
	cmd.Dir = peersDir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var report struct {
		Totals struct {
			Errors, Warnings int
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("redocly lint: %v, no JSON report (%v):\n%s\n%s", runErr, err, stdout.String(), stderr.String())
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("%s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	if runErr != nil || report.Totals.Errors+report.Totals.Warnings > 0 {
		t.Errorf("redocly lint: %v; %d errors, %d warnings", runErr, report.Totals.Errors, report.Totals.Warnings)
	}
}
