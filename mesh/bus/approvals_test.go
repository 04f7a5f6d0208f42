package bus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// A request whose answer is lost, or refused as unavailable (a responder
// stopping), is sent again; any other answer is the last.
func TestRequestServedSendsAgainWhatWasNotServed(t *testing.T) {
	m := meshtest.New(t)
	var seen atomic.Int32
	sub, err := m.NC.Subscribe("served.>", func(msg *nats.Msg) {
		n := seen.Add(1)
		switch {
		case msg.Subject == "served.lost" && n == 1:
			// Held and never answered, as by a responder that died.
		case msg.Subject == "served.stopping" && n == 1:
			_ = msg.RespondMsg(errorReply(msg, mesh.ErrUnavailable.With("stopping")))
		case msg.Subject == "served.refused":
			_ = msg.RespondMsg(errorReply(msg, mesh.ErrApprovalDecided.With("decided")))
		default:
			_ = msg.Respond([]byte("ok"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for _, tc := range []struct {
		subject string
		sent    int32
		want    error
	}{{"served.lost", 2, nil}, {"served.stopping", 2, nil}, {"served.refused", 1, mesh.ErrApprovalDecided}} {
		seen.Store(0)
		reply, err := bus.RequestServed(t.Context(), m.NC, nats.NewMsg(tc.subject), 0, 200*time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", tc.subject, err)
		}
		if got := mesh.ErrorFromMsg(reply); !errors.Is(got, tc.want) || tc.want == nil && got != nil {
			t.Errorf("%s: answer %v, want %v", tc.subject, got, tc.want)
		}
		if n := seen.Load(); n != tc.sent {
			t.Errorf("%s: sent %d times, want %d", tc.subject, n, tc.sent)
		}
	}
	// Nobody serves it: asked again until within has passed.
	start := time.Now()
	_, err = bus.RequestServed(t.Context(), m.NC, nats.NewMsg("unserved.x"), 300*time.Millisecond, 0)
	if !errors.Is(err, nats.ErrNoResponders) || time.Since(start) < 100*time.Millisecond {
		t.Errorf("no responders: %v after %s, want no responders after the bound", err, time.Since(start))
	}
}

// errorReply is the answer a micro responder gives for err.
func errorReply(req *nats.Msg, err error) *nats.Msg {
	m := nats.NewMsg(req.Reply)
	m.Header = mesh.ErrorHeaders(err)
	return m
}
