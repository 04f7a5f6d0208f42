package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// ErrNoChange, returned by a change function, makes an update end without
// writing anything; the update then returns the value as it was read.
var ErrNoChange = errors.New("mesh: no change")

// casAttempts bounds how often an update is re-applied after revision
// conflicts before it gives up.
const casAttempts = 50

// getJSON reads key and decodes it; a missing key is notFound.
func getJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, notFound *Error) (*T, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) && replicated(ctx, kv) {
		// Any replica answers a get, and one still applying a create just
		// acknowledged by the others says "not found": ask again, briefly.
		for i := 0; i < 3 && errors.Is(err, jetstream.ErrKeyNotFound); i++ {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			e, err = kv.Get(ctx, key)
		}
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, notFound.With(fmt.Sprintf("%s: %s", notFound.Message, key))
	}
	if errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, 0, notFound.With(fmt.Sprintf("%s: %q", notFound.Message, key))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	v := new(T)
	if err := decodeValue(e.Value(), v); err != nil {
		return nil, 0, fmt.Errorf("decode %s: %w", key, err)
	}
	return v, e.Revision(), nil
}

// replicatedBuckets remembers, by bucket handle, whether a bucket has
// replicas: the answer costs a stream info request, and every read of a
// missing key asks it.
var replicatedBuckets sync.Map // jetstream.KeyValue → bool

// replicated reports whether the bucket has replicas (a cluster's).
func replicated(ctx context.Context, kv jetstream.KeyValue) bool {
	if r, ok := replicatedBuckets.Load(kv); ok {
		return r.(bool)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return false // not remembered: asked again next time
	}
	b, ok := st.(*jetstream.KeyValueBucketStatus)
	r := ok && b.StreamInfo() != nil && b.StreamInfo().Config.Replicas > 1
	replicatedBuckets.Store(kv, r)
	return r
}

// decodeValue decodes data into v, by its own stored encoding if it has one.
func decodeValue(data []byte, v any) error {
	if sv, ok := v.(storedValue); ok {
		return sv.decodeStored(data)
	}
	return json.Unmarshal(data, v)
}

// encodeValue encodes v, by its own stored encoding if it has one.
func encodeValue(v any) ([]byte, error) {
	if sv, ok := v.(storedValue); ok {
		return sv.encodeStored()
	}
	return json.Marshal(v)
}

// updateJSON applies change to the value of key and writes it back with
// compare-and-set. cur, when not nil, is the value as read at rev and saves
// the first read. On a revision conflict it reloads and applies change again,
// so change must compute its result from the value it is given.
func updateJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, notFound *Error, cur *T, rev uint64, change func(*T) error) (*T, uint64, error) {
	for attempt := 0; ; attempt++ {
		if cur == nil {
			var err error
			cur, rev, err = getJSON[T](ctx, kv, key, notFound)
			if err != nil {
				return nil, 0, err
			}
		}
		if err := change(cur); err != nil {
			if errors.Is(err, ErrNoChange) {
				return cur, rev, nil
			}
			return nil, 0, err
		}
		data, err := encodeValue(cur)
		if err != nil {
			return nil, 0, fmt.Errorf("encode %s: %w", key, err)
		}
		newRev, err := kv.Update(ctx, key, data, rev)
		if err == nil {
			return cur, newRev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt >= casAttempts {
			telemetry.KVFailure(kv.Bucket())
			return nil, 0, &writeError{key: key, err: err}
		}
		telemetry.KVConflict(kv.Bucket())
		cur = nil
		// A short random pause spreads writers that collided.
		select {
		case <-time.After(time.Duration(rand.IntN(1000)) * time.Microsecond * time.Duration(attempt+1)):
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// writeError is a compare-and-set write that failed for good.
type writeError struct {
	key string
	err error
}

func (e *writeError) Error() string { return fmt.Sprintf("update %s: %v", e.key, e.err) }
func (e *writeError) Unwrap() error { return e.err }

// WatchKV follows the keys of kv that keys names (a key, or a filter with
// wildcards) until ctx ends: apply gets the current entries, then each put
// and delete as it comes; synced, when not nil, is called once, when the
// current entries have all been applied.
func WatchKV(ctx context.Context, kv jetstream.KeyValue, keys string, apply func(jetstream.KeyValueEntry), synced func()) error {
	w, err := kv.Watch(ctx, keys)
	if err != nil {
		return err
	}
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				switch {
				case !ok:
					return
				case e != nil:
					apply(e)
				case synced != nil: // the current entries are all delivered
					synced()
					synced = nil
				}
			}
		}
	}()
	return nil
}

// SessionStore keeps conversations in the sessions bucket.
type SessionStore struct {
	kv  jetstream.KeyValue
	now func() time.Time
	nc  *nats.Conn // reads limit markers (lifecycle.go); nil: none
}

// NewSessionStore returns a store over the sessions bucket.
func NewSessionStore(kv jetstream.KeyValue) *SessionStore {
	return &SessionStore{kv: kv, now: time.Now}
}

// Get returns the conversation, or an error matching [ErrSessionNotFound].
func (s *SessionStore) Get(ctx context.Context, id string) (*Conversation, error) {
	if CheckID(id) != nil {
		return nil, ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", Clip(id), IDRule))
	}
	start := time.Now()
	c, rev, err := getJSON[Conversation](ctx, s.kv, id, ErrSessionNotFound)
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	if err := live(id, c.Status, c.Owner, c.DeletedAt); err != nil {
		return nil, err
	}
	telemetry.SessionLoaded(time.Since(start))
	c.Revision = rev
	return c, nil
}

// SessionHead is the part of a conversation that says whether it can take a
// message: decoding only this skips the messages, the bulk of a session.
type SessionHead struct {
	ID              string           `json:"id"`
	SessionID       string           `json:"session_id"`
	Agent           string           `json:"agent"`
	Owner           string           `json:"owner,omitempty"`
	Status          Status           `json:"status"`
	PendingApproval *PendingApproval `json:"pending_approval,omitempty"`
	Turn            *Turn            `json:"turn,omitempty"`
	Queued          *QueuedTurn      `json:"queued_turn,omitempty"`
	RecentTurns     []string         `json:"recent_turns,omitempty"`
	// Group is set on a group conversation: messages go to its group.
	Group *struct {
		Name string `json:"name"`
	} `json:"group,omitempty"`
	// DeletedAt and DeletedBy are set on a tombstone (lifecycle.go).
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	DeletedBy string     `json:"deleted_by,omitempty"`
}

// Head returns the head of the conversation, or an error matching
// [ErrSessionNotFound].
func (s *SessionStore) Head(ctx context.Context, id string) (*SessionHead, error) {
	if CheckID(id) != nil {
		return nil, ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", Clip(id), IDRule))
	}
	h, _, err := getJSON[SessionHead](ctx, s.kv, id, ErrSessionNotFound)
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	if err := live(id, h.Status, h.Owner, h.DeletedAt); err != nil {
		return nil, err
	}
	return h, nil
}

// Create stores a new conversation; it fails if the id exists.
func (s *SessionStore) Create(ctx context.Context, c *Conversation) error {
	if err := CheckID(c.ID); err != nil {
		return err
	}
	now := s.now().UTC()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.UpdatedAt = now
	c.Version = 1
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode %s: %w", c.ID, err)
	}
	rev, err := s.create(ctx, c.ID, data)
	if err != nil {
		return fmt.Errorf("create %s: %w", c.ID, err)
	}
	c.Revision = rev
	return nil
}

// Update loads the conversation, applies change and saves it by
// compare-and-set, re-applying change to a fresh copy after a conflict.
func (s *SessionStore) Update(ctx context.Context, id string, change func(*Conversation) error) (*Conversation, error) {
	return s.update(ctx, id, nil, change)
}

// UpdateLoaded is [SessionStore.Update] starting from c, a conversation read
// by [SessionStore.Get], which saves one read when nobody wrote in between.
// c must not be used afterwards: use the returned conversation.
func (s *SessionStore) UpdateLoaded(ctx context.Context, c *Conversation, change func(*Conversation) error) (*Conversation, error) {
	return s.update(ctx, c.ID, c, change)
}

func (s *SessionStore) update(ctx context.Context, id string, cur *Conversation, change func(*Conversation) error) (*Conversation, error) {
	if CheckID(id) != nil {
		return nil, ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", Clip(id), IDRule))
	}
	var rev uint64
	if cur != nil {
		rev = cur.Revision
	}
	c, rev, err := updateJSON(ctx, s.kv, id, ErrSessionNotFound, cur, rev, func(c *Conversation) error {
		if err := live(id, c.Status, c.Owner, c.DeletedAt); err != nil {
			return err // a tombstone takes no change
		}
		if err := change(c); err != nil {
			return err
		}
		c.Version++
		c.UpdatedAt = s.now().UTC()
		return nil
	})
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			telemetry.SessionSaveFailed() // the write failed; a change's own refusal is not a failure
		}
		return nil, s.missing(ctx, id, err)
	}
	c.Revision = rev
	return c, nil
}

// ConversationDoc is a conversation whose messages stay as the bucket
// holds them, encoded: reading and writing it skips decoding and encoding
// the messages, the bulk of a long conversation, for the readers and
// writers that only need its head (the bridge queueing a turn or
// answering one). It encodes as the conversation, its messages last.
type ConversationDoc struct {
	// Conversation is everything but the messages (Messages is nil).
	*Conversation
	// Messages shadows Conversation.Messages in JSON.
	Messages json.RawMessage `json:"messages"`
}

// GetDoc is [SessionStore.Get] with the messages left encoded.
func (s *SessionStore) GetDoc(ctx context.Context, id string) (*ConversationDoc, error) {
	if CheckID(id) != nil {
		return nil, ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", Clip(id), IDRule))
	}
	d, rev, err := getJSON[ConversationDoc](ctx, s.kv, id, ErrSessionNotFound)
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	d.ensure()
	if err := live(id, d.Status, d.Owner, d.DeletedAt); err != nil {
		return nil, err
	}
	d.Revision = rev
	return d, nil
}

// UpdateDoc is [SessionStore.Update] for a change that neither reads nor
// writes the messages: change gets the conversation without them, and
// they are written back as they were read.
func (s *SessionStore) UpdateDoc(ctx context.Context, id string, change func(*Conversation) error) (*ConversationDoc, error) {
	if CheckID(id) != nil {
		return nil, ErrSessionNotFound.With(fmt.Sprintf("conversation %s not found: a conversation id is %s", Clip(id), IDRule))
	}
	d, rev, err := updateJSON(ctx, s.kv, id, ErrSessionNotFound, nil, 0, func(d *ConversationDoc) error {
		d.ensure()
		if err := live(id, d.Status, d.Owner, d.DeletedAt); err != nil {
			return err
		}
		if err := change(d.Conversation); err != nil {
			return err
		}
		d.Version++
		d.UpdatedAt = s.now().UTC()
		return nil
	})
	if err != nil {
		return nil, s.missing(ctx, id, err)
	}
	d.ensure()
	d.Revision = rev
	return d, nil
}

// ensure gives a document decoded from a value without fields its
// conversation.
func (d *ConversationDoc) ensure() {
	if d.Conversation == nil {
		d.Conversation = &Conversation{}
	}
}

// List returns the conversations, most recently updated first.
func (s *SessionStore) List(ctx context.Context) ([]*Conversation, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []*Conversation
	for key := range keys.Keys() {
		c, err := s.Get(ctx, key)
		if errors.Is(err, ErrSessionNotFound) {
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

// RunKeyPrefix starts the keys of the sessions bucket that reserve run ids:
// _runs.<run id> holds the id of the conversation the run belongs to. Run
// ids must be unique across the mesh, because the ids of everything a run
// makes derive from it (the Nats-Msg-Id of its work items and events, its
// message, call and approval ids); a client chooses some of them (an AG-UI
// runId, an Idempotency-Key), so the bridge reserves each one before it
// queues its turn. The keys are not conversations: [SessionStore.List]
// skips them (a '.' is no id), and they live as long as the bucket keeps
// its keys (sessions.ttl).
const RunKeyPrefix = "_runs."

// ReserveRun reserves run id runID for conversation conv, unless it is
// reserved already; it returns the conversation that holds it (conv when
// the reservation is new or was conv's already).
func (s *SessionStore) ReserveRun(ctx context.Context, runID, conv string) (string, error) {
	if err := CheckID(runID); err != nil {
		return "", ErrBadRequest.With(fmt.Sprintf("run id %s: a run id is %s", Clip(runID), IDRule))
	}
	key := RunKeyPrefix + runID
	_, err := s.kv.Create(ctx, key, []byte(conv))
	if err == nil {
		return conv, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", fmt.Errorf("reserve run %s: %w", runID, err)
	}
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("reserve run %s: %w", runID, err)
	}
	return string(e.Value()), nil
}
