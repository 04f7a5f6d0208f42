package ops

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// Item is one approval as the inbox shows it: the approval (without its
// seal) and what the inbox adds to it.
type Item struct {
	*mesh.Approval
	// Conversation is the conversation the approval pauses; nil when it
	// no longer exists.
	Conversation *ConversationRef `json:"conversation,omitempty"`
	// Member is the step of the agent tree or the group member whose call
	// waits; empty for an agent without a tree.
	Member string `json:"member,omitempty"`
	// Request is the user message of the turn that made the call.
	Request string `json:"request,omitempty"`
	// AskedBy is the principal whose message made the call (the
	// conversation's owner); empty when the mesh had no authentication.
	AskedBy string `json:"asked_by,omitempty"`
	// WaitedSeconds is how long it has waited (pending), or waited before
	// it was decided.
	WaitedSeconds float64 `json:"waited_seconds"`
}

// ConversationRef names a conversation.
type ConversationRef struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	Agent string `json:"agent,omitempty"`
	Group string `json:"group,omitempty"`
	Owner string `json:"owner,omitempty"`
}

// Inbox is GET /ops/approvals.
type Inbox struct {
	// Pending are the approvals waiting for a person, oldest first.
	Pending []Item `json:"pending"`
	// Decided are the approvals people decided, newest first.
	Decided []Item `json:"decided"`
	// Counts are pending, approved and rejected approvals the bridge has
	// seen since it started (every one in the bucket then, and since);
	// decisions of a policy are not counted.
	Counts map[mesh.ApprovalStatus]int `json:"counts"`
	At     time.Time                   `json:"at"`
}

// inbox keeps the approvals a person decides: every pending one, and the
// last decided ones.
type inbox struct {
	keep    int
	changed *core.Signal

	mu       sync.Mutex
	ready    bool
	pending  map[string]*mesh.Approval
	decided  map[string]*mesh.Approval
	statuses map[string]mesh.ApprovalStatus // every one seen, for the counts
	details  map[string]*detail             // by approval id
}

// detail is what the inbox reads from an approval's conversation.
type detail struct {
	conv    *ConversationRef
	member  string
	request string
	// found: the conversation holds the call (it is saved after the
	// approval is recorded); until then the detail is read again.
	found bool
}

func newInbox(keep int) *inbox {
	return &inbox{keep: keep, changed: core.NewSignal(), pending: map[string]*mesh.Approval{}, decided: map[string]*mesh.Approval{},
		statuses: map[string]mesh.ApprovalStatus{}, details: map[string]*detail{}}
}

// apply takes one entry of the approvals bucket.
func (b *inbox) apply(e jetstream.KeyValueEntry) {
	key := e.Key()
	if strings.HasPrefix(key, "_") {
		return // the approvers' public keys
	}
	var ap mesh.Approval
	put := e.Operation() == jetstream.KeyValuePut
	if put && (json.Unmarshal(e.Value(), &ap) != nil || ap.UUID != key) {
		return
	}
	b.mu.Lock()
	delete(b.pending, key)
	delete(b.decided, key)
	switch {
	case !put:
		delete(b.statuses, key)
		delete(b.details, key)
	case ap.Policy != "":
		// A policy's decision: nobody waits for it.
	case ap.Status == mesh.ApprovalPending:
		b.pending[key] = ap.Public()
		b.statuses[key] = ap.Status
	default:
		b.decided[key] = ap.Public()
		b.statuses[key] = ap.Status
		b.trim()
	}
	ready := b.ready
	b.mu.Unlock()
	if ready {
		b.changed.Fire()
	}
}

// trim drops the oldest decided approvals beyond keep.
func (b *inbox) trim() {
	if len(b.decided) <= b.keep {
		return
	}
	all := slices.SortedFunc(maps.Values(b.decided), newestFirst)
	for _, ap := range all[b.keep:] {
		delete(b.decided, ap.UUID)
		delete(b.details, ap.UUID)
	}
}

func (b *inbox) synced() {
	b.mu.Lock()
	b.ready = true
	b.mu.Unlock()
	b.changed.Fire()
}

func (b *inbox) pendingCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

func oldestFirst(a, b *mesh.Approval) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.UUID, b.UUID))
}

func newestFirst(a, b *mesh.Approval) int {
	return cmp.Or(b.DecidedAt.Compare(a.DecidedAt), strings.Compare(a.UUID, b.UUID))
}

// inboxView is the inbox now, with up to history decided approvals.
func (s *Service) inboxView(ctx context.Context, history int) Inbox {
	b := s.inbox
	b.mu.Lock()
	pending := slices.SortedFunc(maps.Values(b.pending), oldestFirst)
	decided := slices.SortedFunc(maps.Values(b.decided), newestFirst)
	if len(decided) > history {
		decided = decided[:history]
	}
	counts := map[mesh.ApprovalStatus]int{mesh.ApprovalPending: 0, mesh.ApprovalApproved: 0, mesh.ApprovalRejected: 0}
	for _, st := range b.statuses {
		counts[st]++
	}
	b.mu.Unlock()
	now := s.now()
	out := Inbox{Pending: make([]Item, 0, len(pending)), Decided: make([]Item, 0, len(decided)), Counts: counts, At: now.UTC()}
	for _, ap := range pending {
		out.Pending = append(out.Pending, s.item(ctx, ap, now.Sub(ap.CreatedAt)))
	}
	for _, ap := range decided {
		out.Decided = append(out.Decided, s.item(ctx, ap, ap.DecidedAt.Sub(ap.CreatedAt)))
	}
	return out
}

// item adds to ap what its conversation says, read once per approval.
func (s *Service) item(ctx context.Context, ap *mesh.Approval, waited time.Duration) Item {
	b := s.inbox
	b.mu.Lock()
	d := b.details[ap.UUID]
	b.mu.Unlock()
	if d == nil {
		d = s.readDetail(ctx, ap)
		if d != nil && d.found {
			b.mu.Lock()
			if _, ok := b.statuses[ap.UUID]; ok {
				b.details[ap.UUID] = d
			}
			b.mu.Unlock()
		}
	}
	it := Item{Approval: ap, WaitedSeconds: max(0, waited.Seconds())}
	if d != nil {
		it.Conversation, it.Member, it.Request = d.conv, d.member, d.request
		it.AskedBy = d.conv.Owner
	}
	return it
}

// readDetail reads the approval's conversation: its name, the member or
// step whose call waits and the user message of that turn. Nil when it
// cannot be read now (asked again next time) or is gone.
func (s *Service) readDetail(ctx context.Context, ap *mesh.Approval) *detail {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conv, err := s.core.Sessions.Get(ctx, ap.ConversationID)
	if err != nil {
		return nil
	}
	sum := conv.Summary()
	d := &detail{conv: &ConversationRef{ID: conv.ID, Title: sum.Title, Agent: conv.Agent, Group: sum.Group, Owner: conv.Owner}}
	for _, m := range conv.Messages {
		if m.Role == mesh.RoleUser {
			d.request = m.Content
		}
		if slices.ContainsFunc(m.ToolCalls, func(c mesh.ToolCall) bool { return c.ID == ap.ToolCallID }) {
			d.member, d.found = m.Name, true
			break
		}
	}
	return d
}
