package core

import (
	"context"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// The answer of a turn from the watch: every bridge watches the sessions
// bucket for its listing (listing.go), so it receives the save that ends a
// run, the agent's, before the run's RUN_FINISHED (the agent publishes it
// after the save). A run that waits keeps the newest save of its
// conversation the watch delivered; its answer decodes that head instead
// of reading it again, and reads only the page of messages. When the watch
// is behind (no save that ends the run yet), the answer reads the
// conversation as before.

// The next message from the answer's head: the head an answer decoded is
// kept (heads), and the next message of the conversation is queued from it
// (store.SessionStore.UpdateHeadFrom) instead of reading the head again,
// unless the listing has seen a newer save meanwhile. A head that turns
// out stale costs a read, as before: the compare-and-set fails, or a
// refusal is checked again on a fresh read.

// maxKeptHeads bounds the heads kept: past it they are all let go.
const maxKeptHeads = 1024

// heads are the heads kept, by conversation.
type heads struct {
	mu sync.Mutex
	m  map[string]*mesh.Conversation
}

// keepHead keeps a copy of conv, a head as stored at conv.Revision, for
// the conversation's next message. A head of an earlier version (its
// messages inside) is not kept: a page read leaves them out.
func (c *Core) keepHead(conv *mesh.Conversation) {
	if conv == nil || conv.MessageCount == 0 || conv.Revision == 0 {
		return
	}
	cp := *conv
	c.heads.mu.Lock()
	if c.heads.m == nil || len(c.heads.m) >= maxKeptHeads {
		c.heads.m = map[string]*mesh.Conversation{}
	}
	c.heads.m[conv.ID] = &cp
	c.heads.mu.Unlock()
}

// reset lets every kept head go: a quiet bridge (memory.Release) need not
// keep them; the next message of a conversation reads its head again.
func (h *heads) reset() {
	h.mu.Lock()
	h.m = nil
	h.mu.Unlock()
}

// takeHead takes the head kept for conversation id, unless the listing
// has seen a newer save of it.
func (c *Core) takeHead(id string) *mesh.Conversation {
	c.heads.mu.Lock()
	h := c.heads.m[id]
	delete(c.heads.m, id)
	c.heads.mu.Unlock()
	if h == nil || c.lists == nil {
		return nil
	}
	if e := c.lists.sessions.get(id); e == nil || e.rev > h.Revision {
		return nil
	}
	return h
}

// updateHead is store.SessionStore.UpdateHead from the head kept for
// conversation id when there is one.
func (c *Core) updateHead(ctx context.Context, id string, change func(*mesh.Conversation) error) (*mesh.Conversation, error) {
	if h := c.takeHead(id); h != nil {
		return c.Sessions.UpdateHeadFrom(ctx, h, change)
	}
	return c.Sessions.UpdateHead(ctx, id, change)
}

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
func (r *Run) watchedDoc(ctx context.Context, finished bool) *store.ConversationDoc {
	h := r.head.Load()
	if !finished || h == nil {
		return nil
	}
	conv, err := store.DecodeHead(r.session, h.data, h.rev)
	if err != nil || !slices.Contains(conv.RecentTurns, r.ID) || conv.Turn != nil && conv.Turn.ID == r.ID {
		return nil
	}
	r.core.keepHead(conv)
	d, err := r.core.Sessions.DocOf(ctx, conv, h.data)
	if err != nil {
		return nil
	}
	return d
}
