package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names the mesh's instrumentation scope.
const TracerName = "github.com/agentmesh/agentmesh"

// propagator is W3C trace context and baggage, set whether tracing is on or
// not, so that a process without an exporter still passes a caller's
// context on.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

func init() { otel.SetTextMapPropagator(propagator) }

// TraceConfig configures [Setup].
type TraceConfig struct {
	// Endpoint and Protocol are config.Telemetry's: an empty Endpoint
	// leaves tracing off. Protocol "grpc" exports over gRPC, anything else
	// over HTTP (protobuf). The exporters read the endpoint, headers and
	// timeouts from the OTEL_EXPORTER_OTLP_* variables themselves.
	Endpoint, Protocol string
	// Service is the default service.name (OTEL_SERVICE_NAME wins), e.g.
	// "mesh-agent"; Node the service.instance.id.
	Service, Node string
	// SamplerSet says OTEL_TRACES_SAMPLER is set: the SDK then samples as
	// it says. Otherwise [DefaultSampleRatio] of the traces that start in
	// the mesh are sampled, and a caller's sampled flag is followed.
	SamplerSet bool
}

// DefaultSampleRatio is the share of root traces sampled when
// OTEL_TRACES_SAMPLER is unset: every turn traced costs a dozen spans, and
// one in ten shows the latencies as well at a tenth of the export.
const DefaultSampleRatio = 0.1

// sampler is the sampler [Setup] installs, or nil to leave it to the SDK
// (which reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG).
func sampler(samplerSet bool) sdktrace.Sampler {
	if samplerSet {
		return nil
	}
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(DefaultSampleRatio))
}

// Setup installs the global tracer provider: spans batched to the OTLP
// exporter, sampled as OTEL_TRACES_SAMPLER says (by default parent-based,
// [DefaultSampleRatio] of root traces). It returns the function that flushes and stops it; with no
// endpoint it installs nothing and returns a no-op.
func Setup(ctx context.Context, cfg TraceConfig) (shutdown func(context.Context) error, err error) {
	if cfg.Endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	var exp *otlptrace.Exporter
	if cfg.Protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, err
	}
	res, err := processResource(ctx, cfg.Service, cfg.Node)
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if s := sampler(cfg.SamplerSet); s != nil {
		opts = append(opts, sdktrace.WithSampler(s))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// processResource is the OpenTelemetry resource of this process, for its
// traces and its metrics alike: service.name (service, unless
// OTEL_SERVICE_NAME says otherwise: later options win), service.instance.id
// (node), OTEL_RESOURCE_ATTRIBUTES and the SDK's own. A partial resource
// with an error is kept: a malformed variable loses only its attribute.
func processResource(ctx context.Context, service, node string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.instance.id", node)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, err
	}
	return res, nil
}

// tracer is the mesh's tracer, looked up once: otel.Tracer takes a lock and
// a map lookup on every call. Got before [Setup] installs the provider, it
// forwards to that provider once installed (the global one delegates).
var tracer = otel.Tracer(TracerName)

// Start starts a span named name as a child of ctx's span (or of the
// remote context [Extract] put there).
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// StartKind is [Start] with a span kind (server for a request taken,
// client for one sent, consumer for a work item).
func StartKind(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Fail marks span failed with a code, for failures that are not Go errors
// (a model error code, a tool's error result).
func Fail(span trace.Span, code string) { span.SetStatus(codes.Error, code) }

// TraceID is the trace id of ctx's span in hex, "" when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// Traceparent is the W3C traceparent of ctx's span, "" when there is none:
// what a record that outlives the request keeps to continue its trace.
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// FromTraceparent returns ctx with the remote span context tp names.
func FromTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// natsCarrier reads and writes trace context in NATS headers under their
// W3C names (traceparent, tracestate, baggage), exactly as written.
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return http.Header(c).Get(key) // a peer that canonicalised the name
}

func (c natsCarrier) Set(key, value string) { c[key] = []string{value} }

func (c natsCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// Inject writes ctx's trace context into h (which must not be nil).
func Inject(ctx context.Context, h nats.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, natsCarrier(h))
}

// Extract returns ctx with the remote trace context of h, if any.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return propagator.Extract(ctx, natsCarrier(h))
}

// HTTPInject writes ctx's trace context into an outgoing request's header.
func HTTPInject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// HTTPExtract returns ctx with a caller's trace context (traceparent).
func HTTPExtract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Messaging operation types of the OpenTelemetry messaging conventions.
const (
	MessagingSend    = "send"
	MessagingProcess = "process"
)

// StartSend starts the PRODUCER span of a message sent to subject, named
// as the messaging conventions say ("send <destination>"), for the caller
// to write into the message's headers ([Inject]). op is the NATS operation
// ("publish", "request").
func StartSend(ctx context.Context, subject, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return startMessaging(ctx, MessagingSend, op, subject, trace.SpanKindProducer, attrs)
}

// StartProcess starts the CONSUMER span of processing a message received
// on subject, a child of the context its headers carry.
func StartProcess(ctx context.Context, hdr nats.Header, subject string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return startMessaging(Extract(ctx, hdr), MessagingProcess, MessagingProcess, subject, trace.SpanKindConsumer, attrs)
}

func startMessaging(ctx context.Context, typ, op, subject string, kind trace.SpanKind, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	dest := DestinationTemplate(subject)
	all := append([]attribute.KeyValue{
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.type", typ),
		attribute.String("messaging.operation.name", op),
		attribute.String("messaging.destination.name", subject),
	}, attrs...)
	if dest != subject {
		all = append(all, attribute.String("messaging.destination.template", dest))
	}
	return tracer.Start(ctx, typ+" "+dest, trace.WithSpanKind(kind), trace.WithAttributes(all...))
}

// DestinationTemplate is subject with its ids replaced by placeholders, low
// in cardinality as a span name must be: a work queue's last token is a
// conversation id, an approval's second to last an approval id. Names of
// roles, agents, servers and tools are few, and stay.
func DestinationTemplate(subject string) string {
	tokens := strings.Split(subject, ".")
	for i, t := range tokens {
		switch {
		case t == "work" && len(tokens) == i+4:
			tokens[i+3] = "{conversation}"
			return strings.Join(tokens, ".")
		case t == "approval" && len(tokens) == i+3:
			tokens[i+1] = "{approval}"
			return strings.Join(tokens, ".")
		}
	}
	return subject
}

// GenAIProvider is the gen_ai.provider.name of one of the mesh's model
// providers, as the GenAI conventions name them.
func GenAIProvider(provider string) string {
	switch provider {
	case "gemini", "google":
		return "gcp.gemini"
	case "vertex":
		return "gcp.vertex_ai"
	case "bedrock":
		return "aws.bedrock"
	}
	return provider
}

// OnError sends the OpenTelemetry SDK's own errors (an export that failed)
// to f: the role's log, as JSON, rather than Go's log, whose plain lines a
// reader of JSON logs cannot parse.
func OnError(f func(error)) { otel.SetErrorHandler(otel.ErrorHandlerFunc(f)) }
