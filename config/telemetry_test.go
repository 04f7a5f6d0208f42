package config

import "testing"

func TestTelemetryFromTheOpenTelemetryVariables(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Telemetry
	}{
		{name: "nothing set", want: Telemetry{Protocol: "http/protobuf"}},
		{name: "an endpoint traces, metrics stay scraped",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
			want: Telemetry{Endpoint: "http://c:4318", Protocol: "http/protobuf"}},
		{name: "metrics pushed when asked by name",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "prometheus,otlp", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
			want: Telemetry{Endpoint: "http://c:4318", Protocol: "http/protobuf", MetricsEndpoint: "http://c:4318", MetricsProtocol: "grpc"}},
		{name: "each signal its own endpoint",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: Telemetry{Endpoint: "http://t", Protocol: "grpc", MetricsEndpoint: "http://m", MetricsProtocol: "grpc"}},
		{name: "traces off, metrics on",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "otlp"},
			want: Telemetry{MetricsEndpoint: "http://c", MetricsProtocol: "http/protobuf"}},
		{name: "the SDK disabled",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"},
			want: Telemetry{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := telemetryFromEnv(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
