package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// findIn is find among the spans of one mesh (its service.namespace).
func findIn(spans []span, ns, service, name string) *span {
	for i, s := range spans {
		if s.ns == ns && s.service == service && strings.HasPrefix(s.name, name) {
			return &spans[i]
		}
	}
	return nil
}

// TestTraceAcrossAnA2ACallBetweenMeshes: mesh A's agent delegates to a
// sub-agent that is mesh B's A2A server; both export to one receiver. A
// caller's trace goes through A's request, A's turn and its A2A client
// call, B's request (which continues the traceparent A sent), B's turn and
// its tool call on B's tool host, each span the child of the one before.
func TestTraceAcrossAnA2ACallBetweenMeshes(t *testing.T) {
	t.Parallel()
	rcv := startOTLP(t)
	b := startMesh(t, meshOpts{env: append(rcv.traceEnv(), "OTEL_RESOURCE_ATTRIBUTES=service.namespace=b")})
	a := startMesh(t, meshOpts{config: a2aClientConfig("http://" + b.httpAddr), env: append(rcv.traceEnv(), "OTEL_RESOURCE_ATTRIBUTES=service.namespace=a")})
	const trace, caller = "5c1e2f0a9b8d47e6a1c3b5d7e9f10234", "1122334455667788"

	conv := a.newConversation()
	out := a.send(conv, "list all resources", "traceparent", "00-"+trace+"-"+caller+"-01")
	if calls := toolCalls(obj(out, "conversation")); len(calls) != 1 || str(calls[0], "name") != "a2a_resource-agent" {
		t.Fatalf("A's tool calls %v, want one call of the sub-agent", calls)
	}
	var spans []span
	meshtest.Eventually(t, 30*time.Second, func() bool {
		spans = rcv.of(trace)
		return findIn(spans, "b", "mesh-toolhost", "tools/call resources_list") != nil &&
			findIn(spans, "a", "mesh-agent", "invoke_agent") != nil && closed(spans, caller)
	}, "the spans of both meshes did not arrive in the caller's trace")
	checkParents(t, spans, caller)
	checkConventions(t, spans)
	chain := []struct {
		what string
		s    *span
	}{
		{"A's request", findIn(spans, "a", "mesh-bridge", "POST /conversations/{id}/messages")},
		{"A's enqueue", findIn(spans, "a", "mesh-bridge", "send mesh.work.agent.")},
		{"A's delivery", findIn(spans, "a", "mesh-agent", "process mesh.work.agent.")},
		{"A's turn", findIn(spans, "a", "mesh-agent", "invoke_agent")},
		{"A's A2A call", findIn(spans, "a", "mesh-agent", "a2a message/send")},
		{"B's request", findIn(spans, "b", "mesh-bridge", "POST /a2a")},
		{"B's enqueue", findIn(spans, "b", "mesh-bridge", "send mesh.work.agent.")},
		{"B's delivery", findIn(spans, "b", "mesh-agent", "process mesh.work.agent.")},
		{"B's turn", findIn(spans, "b", "mesh-agent", "invoke_agent")},
		{"B's tool call", findIn(spans, "b", "mesh-agent", "execute_tool resources_list")},
		{"B's tool request", findIn(spans, "b", "mesh-agent", "send mesh.tool.resources.resources_list")},
		{"B's tool host", findIn(spans, "b", "mesh-toolhost", "process mesh.tool.resources.resources_list")},
	}
	parent := caller
	for _, c := range chain {
		if c.s == nil {
			t.Fatalf("no span of %s among %v", c.what, spans)
		}
		if c.s.parent != parent {
			t.Errorf("%s (%s %q) has parent %s, want %s", c.what, c.s.service, c.s.name, c.s.parent, parent)
		}
		parent = c.s.id
	}
	for _, m := range []*meshProc{a, b} {
		if !strings.Contains(m.logs(), `"trace_id":"`+trace+`"`) {
			t.Errorf("no log line of mesh %s carries trace_id %s", m.httpAddr, trace)
		}
	}
}

// grpcTraces is the collector's trace service over gRPC, handing what it
// gets to an otlpReceiver.
type grpcTraces struct {
	coltrace.UnimplementedTraceServiceServer
	r *otlpReceiver
}

func (g grpcTraces) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.r.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// startOTLPGRPC serves the trace service over gRPC (no TLS) and returns
// the receiver and the environment pointing a mesh at it.
func startOTLPGRPC(t testing.TB) (*otlpReceiver, []string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcTraces{r: r})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return r, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + l.Addr().String(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_TRACES_SAMPLER=parentbased_always_on"}
}

// TestTraceExportOverGRPC: with OTEL_EXPORTER_OTLP_PROTOCOL=grpc, the
// spans of a turn reach a gRPC collector from the bridge, the agent and
// the tool host, in the caller's trace with correct parents.
func TestTraceExportOverGRPC(t *testing.T) {
	t.Parallel()
	rcv, env := startOTLPGRPC(t)
	m := startMesh(t, meshOpts{env: env})
	const trace, caller = "7d3a9e1b2c4f4a6b8e0d1f2a3b4c5d6e", "8877665544332211"
	m.firstTurn("list all resources", "traceparent", "00-"+trace+"-"+caller+"-01")
	var spans []span
	meshtest.Eventually(t, 20*time.Second, func() bool {
		spans = rcv.of(trace)
		return find(spans, "mesh-toolhost", "tools/call") != nil && find(spans, "mesh-agent", "invoke_agent") != nil && closed(spans, caller)
	}, "the turn's spans did not arrive over gRPC")
	checkParents(t, spans, caller)
	req := find(spans, "mesh-bridge", "POST /conversations/{id}/messages")
	enqueue := find(spans, "mesh-bridge", "send mesh.work.agent.")
	turn := find(spans, "mesh-agent", "process mesh.work.agent.")
	host := find(spans, "mesh-toolhost", "process mesh.tool.resources.resources_list")
	if req == nil || enqueue == nil || turn == nil || host == nil {
		t.Fatalf("spans %v: want the bridge's request and enqueue, the agent's turn and the tool host's call", spans)
	}
	if req.parent != caller || enqueue.parent != req.id || turn.parent != enqueue.id {
		t.Errorf("parents: request→%s (caller %s), enqueue→%s (request %s), turn→%s (enqueue %s)", req.parent, caller, enqueue.parent, req.id, turn.parent, enqueue.id)
	}
}
