package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// otlpMetrics is an OpenTelemetry collector's metrics service over HTTP
// (POST /v1/metrics, protobuf, the official OTLP types): the names of the
// metrics each service pushed, with the sum of their data points (a
// histogram counts its observations). Traces are taken and dropped.
type otlpMetrics struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]map[string]float64 // service → metric → value
}

func startOTLPMetrics(t testing.TB) *otlpMetrics {
	r := &otlpMetrics{got: map[string]map[string]float64{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		data, err := otlpBody(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var out proto.Message
		switch req.URL.Path {
		case "/v1/traces":
			out = &coltrace.ExportTraceServiceResponse{}
		case "/v1/metrics":
			var ex colmetrics.ExportMetricsServiceRequest
			if err := proto.Unmarshal(data, &ex); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.add(&ex)
			out = &colmetrics.ExportMetricsServiceResponse{}
		default:
			http.NotFound(w, req)
			return
		}
		b, _ := proto.Marshal(out)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpMetrics) add(ex *colmetrics.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rm := range ex.ResourceMetrics {
		service := ""
		for _, a := range rm.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		if r.got[service] == nil {
			r.got[service] = map[string]float64{}
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				v := 0.0
				for _, p := range m.GetSum().GetDataPoints() {
					v += p.GetAsDouble() + float64(p.GetAsInt())
				}
				for _, p := range m.GetGauge().GetDataPoints() {
					v += p.GetAsDouble() + float64(p.GetAsInt())
				}
				for _, p := range m.GetHistogram().GetDataPoints() {
					v += float64(p.GetCount())
				}
				r.got[service][m.Name] = v // cumulative: the last push holds
			}
		}
	}
}

func (r *otlpMetrics) value(service, name string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.got[service][name]
	return v, ok
}

// A mesh told so by the standard OTEL_* variables pushes its metrics over
// OTLP too (every role, the same series /metrics serves), and the
// OpenMetrics exposition of /metrics links the latency histograms to the
// traces that show them: a traced turn's trace id is the exemplar of the
// bridge's request duration and of the agent's turn and model durations.
func TestMetricsGoOutOverOTLPWithExemplarsOnScrape(t *testing.T) {
	t.Parallel()
	rcv := startOTLPMetrics(t)
	m := startMesh(t, meshOpts{env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_METRICS_EXPORTER=otlp", "OTEL_METRIC_EXPORT_INTERVAL=300", "OTEL_BSP_SCHEDULE_DELAY=100",
		"MESH_METRICS_ADDR=127.0.0.1:0",
	}})
	const trace = "5b8efff798038103d269b633813fc60c"
	m.firstTurn("list all resources", "traceparent", "00-"+trace+"-eee19b7ec3c1b174-01")

	for _, want := range []struct{ service, name string }{
		{"mesh-bridge", "mesh_http_requests_total"},
		{"mesh-agent", "mesh_turn_duration_seconds"},
		{"mesh-agent", "mesh_model_calls_total"},
		{"mesh-toolhost", "mesh_toolhost_calls_total"},
		{"mesh-approver", "mesh_build_info"},
		{"mesh-monitor", "mesh_build_info"},
	} {
		meshtest.Eventually(t, 20*time.Second, func() bool {
			v, ok := rcv.value(want.service, want.name)
			return ok && v > 0
		}, "%s pushed no %s over OTLP", want.service, want.name)
	}

	eps := m.metricsEndpoints(t, 5)
	exemplar := regexp.MustCompile(`# \{[^}]*trace_id="` + trace + `"`)
	for role, name := range map[string]string{
		"bridge": "mesh_http_request_duration_seconds_bucket",
		"agent":  "mesh_turn_duration_seconds_bucket",
	} {
		req, _ := http.NewRequest("GET", eps[role], nil)
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
			t.Errorf("%s: Content-Type %q, want OpenMetrics", role, ct)
		}
		found := false
		for line := range strings.Lines(string(body)) {
			found = found || strings.HasPrefix(line, name) && exemplar.MatchString(line)
		}
		if !found {
			t.Errorf("%s: no %s line with the exemplar of trace %s", role, name, trace)
		}
	}
}
