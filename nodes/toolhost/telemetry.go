package toolhost

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// observe begins the span of a tool request, continuing the caller's trace
// (traceparent in the request's headers), and returns the function that
// ends it and records the call (mesh_toolhost_calls_total).
func (c *conn) observe(req request, t *tool) (context.Context, func(outcome string, err error)) {
	start := time.Now()
	ctx, span := telemetry.StartKind(telemetry.Extract(c.ctx, req.header), "toolhost "+c.s.cfg.Name+"/"+t.name, trace.SpanKindServer,
		attribute.String("mesh.tool.server", c.s.cfg.Name), attribute.String("mesh.tool.name", t.name))
	return ctx, func(outcome string, err error) {
		telemetry.ToolhostCall(c.s.cfg.Name, t.name, outcome, time.Since(start))
		if outcome != telemetry.ToolOK && err == nil {
			telemetry.Fail(span, outcome)
		}
		telemetry.End(span, err)
	}
}

// observeMCP begins the span of the MCP tools/call itself.
func (c *conn) observeMCP(ctx context.Context, t *tool) (context.Context, trace.Span) {
	return telemetry.StartKind(ctx, "mcp tools/call "+t.name, trace.SpanKindClient,
		attribute.String("mcp.server", c.s.cfg.Name), attribute.String("mcp.tool", t.name))
}
