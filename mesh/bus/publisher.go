package bus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// Publisher publishes AG-UI events to the events stream.
type Publisher struct {
	js  jetstream.JetStream
	ns  mesh.Namespace
	now func() time.Time
}

// NewPublisher returns a publisher for namespace ns.
func NewPublisher(js jetstream.JetStream, ns mesh.Namespace) *Publisher {
	telemetry.EventTypes(eventTypes)
	return &Publisher{js: js, ns: ns, now: time.Now}
}

// eventTypes are the AG-UI types the mesh publishes.
var eventTypes = []string{string(mesh.EventRunStarted), string(mesh.EventRunFinished), string(mesh.EventRunError),
	string(mesh.EventStepStarted), string(mesh.EventStepFinished), string(mesh.EventTextMessageStart), string(mesh.EventTextMessageContent),
	string(mesh.EventTextMessageEnd), string(mesh.EventToolCallStart), string(mesh.EventToolCallArgs), string(mesh.EventToolCallEnd),
	string(mesh.EventToolCallResult), string(mesh.EventStateSnapshot), string(mesh.EventStateDelta), string(mesh.EventMessagesSnapshot),
	string(mesh.EventCustom), string(mesh.EventReasoningStart), string(mesh.EventReasoningMessageStart),
	string(mesh.EventReasoningMessageContent), string(mesh.EventReasoningMessageEnd), string(mesh.EventReasoningEnd)}

// Publish publishes one event synchronously. msgID, when not empty,
// deduplicates it in the stream; runID, when not empty, goes in [HeaderRun].
func (p *Publisher) Publish(ctx context.Context, session, runID, msgID string, ev mesh.Event) (uint64, error) {
	m, err := p.Msg(session, runID, msgID, ev)
	if err != nil {
		return 0, err
	}
	ack, err := p.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("publish %s: %w", m.Subject, err)
	}
	return ack.Sequence, nil
}

// Msg is the message that publishes ev for run runID of session, with the
// deduplication id msgID (none when empty), for callers that batch their
// publishes.
func (p *Publisher) Msg(session, runID, msgID string, ev mesh.Event) (*nats.Msg, error) {
	subj, err := p.ns.Event(session, ev.Type)
	if err != nil {
		return nil, err
	}
	if ev.Timestamp == 0 {
		ev.Timestamp = p.now().UnixMilli()
	}
	// MarshalJSON itself, not json.Marshal: that would scan and compact
	// what MarshalJSON wrote once more.
	data, err := ev.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	m := nats.NewMsg(subj)
	m.Data = data
	telemetry.EventPublished(string(ev.Type))
	if msgID != "" {
		m.Header.Set(mesh.HeaderMsgID, msgID)
	}
	if runID != "" {
		m.Header.Set(mesh.HeaderRun, runID)
	}
	return m, nil
}

// Run returns the publisher of one attempt of one run (or of its part that
// one work item publishes: a tree step, a group member's turn). Its events
// are published asynchronously, in order, with no deduplication id: nothing
// publishes one of them twice (a redelivered work item is a new attempt
// whose events are its own), and the server would keep every id for the
// stream's duplicate window. The end of a run has one ([RunEvents.EmitAs]).
func (p *Publisher) Run(session, runID string) *RunEvents {
	return &RunEvents{p: p, session: session, run: runID}
}

// RunEvents publishes the events of one run attempt. It is safe for
// concurrent use, though events published concurrently have no set order.
type RunEvents struct {
	p       *Publisher
	session string
	run     string

	mu      sync.Mutex
	pending []jetstream.PubAckFuture
	err     error
}

// Emit publishes ev without waiting for the stream's acknowledgement; the
// first error is kept and returned by [RunEvents.Flush].
func (r *RunEvents) Emit(ev mesh.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	r.publish(r.run, "", ev)
}

// EmitAs is [RunEvents.Emit] for an event of run runID with its own
// deduplication id: the end of a run, stored once whichever attempt
// publishes it, waited for with the run's other events.
func (r *RunEvents) EmitAs(runID, msgID string, ev mesh.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.publish(runID, msgID, ev)
	}
}

// publish publishes ev asynchronously; r.mu is held.
func (r *RunEvents) publish(runID, msgID string, ev mesh.Event) {
	m, err := r.p.Msg(r.session, runID, msgID, ev)
	if err != nil {
		r.err = err
		return
	}
	f, err := r.p.js.PublishMsgAsync(m)
	if err != nil {
		r.err = fmt.Errorf("publish %s: %w", m.Subject, err)
		return
	}
	r.pending = append(r.pending, f)
}

// Flush waits until the stream has stored every event emitted so far.
func (r *RunEvents) Flush(ctx context.Context) error {
	r.mu.Lock()
	pending := r.pending
	r.pending = nil
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return AwaitAcks(ctx, pending)
}

// AwaitAcks waits until the streams have acknowledged every asynchronous
// publish of futures, and returns the first failure.
func AwaitAcks(ctx context.Context, futures []jetstream.PubAckFuture) error {
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
