package group

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// Publishing a round's events and work, with deterministic ids.

// publish publishes one event of the round with a deterministic id.
func (x *exec) publish(ctx context.Context, session, runID, msgID string, ev mesh.Event) error {
	_, err := x.r.events.Publish(ctx, session, runID, msgID, ev)
	return err
}

// outMsg is a message to publish, or the error of building it.
type outMsg struct {
	m   *nats.Msg
	err error
}

func (x *exec) event(session, runID, msgID string, ev mesh.Event) outMsg {
	m, err := x.r.events.Msg(session, runID, msgID, ev)
	return outMsg{m, err}
}

func (x *exec) work(role, name string, item mesh.WorkItem, hdr nats.Header) outMsg {
	m, err := workloop.Msg(x.r.ns, role, name, item, hdr)
	return outMsg{m, err}
}

// publishAll publishes msgs at once, in order, and waits until the streams
// have stored them all: one round trip instead of one each.
func (x *exec) publishAll(ctx context.Context, msgs ...outMsg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, o := range msgs {
		if o.err != nil {
			return o.err
		}
		telemetry.Inject(ctx, o.m.Header)
		f, err := x.r.cfg.JS.PublishMsgAsync(o.m)
		if err != nil {
			return fmt.Errorf("publish %s: %w", o.m.Subject, err)
		}
		futures = append(futures, f)
	}
	return bus.AwaitAcks(ctx, futures)
}
