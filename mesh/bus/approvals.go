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
	telemetry.Inject(ctx, msg.Header)
	pause := 50 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		reply, err := nc.RequestMsgWithContext(rctx, msg)
		cancel()
		if errors.Is(err, nats.ErrNoResponders) {
			select {
			case <-ctx.Done():
				return nil, mesh.ErrUnavailable.With("no approver is running: " + ctx.Err().Error())
			case <-time.After(pause):
			}
			pause = min(pause*2, time.Second)
			continue
		}
		if err != nil {
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
}
