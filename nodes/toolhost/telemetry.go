package toolhost

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// observe begins the span of a tool request, continuing the caller's trace
// (traceparent in the request's headers), and returns the function that
// ends it and records the call (mesh_toolhost_calls_total).
func (c *conn) observe(req request, t *tool) (context.Context, func(outcome string, err error)) {
	start := time.Now()
	ctx, span := telemetry.StartProcess(c.ctx, req.header, req.subject,
		attribute.String("mesh.tool.server", c.s.cfg.Name), attribute.String("mesh.tool.name", t.name))
	return ctx, func(outcome string, err error) {
		telemetry.ToolhostCall(ctx, c.s.cfg.Name, t.name, outcome, time.Since(start))
		if outcome != telemetry.ToolOK && err == nil {
			telemetry.Fail(span, outcome)
		}
		telemetry.End(span, err)
	}
}

// observeMCP begins the span of the MCP tools/call itself, named and
// described as the OpenTelemetry MCP conventions say, and returns the
// _meta that carries its trace context to the server (traceparent and
// tracestate, as the MCP conventions propagate it) with meta's entries.
func (c *conn) observeMCP(ctx context.Context, t *tool, meta mcp.Meta) (context.Context, trace.Span, mcp.Meta) {
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", t.name),
		attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("mesh.tool.server", c.s.cfg.Name),
	}
	if id := c.session.ID(); id != "" {
		attrs = append(attrs, attribute.String("mcp.session.id", id))
	}
	ctx, span := telemetry.StartKind(ctx, "tools/call "+t.name, trace.SpanKindClient, attrs...)
	h := http.Header{}
	telemetry.HTTPInject(ctx, h)
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := h.Get(k); v != "" {
			meta[k] = v
		}
	}
	return ctx, span, meta
}
