package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishWork enqueues item for the consumers of role and name, with the
// headers given (authorization, trace id).
func PublishWork(ctx context.Context, js jetstream.JetStream, ns Namespace, role, name string, item WorkItem, hdr nats.Header) error {
	m, err := WorkMsg(ns, role, name, item, hdr)
	if err != nil {
		return err
	}
	telemetry.Inject(ctx, m.Header)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish %s: %w", m.Subject, err)
	}
	return nil
}

// WorkSubject is the subject item is enqueued on for the consumer of role
// and name: mesh.work.<role>.<name>.<session>.
func WorkSubject(ns Namespace, role, name string, item WorkItem) (string, error) {
	return ns.Work(role, name, item.Session)
}

// WorkMsg is the message that enqueues item (see [PublishWork]), for
// callers that batch their publishes.
func WorkMsg(ns Namespace, role, name string, item WorkItem, hdr nats.Header) (*nats.Msg, error) {
	subj, err := WorkSubject(ns, role, name, item)
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
	m.Header.Set(HeaderMsgID, WorkMsgID(item))
	return m, nil
}

// KeepInProgress keeps a work item held while it is handled: it signals
// progress every third of ackWait, so that a long item is not redelivered
// while its holder lives, and one whose holder died is within ackWait.
// Call the returned stop when the item is settled.
func KeepInProgress(msg jetstream.Msg, ackWait time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}
