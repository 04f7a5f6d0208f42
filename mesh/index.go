package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// SummaryOf is the list form of a stored conversation (a value of the
// sessions bucket) without decoding its messages: the head is decoded, the
// messages are counted by a scan of their JSON array, and only those up to
// the first user message (the title) are decoded. A bridge's listing index
// reads every save of every conversation with it.
func SummaryOf(data []byte) (ConversationSummary, error) {
	var d ConversationDoc
	if err := d.decodeStored(data); err != nil {
		return ConversationSummary{}, fmt.Errorf("decode conversation: %w", err)
	}
	d.ensure()
	c := d.Conversation
	c.Messages = nil
	s := c.Summary()
	s.MessageCount, s.Title = scanMessages(d.Messages)
	return s, nil
}

// scanMessages counts the elements of the JSON array raw and finds the
// content of the first user message, decoding no other message.
func scanMessages(raw []byte) (n int, title string) {
	depth, inString, escaped, start, found := 0, false, false, -1, false
	for i, b := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		case b == '"':
			inString = true
		case b == '[' || b == '{':
			depth++
			if depth == 2 {
				start = i
			}
		case b == ']' || b == '}':
			if depth == 2 && start >= 0 {
				n++
				if !found {
					title, found = userText(raw[start : i+1])
				}
				start = -1
			}
			depth--
		}
	}
	return n, title
}

// userText is the title a message gives a conversation, when it is a
// user's (ok): its content, cut to 80 characters.
func userText(msg []byte) (title string, ok bool) {
	var m struct {
		Role    Role   `json:"role"`
		Content string `json:"content"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Role != RoleUser {
		return "", false
	}
	if r := []rune(m.Content); len(r) > 80 {
		return string(r[:80]) + "…", true
	}
	return m.Content, true
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
