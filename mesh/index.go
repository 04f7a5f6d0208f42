package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// SummaryOf is the list form of a stored conversation (a value of the
// sessions bucket): its head carries the message count and the title, so
// no message is read; a head of an earlier version, with its messages
// inside, is counted and titled from them. A bridge's listing index reads
// every save of every conversation with it.
func SummaryOf(data []byte) (ConversationSummary, error) {
	var c Conversation
	if err := json.Unmarshal(data, &c); err != nil {
		return ConversationSummary{}, fmt.Errorf("decode conversation: %w", err)
	}
	if c.MessageCount == 0 && len(c.Messages) > 0 {
		c.MessageCount, c.Title = len(c.Messages), titleOf(c.Messages)
	}
	c.Messages = nil
	return c.Summary(), nil
}

// Summaries are the list forms of every conversation of the bucket (not
// the run reservations), read by one watch of the bucket and decoded with
// [SummaryOf]: what an operator's listing over NATS reads (mesh sessions).
// The bridge keeps an index instead (bridge/core/listing.go).
func (s *SessionStore) Summaries(ctx context.Context) ([]ConversationSummary, error) {
	w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []ConversationSummary
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
