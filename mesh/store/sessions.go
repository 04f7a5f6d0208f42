package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// SessionStore keeps conversations: the head of each in the sessions
// bucket, its messages in the message log (messages.go).
type SessionStore struct {
	kv  jetstream.KeyValue
	log *MessageLog
	now func() time.Time
	nc  *nats.Conn // reads limit markers (lifecycle.go); nil: none
	// HistoryBytes bounds the messages a read loads (the history the model
	// gets, a page): the newest that fit, at most [TailKept]. Zero means
	// [DefaultHistoryBytes] (sessions.max_bytes sets it).
	HistoryBytes int
	// Logger gets a WARN line when a compare-and-set gives up after
	// meeting a newer revision on every try. Zero value: disabled.
	Logger zerolog.Logger
}

// NewSessionStore returns a store over the sessions bucket and the message
// log.
func NewSessionStore(kv jetstream.KeyValue, log *MessageLog) *SessionStore {
	return &SessionStore{kv: kv, log: log, now: time.Now}
}

// WithLogger sets s's Logger and returns s.
func (s *SessionStore) WithLogger(l zerolog.Logger) *SessionStore {
	s.Logger = l
	return s
}

func (s *SessionStore) budget() int {
	if s.HistoryBytes > 0 {
		return s.HistoryBytes
	}
	return DefaultHistoryBytes
}

func badID(id string) error {
	return mesh.ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", mesh.Clip(id), mesh.IDRule))
}

// Get returns the conversation with its newest messages (the history:
// HistoryBytes, [TailKept] at most, no tool result without its call), or
// an error matching [ErrSessionNotFound].
func (s *SessionStore) Get(ctx context.Context, id string) (*mesh.Conversation, error) {
	if mesh.CheckID(id) != nil {
		return nil, badID(id)
	}
	start := time.Now()
	c, rev, err := getJSON[mesh.Conversation](ctx, s.kv, id, mesh.ErrSessionNotFound)
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	if err := live(id, c.Status, c.Owner, c.DeletedAt); err != nil {
		return nil, err
	}
	c.Revision = rev
	if err := s.loadHistory(ctx, c); err != nil {
		return nil, err
	}
	telemetry.SessionLoaded(time.Since(start))
	return c, nil
}

// loadHistory reads the newest messages of c that fit the budget.
func (s *SessionStore) loadHistory(ctx context.Context, c *mesh.Conversation) error {
	if c.MessageCount == 0 {
		// Nothing in the log yet: messages a head of an earlier version
		// holds are appended to the log by the next save.
		c.SetStored(0, nil)
		return nil
	}
	k := historyStart(c.MessageTail, s.budget())
	msgs, snap, err := s.log.decodedAt(ctx, sourceOf(c), c.MessageTail[k:])
	if err != nil {
		return err
	}
	c.Messages = cutHistory(msgs)
	c.SetStored(len(c.Messages), snap[len(msgs)-len(c.Messages):])
	return nil
}

// Head returns the head of the conversation, or an error matching
// [ErrSessionNotFound].
func (s *SessionStore) Head(ctx context.Context, id string) (*SessionHead, error) {
	if mesh.CheckID(id) != nil {
		return nil, badID(id)
	}
	h, _, err := getJSON[SessionHead](ctx, s.kv, id, mesh.ErrSessionNotFound)
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	if err := live(id, h.Status, h.Owner, h.DeletedAt); err != nil {
		return nil, err
	}
	return h, nil
}

// HeadOf decodes the head of conversation id from a save of it as the
// sessions bucket holds it (a watch's entry), as [SessionStore.Head] would
// read it.
func HeadOf(id string, data []byte) (*SessionHead, error) {
	var h SessionHead
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("decode %s: %w", id, err)
	}
	if err := live(id, h.Status, h.Owner, h.DeletedAt); err != nil {
		return nil, err
	}
	return &h, nil
}

// SessionHead is the part of a conversation that says whether it can take a
// message.
type SessionHead struct {
	ID              string                `json:"id"`
	SessionID       string                `json:"session_id"`
	Agent           string                `json:"agent"`
	Owner           string                `json:"owner,omitempty"`
	Status          mesh.Status           `json:"status"`
	PendingApproval *mesh.PendingApproval `json:"pending_approval,omitempty"`
	Turn            *mesh.Turn            `json:"turn,omitempty"`
	Queued          *mesh.QueuedTurn      `json:"queued_turn,omitempty"`
	RecentTurns     []string              `json:"recent_turns,omitempty"`
	// Group is set on a group conversation: messages go to its group.
	Group *struct {
		Name string `json:"name"`
	} `json:"group,omitempty"`
	// DeletedAt and DeletedBy are set on a tombstone (lifecycle.go).
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	DeletedBy string     `json:"deleted_by,omitempty"`
	// ForkedFrom is a branch's point (fork.go); CreatedAt when the
	// conversation began.
	ForkedFrom *mesh.ForkPoint `json:"forked_from,omitempty"`
	CreatedAt  time.Time       `json:"created_at,omitzero"`
}

// Create stores a new conversation; it fails if the id exists.
func (s *SessionStore) Create(ctx context.Context, c *mesh.Conversation) error {
	if err := mesh.CheckID(c.ID); err != nil {
		return err
	}
	now := s.now().UTC()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.UpdatedAt = now
	c.Version = 1
	c.SetStored(0, nil)
	return s.save(ctx, c, true)
}

// Update loads the conversation, applies change and saves it by
// compare-and-set, re-applying change to a fresh copy after a conflict.
// The messages change appends are added to the log; a change to a message
// read is refused.
func (s *SessionStore) Update(ctx context.Context, id string, change func(*mesh.Conversation) error) (*mesh.Conversation, error) {
	return s.update(ctx, id, nil, change, false, false)
}

// UpdateLoaded is [SessionStore.Update] starting from c, a conversation read
// by [SessionStore.Get], which saves one read when nobody wrote in between.
// c must not be used afterwards: use the returned conversation.
func (s *SessionStore) UpdateLoaded(ctx context.Context, c *mesh.Conversation, change func(*mesh.Conversation) error) (*mesh.Conversation, error) {
	return s.update(ctx, c.ID, c, change, false, false)
}

// UpdateHead is [SessionStore.Update] for a change of the head alone: no
// message is read, and change must add none.
func (s *SessionStore) UpdateHead(ctx context.Context, id string, change func(*mesh.Conversation) error) (*mesh.Conversation, error) {
	return s.update(ctx, id, nil, headChange(change), true, false)
}

// UpdateHeadFrom is [SessionStore.UpdateHead] starting from c, a head this
// process read or decoded ([DecodeHead]) earlier, which saves the read
// when nobody wrote since. c may be stale: a refusal of change on it (or
// its tombstone) is checked again on a fresh read, and a save that meets a
// newer revision starts over from one, so nothing is refused or written
// on a stale head. c itself is not changed.
func (s *SessionStore) UpdateHeadFrom(ctx context.Context, c *mesh.Conversation, change func(*mesh.Conversation) error) (*mesh.Conversation, error) {
	cp := *c
	return s.update(ctx, c.ID, &cp, headChange(change), true, true)
}

// headChange is change, refused when it adds messages.
func headChange(change func(*mesh.Conversation) error) func(*mesh.Conversation) error {
	return func(c *mesh.Conversation) error {
		n := len(c.Messages)
		if err := change(c); err != nil {
			return err
		}
		if len(c.Messages) != n {
			return errors.New("mesh: UpdateHead added messages")
		}
		return nil
	}
}

// update applies change to cur (nil: a fresh read) and saves it by
// compare-and-set; stale says cur may be older than the bucket's.
func (s *SessionStore) update(ctx context.Context, id string, cur *mesh.Conversation, change func(*mesh.Conversation) error, headOnly, stale bool) (*mesh.Conversation, error) {
	if mesh.CheckID(id) != nil {
		return nil, badID(id)
	}
	for attempt := 0; ; attempt++ {
		if cur == nil {
			stale = false
			var err error
			if headOnly {
				cur, err = s.headOf(ctx, id)
			} else {
				cur, err = s.Get(ctx, id)
			}
			if err != nil {
				return nil, s.missing(ctx, id, err)
			}
		}
		err := live(id, cur.Status, cur.Owner, cur.DeletedAt)
		if err == nil {
			err = change(cur)
		}
		if err != nil && stale {
			// Refused on a head that may be stale: ask the bucket.
			cur, attempt = nil, attempt-1
			continue
		}
		if err != nil {
			if errors.Is(err, ErrNoChange) {
				return cur, nil
			}
			// A tombstone takes no change; a change's own refusal is not a
			// failed save.
			return nil, err
		}
		cur.Version++
		cur.UpdatedAt = s.now().UTC()
		err = s.save(ctx, cur, false)
		if err == nil {
			return cur, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt >= casAttempts {
			telemetry.KVFailure(s.kv.Bucket())
			telemetry.SessionSaveFailed(saveFailureReason(err))
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				s.warnGaveUp(ctx, id, cur.Revision, attempt+1)
			}
			return nil, &writeError{key: id, err: err}
		}
		telemetry.KVConflict(s.kv.Bucket())
		cur = nil
		// A short random pause spreads writers that collided.
		select {
		case <-time.After(time.Duration(rand.IntN(1000)) * time.Microsecond * time.Duration(attempt+1)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// warnGaveUp logs a compare-and-set of conversation id that met a newer
// revision on each of its tries: the revision it last read, and the one
// the bucket holds now (0 when it cannot be read).
func (s *SessionStore) warnGaveUp(ctx context.Context, id string, read uint64, tries int) {
	var found uint64
	if e, err := s.kv.Get(ctx, id); err == nil {
		found = e.Revision()
	}
	s.Logger.Warn().Str("session", id).Str("bucket", s.kv.Bucket()).Uint64("revision_read", read).Uint64("revision_found", found).
		Int("tries", tries).Msg("saving the conversation gave up: every try met a newer revision")
}

// saveFailureReason is the bounded reason of mesh_session_save_failures_total:
// conflict (a newer revision on every try), timeout, unavailable (NATS out
// of reach or no JetStream answer), or error.
func saveFailureReason(err error) string {
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return telemetry.SaveConflict
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return telemetry.SaveTimeout
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrNoStreamResponse):
		return telemetry.SaveUnavailable
	}
	return telemetry.SaveError
}

// HoldsTurn reports whether any message of conversation c, however old,
// belongs to turn turnID (its id or its turn_id): c's own messages are
// only the newest, and its recent turns only the last few dozen. Past
// c's messages it reads the log back from the newest record until it
// finds one.
func (s *SessionStore) HoldsTurn(ctx context.Context, c *mesh.Conversation, turnID string) (bool, error) {
	return s.log.holdsTurn(ctx, c, turnID)
}

// headOf reads the head alone: Messages holds only what a head of an
// earlier version carries.
func (s *SessionStore) headOf(ctx context.Context, id string) (*mesh.Conversation, error) {
	c, rev, err := getJSON[mesh.Conversation](ctx, s.kv, id, mesh.ErrSessionNotFound)
	if err != nil {
		return nil, err
	}
	c.Revision = rev
	c.SetStored(len(c.Messages), snapshot(c.Messages))
	if c.MessageCount == 0 {
		c.SetStored(0, nil)
	}
	return c, nil
}

// save appends the messages added since c was read to the log, as one
// record, then writes the head: created, or by compare-and-set at
// c.Revision. The record of a save whose head write fails is left in the
// log unread; a save tried again after a conflict publishes its own.
func (s *SessionStore) save(ctx context.Context, c *mesh.Conversation, create bool) error {
	stored, snap := c.StoredSnapshot()
	if stored > len(c.Messages) || !unchanged(snap, c.Messages[:stored]) {
		return errStoredChanged
	}
	added := c.Messages[stored:]
	head := *c
	if len(added) > 0 {
		var prev uint64
		if n := len(c.MessageTail); n > 0 {
			prev = c.MessageTail[n-1].Seq
		}
		refs, err := s.log.append(ctx, c.ID, prev, added)
		if err != nil {
			return err
		}
		tail := append(slices.Clip(c.MessageTail), refs...)
		if len(tail) > TailKept {
			tail = slices.Clone(tail[len(tail)-TailKept:])
		}
		head.MessageTail, head.MessageCount = tail, c.MessageCount+len(added)
		if head.Title == "" {
			head.Title = mesh.TitleOf(added)
		}
	}
	data, err := json.Marshal(headOf(&head))
	if err != nil {
		return fmt.Errorf("encode %s: %w", c.ID, err)
	}
	var rev uint64
	if create {
		rev, err = s.create(ctx, c.ID, data)
		if err != nil {
			return fmt.Errorf("create %s: %w", c.ID, err)
		}
	} else if rev, err = s.kv.Update(ctx, c.ID, data, c.Revision); err != nil {
		return err
	}
	c.MessageTail, c.MessageCount, c.Title, c.Revision = head.MessageTail, head.MessageCount, head.Title, rev
	c.SetStored(len(c.Messages), append(slices.Clip(snap), snapshot(added)...))
	return nil
}

// storedHead encodes a conversation's head: its messages are the log's,
// except those of a head of an earlier version not appended yet.
type storedHead struct {
	*mesh.Conversation
	Messages []mesh.Message `json:"messages,omitempty"`
}

func headOf(c *mesh.Conversation) storedHead {
	h := storedHead{Conversation: c}
	if c.MessageCount == 0 {
		h.Messages = c.Messages
	}
	return h
}

// ConversationDoc is a conversation with a page of its messages as the
// log holds them, encoded: the bridge passes them on without decoding
// them. It encodes as the conversation, with messages_before, the cursor
// of the page before, when there is one.
type ConversationDoc struct {
	// Conversation is everything but the messages (Messages is nil).
	*mesh.Conversation
	// Messages are the page's messages, oldest first.
	Messages []json.RawMessage
	// Before is the cursor of the older page (empty: none).
	Before string
	// head is the head's JSON as stored, when the doc was made from it
	// ([SessionStore.DocOf]); nil: Conversation is encoded.
	head []byte
}

// GetDoc is [SessionStore.Get] with the newest page of messages
// ([DefaultPageSize] within HistoryBytes), left encoded.
func (s *SessionStore) GetDoc(ctx context.Context, id string) (*ConversationDoc, error) {
	return s.GetPage(ctx, id, DefaultPageSize, "")
}

// GetPage is the conversation with a page of up to n of its messages
// (within HistoryBytes, one at least) older than the cursor before
// (empty: the newest).
func (s *SessionStore) GetPage(ctx context.Context, id string, n int, before string) (*ConversationDoc, error) {
	if mesh.CheckID(id) != nil {
		return nil, badID(id)
	}
	var cursor Cursor
	if before != "" {
		var ok bool
		if cursor, ok = ParseCursor(before); !ok {
			return nil, mesh.ErrBadRequest.With(fmt.Sprintf("before %s: a cursor is the messages_before of a page", mesh.Clip(before)))
		}
	}
	if n <= 0 {
		n = DefaultPageSize
	}
	c, rev, err := getJSON[mesh.Conversation](ctx, s.kv, id, mesh.ErrSessionNotFound)
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	if err := live(id, c.Status, c.Owner, c.DeletedAt); err != nil {
		return nil, err
	}
	c.Revision = rev
	return s.pageOf(ctx, c, n, cursor)
}

// DecodeHead decodes the head of conversation id as the sessions bucket
// holds it at revision rev (an entry a watch of the bucket delivered),
// for [SessionStore.DocOf]. A tombstone is an error, as for a read.
func DecodeHead(id string, data []byte, rev uint64) (*mesh.Conversation, error) {
	var c mesh.Conversation
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("decode %s: %w", id, err)
	}
	if c.ID != id {
		return nil, fmt.Errorf("decode %s: the head is of conversation %s", id, mesh.Clip(c.ID))
	}
	if err := live(id, c.Status, c.Owner, c.DeletedAt); err != nil {
		return nil, err
	}
	c.Revision = rev
	return &c, nil
}

// DocOf is [SessionStore.GetDoc] for a head the caller already holds: c,
// decoded by [DecodeHead] from data. Only the page of messages is read;
// the doc encodes the head as data holds it, which is what encoding c
// gives (the same struct wrote it), without encoding it again. c becomes
// the doc's.
func (s *SessionStore) DocOf(ctx context.Context, c *mesh.Conversation, data []byte) (*ConversationDoc, error) {
	d, err := s.pageOf(ctx, c, DefaultPageSize, Cursor{})
	if err != nil {
		return nil, err
	}
	if data = bytes.TrimSpace(data); c.MessageCount > 0 && len(data) >= 2 && data[0] == '{' && data[len(data)-1] == '}' {
		d.head = data
	}
	return d, nil
}

// pageOf reads the page of up to n messages of head c older than cursor.
func (s *SessionStore) pageOf(ctx context.Context, c *mesh.Conversation, n int, cursor Cursor) (*ConversationDoc, error) {
	d := &ConversationDoc{Conversation: c}
	if c.MessageCount == 0 { // a head of an earlier version: its own messages
		for _, m := range c.Messages {
			b, err := json.Marshal(m)
			if err != nil {
				return nil, err
			}
			d.Messages = append(d.Messages, b)
		}
		c.Messages = nil
		return d, nil
	}
	p, err := s.log.page(ctx, c, n, cursor, min(s.budget(), PageBytes))
	if err != nil {
		if cursor.Seq != 0 {
			return nil, mesh.ErrBadRequest.With(fmt.Sprintf("before %s: no such message in conversation %s", cursor, c.ID))
		}
		return nil, err
	}
	d.Messages, d.Before = p.Messages, p.Before
	return d, nil
}

// AppendJSON appends the conversation's JSON to b, its messages as stored:
// unlike json.Marshal, it does not scan them again.
func (d *ConversationDoc) AppendJSON(b []byte) ([]byte, error) {
	head := d.head
	if head == nil {
		var err error
		if head, err = json.Marshal(storedHead{Conversation: d.Conversation}); err != nil {
			return nil, err
		}
	}
	n := len(head) + len(`,"messages":[]`) + len(`,"messages_before":""}`) + len(d.Before)
	for _, m := range d.Messages {
		n += len(m) + 1
	}
	// One allocation, with room for what a caller adds after it (the rest
	// of a REST answer: the run's result).
	b = slices.Grow(b, n+512)
	b = append(b, head[:len(head)-1]...)
	if len(head) > 2 {
		b = append(b, ',')
	}
	b = appendMessages(append(b, `"messages":`...), d.Messages)
	if d.Before != "" { // digits and a dot: nothing to escape
		b = append(b, `,"messages_before":"`...)
		b = append(b, d.Before...)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

// MarshalJSON encodes the conversation, its messages as stored.
func (d *ConversationDoc) MarshalJSON() ([]byte, error) { return d.AppendJSON(nil) }

// List returns the conversations' heads (no messages), most recently
// updated first.
func (s *SessionStore) List(ctx context.Context) ([]*mesh.Conversation, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []*mesh.Conversation
	for key := range keys.Keys() {
		if mesh.CheckID(key) != nil {
			continue
		}
		c, err := s.headOf(ctx, key)
		if errors.Is(err, mesh.ErrSessionNotFound) {
			continue // deleted between the listing and the read
		}
		if err != nil {
			_ = keys.Stop()
			return nil, err
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out, nil
}

// AllMessages is conversation id's head and every one of its messages,
// oldest first: the log's pages walked back from the newest. It is for
// reading a whole conversation once (a replay), not for a turn.
func (s *SessionStore) AllMessages(ctx context.Context, id string) (*mesh.Conversation, []mesh.Message, error) {
	var head *mesh.Conversation
	var pages [][]json.RawMessage
	before := ""
	for {
		d, err := s.GetPage(ctx, id, 500, before)
		if err != nil {
			return nil, nil, err
		}
		if head == nil {
			head = d.Conversation
		}
		pages = append(pages, d.Messages)
		if d.Before == "" || d.Before == before {
			break
		}
		before = d.Before
	}
	var out []mesh.Message
	for i := len(pages) - 1; i >= 0; i-- {
		for _, raw := range pages[i] {
			var m mesh.Message
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, nil, fmt.Errorf("decode a message of %s: %w", id, err)
			}
			out = append(out, m)
		}
	}
	return head, out, nil
}
