package limits

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The limits bucket (mesh_limits) holds what every bridge of a mesh counts
// together: request budgets (token buckets) and the sets of conversations
// that are active, per principal and mesh-wide. Every write is a
// compare-and-set on the key's last revision, with a per-key TTL, so that
// two bridges spend one budget and an idle key goes away by itself.
//
// A budget of n requests a window (a minute by default) is a token bucket
// of n tokens refilled over the window, kept as one number (the generic
// cell rate algorithm): the theoretical arrival time tat, a time in unix
// nanoseconds. A request at now moves tat to max(tat, now) + window/n and
// is allowed when the new tat is at most a window ahead of now; a refused
// request changes nothing, and may try again at new tat - window (its
// resetAt).

// Keys of the limits bucket: <kind>.<hash of the id>. A principal's name
// or a client's address never appears in a key.
const (
	RatePrincipal = "rate.p"
	RateIP        = "rate.ip"
	ActiveOwner   = "active.p"
	// ActiveAll is the key of the mesh-wide set of active conversations.
	ActiveAll = "active.all"
)

// Per-key TTLs: a budget idle for two of its windows is full again
// anyway; a set of active conversations that no one touched for a day is
// dropped (its entries would be checked again on the next admission).
const (
	setTTL = 24 * time.Hour
	// casTries bounds the compare-and-set attempts of one operation.
	casTries = 8
	// maxCached bounds the revisions a Limits remembers.
	maxCached = 50000
)

// ErrContention reports a limit key that other writers changed on
// every attempt: the caller decides whether to let the request through.
var ErrContention = errors.New("limits: key changed on every attempt")

// Key is the key of id in the limits bucket: kind, then a hash of id.
func Key(kind, id string) string {
	sum := sha256.Sum256([]byte(id))
	return kind + "." + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// Store reads and writes the limits bucket. It remembers the last
// revision of each key it saw, so that the common case (one bridge, or a
// principal served by one bridge at a time) costs one write per key.
type Store struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	subject string // $KV.<bucket>.
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]limitEntry
}

type limitEntry struct {
	rev uint64
	tat int64 // for a budget
}

// New returns the limits of bucket kv (mesh_limits), written through js.
func New(js jetstream.JetStream, kv jetstream.KeyValue) *Store {
	return &Store{js: js, kv: kv, subject: "$KV." + kv.Bucket() + ".", now: time.Now, cache: map[string]limitEntry{}}
}

// SetClock replaces the clock (tests).
func (l *Store) SetClock(now func() time.Time) { l.now = now }

// Budget is the answer of a budget to one request.
type Budget struct {
	Allowed bool
	// ResetAt is when a refused request may be allowed: when the bucket
	// holds a token again.
	ResetAt time.Time
}

// Take takes one request from the budget key of n requests a window.
// Zero window means a minute. An error (NATS unreachable,
// [ErrContention]) takes nothing.
func (l *Store) Take(ctx context.Context, key string, n int, window time.Duration) (Budget, error) {
	if n <= 0 {
		return Budget{Allowed: true}, nil
	}
	if window <= 0 {
		window = time.Minute
	}
	interval := int64(window) / int64(n)
	cached, ok := l.cached(key)
	for range casTries {
		if !ok {
			var err error
			if cached, err = l.read(ctx, key); err != nil {
				return Budget{}, err
			}
		}
		now := l.now().UnixNano()
		tat := max(cached.tat, now) + interval
		if tat-now > int64(window) {
			// What this process saw last is at most what the key holds:
			// a refusal on it is a refusal on the key.
			return Budget{ResetAt: time.Unix(0, tat-int64(window))}, nil
		}
		rev, err := l.write(ctx, key, strconv.AppendInt(nil, tat, 10), cached.rev, 2*window)
		if err == nil {
			l.remember(key, limitEntry{rev: rev, tat: tat})
			return Budget{Allowed: true}, nil
		}
		if !errors.Is(err, errMismatch) {
			return Budget{}, err
		}
		ok = false
	}
	return Budget{}, ErrContention
}

// read is the key's last value and revision; a missing key is revision 0.
func (l *Store) read(ctx context.Context, key string) (limitEntry, error) {
	e, err := l.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return limitEntry{}, nil
	case err != nil:
		return limitEntry{}, fmt.Errorf("limits: get %s: %w", key, err)
	}
	tat, _ := strconv.ParseInt(string(e.Value()), 10, 64)
	out := limitEntry{rev: e.Revision(), tat: tat}
	l.remember(key, out)
	return out, nil
}

// errMismatch is a compare-and-set that found another revision.
var errMismatch = errors.New("limits: revision mismatch")

// write puts value at key if its last revision is rev (0: the key does not
// exist, or was deleted or expired), with ttl.
func (l *Store) write(ctx context.Context, key string, value []byte, rev uint64, ttl time.Duration) (uint64, error) {
	if rev == 0 {
		// Create also takes a key whose last entry is a delete or expiry
		// marker, whose revision a compare-and-set would have to name.
		n, err := l.kv.Create(ctx, key, value, jetstream.KeyTTL(ttl))
		if errors.Is(err, jetstream.ErrKeyExists) {
			l.forget(key)
			return 0, errMismatch
		}
		if err != nil {
			return 0, fmt.Errorf("limits: create %s: %w", key, err)
		}
		return n, nil
	}
	m := &nats.Msg{Subject: l.subject + key, Data: value, Header: nats.Header{}}
	ack, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	if err != nil {
		if revisionMismatch(err) {
			l.forget(key)
			return 0, errMismatch
		}
		return 0, fmt.Errorf("limits: write %s: %w", key, err)
	}
	return ack.Sequence, nil
}

func revisionMismatch(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func (l *Store) cached(key string) (limitEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.cache[key]
	return e, ok
}

func (l *Store) remember(key string, e limitEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cache) >= maxCached {
		clear(l.cache)
	}
	l.cache[key] = e
}

func (l *Store) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.cache, key)
}

// ActiveFunc reports whether conversation id is still active (its turn
// queued, running or waiting for an approval), for [Store.Admit].
type ActiveFunc func(ctx context.Context, id string) bool

// maxChecks bounds the conversations one admission checks when a set is
// full: the oldest first, each one checked moves to the back.
const maxChecks = 8

// Admit adds conversation id to the set of active conversations key, of at
// most limit entries, and reports whether it is in the set. A full set
// first drops the entries that active says are no longer active (the
// oldest first, at most 8 checks): entries are added by admissions and
// removed only so, which holds across bridges that come and go.
func (l *Store) Admit(ctx context.Context, key, id string, limit int, active ActiveFunc) (bool, error) {
	if limit <= 0 {
		return true, nil
	}
	for range casTries {
		set, rev, err := l.readSet(ctx, key)
		if err != nil {
			return false, err
		}
		if _, ok := set[id]; ok {
			return true, nil
		}
		now := l.now().Unix()
		changed := false
		if len(set) >= limit {
			for _, c := range oldest(set, maxChecks) {
				changed = true
				if active(ctx, c) {
					set[c] = now
					continue
				}
				delete(set, c)
				if len(set) < limit {
					break
				}
			}
		}
		admitted := len(set) < limit
		if admitted {
			set[id] = now
		} else if !changed {
			return false, nil
		}
		data, _ := json.Marshal(set)
		_, err = l.write(ctx, key, data, rev, setTTL)
		if err == nil {
			return admitted, nil
		}
		if !errors.Is(err, errMismatch) {
			return false, err
		}
	}
	return false, ErrContention
}

// ActiveSet is the set key as stored: conversation id → unix time it was
// admitted or last found active.
func (l *Store) ActiveSet(ctx context.Context, key string) (map[string]int64, error) {
	set, _, err := l.readSet(ctx, key)
	return set, err
}

func (l *Store) readSet(ctx context.Context, key string) (map[string]int64, uint64, error) {
	set := map[string]int64{}
	e, err := l.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return set, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("limits: get %s: %w", key, err)
	}
	_ = json.Unmarshal(e.Value(), &set) // a value that is not a set starts again empty
	return set, e.Revision(), nil
}

// oldest are at most n ids of set, the longest unchecked first.
func oldest(set map[string]int64, n int) []string {
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(set[a], set[b]), strings.Compare(a, b)) })
	return ids[:min(n, len(ids))]
}
