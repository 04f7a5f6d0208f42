package group

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// observe begins the span of a group work item, continuing the trace of
// whoever queued it, counts a redelivery, and returns the context, log
// (with trace_id when the span is recorded) and the function that ends
// the span.
func observe(ctx context.Context, subject string, hdr nats.Header, group string, item mesh.WorkItem, attempt int, log zerolog.Logger) (context.Context, zerolog.Logger, func(error)) {
	telemetry.WorkDelivered(mesh.RoleGroup, group, attempt)
	ctx, span := telemetry.StartProcess(ctx, hdr, subject,
		attribute.String("mesh.group", group), attribute.String("mesh.work.kind", string(item.Kind)), attribute.Int("mesh.work.attempt", attempt))
	if span.IsRecording() {
		log = log.With().Str("trace_id", span.SpanContext().TraceID().String()).Logger()
	}
	var once sync.Once
	return ctx, log, func(err error) { once.Do(func() { telemetry.End(span, err) }) }
}
