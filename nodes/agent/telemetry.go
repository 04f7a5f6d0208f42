package agent

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// observe begins the metrics and the span of a work item: the span
// continues the trace of whoever queued it (traceparent in the work
// item's headers: the bridge's request, the approval's turn for a resume,
// the run that scheduled a step). It returns the context to run the item
// in, log with trace_id when the span is recorded, and the function that
// ends both.
func (a *Role) observe(ctx context.Context, hdr nats.Header, item mesh.WorkItem, attempt int, log zerolog.Logger) (context.Context, zerolog.Logger, func(error)) {
	kind := string(item.Kind)
	telemetry.WorkDelivered(mesh.RoleAgent, a.name, attempt)
	done := telemetry.TurnStarted(a.name, kind)
	ctx, span := telemetry.StartKind(telemetry.Extract(ctx, hdr), "agent "+kind, trace.SpanKindConsumer,
		attribute.String("mesh.agent", a.name), attribute.String("mesh.work.kind", kind), attribute.Int("mesh.work.attempt", attempt))
	if span.IsRecording() {
		log = log.With().Str("trace_id", span.SpanContext().TraceID().String()).Logger()
	}
	return ctx, log, func(err error) {
		done()
		telemetry.End(span, err)
	}
}

// observeTool begins the span of a tool call, its context written into
// the request's headers so that the tool host continues it, and returns
// the function that records the call's outcome (mesh_tool_calls_total).
func observeTool(ctx context.Context, call mesh.ToolCall, hdr nats.Header) (context.Context, func(*mesh.ToolResult, error)) {
	start := time.Now()
	ctx, span := telemetry.StartKind(ctx, "tool "+call.Server+"/"+call.Tool, trace.SpanKindClient,
		attribute.String("mesh.tool.server", call.Server), attribute.String("mesh.tool.name", call.Tool))
	telemetry.Inject(ctx, hdr)
	return ctx, func(res *mesh.ToolResult, err error) {
		outcome := telemetry.ToolOK
		switch {
		case errors.Is(err, mesh.ErrApprovalRequired), errors.Is(err, mesh.ErrApprovalInvalid):
			outcome = telemetry.ToolRefused
		case errors.Is(err, nats.ErrNoResponders), errors.Is(err, mesh.ErrToolUnavailable), errors.Is(err, mesh.ErrUnavailable):
			outcome = telemetry.ToolUnavailable
		case err != nil || res == nil || res.IsError:
			outcome = telemetry.ToolError
		}
		telemetry.ToolCall(call.Server, call.Tool, outcome, time.Since(start))
		if outcome != telemetry.ToolOK && err == nil {
			telemetry.Fail(span, outcome)
		}
		telemetry.End(span, err)
	}
}
