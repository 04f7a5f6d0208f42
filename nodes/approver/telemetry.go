package approver

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// countPending keeps the set of approvals waiting for a person, and
// mesh_approvals_pending and the oldest one's age with it. a.mu is held.
func (a *Role) countPending(id string, pending bool, created time.Time) {
	if pending {
		a.pending[id] = created
	} else {
		delete(a.pending, id)
	}
	var oldest time.Time
	for _, at := range a.pending {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	telemetry.SetApprovalsPending(len(a.pending), oldest)
}

// resumeSpan begins the span of enqueueing a resume in the trace of the
// run that asked for the approval (its traceparent is in the record), so
// that the resumed run, hours later on another replica, continues that
// trace; the decider's request, when traced, is linked. The span's
// context goes into h, the resume's headers.
func resumeSpan(ctx context.Context, ap *mesh.Approval, h nats.Header) (context.Context, func()) {
	decider := trace.SpanContextFromContext(ctx)
	if ap.Traceparent != "" {
		ctx = telemetry.FromTraceparent(ctx, ap.Traceparent)
	}
	ctx, span := telemetry.StartKind(ctx, "approval resume", trace.SpanKindInternal,
		attribute.String("mesh.approval.status", string(ap.Status)), attribute.String("mesh.agent", ap.Agent))
	if decider.IsValid() {
		span.AddLink(trace.Link{SpanContext: decider})
	}
	telemetry.Inject(ctx, h)
	return ctx, func() { span.End() }
}

// withSID adds the caller's session id to a log line when there is one: an
// empty sid is no correlation id.
func withSID(e *zerolog.Event, sid string) *zerolog.Event {
	if sid == "" {
		return e
	}
	return e.Str("sid", sid)
}
