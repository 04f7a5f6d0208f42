package e2e

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// TestAlertRulesFireOnTheMeshSeries runs `promtool test rules` on every
// rule of deploy/prometheus/rules.yml, fed with the series a real mesh
// exposes: each input series is one a scrape of a fresh `mesh up` found
// (its name and labels, with the instance and job labels Prometheus
// adds), given the values the rule's condition makes over time (a node
// recorded down, an approval waiting an hour, a breaker open …), since a
// test cannot wait an hour. Each rule must stay quiet while the values are
// healthy and fire, with the labels and annotations an operator reads,
// once they are not.
func TestAlertRulesFireOnTheMeshSeries(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		needPeer(t, "promtool is not on PATH (Debian's prometheus package)")
	}
	rules, err := filepath.Abs("../../../deploy/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := startMesh(t, meshOpts{config: groupConfig(t, teamGroup), env: []string{"MESH_METRICS_ADDR=127.0.0.1:0"}})
	eps := m.metricsEndpoints(t, 6)
	m.waitServerTools("resources")
	find := func(role, name string, want ...string) promSeries {
		t.Helper()
		var s promSeries
		meshtest.Eventually(t, 20*time.Second, func() bool {
			sc, _ := scrapeURL(t, eps[role])
			f := sc[name]
			if f == nil {
				return false
			}
			for _, mm := range f.Metric {
				if hasLabels(mm, want) {
					s = seriesOf(name, eps[role], mm)
					return true
				}
			}
			return false
		}, "%s exposes no %s%v", role, name, want)
		return s
	}

	oldest := find("approver", "mesh_approval_oldest_pending_seconds")
	breaker := find("agent", "mesh_breaker_state", "breaker=mcp:resources")
	down := find("monitor", "mesh_nodes_down_total", "role=approver", "reason=silent")
	degraded := find("monitor", "mesh_degraded")
	redelivered := find("agent", "mesh_work_redeliveries_total", "role=agent")
	givenUp := find("agent", "mesh_work_max_deliveries_total", "role=agent")
	modelErrors := find("agent", "mesh_model_errors_total", "code=LLM_ERROR")
	modelCalls := find("agent", "mesh_model_calls_total", "provider="+modelErrors.labels["provider"], "model="+modelErrors.labels["model"])
	saveFailures := find("agent", "mesh_session_save_failures_total")
	saveAlerts := find("agent", "mesh_session_save_alerts_total")
	health := find("bridge", "mesh_health_status")
	propagation := find("bridge", "mesh_event_propagation_seconds")
	fast := promSeries{name: propagation.name + "_bucket", labels: propagation.labels}.with("le", "0.01")
	slow := fast.with("le", "0.025")
	slowest := fast.with("le", "+Inf")
	requests := find("bridge", "mesh_http_requests_total", "route=GET /ready", "code=200")
	// A 5xx of the same route: the fresh mesh answered none yet.
	failures := requests.with("code", "503")

	var tests []promTest
	quietThenFires := func(alert string, series []promInput, fireAt string, labels, annotations map[string]string) {
		tests = append(tests, promTest{Interval: "1m", Input: series, Alerts: []promAlertTest{
			{EvalTime: "0m", Alert: alert, Expected: []promAlert{}},
			{EvalTime: fireAt, Alert: alert, Expected: []promAlert{{Labels: labels, Annotations: annotations}}},
		}})
	}
	plus := func(a, b map[string]string) map[string]string {
		out := maps.Clone(a)
		maps.Copy(out, b)
		return out
	}

	// 3500 s, then a minute more each minute: past the hour at 2m, for 5m.
	quietThenFires("MeshApprovalsWaiting", []promInput{{oldest.String(), "3500+60x15"}}, "10m",
		map[string]string{"severity": "warning"},
		map[string]string{"summary": "Approvals have been waiting for a decision for over an hour",
			"description": "The oldest has waited 1h 8m 20s: look at the approvals inbox (/ops/approvals, mesh approve)."})
	quietThenFires("MeshBreakerOpen", []promInput{{breaker.String(), "0 0 2x10"}}, "5m",
		map[string]string{"severity": "warning", "instance": breaker.labels["instance"], "breaker": "mcp:resources"},
		map[string]string{"summary": "Circuit breaker mcp:resources is open on " + breaker.labels["instance"],
			"description": "Calls to this model endpoint, MCP server or sub-agent fail fast until it recovers."})
	quietThenFires("MeshNodeDown", []promInput{{down.String(), "0 0 0 1 1 1"}}, "4m",
		plus(down.labels, map[string]string{"severity": "critical"}),
		map[string]string{"summary": "A approver node went down (silent)",
			"description": "The monitor recorded a node down and applied its recovery strategy; see mesh status."})
	quietThenFires("MeshDegraded", []promInput{{degraded.String(), "0 1 1 1"}}, "2m",
		map[string]string{"severity": "critical"},
		map[string]string{"summary": "The mesh is in degradation mode", "description": "New conversations are refused (503) until fewer nodes are down."})
	// 10 a minute: 0.17 a second, over the 0.05 of the rule, for 10m.
	quietThenFires("MeshWorkRedeliveriesClimbing", []promInput{{redelivered.String(), "0 0+10x30"}}, "25m",
		map[string]string{"severity": "warning", "role": "agent", "name": redelivered.labels["name"]},
		map[string]string{"summary": "Work items of agent " + redelivered.labels["name"] + " are being delivered again",
			"description": "Agents or groups keep failing or dying mid work item; check their logs and mesh_work_max_deliveries_total."})
	quietThenFires("MeshWorkGivenUp", []promInput{{givenUp.String(), "0 0 1 1 1"}}, "3m",
		plus(givenUp.labels, map[string]string{"severity": "warning"}),
		map[string]string{"summary": "Work items of agent " + givenUp.labels["name"] + " were given up after their last delivery"})
	// Half the calls fail: over the 20% of the rule, for 5m.
	quietThenFires("MeshModelErrors", []promInput{{modelErrors.String(), "0 0+10x20"}, {modelCalls.String(), "0 0+20x20"}}, "15m",
		map[string]string{"severity": "warning", "provider": modelErrors.labels["provider"], "model": modelErrors.labels["model"], "code": "LLM_ERROR"},
		map[string]string{"summary": fmt.Sprintf("More than 20%% of calls to %s:%s fail (LLM_ERROR)", modelErrors.labels["provider"], modelErrors.labels["model"])})
	quietThenFires("MeshSessionSaveFailures", []promInput{{saveFailures.String(), "0 0 1 1"}}, "3m",
		plus(saveFailures.labels, map[string]string{"severity": "warning"}),
		map[string]string{"summary": "Conversations failed to save"})
	// Failures every minute, by reason: the critical rule after 5 of them.
	quietThenFires("MeshSessionSavesFailingFor5m", []promInput{{saveFailures.String(), "0 0+1x15"}}, "10m",
		map[string]string{"severity": "critical", "reason": saveFailures.labels["reason"]},
		map[string]string{"summary": "Conversations have failed to save for 5 minutes (" + saveFailures.labels["reason"] + ")",
			"description": "Agents hand their turns back for redelivery meanwhile; check NATS (mesh status, nats stream info) and the agents' logs."})
	// Every live event between 10 and 25 ms: the p95 is over 10 ms.
	quietThenFires("MeshEventPropagationSlow", []promInput{{fast.String(), "0x20"}, {slow.String(), "0 0+10x20"}, {slowest.String(), "0 0+10x20"}}, "15m",
		map[string]string{"severity": "critical", "instance": fast.labels["instance"]},
		map[string]string{"summary": "Live events take more than 10 ms (p95) to reach the followers of " + fast.labels["instance"],
			"description": "mesh_event_latency_violations_total counts each late event; the bridge logs a WARN every 10 s while they last. Look at NATS and the bridge's CPU."})
	// Unhealthy from the start: pending for 10m, then firing.
	quietThenFires("MeshAvailabilityBelowTarget", []promInput{{health.String(), "2x40"}}, "15m",
		map[string]string{"severity": "critical"},
		map[string]string{"summary": "The mesh was available 0% of the last 30 days, under its 95 % target",
			"description": "Time counted unavailable is time /health said unhealthy (NATS out of reach, more than 3 nodes failed, or degradation mode)."})
	// The recorded series: healthy or degraded counts as available; every
	// request failing is a ratio of 1.
	tests = append(tests, promTest{Interval: "1m",
		Input: []promInput{{health.String(), "1x9"}, {requests.String(), "0+100x10"}, {failures.String(), "0+100x10"}},
		Exprs: []promExprTest{
			{Expr: "mesh:availability:ratio30d", EvalTime: "9m", Samples: []promSample{{Labels: "mesh:availability:ratio30d", Value: 1}}},
			{Expr: "mesh:http_error_ratio:rate5m", EvalTime: "9m", Samples: []promSample{{Labels: "mesh:http_error_ratio:rate5m", Value: 0.5}}},
		}})
	quietThenFires("MeshSessionSaveAlerts", []promInput{{saveAlerts.String(), "0 0 1 1"}}, "3m",
		plus(saveAlerts.labels, map[string]string{"severity": "critical"}),
		map[string]string{"summary": "A run's outcome failed to save three times in a row (CUSTOM session_save_failed on mesh.evt._mesh.CUSTOM names the conversation)"})
	// One request in six fails: over the 5% of the rule, for 5m.
	quietThenFires("MeshHTTPErrors", []promInput{{requests.String(), "0 0+100x20"}, {failures.String(), "0 0+20x20"}}, "15m",
		map[string]string{"severity": "warning"},
		map[string]string{"summary": "More than 5% of the bridge's requests fail with 5xx"})

	// Every rule of the file has its test.
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	data, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, pt := range tests {
		for _, a := range pt.Alerts {
			tested[a.Alert] = true
		}
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !tested[r.Alert] {
				t.Errorf("rule %s has no promtool test here", r.Alert)
			}
		}
	}

	out, err := yaml.Marshal(map[string]any{"rule_files": []string{rules}, "evaluation_interval": "1m", "tests": tests})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules_test.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := exec.Command(promtool, "test", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s\n--- the tests:\n%s", err, res, out)
	}
}

// promSeries is one series a scrape found, with the labels Prometheus
// gives it when it scrapes the endpoint (instance, job).
type promSeries struct {
	name   string
	labels map[string]string
}

func seriesOf(name, url string, m *dto.Metric) promSeries {
	instance := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics")
	labels := map[string]string{"instance": instance, "job": "mesh"}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return promSeries{name: name, labels: labels}
}

// with is the series with label k set to v.
func (s promSeries) with(k, v string) promSeries {
	s.labels = maps.Clone(s.labels)
	s.labels[k] = v
	return s
}

// String is the series in PromQL: name{k="v",…}.
func (s promSeries) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.labels)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, s.labels[k]))
	}
	return s.name + "{" + strings.Join(parts, ",") + "}"
}

// The shapes of a promtool rule test file.
type promTest struct {
	Interval string          `yaml:"interval"`
	Input    []promInput     `yaml:"input_series"`
	Alerts   []promAlertTest `yaml:"alert_rule_test,omitempty"`
	Exprs    []promExprTest  `yaml:"promql_expr_test,omitempty"`
}

type promExprTest struct {
	Expr     string       `yaml:"expr"`
	EvalTime string       `yaml:"eval_time"`
	Samples  []promSample `yaml:"exp_samples"`
}

type promSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

type promInput struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type promAlertTest struct {
	EvalTime string      `yaml:"eval_time"`
	Alert    string      `yaml:"alertname"`
	Expected []promAlert `yaml:"exp_alerts"`
}

type promAlert struct {
	Labels      map[string]string `yaml:"exp_labels"`
	Annotations map[string]string `yaml:"exp_annotations"`
}
