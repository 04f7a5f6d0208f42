package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// live is nil for a conversation that may be read and changed, the 410 of
// a tombstone.
func live(id string, status mesh.Status, owner string, at *time.Time) error {
	if status != mesh.StatusDeleted {
		return nil
	}
	msg := fmt.Sprintf("conversation %s was deleted", mesh.Clip(id))
	if at != nil {
		msg += " at " + at.UTC().Format(time.RFC3339)
	}
	return &mesh.GoneError{Err: mesh.ErrSessionDeleted.With(msg), Owner: owner}
}

// WithConn lets the store tell an expired conversation from one that never
// existed: it reads the bucket's limit markers by direct get on nc. A store
// without it answers not found for both.
func (s *SessionStore) WithConn(nc *nats.Conn) *SessionStore {
	s.nc = nc
	return s
}

// missing is err, a read that found no conversation id, or
// [ErrSessionExpired] when the bucket's last word on the key is the limit
// marker of its max age.
func (s *SessionStore) missing(ctx context.Context, id string, err error) error {
	if !errors.Is(err, mesh.ErrSessionNotFound) || mesh.IsGone(err) || s.nc == nil {
		return err
	}
	if at, ok := s.expiredAt(ctx, id); ok {
		return mesh.ErrSessionExpired.With(fmt.Sprintf("conversation %s expired at %s after sessions.ttl without activity", mesh.Clip(id), at.UTC().Format(time.RFC3339)))
	}
	return err
}

// expiredAt reads the last message of key id in the bucket's stream and
// reports whether it is a max-age limit marker, and when it was placed. The
// jetstream KV API hides the markers' reasons (a marker is "not found"
// whatever placed it), so this asks the stream directly (DIRECT.GET, which
// every role that reads the bucket may).
func (s *SessionStore) expiredAt(ctx context.Context, id string) (time.Time, bool) {
	bucket := s.kv.Bucket()
	subj := "$JS.API.DIRECT.GET.KV_" + bucket + ".$KV." + bucket + "." + id
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, subj, nil)
	if err != nil || m.Header == nil || m.Header.Get(jetstream.MarkerReasonHeader) != "MaxAge" {
		return time.Time{}, false
	}
	at, _ := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
	return at, true
}

// HeadAny is [SessionStore.Head] that also returns a tombstone (status
// deleted): what deleting again and reading a deleted conversation's events
// need.
func (s *SessionStore) HeadAny(ctx context.Context, id string) (*SessionHead, error) {
	if mesh.CheckID(id) != nil {
		return nil, mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", mesh.Clip(id), mesh.IDRule))
	}
	h, _, err := getJSON[SessionHead](ctx, s.kv, id, mesh.ErrSessionNotFound)
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	return h, nil
}

// Deleted is what [SessionStore.Delete] found and left.
type Deleted struct {
	// Tombstone is the conversation as it now stands.
	Tombstone *SessionHead
	// Before is its head before the deletion: the turn that ran, the turn
	// queued, the approvals it waited for. Nil when it was deleted already.
	Before *mesh.Conversation
	// Revision is the tombstone's revision in the bucket.
	Revision uint64
}

// Delete replaces conversation id by its tombstone: status deleted, the id,
// owner, agent, trace id and creation time kept, deleted_at and deleted_by
// set, the messages and everything a turn needs gone (a queued turn is
// dropped with them). It is idempotent: deleting a tombstone changes
// nothing. The caller cancels the running turn and rejects the approvals
// that Before waited for.
func (s *SessionStore) Delete(ctx context.Context, id, by string) (*Deleted, error) {
	if mesh.CheckID(id) != nil {
		return nil, mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", mesh.Clip(id), mesh.IDRule))
	}
	out := &Deleted{}
	// The head alone is rewritten: the tombstone counts no message, so no
	// read reaches the message log (Purge empties it).
	c, rev, err := updateJSON(ctx, s.kv, id, mesh.ErrSessionNotFound, nil, 0, func(c *mesh.Conversation) error {
		out.Before = nil
		if c.Status == mesh.StatusDeleted {
			return ErrNoChange
		}
		before := *c
		out.Before = &before
		now := s.now().UTC()
		*c = mesh.Conversation{
			ID: c.ID, SessionID: c.SessionID, Agent: c.Agent, Owner: c.Owner, Status: mesh.StatusDeleted,
			Group: c.Group, Version: c.Version + 1, CreatedAt: c.CreatedAt, UpdatedAt: now,
			DeletedAt: &now, DeletedBy: by, Messages: []mesh.Message{},
			// Kept: the family of a branch is told by it (GET /branches).
			ForkedFrom: c.ForkedFrom,
		}
		return nil
	})
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	out.Revision = rev
	out.Tombstone = &SessionHead{ID: c.ID, SessionID: c.SessionID, Agent: c.Agent, Owner: c.Owner, Status: c.Status, DeletedAt: c.DeletedAt, DeletedBy: c.DeletedBy}
	return out, nil
}

// Purge removes conversation id from the sessions bucket, every revision,
// leaving only the bucket's purge marker: afterwards it is not found (404),
// no longer gone. Whatever else a conversation stores goes here too, so
// that one call purges it all, but for the messages a living branch
// shares: they stay until the last such branch goes (fork.go). The events are the caller's: they live in
// a stream of their own ([PurgeEvents]).
func (s *SessionStore) Purge(ctx context.Context, id string) error {
	if err := mesh.CheckID(id); err != nil {
		return mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", mesh.Clip(id), mesh.IDRule))
	}
	if err := s.kv.Purge(ctx, id); err != nil {
		return fmt.Errorf("purge %s: %w", id, err)
	}
	if s.log != nil {
		return s.purgeLog(ctx, id, map[string]bool{})
	}
	return nil
}

// PurgeMessages empties the message log of conversation id, whose head is
// gone (it expired), unless a branch that lives still shares part of it
// (fork.go): they go with the last such branch.
func (s *SessionStore) PurgeMessages(ctx context.Context, id string) error {
	if s.log == nil || mesh.CheckID(id) != nil {
		return nil
	}
	return s.purgeLog(ctx, id, map[string]bool{})
}

// PurgeEvents removes the events of conversation id from the events
// stream, those on mesh.evt.<id>.> (RemoveSubject).
func PurgeEvents(ctx context.Context, js jetstream.JetStream, ns mesh.Namespace, id string) error {
	subj, err := ns.EventsOf(id)
	if err != nil {
		return mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found", mesh.Clip(id)))
	}
	st, err := js.Stream(ctx, ns.Stream(mesh.StreamEvents))
	if err != nil {
		return fmt.Errorf("purge events of %s: %w", id, err)
	}
	if err := RemoveSubject(ctx, st, subj, nil); err != nil {
		return fmt.Errorf("remove the events of %s: %w", id, err)
	}
	return nil
}

// Touch saves conversation id unchanged but for its updated_at and version:
// a save renews its age in the bucket, so that a conversation that waits for
// a person (an approval) does not expire meanwhile. A conversation that
// changed since at (the time its reader saw) is left as it is.
func (s *SessionStore) Touch(ctx context.Context, id string, at time.Time) error {
	_, err := s.UpdateHead(ctx, id, func(c *mesh.Conversation) error {
		if c.UpdatedAt.After(at) {
			return ErrNoChange
		}
		return nil
	})
	return err
}

// create creates key id. An expired conversation's id is not taken again
// while its limit marker says it expired (it answers 410 meanwhile); a
// deleted marker of another kind (a purge) does not stand in the way.
func (s *SessionStore) create(ctx context.Context, id string, data []byte) (uint64, error) {
	if s.nc == nil {
		return s.kv.Create(ctx, id, data)
	}
	// Revision 0: only when the key's subject holds no message at all.
	rev, err := s.kv.Update(ctx, id, data, 0)
	if err == nil || !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return rev, err
	}
	if _, expired := s.expiredAt(ctx, id); expired {
		return 0, mesh.ErrSessionExpired.With(fmt.Sprintf("conversation %s expired; its id is not taken again until it is cleaned up", mesh.Clip(id)))
	}
	return s.kv.Create(ctx, id, data)
}
