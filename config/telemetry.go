package config

import (
	"slices"
	"strings"
)

// Metrics configures the Prometheus endpoint of a role process.
type Metrics struct {
	// Listen is the address a role serves GET /metrics on (MESH_METRICS_ADDR,
	// or --metrics-addr): empty means none, port 0 a free port (reported in
	// the node's heartbeat, so in /health and `mesh status`). Under `mesh
	// up` it is the first of consecutive ports: the monitor's process takes
	// it and each child the next one, in start order; the bridge also
	// serves /metrics on its HTTP address.
	Listen string `yaml:"listen"`
}

// Telemetry is what the OpenTelemetry environment says about traces and
// metrics. The SDK reads the rest itself (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and _ARG,
// OTEL_METRIC_EXPORT_INTERVAL, headers, timeouts).
type Telemetry struct {
	// Endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT: empty means tracing is off.
	Endpoint string
	// Protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" or "http/protobuf" (the default).
	Protocol string
	// MetricsEndpoint is OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT, when OTEL_METRICS_EXPORTER names otlp:
	// empty means metrics are only scraped (Prometheus).
	MetricsEndpoint string
	// MetricsProtocol is OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL.
	MetricsProtocol string
	// Sampler is OTEL_TRACES_SAMPLER: empty means the mesh's default,
	// parent-based with 10 % of root traces sampled.
	Sampler string
}

// Tracing reports whether traces are exported.
func (t Telemetry) Tracing() bool { return t.Endpoint != "" }

// PushingMetrics reports whether metrics are exported over OTLP.
func (t Telemetry) PushingMetrics() bool { return t.MetricsEndpoint != "" }

func telemetryFromEnv(getenv func(string) string) Telemetry {
	var t Telemetry
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return t
	}
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := getenv(k); v != "" {
				return v
			}
		}
		return "http/protobuf"
	}
	if getenv("OTEL_TRACES_EXPORTER") != "none" {
		t.Endpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		if t.Endpoint == "" {
			t.Endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
		t.Protocol = first("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
		t.Sampler = getenv("OTEL_TRACES_SAMPLER")
	}
	// Metrics are scraped by default (every role serves /metrics); pushing
	// them too is asked for by name, so that pointing traces at a collector
	// does not double every series.
	if slices.Contains(strings.Split(getenv("OTEL_METRICS_EXPORTER"), ","), "otlp") {
		t.MetricsEndpoint = getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
		if t.MetricsEndpoint == "" {
			t.MetricsEndpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
		t.MetricsProtocol = first("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	return t
}
