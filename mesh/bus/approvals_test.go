package bus_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// An approval request carries the asker's trace in its headers
// (traceparent), as every other request of the mesh does.
func TestApprovalRequestCarriesTheTraceInItsHeaders(t *testing.T) {
	m := meshtest.New(t)
	got := make(chan nats.Header, 1)
	sub, err := m.NC.Subscribe(m.NS.ApprovalRequestAll(), func(msg *nats.Msg) {
		got <- msg.Header
		var ap mesh.Approval
		_ = json.Unmarshal(msg.Data, &ap)
		ap.Status = mesh.ApprovalPending
		data, _ := json.Marshal(ap)
		_ = msg.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	if _, err := bus.RequestApproval(ctx, m.NC, m.NS, &mesh.Approval{UUID: mesh.NewID(), ConversationID: mesh.NewID()}); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if tp := h.Get("traceparent"); !strings.Contains(tp, traceID.String()) {
		t.Errorf("traceparent %q, want one of trace %s", tp, traceID)
	}
}
