package core

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Ownership: a conversation belongs to the principal who created it
// (mesh.Conversation.Owner). While authentication is on (Config.Auth),
// every path to a conversation asks [Core.Sees] first, and one the caller
// may not reach is not found, exactly as one that does not exist: a
// principal learns nothing of others' conversations, not even their ids.
// With authentication off every caller sees everything, as before.

// Sees reports whether caller may reach a conversation of owner: its owner
// or an admin, or anyone when authentication is off.
func (c *Core) Sees(caller Caller, owner string) bool {
	return !c.cfg.Auth || caller.Principal.Owns(owner)
}

// Authenticated reports whether the caller proved who it is (always, with
// authentication off).
func (c *Core) Authenticated(caller Caller) bool { return !c.cfg.Auth || caller.Principal != nil }

// May reports whether the caller's roles grant perm (always, with
// authentication off).
func (c *Core) May(caller Caller, perm auth.Permission) bool {
	return !c.cfg.Auth || caller.Principal.May(perm)
}

// ErrReadOnly refuses a change asked with a credential that only reads: a
// stream token, on the AG-UI socket it opened.
var ErrReadOnly = mesh.NewError("read_only", http.StatusForbidden, "a stream token only reads")

// Writes is nil when the caller may change something (a conversation, a
// turn, a decision, a rating, a file), and [ErrReadOnly] when its
// credential only reads ([auth.Principal.ReadOnly]). Every change of the
// core asks it, whichever surface it comes from.
func (c *Core) Writes(caller Caller) error {
	if caller.Principal.ReadOnly() {
		return ErrReadOnly.With("this connection was opened with a stream token, which only reads: it may follow and reattach to runs; " +
			"open it with Authorization: Bearer <token> to run, cancel, decide or rate")
	}
	return nil
}

// owner is what a conversation the caller creates records as its owner.
func (c *Core) owner(caller Caller) string {
	if !c.cfg.Auth || caller.Principal == nil {
		return ""
	}
	return caller.Principal.Name
}

// notFound is the error for a conversation the caller may not reach.
func notFound(id string) error {
	return mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found", mesh.Clip(id)))
}

// check is nil when the caller may reach the conversation of head h, else
// not found.
func (c *Core) check(caller Caller, h *store.SessionHead) error {
	if !c.Sees(caller, h.Owner) {
		return notFound(h.ID)
	}
	return nil
}

// HeadFor is the head of conversation id as the caller may see it: not
// found when it does not exist or belongs to someone else.
func (c *Core) HeadFor(ctx context.Context, id string, caller Caller) (*store.SessionHead, error) {
	h, err := c.Sessions.Head(ctx, id)
	if err != nil {
		return nil, c.hideGone(caller, id, err)
	}
	if err := c.check(caller, h); err != nil {
		return nil, err
	}
	noteConversation(ctx, h.ID, h.SessionID)
	return h, nil
}

// GetFor is conversation id, whole, as the caller may see it: not found
// when it does not exist or belongs to someone else.
func (c *Core) GetFor(ctx context.Context, id string, caller Caller) (*mesh.Conversation, error) {
	conv, err := c.Sessions.Get(ctx, id)
	if err != nil {
		return nil, c.hideGone(caller, id, err)
	}
	if !c.Sees(caller, conv.Owner) {
		return nil, notFound(id)
	}
	noteConversation(ctx, conv.ID, conv.SessionID)
	return conv, nil
}

// ListFor is every conversation the caller may see.
func (c *Core) ListFor(ctx context.Context, caller Caller) ([]*mesh.Conversation, error) {
	all, err := c.Sessions.List(ctx)
	if err != nil || !c.cfg.Auth {
		return all, err
	}
	out := all[:0]
	for _, conv := range all {
		if c.Sees(caller, conv.Owner) {
			out = append(out, conv)
		}
	}
	return out, nil
}

// SeesApproval reports whether the caller may read approval ap: an
// approver or an admin reads them all, others those of the conversations
// they own. owners caches the owners of the conversations looked up.
func (c *Core) SeesApproval(ctx context.Context, caller Caller, ap *mesh.Approval, owners map[string]string) bool {
	if !c.cfg.Auth || caller.Principal.May(auth.Decide) {
		return true
	}
	owner, ok := owners[ap.ConversationID]
	if !ok {
		// A deleted conversation's tombstone keeps its owner; an expired
		// one's is still in the listing for a while.
		if h, err := c.Sessions.HeadAny(ctx, ap.ConversationID); err == nil {
			owner = h.Owner
		} else if c.lists != nil {
			if e := c.lists.sessions.get(ap.ConversationID); e != nil {
				owner = e.owner
			}
		}
		owners[ap.ConversationID] = owner
	}
	return owner != "" && c.Sees(caller, owner)
}
