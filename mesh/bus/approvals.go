package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// RequestApproval asks the approvers for an approval on
// mesh.approval.<ap.UUID>.request and returns the record the approver
// created, or the one that existed under that id. The body is ap: the
// conversation, run, call (ToolCallID, ToolName, Server, Tool, ToolArgs),
// description, step path and remote task; with Policy set, it asks for a
// decision by that policy at once and CallID names the call to approve.
// Status, decision, seal and argument hash are the approver's to set.
//
// While no approver answers (one restarting), it asks again until ctx ends.
// Refusals come back as mesh errors ([ErrApprovalPolicy], [ErrBadRequest]).
func RequestApproval(ctx context.Context, nc *nats.Conn, ns mesh.Namespace, ap *mesh.Approval) (*mesh.Approval, error) {
	subj, err := ns.ApprovalRequest(ap.UUID)
	if err != nil {
		return nil, err
	}
	if ap.Traceparent == "" {
		ap.Traceparent = telemetry.Traceparent(ctx)
	}
	data, err := json.Marshal(ap)
	if err != nil {
		return nil, fmt.Errorf("encode approval request: %w", err)
	}
	msg := nats.NewMsg(subj)
	msg.Data = data
	// The trace travels in the headers too, as on every other request:
	// a tracer of NATS messages need not read the body.
	sctx, span := telemetry.StartSend(ctx, subj, "request")
	telemetry.Inject(sctx, msg.Header)
	reply, err := RequestServed(sctx, nc, msg, 0, 15*time.Second)
	telemetry.End(span, err)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, mesh.ErrUnavailable.With("no approver is running: " + ctx.Err().Error())
	}
	return approverReply(subj, reply, err)
}

// approverReply is the approval an approver answered on subj with, or
// the error it answered, or the request's own error.
func approverReply(subj string, reply *nats.Msg, err error) (*mesh.Approval, error) {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, mesh.ErrUnavailable.With("no approver is running")
	case err != nil:
		return nil, mesh.ErrUnavailable.With(fmt.Sprintf("the approvers did not answer on %s: %v", subj, err))
	}
	if err := mesh.ErrorFromMsg(reply); err != nil {
		return nil, err
	}
	var out mesh.Approval
	if err := json.Unmarshal(reply.Data, &out); err != nil {
		return nil, fmt.Errorf("decode approver reply: %w", err)
	}
	return &out, nil
}

// RequestServed sends m, which must be safe to send twice, and sends it
// again while it is not served:
//   - no process serves its subject (no responders: a role restarting, or
//     not started yet): again after a pause of 50 ms doubling to 1 s, until
//     within has passed (0: as long as ctx lasts);
//   - an attempt had no answer within attempt (the request or its answer
//     was lost with a NATS server, or the responder died holding it):
//     again at once, as long as ctx lasts;
//   - the answer was [mesh.ErrUnavailable] (a responder stopping, or one
//     whose own store did not answer): again after the same pauses, as
//     long as ctx lasts.
//
// It returns the last attempt's answer or error. attempt 0 waits for each
// answer as long as ctx allows, and so never sends again on a lost answer.
func RequestServed(ctx context.Context, nc *nats.Conn, m *nats.Msg, within, attempt time.Duration) (*nats.Msg, error) {
	var deadline time.Time
	if within > 0 {
		deadline = time.Now().Add(within)
	}
	pause := 50 * time.Millisecond
	for {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if attempt > 0 {
			actx, cancel = context.WithTimeout(ctx, attempt)
		}
		reply, err := nc.RequestMsgWithContext(actx, m)
		cancel()
		switch {
		case ctx.Err() != nil:
			return reply, err
		case errors.Is(err, nats.ErrNoResponders):
			if !deadline.IsZero() && time.Now().Add(pause).After(deadline) {
				return reply, err
			}
			if !sleepCtx(ctx, pause) {
				return nil, err
			}
			pause = min(2*pause, time.Second)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			// This attempt's own deadline: ask again.
		case err == nil && mesh.IsUnavailable(mesh.ErrorFromMsg(reply)):
			if !sleepCtx(ctx, pause) {
				return reply, nil
			}
			pause = min(2*pause, time.Second)
		default:
			return reply, err
		}
	}
}

// sleepCtx pauses for d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ResealApproval asks an approver to seal approval id, pending without a
// seal since a release before seals recorded it, once an admin has read it
// (r.ArgsHash: the hash of the arguments read). Only the admin identity
// may send it. It returns the approval as sealed, or as it stands when it
// was sealed already.
func ResealApproval(ctx context.Context, nc *nats.Conn, ns mesh.Namespace, id string, r mesh.Reseal) (*mesh.Approval, error) {
	subj, err := ns.ApprovalReseal(id)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode reseal: %w", err)
	}
	reply, err := nc.RequestWithContext(ctx, subj, data)
	return approverReply(subj, reply, err)
}
