package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// ApprovalStore keeps approvals in the approvals bucket.
type ApprovalStore struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

// NewApprovalStore returns a store over the approvals bucket.
func NewApprovalStore(kv jetstream.KeyValue) *ApprovalStore {
	return &ApprovalStore{kv: kv, now: time.Now}
}

// Get returns the approval, or an error matching [ErrApprovalNotFound].
func (s *ApprovalStore) Get(ctx context.Context, id string) (*mesh.Approval, error) {
	if mesh.CheckID(id) != nil {
		return nil, mesh.ErrApprovalNotFound.With(fmt.Sprintf("approval %s not found: an approval id is %s", mesh.Clip(id), mesh.IDRule))
	}
	a, rev, err := getJSON[mesh.Approval](ctx, s.kv, id, mesh.ErrApprovalNotFound)
	if err != nil {
		return nil, err
	}
	if err := storedUnder(a, id); err != nil {
		return nil, err
	}
	a.Revision = rev
	return a, nil
}

// Create stores a new approval (pending unless its status says otherwise).
// Creating one that exists for the same call is not an error: a becomes
// the stored approval, so a request asked again gets the record as it
// stands.
// Only the approver creates approvals.
func (s *ApprovalStore) Create(ctx context.Context, a *mesh.Approval) error {
	if err := mesh.CheckID(a.UUID); err != nil {
		return err
	}
	if a.Status == "" {
		a.Status = mesh.ApprovalPending
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = s.now().UTC()
	}
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode approval %s: %w", a.UUID, err)
	}
	rev, err := s.kv.Create(ctx, a.UUID, data)
	if err != nil {
		if existing, gerr := s.Get(ctx, a.UUID); gerr == nil && existing.ConversationID == a.ConversationID && existing.ToolCallID == a.ToolCallID {
			*a = *existing
			return nil
		}
		return fmt.Errorf("create approval %s: %w", a.UUID, err)
	}
	a.Revision = rev
	return nil
}

// Decide moves a pending approval to approved or rejected. A second decision
// fails with an error matching [ErrApprovalDecided] that carries the first.
func (s *ApprovalStore) Decide(ctx context.Context, id string, d mesh.Decision) (*mesh.Approval, error) {
	return s.Update(ctx, id, func(a *mesh.Approval) error {
		if a.Status != mesh.ApprovalPending {
			return mesh.ErrApprovalDecided.With(fmt.Sprintf("approval %s was already %s", id, a.Status))
		}
		a.Status = mesh.ApprovalRejected
		if d.Approved {
			a.Status = mesh.ApprovalApproved
		}
		a.Decision = &d
		a.DecidedAt = s.now().UTC()
		return nil
	})
}

// Update applies change by compare-and-set, like [SessionStore.Update].
func (s *ApprovalStore) Update(ctx context.Context, id string, change func(*mesh.Approval) error) (*mesh.Approval, error) {
	if mesh.CheckID(id) != nil {
		return nil, mesh.ErrApprovalNotFound.With(fmt.Sprintf("approval %s not found: an approval id is %s", mesh.Clip(id), mesh.IDRule))
	}
	a, rev, err := updateJSON(ctx, s.kv, id, mesh.ErrApprovalNotFound, nil, 0, func(a *mesh.Approval) error {
		if err := storedUnder(a, id); err != nil {
			return err
		}
		return change(a)
	})
	if err != nil {
		return nil, err
	}
	a.Revision = rev
	return a, nil
}

// List returns every approval, optionally only those with a status.
func (s *ApprovalStore) List(ctx context.Context, status mesh.ApprovalStatus) ([]*mesh.Approval, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	var out []*mesh.Approval
	for key := range keys.Keys() {
		a, err := s.Get(ctx, key)
		if err != nil {
			continue // deleted between the listing and the read
		}
		if status == "" || a.Status == status {
			out = append(out, a)
		}
	}
	return out, nil
}

// storedUnder checks the approval against the key it was read from: a
// record of one approval stored under another's id is refused, never taken
// for the one the key names.
func storedUnder(a *mesh.Approval, key string) error {
	if a.UUID != key {
		return mesh.ErrApprovalTampered.With(fmt.Sprintf("the record stored as approval %s is that of approval %s; reject it, and ask again", mesh.Clip(key), mesh.Clip(a.UUID)))
	}
	return nil
}
