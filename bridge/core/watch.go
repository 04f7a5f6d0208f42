package core

import (
	"context"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// The answer of a turn from the watch: every bridge watches the sessions
// bucket for its listing (listing.go), so it receives the save that ends a
// run, the agent's, before the run's RUN_FINISHED (the agent publishes it
// after the save). A run that waits keeps the newest save of its
// conversation the watch delivered; its answer decodes that head instead
// of reading it again, and reads only the page of messages. When the watch
// is behind (no save that ends the run yet), the answer reads the
// conversation as before.

// watchedHead is a save of a conversation as the watch delivered it.
type watchedHead struct {
	data []byte
	rev  uint64
}

// handHead gives a save of the sessions bucket to the run waiting in its
// conversation, if any; a deletion takes back the head it held.
func (c *Core) handHead(e jetstream.KeyValueEntry) {
	c.mu.Lock()
	r := c.watched[e.Key()]
	c.mu.Unlock()
	if r == nil {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		r.head.Store(nil)
		return
	}
	r.head.Store(&watchedHead{data: e.Value(), rev: e.Revision()})
}

// watchedDoc is the conversation with its newest page of messages, from
// the head the watch delivered, when that head shows the run over (the
// same test as the poll of [Run.Wait]); nil when there is none, it is not
// over there, or anything fails: the caller then reads the conversation.
func (r *Run) watchedDoc(ctx context.Context, finished bool) *mesh.ConversationDoc {
	h := r.head.Load()
	if !finished || h == nil {
		return nil
	}
	conv, err := mesh.DecodeHead(r.session, h.data, h.rev)
	if err != nil || !slices.Contains(conv.RecentTurns, r.ID) || conv.Turn != nil && conv.Turn.ID == r.ID {
		return nil
	}
	d, err := r.core.Sessions.DocOf(ctx, conv, h.data)
	if err != nil {
		return nil
	}
	return d
}
