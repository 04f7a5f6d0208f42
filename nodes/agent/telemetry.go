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
	// The delivery is a messaging "process" span; the agent's work inside
	// it is the GenAI conventions' invoke_agent span, parent of the model
	// and tool calls.
	subject, _ := a.ns.Work(a.workRole, a.name, item.Session)
	ctx, process := telemetry.StartProcess(ctx, hdr, subject,
		attribute.String("mesh.work.kind", kind), attribute.Int("mesh.work.attempt", attempt))
	ctx, span := telemetry.StartKind(ctx, "invoke_agent "+a.name, trace.SpanKindInternal,
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", a.name),
		attribute.String("gen_ai.conversation.id", item.Session), attribute.String("mesh.work.kind", kind))
	if span.IsRecording() {
		log = log.With().Str("trace_id", span.SpanContext().TraceID().String()).Logger()
	}
	return ctx, log, func(err error) {
		done(ctx)
		telemetry.End(span, err)
		telemetry.End(process, err)
	}
}

// observeTool begins the span of a tool call, its context written into
// the request's headers so that the tool host continues it, and returns
// the function that records the call's outcome (mesh_tool_calls_total).
func observeTool(ctx context.Context, ns mesh.Namespace, call mesh.ToolCall, hdr nats.Header) (context.Context, func(*mesh.ToolResult, error)) {
	start := time.Now()
	ctx, span := telemetry.StartKind(ctx, "execute_tool "+call.Tool, trace.SpanKindInternal,
		attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", call.Tool),
		attribute.String("gen_ai.tool.call.id", call.ID), attribute.String("gen_ai.tool.type", "extension"),
		attribute.String("mesh.tool.server", call.Server))
	// The request to the tool host is a message of its own: the host's
	// span continues this one.
	subject, _ := ns.Tool(call.Server, call.Tool)
	ctx, send := telemetry.StartSend(ctx, subject, "request")
	telemetry.Inject(ctx, hdr)
	return ctx, func(res *mesh.ToolResult, err error) {
		telemetry.End(send, err)
		outcome := telemetry.ToolOK
		switch {
		case errors.Is(err, mesh.ErrApprovalRequired), errors.Is(err, mesh.ErrApprovalInvalid):
			outcome = telemetry.ToolRefused
		case errors.Is(err, nats.ErrNoResponders), errors.Is(err, mesh.ErrToolUnavailable), errors.Is(err, mesh.ErrUnavailable):
			outcome = telemetry.ToolUnavailable
		case err != nil || res == nil || res.IsError:
			outcome = telemetry.ToolError
		}
		telemetry.ToolCall(ctx, call.Server, call.Tool, outcome, time.Since(start))
		if outcome != telemetry.ToolOK && err == nil {
			telemetry.Fail(span, outcome)
		}
		telemetry.End(span, err)
	}
}
