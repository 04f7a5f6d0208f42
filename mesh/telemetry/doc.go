// Package telemetry holds what every role reports to operators: the
// Prometheus collectors of the mesh (metrics.go, one registry per process,
// served by [Handler] and [Serve]), the small hooks roles call at the
// places where things happen (hooks.go), and OpenTelemetry tracing
// (trace.go): the tracer provider built from the standard OTEL_*
// environment, spans, and the W3C trace context carried in NATS headers
// and HTTP requests.
//
// # Metrics
//
// Every metric is named mesh_<thing>_<unit> ("_total" for counters,
// "_seconds" for durations), with label values from bounded sets: agent,
// group, MCP server and tool names come from the configuration or the
// tool catalog, outcomes and codes from the mesh's constants; no
// conversation, run, call or user id is ever a label. docs/observability.md's metrics
// table lists them all, and a test checks that the table, the Grafana
// dashboard and the Prometheus rules under deploy/ name only metrics this
// package defines.
//
// # Traces
//
// [Setup] installs the tracer provider when OTEL_EXPORTER_OTLP_ENDPOINT
// (or the _TRACES_ variant) is set, and nothing otherwise: [Start] then
// returns non-recording spans at the cost of a context lookup. [Inject]
// and [Extract] carry the context over NATS headers (traceparent,
// tracestate), [HTTPInject] and [HTTPExtract] over HTTP.
//
// Spans follow the OpenTelemetry semantic conventions: [StartSend] and
// [StartProcess] name NATS operations as the messaging conventions do, and
// the callers use the GenAI, MCP and HTTP ones.
//
// [Handler] answers OpenMetrics to a scraper that asks for it, with the
// trace of a sampled span as the exemplar of the latency histograms.
// [SetupMetrics] pushes the same registry over OTLP when
// OTEL_METRICS_EXPORTER names otlp.
//
// The package starts no goroutine of its own but [Serve]'s listener, which
// stops with its context, and the exporters' batcher and periodic reader,
// which the shutdown functions returned by [Setup] and [SetupMetrics]
// flush and stop.
package telemetry
