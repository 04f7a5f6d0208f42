package core

import (
	"context"
	"errors"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// ErrNotABranch refuses a fork into an id that names a conversation
// which is not a branch of the one forked (an AG-UI thread, an A2A
// context the client chose).
var ErrNotABranch = mesh.NewError("conflict", http.StatusConflict, "that id names a conversation that is not a branch of the one forked")

// ForkAs is Fork into a branch whose id the client chose (an AG-UI
// thread, an A2A context), which must not exist yet: an id taken (also
// by a deleted conversation) is jetstream.ErrKeyExists. It is checked
// first, so that the grants a fork writes in the original's log name only
// an id that was free.
func (c *Core) ForkAs(ctx context.Context, id, branchID string, req ForkRequest, caller Caller) (*mesh.Conversation, error) {
	if err := CheckID("branch id", branchID); err != nil {
		return nil, err
	}
	switch _, err := c.Sessions.Head(ctx, branchID); {
	case err == nil || mesh.IsGone(err):
		return nil, jetstream.ErrKeyExists
	case !errors.Is(err, mesh.ErrSessionNotFound):
		return nil, err
	}
	req.ID = branchID
	return c.Fork(ctx, id, req, caller)
}

// ForkedFrom is where conversation id was forked: nil when it is no
// branch; a conversation the caller may not read is not found.
func (c *Core) ForkedFrom(ctx context.Context, id string, caller Caller) (*mesh.ForkPoint, error) {
	if _, err := c.HeadFor(ctx, id, caller); err != nil {
		return nil, err
	}
	conv, err := c.Sessions.Get(ctx, id)
	if err != nil {
		return nil, c.hideGone(caller, id, err)
	}
	return conv.ForkedFrom, nil
}
