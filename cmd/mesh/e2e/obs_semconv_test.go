package e2e

import (
	"regexp"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// messagingTypes are the messaging conventions' operation types.
var messagingTypes = map[string]tracepb.Span_SpanKind{
	"create": tracepb.Span_SPAN_KIND_PRODUCER, "send": tracepb.Span_SPAN_KIND_PRODUCER,
	"receive": tracepb.Span_SPAN_KIND_CONSUMER, "process": tracepb.Span_SPAN_KIND_CONSUMER, "settle": tracepb.Span_SPAN_KIND_CONSUMER,
}

// anID matches a token that is an id (a UUID), which a span name must not
// hold: span names are low in cardinality.
var anID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// checkConventions checks spans against the OpenTelemetry semantic
// conventions the mesh follows: messaging (NATS), GenAI (model calls,
// tools, agents), MCP and HTTP. A span of another kind than INTERNAL must
// be one of those.
func checkConventions(t *testing.T, spans []span) {
	t.Helper()
	for _, s := range spans {
		a := s.attrs
		bad := func(format string, args ...any) {
			t.Helper()
			t.Errorf("span %s %q (%v): "+format, append([]any{s.service, s.name, s.kind}, args...)...)
		}
		if anID.MatchString(s.name) {
			bad("its name holds an id")
		}
		if _, old := a["gen_ai.system"]; old {
			bad("gen_ai.system is gone from the conventions: gen_ai.provider.name")
		}
		switch {
		case a["messaging.system"] != "":
			typ := a["messaging.operation.type"]
			kind, ok := messagingTypes[typ]
			dest := a["messaging.destination.name"]
			name := a["messaging.destination.template"]
			if name == "" {
				name = dest
			}
			switch {
			case a["messaging.system"] != "nats":
				bad("messaging.system %q, want nats", a["messaging.system"])
			case !ok:
				bad("messaging.operation.type %q", typ)
			case s.kind != kind:
				bad("kind, want %v for %s", kind, typ)
			case dest == "" || a["messaging.operation.name"] == "":
				bad("no messaging.destination.name or messaging.operation.name")
			case s.name != typ+" "+name:
				bad("want the name %q", typ+" "+name)
			case anID.MatchString(dest) && !strings.Contains(name, "{"):
				bad("destination %s holds an id, and no messaging.destination.template", dest)
			}
		case a["mcp.method.name"] != "":
			if want := a["mcp.method.name"] + " " + a["gen_ai.tool.name"]; s.name != want || s.kind != tracepb.Span_SPAN_KIND_CLIENT {
				bad("want a CLIENT span named %q", want)
			}
		case a["gen_ai.operation.name"] != "":
			op := a["gen_ai.operation.name"]
			want := map[string]string{"chat": a["gen_ai.request.model"], "execute_tool": a["gen_ai.tool.name"], "invoke_agent": a["gen_ai.agent.name"]}[op]
			switch {
			case want == "":
				bad("gen_ai.operation.name %q without its subject", op)
			case s.name != op+" "+want:
				bad("want the name %q", op+" "+want)
			case op == "chat" && (a["gen_ai.provider.name"] == "" || s.kind != tracepb.Span_SPAN_KIND_CLIENT):
				bad("a chat span is a CLIENT span with gen_ai.provider.name")
			case op != "chat" && s.kind != tracepb.Span_SPAN_KIND_INTERNAL:
				bad("want an INTERNAL span")
			}
		case a["http.request.method"] != "":
			route := a["http.route"]
			want := a["http.request.method"]
			if route != "" {
				want += " " + route
			}
			switch {
			case s.kind != tracepb.Span_SPAN_KIND_SERVER:
				bad("want a SERVER span")
			case route != "" && !strings.HasPrefix(route, "/"):
				bad("http.route %q is not a path template", route)
			case s.name != want:
				bad("want the name %q", want)
			case a["http.response.status_code"] == "" || a["url.path"] == "":
				bad("no http.response.status_code or url.path")
			}
		case a["rpc.system"] != "":
		case s.kind != tracepb.Span_SPAN_KIND_INTERNAL:
			bad("a %v span that follows none of the conventions", s.kind)
		}
	}
}
