package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Listings: GET /conversations and GET /approvals page through indexes
// (index.go) that each bridge keeps in memory, fed by a watch of the
// sessions and approvals buckets. Every replica watches the buckets, so
// every replica lists what the buckets hold, a few milliseconds behind a
// write; a bridge puts what it writes itself (a conversation it creates or
// deletes) in its index at once, so that its own client lists it right
// away. A cursor names a place in the order (creation time and id), not a
// position in one process, so a walk may go on on another replica.

// listings holds the indexes and what feeds them.
type listings struct {
	sessions  *index
	approvals *index
	ready     chan struct{} // closed once both watches delivered the buckets
}

// startListings watches both buckets into their indexes, and sweeps them
// every sweep: expired conversations leave after expiredKept, and those
// waiting for an approval are kept alive (ttl: zero when none expire).
func (c *Core) startListings(ctx context.Context) error {
	l := &listings{sessions: newIndex(), approvals: newIndex(), ready: make(chan struct{})}
	c.lists = l
	sessionsSynced := make(chan struct{})
	_, err := store.WatchKV(ctx, c.cfg.Resources.Sessions, store.KVWatch{Apply: c.applySession, Synced: func() { close(sessionsSynced) }})
	if err != nil {
		return fmt.Errorf("core: watch sessions: %w", err)
	}
	go func() {
		// The approvals' owners are their conversations': those first.
		select {
		case <-sessionsSynced:
		case <-ctx.Done():
			return
		}
		_, err := store.WatchKV(ctx, c.cfg.Resources.Approvals, store.KVWatch{Apply: c.applyApproval, Synced: func() { close(l.ready) }})
		if err != nil {
			c.log.Error().Err(err).Msg("watch approvals")
		}
	}()
	go c.sweepListings(ctx)
	return nil
}

// applySession puts a save of the sessions bucket in the index.
func (c *Core) applySession(e jetstream.KeyValueEntry) {
	if strings.HasPrefix(e.Key(), store.RunKeyPrefix) {
		return
	}
	c.handHead(e)
	x := c.lists.sessions
	if e.Operation() != jetstream.KeyValuePut {
		old := x.get(e.Key())
		if old == nil || old.status == string(mesh.StatusDeleted) || old.status == string(mesh.StatusExpired) {
			// A purge (of a tombstone, by an admin) or a key deleted.
			x.delete(e.Key())
			return
		}
		// Gone without being deleted: it aged out (the bucket's max age).
		// Its messages go with it: no head points at them any more. Every
		// bridge that sees the expiry purges; the second finds nothing.
		go c.purgeExpired(old.id)
		s, _ := old.item.(mesh.ConversationSummary)
		s.Status = mesh.StatusExpired
		x.put(&entry{id: old.id, created: old.created, status: string(mesh.StatusExpired), owner: old.owner, rev: e.Revision(), updated: e.Created(), item: s})
		return
	}
	if old := x.get(e.Key()); old != nil && old.rev >= e.Revision() {
		// This bridge's own save, indexed when it wrote it (or an older
		// one): nothing to decode.
		return
	}
	s, err := store.SummaryOf(e.Value())
	if err != nil {
		c.log.Warn().Err(err).Str("session", e.Key()).Msg("listing: undecodable conversation")
		return
	}
	x.put(sessionEntry(s, e.Revision()))
}

// purgeExpired empties the message log of an expired conversation.
func (c *Core) purgeExpired(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Sessions.PurgeMessages(ctx, id); err != nil {
		c.log.Warn().Err(err).Str("session", id).Msg("purge the messages of an expired conversation")
	}
}

func sessionEntry(s mesh.ConversationSummary, rev uint64) *entry {
	return &entry{id: s.ID, created: s.CreatedAt.UnixNano(), status: string(s.Status), owner: s.Owner, rev: rev, updated: s.UpdatedAt, item: s}
}

// applyApproval puts a write of the approvals bucket in the index.
func (c *Core) applyApproval(e jetstream.KeyValueEntry) {
	if strings.HasPrefix(e.Key(), mesh.ApprovalKeysPrefix) {
		return
	}
	x := c.lists.approvals
	if e.Operation() != jetstream.KeyValuePut {
		x.delete(e.Key())
		return
	}
	var ap mesh.Approval
	if err := json.Unmarshal(e.Value(), &ap); err != nil {
		return
	}
	ap.Revision = e.Revision()
	owner := ""
	if conv := c.lists.sessions.get(ap.ConversationID); conv != nil {
		owner = conv.owner
	} else if h, err := c.Sessions.HeadAny(context.Background(), ap.ConversationID); err == nil {
		owner = h.Owner
	}
	x.put(&entry{id: ap.UUID, created: ap.CreatedAt.UnixNano(), status: string(ap.Status), owner: owner, rev: e.Revision(), updated: ap.CreatedAt, item: &ap})
}

// sweepEvery is how often the listings are swept.
const sweepEvery = 30 * time.Second

func (c *Core) sweepListings(ctx context.Context) {
	// Often enough for a short TTL (tests, demos) to be kept alive too.
	every := sweepEvery
	for _, d := range []time.Duration{c.cfg.SessionTTL / 4, c.cfg.ExpiredKept / 4} {
		if d > 0 && d < every {
			every = max(d, 250*time.Millisecond)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.sweep(ctx, time.Now())
		}
	}
}

// sweep drops the expired conversations whose limit marker is gone, and
// saves, unchanged, the conversations that have waited for an approval for
// half the TTL: a person's decision may take days, and the conversation
// must still be there then. (Every replica does it; the compare-and-set of
// a save makes the others' a no-op.)
func (c *Core) sweep(ctx context.Context, now time.Time) {
	for _, e := range c.lists.sessions.withStatus(string(mesh.StatusExpired)) {
		if now.Sub(e.updated) > c.cfg.ExpiredKept {
			c.lists.sessions.delete(e.id)
		}
	}
	if c.cfg.SessionTTL <= 0 {
		return
	}
	for _, e := range c.lists.sessions.withStatus(string(mesh.StatusWaitingApproval)) {
		if now.Sub(e.updated) < c.cfg.SessionTTL/2 {
			continue
		}
		if err := c.Sessions.Touch(ctx, e.id, e.updated); err != nil && !errors.Is(err, mesh.ErrSessionNotFound) {
			c.log.Warn().Err(err).Str("session", e.id).Msg("keep a waiting conversation alive")
		}
	}
}

// listReady waits until the indexes hold the buckets (a bridge just
// started), at most until ctx ends.
func (c *Core) listReady(ctx context.Context) error {
	if c.lists == nil {
		return mesh.ErrUnavailable.With("the listing is not started")
	}
	select {
	case <-c.lists.ready:
		return nil
	case <-ctx.Done():
		return mesh.ErrUnavailable.With("the listing is still loading; try again")
	}
}

// listsLoaded reports whether the indexes hold the buckets.
func (c *Core) listsLoaded() bool {
	if c.lists == nil {
		return false
	}
	select {
	case <-c.lists.ready:
		return true
	default:
		return false
	}
}

// scope applies who the caller is to q: an owner filter is for those who
// see everything (admins; approvers too for approvals), others list their
// own.
func (c *Core) scope(caller Caller, q Query, seesAll bool) (Query, error) {
	if !c.cfg.Auth || seesAll {
		return q, nil
	}
	if q.OwnerSet && q.Owner != caller.Principal.Name {
		return q, ErrForbidden.With("the owner filter needs the admin role; without it you list your own")
	}
	q.Owner, q.OwnerSet = caller.Principal.Name, true
	return q, nil
}

// ConversationPage is a page of conversations.
type ConversationPage struct {
	Conversations []mesh.ConversationSummary `json:"conversations"`
	NextCursor    string                     `json:"next_cursor,omitempty"`
	// Counts are the conversations by status that the caller may list,
	// every page alike.
	Counts map[string]int `json:"counts"`
}

// ListConversations is a page of the conversations the caller may see,
// newest first.
func (c *Core) ListConversations(ctx context.Context, caller Caller, q Query) (*ConversationPage, error) {
	q, err := c.scope(caller, q, c.May(caller, auth.Admin))
	if err != nil {
		return nil, err
	}
	if err := c.listReady(ctx); err != nil {
		return nil, err
	}
	entries, next, err := c.lists.sessions.page(q)
	if err != nil {
		return nil, err
	}
	p := &ConversationPage{Conversations: make([]mesh.ConversationSummary, 0, len(entries)), NextCursor: next}
	for _, e := range entries {
		p.Conversations = append(p.Conversations, e.item.(mesh.ConversationSummary))
	}
	p.Counts = c.lists.sessions.counts(q.Owner, !q.OwnerSet)
	return p, nil
}

// ConversationsChanged is the channel closed at the next change to a
// conversation the caller lists with q ([Core.ListConversations]): one of
// its own, or any for an admin who filters on no owner.
func (c *Core) ConversationsChanged(ctx context.Context, caller Caller, q Query) (<-chan struct{}, error) {
	q, err := c.scope(caller, q, c.May(caller, auth.Admin))
	if err != nil {
		return nil, err
	}
	if err := c.listReady(ctx); err != nil {
		return nil, err
	}
	return c.lists.sessions.changes(q.Owner, !q.OwnerSet), nil
}

// ApprovalPage is a page of approvals.
type ApprovalPage struct {
	Approvals  []*mesh.Approval `json:"approvals"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// ListApprovals is a page of the approvals the caller may see, newest
// first: approvers and admins see every one, others those of their
// conversations.
func (c *Core) ListApprovals(ctx context.Context, caller Caller, q Query) (*ApprovalPage, error) {
	q, err := c.scope(caller, q, c.May(caller, auth.Decide))
	if err != nil {
		return nil, err
	}
	if err := c.listReady(ctx); err != nil {
		return nil, err
	}
	entries, next, err := c.lists.approvals.page(q)
	if err != nil {
		return nil, err
	}
	p := &ApprovalPage{Approvals: make([]*mesh.Approval, 0, len(entries)), NextCursor: next}
	for _, e := range entries {
		p.Approvals = append(p.Approvals, e.item.(*mesh.Approval))
	}
	return p, nil
}

// SessionCounts are the conversations by status, from the index:
// deleted and expired ones among them while they are kept.
func (c *Core) SessionCounts() map[string]int {
	if c.lists == nil {
		return map[string]int{}
	}
	return c.lists.sessions.counts("", true)
}

// indexConversation puts a conversation this bridge wrote in its index
// at once, ahead of the watch.
func (c *Core) indexConversation(conv *mesh.Conversation) {
	if c.lists != nil {
		c.lists.sessions.put(sessionEntry(conv.Summary(), conv.Revision))
	}
}
