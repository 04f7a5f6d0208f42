package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// span is one span an OTLP receiver got, with the service that sent it
// (and its service.namespace, which tells two meshes apart).
type span struct {
	service, ns, name string
	trace, id, parent string
	start, end        time.Time
	kind              tracepb.Span_SpanKind
	// attrs are the span's attributes, each value as text.
	attrs map[string]string
}

// otlpReceiver is an OpenTelemetry collector's trace service over HTTP
// (POST /v1/traces, protobuf), built on the official OTLP types.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []span
}

func startOTLP(t testing.TB) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		data, err := otlpBody(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ex coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&ex)
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// otlpBody is the body of an OTLP export over HTTP, gunzipped when the
// exporter compressed it.
func otlpBody(req *http.Request) ([]byte, error) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	return io.ReadAll(body)
}

func (r *otlpReceiver) add(ex *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range ex.ResourceSpans {
		service, ns := "", ""
		for _, a := range rs.GetResource().GetAttributes() {
			switch a.Key {
			case "service.name":
				service = a.GetValue().GetStringValue()
			case "service.namespace":
				ns = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := spanOf(service, s)
				sp.ns = ns
				r.spans = append(r.spans, sp)
			}
		}
	}
}

func spanOf(service string, s *tracepb.Span) span {
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		v := a.GetValue()
		switch {
		case v.GetArrayValue() != nil:
			var parts []string
			for _, e := range v.GetArrayValue().Values {
				parts = append(parts, e.GetStringValue())
			}
			attrs[a.Key] = strings.Join(parts, ",")
		case v.GetStringValue() != "":
			attrs[a.Key] = v.GetStringValue()
		default:
			attrs[a.Key] = strconv.FormatInt(v.GetIntValue(), 10)
		}
	}
	return span{service: service, name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId),
		start: time.Unix(0, int64(s.StartTimeUnixNano)), end: time.Unix(0, int64(s.EndTimeUnixNano)), kind: s.Kind, attrs: attrs}
}

// of returns the spans of trace id.
func (r *otlpReceiver) of(trace string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, s := range r.spans {
		if s.trace == trace {
			out = append(out, s)
		}
	}
	return out
}

// find is the first span of spans whose service and name start so.
func find(spans []span, service, name string) *span {
	for i, s := range spans {
		if s.service == service && strings.HasPrefix(s.name, name) {
			return &spans[i]
		}
	}
	return nil
}

// findWith is the first span of spans whose service and name start so
// and whose attribute key is value.
func findWith(spans []span, service, name, key, value string) *span {
	for i, s := range spans {
		if s.service == service && strings.HasPrefix(s.name, name) && s.attrs[key] == value {
			return &spans[i]
		}
	}
	return nil
}

// traceEnv points a mesh's processes at r, flushing spans quickly.
func (r *otlpReceiver) traceEnv() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_TRACES_SAMPLER=parentbased_always_on"} // every trace, not the default tenth
}

// TestTraceOfATurnAcrossAnApprovalAndAnAgentRestart: a caller's
// traceparent is continued by the bridge; the turn's spans on the agent
// (the work item, the model and tool calls) and the tool host (the request
// and the MCP call) are one trace with correct parents; the run pauses for
// an approval, the agent is killed and restarted, the approval is decided,
// and the resumed run and its tool call are still in that trace, under the
// approver's resume span.
func TestTraceOfATurnAcrossAnApprovalAndAnAgentRestart(t *testing.T) {
	t.Parallel()
	rcv := startOTLP(t)
	m := startMesh(t, meshOpts{env: rcv.traceEnv()})
	const trace, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

	conv, _ := m.firstTurn("list all resources", "traceparent", "00-"+trace+"-"+caller+"-01")
	var spans []span
	meshtest.Eventually(t, 20*time.Second, func() bool {
		spans = rcv.of(trace)
		return find(spans, "mesh-toolhost", "tools/call") != nil && find(spans, "mesh-agent", "invoke_agent") != nil && closed(spans, caller)
	}, "the turn's spans did not arrive")
	checkParents(t, spans, caller)
	checkConventions(t, spans)
	req := find(spans, "mesh-bridge", "POST /conversations/{id}/messages")
	enqueue := find(spans, "mesh-bridge", "send mesh.work.agent.resource-manager.{conversation}")
	delivery := findWith(spans, "mesh-agent", "process mesh.work.agent.resource-manager.{conversation}", "mesh.work.kind", "turn")
	turn := find(spans, "mesh-agent", "invoke_agent resource-manager")
	tool := find(spans, "mesh-agent", "execute_tool resources_list")
	request := find(spans, "mesh-agent", "send mesh.tool.resources.resources_list")
	host := find(spans, "mesh-toolhost", "process mesh.tool.resources.resources_list")
	mcp := find(spans, "mesh-toolhost", "tools/call resources_list")
	model := find(spans, "mesh-agent", "chat ")
	for name, s := range map[string]*span{"http": req, "enqueue": enqueue, "delivery": delivery, "turn": turn, "tool": tool, "request": request, "toolhost": host, "mcp": mcp, "model": model} {
		if s == nil {
			t.Fatalf("no %s span in %v", name, spans)
		}
	}
	for _, link := range []struct {
		child, parent string
		got, want     string
	}{
		{"http", "the caller", req.parent, caller},
		{"enqueue", "http", enqueue.parent, req.id},
		{"delivery", "enqueue", delivery.parent, enqueue.id},
		{"turn", "delivery", turn.parent, delivery.id},
		{"tool", "turn", tool.parent, turn.id},
		{"request", "tool", request.parent, tool.id},
		{"toolhost", "request", host.parent, request.id},
		{"mcp", "toolhost", mcp.parent, host.id},
		{"model", "turn", model.parent, turn.id},
	} {
		if link.got != link.want {
			t.Errorf("the %s span's parent is %s, want %s's %s", link.child, link.got, link.parent, link.want)
		}
	}
	if !strings.Contains(m.logs(), `"trace_id":"`+trace+`"`) {
		t.Errorf("no log line of the turn carries trace_id %s", trace)
	}

	// A new trace: the paused run, a restart of the agent, the resume.
	const trace2, caller2 = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ap := m.addPendingWith(conv, "create a server traced with value 7", "traceparent", "00-"+trace2+"-"+caller2+"-01")
	// The paused run's spans leave the agent before it is killed (a
	// batch every 100 ms here); what a crash loses is not the point.
	meshtest.Eventually(t, 20*time.Second, func() bool {
		return findWith(rcv.of(trace2), "mesh-agent", "process mesh.work.agent.", "mesh.work.kind", "turn") != nil
	}, "the paused run's spans did not arrive")
	pid := m.childPID("agent")
	if err := killPID(pid); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 30*time.Second, func() bool { return m.childPID("agent") != pid }, "agent not restarted")
	m.waitReady()
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"answer": "yes"})
	meshtest.Eventually(t, 20*time.Second, func() bool {
		spans = rcv.of(trace2)
		return find(spans, "mesh-toolhost", "tools/call resources_add") != nil && findWith(spans, "mesh-agent", "process mesh.work.agent.", "mesh.work.kind", "resume") != nil && closed(spans, caller2)
	}, "the resumed run's spans are not in the paused run's trace")
	checkParents(t, spans, caller2)
	checkConventions(t, spans)
	resume := find(spans, "mesh-approver", "approval resume")
	enqueued := find(spans, "mesh-approver", "send mesh.work.agent.")
	resumed := findWith(spans, "mesh-agent", "process mesh.work.agent.", "mesh.work.kind", "resume")
	paused := findWith(spans, "mesh-agent", "invoke_agent", "mesh.work.kind", "turn")
	if resume == nil || enqueued == nil || resumed == nil || paused == nil {
		t.Fatalf("spans %v: want the paused turn, the approver's resume and the resumed run", spans)
	}
	if resume.parent != paused.id || enqueued.parent != resume.id || resumed.parent != enqueued.id {
		t.Errorf("resume span's parent %s, want the paused turn %s; its enqueue's %s; the resumed run's parent %s, want the enqueue %s", resume.parent, paused.id, enqueued.parent, resumed.parent, enqueued.id)
	}
	services := map[string]bool{}
	for _, s := range spans {
		services[s.service] = true
	}
	for _, want := range []string{"mesh-bridge", "mesh-agent", "mesh-approver", "mesh-toolhost"} {
		if !services[want] {
			t.Errorf("no span of %s in the trace (%v)", want, slices.Collect(func(yield func(string) bool) {
				for s := range services {
					if !yield(s) {
						return
					}
				}
			}))
		}
	}
}

// closed says every span's parent arrived (or is the caller's).
func closed(spans []span, caller string) bool {
	ids := map[string]bool{caller: true}
	for _, s := range spans {
		ids[s.id] = true
	}
	for _, s := range spans {
		if !ids[s.parent] {
			return false
		}
	}
	return true
}

// checkParents: every span's parent is the caller's span or another span
// of the trace (no span hangs from one that was never reported).
func checkParents(t *testing.T, spans []span, caller string) {
	t.Helper()
	ids := map[string]bool{caller: true}
	for _, s := range spans {
		ids[s.id] = true
	}
	for _, s := range spans {
		if s.parent == "" || !ids[s.parent] {
			t.Errorf("span %s %q (%s) has parent %q, which is not in the trace", s.service, s.name, s.id, s.parent)
		}
	}
}

// addPendingWith is addPending with request headers.
func (m *meshProc) addPendingWith(conv, text string, headers ...string) map[string]any {
	m.t.Helper()
	out := m.send(conv, text, headers...)
	ap := obj(out, "result", "approval")
	if str(ap, "uuid") == "" {
		m.t.Fatalf("%q: no approval in %v", text, out)
	}
	return ap
}
