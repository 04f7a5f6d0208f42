package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Deletion (DELETE /conversations/{id}): the conversation becomes a
// tombstone (store.SessionStore.Delete), which every later request meets as
// 410 deleted; its running turn is cancelled on the cancel subject, its
// pending approvals are rejected through the approvers (the normal
// decision: signed, published, the tool never runs), and a queued turn
// goes with the tombstone (the agent that pulls it finds no conversation
// and drops it). The events stay, readable by the owner and admins, until
// the events stream's age limit, unless an admin purges them.

// DeleteResult is what a deletion did.
type DeleteResult struct {
	Conversation *store.SessionHead `json:"conversation"`
	// Cancelled is the turn that ran or was queued, asked to stop.
	Cancelled string `json:"cancelled_run,omitempty"`
	// Rejected are the approvals rejected; Unrejected those the approvers
	// did not reject (no approver answered): their resume will not apply.
	Rejected   []string `json:"rejected_approvals,omitempty"`
	Unrejected []string `json:"unrejected_approvals,omitempty"`
	// Purged: the events and the stored conversation are gone.
	Purged bool `json:"purged"`
}

// ReasonDeleted is the reason of an approval rejected by a deletion.
const ReasonDeleted = "conversation deleted"

// Delete deletes conversation id for the caller, its owner or an admin;
// with purge (admins only), its events and stored data go too. Deleting a
// tombstone again changes nothing (a purge still purges).
func (c *Core) Delete(ctx context.Context, id string, purge bool, caller Caller) (*DeleteResult, error) {
	if err := c.Writes(caller); err != nil {
		return nil, err
	}
	if err := CheckConversationID(id); err != nil {
		return nil, err
	}
	if purge && !c.May(caller, auth.Admin) {
		return nil, ErrForbidden.With("?purge=true needs the admin role: without it the events stay until the events stream's age limit")
	}
	h, err := c.Sessions.HeadAny(ctx, id)
	if errors.Is(err, mesh.ErrSessionExpired) && purge {
		return c.purge(ctx, id, &DeleteResult{Conversation: &store.SessionHead{ID: id, Status: mesh.StatusExpired}})
	}
	if err != nil {
		return nil, err
	}
	if !c.Sees(caller, h.Owner) {
		return nil, notFound(id)
	}
	by := "anonymous"
	if caller.Principal != nil {
		by = caller.Principal.Name
	}
	d, err := c.Sessions.Delete(ctx, id, by)
	if err != nil {
		return nil, err
	}
	out := &DeleteResult{Conversation: d.Tombstone}
	if b := d.Before; b != nil {
		c.log.Info().Str("session", id).Str("principal", by).Bool("purge", purge).Msg("conversation deleted")
		out.Cancelled = c.stopDeleted(b)
		for _, ap := range pendingOf(b) {
			if err := c.rejectDeleted(ctx, ap, by, caller); err != nil {
				c.log.Warn().Err(err).Str("session", id).Str("approval", ap).Msg("reject an approval of a deleted conversation")
				out.Unrejected = append(out.Unrejected, ap)
				continue
			}
			out.Rejected = append(out.Rejected, ap)
		}
	}
	if c.lists != nil {
		s := mesh.ConversationSummary{ID: id, SessionID: d.Tombstone.SessionID, Agent: d.Tombstone.Agent, Owner: d.Tombstone.Owner,
			Status: mesh.StatusDeleted, DeletedAt: d.Tombstone.DeletedAt, DeletedBy: d.Tombstone.DeletedBy}
		if old := c.lists.sessions.get(id); old != nil {
			s.CreatedAt = time.Unix(0, old.created).UTC()
			if prev, ok := old.item.(mesh.ConversationSummary); ok {
				s.Group, s.Title, s.CreatedAt = prev.Group, prev.Title, prev.CreatedAt
			}
		}
		if d.Tombstone.DeletedAt != nil {
			s.UpdatedAt = *d.Tombstone.DeletedAt
		}
		c.lists.sessions.put(sessionEntry(s, d.Revision))
	}
	if purge {
		return c.purge(ctx, id, out)
	}
	return out, nil
}

// purge removes the events and the stored conversation of id.
func (c *Core) purge(ctx context.Context, id string, out *DeleteResult) (*DeleteResult, error) {
	if err := store.PurgeEvents(ctx, c.cfg.JS, c.ns, id); err != nil {
		return nil, err
	}
	if err := c.Sessions.Purge(ctx, id); err != nil {
		return nil, err
	}
	if c.lists != nil {
		c.lists.sessions.delete(id)
	}
	out.Purged = true
	return out, nil
}

// stopDeleted asks the agents to stop what the deleted conversation ran
// (b, as it was before the deletion) and ends the waits of its runs; it
// returns the run it asked to stop.
func (c *Core) stopDeleted(b *mesh.Conversation) string {
	run := ""
	switch {
	case b.Turn != nil:
		run = b.Turn.ID
	case b.Queued != nil:
		run = b.Queued.ID
	}
	if subj, err := c.ns.SessionCancel(b.ID); err == nil {
		if err := c.cfg.NC.Publish(subj, nil); err != nil {
			c.log.Warn().Err(err).Str("session", b.ID).Msg("cancel the turn of a deleted conversation")
		}
	}
	// Whoever waits for a run of it learns at once.
	c.mu.Lock()
	var waiting []*Run
	for _, r := range c.waiters {
		if r.session == b.ID {
			waiting = append(waiting, r)
		}
	}
	c.mu.Unlock()
	for _, r := range waiting {
		r.end(nil)
	}
	return run
}

// pendingOf are the approvals conversation b waited for.
func pendingOf(b *mesh.Conversation) []string {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if b.PendingApproval != nil {
		add(b.PendingApproval.UUID)
	}
	for _, p := range b.PendingApprovals {
		add(p.UUID)
	}
	if b.Tree != nil {
		for _, sr := range b.Tree.Steps {
			for _, ap := range sr.Approvals {
				add(ap)
			}
		}
	}
	return out
}

// rejectDeleted rejects approval id through the approvers, the normal
// decision path: the statement says rejected, with the reason, decided by
// the principal who deleted the conversation. One decided already is left
// as it is.
func (c *Core) rejectDeleted(ctx context.Context, id, by string, caller Caller) error {
	subj, err := c.ns.ApprovalDecide(id)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"approved": false, "reason": ReasonDeleted, "by": by})
	m := nats.NewMsg(subj)
	m.Data = body
	m.Header = caller.headers(caller.SessionID)
	if c.cfg.Auth && caller.Principal != nil {
		m.Header.Set(mesh.HeaderPrincipal, caller.Principal.Name)
	}
	reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reply, err := c.cfg.NC.RequestMsgWithContext(reqCtx, m)
	if err != nil {
		return fmt.Errorf("reject %s: %w", id, err)
	}
	if err := mesh.ErrorFromMsg(reply); err != nil && !errors.Is(err, mesh.ErrApprovalDecided) {
		return err
	}
	return nil
}

// hideGone is err, or not found when err is the 410 of a tombstone the
// caller may not see: a deleted conversation of someone else is as unknown
// as any of theirs.
func (c *Core) hideGone(caller Caller, id string, err error) error {
	if owner, ok := mesh.GoneOwner(err); ok && !c.Sees(caller, owner) {
		return notFound(id)
	}
	return err
}

// TombstoneFor is [Core.HeadFor] that also returns a tombstone: a deleted
// conversation's events stay readable by its owner and admins until the
// events stream's age limit (or a purge).
func (c *Core) TombstoneFor(ctx context.Context, id string, caller Caller) (*store.SessionHead, error) {
	if err := CheckConversationID(id); err != nil {
		return nil, err
	}
	h, err := c.Sessions.HeadAny(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.check(caller, h); err != nil {
		return nil, err
	}
	noteConversation(ctx, h.ID, h.SessionID)
	return h, nil
}
