package workloop

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"go.opentelemetry.io/otel/attribute"
)

// Publish enqueues item for the consumers of role and name, with the
// headers given (authorization, trace id).
func Publish(ctx context.Context, js jetstream.JetStream, ns mesh.Namespace, role, name string, item mesh.WorkItem, hdr nats.Header) error {
	m, err := Msg(ns, role, name, item, hdr)
	if err != nil {
		return err
	}
	ctx, span := telemetry.StartSend(ctx, m.Subject, "publish", attribute.String("mesh.work.kind", string(item.Kind)))
	telemetry.Inject(ctx, m.Header)
	if _, err = js.PublishMsg(ctx, m); err != nil {
		err = fmt.Errorf("publish %s: %w", m.Subject, err)
	}
	telemetry.End(span, err)
	return err
}

// Subject is the subject item is enqueued on for the consumer of role
// and name: mesh.work.<role>.<name>.<session>.
func Subject(ns mesh.Namespace, role, name string, item mesh.WorkItem) (string, error) {
	return ns.Work(role, name, item.Session)
}

// Msg is the message that enqueues item (see [Publish]), for
// callers that batch their publishes.
func Msg(ns mesh.Namespace, role, name string, item mesh.WorkItem, hdr nats.Header) (*nats.Msg, error) {
	subj, err := Subject(ns, role, name, item)
	if err != nil {
		return nil, err
	}
	if item.EnqueuedAt.IsZero() {
		item.EnqueuedAt = time.Now().UTC()
	}
	data, err := json.Marshal(item)
	if err != nil {
		return nil, fmt.Errorf("encode work item: %w", err)
	}
	m := nats.NewMsg(subj)
	m.Data = data
	for k, v := range hdr {
		m.Header[k] = v
	}
	m.Header.Set(mesh.HeaderMsgID, MsgID(item))
	return m, nil
}

// MsgID is the deduplication id of a work item: the same turn enqueued
// twice within the stream's duplicate window is stored once.
func MsgID(item mesh.WorkItem) string {
	switch item.Kind {
	case mesh.WorkStep:
		return fmt.Sprintf("node:%s:%s:%d", item.TurnID, item.Step, item.Gen)
	case mesh.WorkGroupNext:
		return fmt.Sprintf("group_next:%s:%s", item.TurnID, item.RunID)
	}
	return string(item.Kind) + ":" + item.TurnID
}
