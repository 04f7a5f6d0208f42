package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// scrape is one parse of a metrics endpoint: its families by name.
type scrape map[string]*dto.MetricFamily

// scrapeURL reads and parses a Prometheus text exposition.
func scrapeURL(t testing.TB, url string) (scrape, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams, body
}

// value is the sum of the samples of family name whose labels include
// want (name=value pairs); a histogram counts its observations.
func (s scrape) value(name string, want ...string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.Metric {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

func hasLabels(m *dto.Metric, want []string) bool {
	have := map[string]string{}
	for _, l := range m.Label {
		have[l.GetName()] = l.GetValue()
	}
	for _, kv := range want {
		k, v, _ := strings.Cut(kv, "=")
		if have[k] != v {
			return false
		}
	}
	return true
}

// role is the role the process says it has (mesh_build_info).
func (s scrape) role() string {
	if f := s["mesh_build_info"]; f != nil && len(f.Metric) > 0 {
		for _, l := range f.Metric[0].Label {
			if l.GetName() == "role" {
				return l.GetValue()
			}
		}
	}
	return ""
}

// endpoints are the metrics endpoints of the mesh's processes, by role,
// as /health lists them.
func (m *meshProc) metricsEndpoints(t testing.TB, want int) map[string]string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h := m.do(http.StatusOK, "GET", "/health", nil)
		addrs := obj(h, "metrics")
		if len(addrs) >= want || time.Now().After(deadline) {
			out := map[string]string{}
			for _, a := range addrs {
				url := "http://" + a.(string) + "/metrics"
				s, _ := scrapeURL(t, url)
				out[s.role()] = url
			}
			if len(out) < want {
				t.Fatalf("metrics endpoints %v in /health, want %d roles", addrs, want)
			}
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrapeAll scrapes every endpoint.
func scrapeAll(t testing.TB, eps map[string]string) map[string]scrape {
	out := map[string]scrape{}
	for role, url := range eps {
		out[role], _ = scrapeURL(t, url)
	}
	return out
}

// obsConfig is config/agent.yaml with the team group, llm.model a cloud
// model served by an llmtest server, and no retries (one failure is one
// model error).
func obsConfig(t testing.TB, c llmCase) string {
	cfg := groupConfig(t, teamGroup)
	const offline = "\n  model: offline\n"
	if !strings.Contains(cfg, offline) {
		t.Fatalf("config/agent.yaml has no %q to replace", offline)
	}
	return strings.Replace(cfg, offline, "\n  model: "+c.model+"\n  max_retries: -1\n  timeout: 20s\n", 1)
}

// delta is what a step changed: after minus before, per role and metric.
type delta struct {
	t             *testing.T
	step          string
	before, after map[string]scrape
}

func (d delta) want(role, name string, want float64, labels ...string) {
	d.t.Helper()
	got := d.after[role].value(name, labels...) - d.before[role].value(name, labels...)
	if got != want {
		d.t.Errorf("%s: %s: %s%v went up by %v, want %v", d.step, role, name, labels, got, want)
	}
}

// TestMetricsCountWhatHappened runs a tool turn, a turn paused for an
// approval and its resume, a turn whose model call fails and a group
// round, and checks after each that every role's /metrics counts exactly
// that; every endpoint passes promtool check metrics.
func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	c := llmCases()[0]
	srv := llmtest.Start(t, llmtest.Config{API: c.api, APIKey: c.key(), Model: c.wireModel})
	m := startMesh(t, meshOpts{config: obsConfig(t, c), env: []string{
		c.keyEnv + "=" + c.key(), c.baseEnv + "=" + srv.BaseURL(), "MESH_METRICS_ADDR=127.0.0.1:0",
	}})
	const agent = "resource-manager"
	roles := []string{"agent", "toolhost", "approver", "group", "bridge", "monitor"}
	eps := m.metricsEndpoints(t, len(roles))
	for _, r := range roles {
		if eps[r] == "" {
			t.Fatalf("no metrics endpoint for %s in %v", r, eps)
		}
	}
	step := func(name string, run func()) delta {
		before := scrapeAll(t, eps)
		run()
		// Counters move before the HTTP answer for everything but the
		// bridge's own request, counted as it returns.
		time.Sleep(300 * time.Millisecond)
		return delta{t: t, step: name, before: before, after: scrapeAll(t, eps)}
	}
	msgRoute := "route=POST /conversations/{id}/messages"
	model := []string{"provider=" + config0(c.name), "model=" + c.wireModel}

	conv := m.newConversation()
	d := step("tool turn", func() { m.send(conv, "list all resources") })
	d.want("agent", "mesh_turns_started_total", 1, "agent="+agent, "kind=turn")
	d.want("agent", "mesh_turns_finished_total", 1, "agent="+agent, "outcome=success")
	d.want("agent", "mesh_turn_duration_seconds", 1, "agent="+agent, "kind=turn")
	d.want("agent", "mesh_model_calls_total", 2, model...)
	d.want("agent", "mesh_model_errors_total", 0, model...)
	d.want("agent", "mesh_tool_calls_total", 1, "server=resources", "tool=resources_list", "outcome=ok")
	d.want("agent", "mesh_tool_call_duration_seconds", 1, "server=resources", "tool=resources_list")
	d.want("toolhost", "mesh_toolhost_calls_total", 1, "server=resources", "tool=resources_list", "outcome=ok")
	d.want("bridge", "mesh_http_requests_total", 1, msgRoute, "code=200")
	d.want("agent", "mesh_events_published_total", 1, "type=RUN_STARTED")
	d.want("agent", "mesh_events_published_total", 1, "type=TOOL_CALL_RESULT")

	var ap map[string]any
	d = step("approval asked", func() { ap = m.addPending(conv, "create a server my-test with value 42") })
	d.want("agent", "mesh_turns_finished_total", 1, "agent="+agent, "outcome=interrupt")
	d.want("approver", "mesh_approvals_requested_total", 1, "policy=human")
	d.want("approver", "mesh_approvals_pending", 1)
	d.want("toolhost", "mesh_toolhost_calls_total", 0, "server=resources", "tool=resources_add")
	d = step("approval decided", func() {
		m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"answer": "yes"})
	})
	d.want("approver", "mesh_approvals_decided_total", 1, "outcome=approved")
	d.want("approver", "mesh_approval_decision_seconds", 1)
	d.want("approver", "mesh_approvals_pending", -1)
	d.want("agent", "mesh_turns_started_total", 1, "agent="+agent, "kind=resume")
	d.want("agent", "mesh_turns_finished_total", 1, "agent="+agent, "outcome=success")
	d.want("toolhost", "mesh_toolhost_calls_total", 1, "server=resources", "tool=resources_add", "outcome=ok")
	d.want("agent", "mesh_tool_calls_total", 1, "server=resources", "tool=resources_add", "outcome=ok")
	d.want("bridge", "mesh_http_requests_total", 1, "route=POST /approvals/{uuid}", "code=200")

	d = step("model error", func() {
		srv.Fail(llmtest.Fault{Status: 500, Times: 1})
		out := m.send(conv, "list all resources")
		if str(out, "result", "error_code") != llm.CodeError {
			t.Errorf("result %v: want error_code %s", obj(out, "result"), llm.CodeError)
		}
	})
	d.want("agent", "mesh_model_errors_total", 1, append(model, "code="+llm.CodeError)...)
	d.want("agent", "mesh_model_calls_total", 1, model...)
	d.want("agent", "mesh_model_retries_total", 0)
	d.want("agent", "mesh_turns_finished_total", 1, "agent="+agent, "outcome=error")
	d.want("agent", "mesh_events_published_total", 1, "type=RUN_ERROR")

	group := m.newGroupChat("team")
	d = step("group round", func() { m.send(group, "list all resources") })
	d.want("group", "mesh_group_rounds_total", 1, "group=team", "reason=max_turns")
	d.want("group", "mesh_group_speaker_selections_total", 3, "group=team", "method=round_robin")
	d.want("group", "mesh_group_speaker_selection_duration_seconds", 3, "group=team")
	for _, member := range []string{"alice", "bob", "carol"} {
		d.want("agent", "mesh_turns_started_total", 1, "agent="+member, "kind=turn")
	}
	d.want("bridge", "mesh_http_requests_total", 1, msgRoute, "code=200")

	final := scrapeAll(t, eps)
	if v := final["monitor"].value("mesh_nodes_down_total"); v != 0 {
		t.Errorf("monitor: %v nodes down, want 0", v)
	}
	if v := final["agent"].value("mesh_breaker_state"); v != 0 {
		t.Errorf("agent: breaker states sum to %v, want all closed", v)
	}
	if final["agent"]["mesh_breaker_state"] == nil {
		t.Errorf("agent: no mesh_breaker_state")
	}
	// The bridge's own /metrics is the bridge process's.
	if s, _ := scrapeURL(t, m.url("/metrics")); s.role() != "bridge" {
		t.Errorf("GET /metrics on the bridge: role %q", s.role())
	}
	promtoolCheck(t, eps)
}

// ciRun says the tests run in CI, where every peer must be installed.
func ciRun() bool { return os.Getenv("CI") == "true" }

// config0 is the provider name of an llm case as config names it.
func config0(name string) string {
	if name == "gemini" {
		return "google"
	}
	return name
}

// promtoolCheck runs `promtool check metrics` on every endpoint's
// exposition (Debian's prometheus package; skipped when missing outside
// CI).
func promtoolCheck(t *testing.T, eps map[string]string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if ciRun() {
			t.Fatal("promtool is not installed (.ci/run installs Debian's prometheus)")
		}
		t.Log("promtool not installed: check metrics skipped")
		return
	}
	roles := make([]string, 0, len(eps))
	for r := range eps {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		_, body := scrapeURL(t, eps[r])
		cmd := exec.Command(path, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on %s's /metrics: %v\n%s", r, err, out)
		}
	}
}

// TestEveryDocumentedMetricExistsOnAFreshMesh scrapes every role of a mesh
// that has run nothing yet: each metric the mesh documents is there, its
// counters at 0, so that an alert on a first failure (an increase() over a
// series) can fire and a dashboard shows 0 rather than no data.
func TestEveryDocumentedMetricExistsOnAFreshMesh(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: groupConfig(t, teamGroup), env: []string{"MESH_METRICS_ADDR=127.0.0.1:0"}})
	roles := []string{"agent", "toolhost", "approver", "group", "bridge", "monitor"}
	eps := m.metricsEndpoints(t, len(roles))
	m.waitServerTools("resources")
	var missing []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		seen := map[string]bool{}
		for _, s := range scrapeAll(t, eps) {
			for name := range s {
				seen[name] = true
			}
		}
		missing = missing[:0]
		for name := range telemetry.Names() {
			if !seen[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("documented metrics missing on a fresh mesh: %v", missing)
	}
}
