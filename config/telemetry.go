package config

import "strings"

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

// Telemetry is what the OpenTelemetry environment says about traces. The
// SDK reads the rest itself (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER and _ARG, headers, timeouts).
type Telemetry struct {
	// Endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT: empty means tracing is off.
	Endpoint string
	// Protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" or "http/protobuf" (the default).
	Protocol string
}

// Tracing reports whether traces are exported.
func (t Telemetry) Tracing() bool { return t.Endpoint != "" }

func telemetryFromEnv(getenv func(string) string) Telemetry {
	var t Telemetry
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return t
	}
	t.Endpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if t.Endpoint == "" {
		t.Endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	t.Protocol = getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if t.Protocol == "" {
		t.Protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if t.Protocol == "" {
		t.Protocol = "http/protobuf"
	}
	return t
}
