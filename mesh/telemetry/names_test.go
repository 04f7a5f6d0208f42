package telemetry

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var metricName = regexp.MustCompile(`\bmesh_[a-z0-9_]*[a-z0-9]`)

// known reports whether name is a metric of Names, or a series of one of
// its histograms.
func known(name string) bool {
	if _, ok := Names()[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if m, ok := Names()[strings.TrimSuffix(name, suffix)]; ok && m.Type == "histogram" && strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// TestDeployNamesExist: the alert rules and the Grafana dashboard name
// only metrics the mesh exposes, and together watch the main areas.
func TestDeployNamesExist(t *testing.T) {
	for _, path := range []string{"../../deploy/prometheus/rules.yml", "../../deploy/grafana/agentmesh.json"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		names := metricName.FindAllString(string(data), -1)
		if len(names) == 0 {
			t.Errorf("%s names no metric", path)
		}
		for _, n := range names {
			if !known(n) {
				t.Errorf("%s: %s is not a metric of the mesh", path, n)
			}
		}
		if strings.HasSuffix(path, ".json") {
			// The dashboard follows the scrape: both every 5 s.
			if !strings.Contains(string(data), `"refresh": "5s"`) {
				t.Errorf("%s does not refresh every 5s", path)
			}
			for name := range Names() {
				if name != "mesh_build_info" && !slices.ContainsFunc(names, func(n string) bool {
					return n == name || strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count") == name
				}) {
					t.Errorf("the dashboard shows nothing of %s", name)
				}
			}
		}
	}
}

// TestDocsMetricsTable: the metrics table of docs/observability.md lists
// every metric with its type, and no other.
func TestDocsMetricsTable(t *testing.T) {
	data, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "| metric | type | labels | what |\n")
	if !ok {
		t.Fatal("docs/observability.md has no metrics table (| metric | type | labels | what |)")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	listed := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`mesh_") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		listed[name] = strings.TrimSpace(cells[2])
	}
	for name, m := range Names() {
		typ, ok := listed[name]
		switch {
		case !ok:
			t.Errorf("the metrics table of docs/observability.md lacks %s", name)
		case typ != m.Type:
			t.Errorf("docs/observability.md says %s is a %s; it is a %s", name, typ, m.Type)
		}
	}
	for name := range listed {
		if _, ok := Names()[name]; !ok {
			t.Errorf("docs/observability.md lists %s, which the mesh does not expose", name)
		}
	}
}

// TestPromtoolCheckRules runs Debian's promtool over the alert rules.
func TestPromtoolCheckRules(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (.ci/run installs Debian's prometheus)")
		}
		t.Skip("promtool not installed")
	}
	out, err := exec.Command(path, "check", "rules", "../../deploy/prometheus/rules.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	scrape, err := os.ReadFile("../../deploy/prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(scrape), "scrape_interval: 5s") {
		t.Error("deploy/prometheus/prometheus.yml does not scrape every 5s")
	}
	out, err = exec.Command(path, "check", "config", "--syntax-only", "../../deploy/prometheus/prometheus.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}
