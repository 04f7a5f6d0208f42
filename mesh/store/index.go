package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// SummaryOf is the list form of a stored conversation (a value of the
// sessions bucket): its head carries the message count and the title, so
// no message is read; a head of an earlier version, with its messages
// inside, is counted and titled from them. A bridge's listing index reads
// every save of every conversation with it.
func SummaryOf(data []byte) (mesh.ConversationSummary, error) {
	var h summaryHead
	if !scanSummary(data, &h) {
		h = summaryHead{}
		if err := json.Unmarshal(data, &h); err != nil {
			return mesh.ConversationSummary{}, fmt.Errorf("decode conversation: %w", err)
		}
	}
	c := mesh.Conversation{ID: h.ID, SessionID: h.SessionID, Agent: h.Agent, Owner: h.Owner, Status: h.Status, Title: h.Title,
		Messages: h.Messages, MessageCount: h.MessageCount, PendingApproval: h.PendingApproval, Queued: h.Queued,
		CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt, DeletedAt: h.DeletedAt, DeletedBy: h.DeletedBy, ForkedFrom: h.ForkedFrom}
	if h.Group != nil {
		c.Group = &mesh.GroupRun{Name: h.Group.Name}
	}
	return c.Summary(), nil
}

// summaryHead is what [SummaryOf] decodes of a head: the fields of the
// list form. encoding/json skips the others (the message tail, the recent
// turns, the state, the last run) without building them, and a bridge
// decodes every save of the mesh this way.
type summaryHead struct {
	ID              string                `json:"id"`
	SessionID       string                `json:"session_id"`
	Agent           string                `json:"agent"`
	Owner           string                `json:"owner"`
	Status          mesh.Status           `json:"status"`
	Title           string                `json:"title"`
	Messages        []mesh.Message        `json:"messages"` // a head of an earlier version's
	MessageCount    int                   `json:"message_count"`
	PendingApproval *mesh.PendingApproval `json:"pending_approval"`
	Queued          *mesh.QueuedTurn      `json:"queued_turn"`
	Group           *struct {
		Name string `json:"name"`
	} `json:"group"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at"`
	DeletedBy string     `json:"deleted_by"`
	// ForkedFrom: a branch's.
	ForkedFrom *mesh.ForkPoint `json:"forked_from"`
}

// Summaries are the list forms of every conversation of the bucket (not
// the run reservations), read by one watch of the bucket and decoded with
// [SummaryOf]: what an operator's listing over NATS reads (mesh sessions).
// The bridge keeps an index instead (bridge/core/listing.go).
func (s *SessionStore) Summaries(ctx context.Context) ([]mesh.ConversationSummary, error) {
	w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []mesh.ConversationSummary
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return out, nil
			}
			if e == nil {
				return out, nil // every current entry delivered
			}
			if strings.HasPrefix(e.Key(), RunKeyPrefix) {
				continue
			}
			if sum, err := SummaryOf(e.Value()); err == nil {
				out = append(out, sum)
			}
		}
	}
}
