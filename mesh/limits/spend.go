package limits

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The usage bucket (mesh_usage) holds what each principal's conversations
// spent on models, one key a principal a day: <UTC day>.<hash of the
// principal>, a [Tally] in JSON. The agents that call the models add to it
// by compare-and-set; the bridges read it to refuse a message past a daily
// budget. Each write carries a TTL of two days, so a day's keys go away by
// themselves once no budget can ask for them.

// spendTTL is how long a day's key outlives its last write; spendTries
// bounds the compare-and-sets of one Add, which every agent of a principal
// may contend for.
const (
	spendTTL   = 48 * time.Hour
	spendTries = 32
)

// Tally is what a principal spent on one day: tokens (input and output)
// and their cost at the configured prices.
type Tally struct {
	Tokens int     `json:"tokens"`
	Cost   float64 `json:"cost,omitempty"`
}

// Spend reads and adds to the usage bucket.
type Spend struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	subject string // $KV.<bucket>.
}

// NewSpend returns the daily spend of bucket kv (mesh_usage), written
// through js.
func NewSpend(js jetstream.JetStream, kv jetstream.KeyValue) *Spend {
	return &Spend{js: js, kv: kv, subject: "$KV." + kv.Bucket() + "."}
}

// SpendKey is the key of principal's spend on day (2006-01-02): the
// principal's name never appears in a key.
func SpendKey(day, principal string) string {
	sum := sha256.Sum256([]byte(principal))
	return day + "." + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// Of is what principal spent on day; nothing spent is a zero Tally.
func (s *Spend) Of(ctx context.Context, day, principal string) (Tally, error) {
	t, _, err := s.read(ctx, SpendKey(day, principal))
	return t, err
}

// Add adds t to what principal spent on day, by compare-and-set.
func (s *Spend) Add(ctx context.Context, day, principal string, t Tally) error {
	key := SpendKey(day, principal)
	for try := range spendTries {
		if try > 0 {
			// Another agent wrote between the read and the write: a pause
			// of a few milliseconds, random, keeps a crowd from colliding
			// again.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(1+rand.IntN(1<<min(try, 5))) * time.Millisecond):
			}
		}
		cur, rev, err := s.read(ctx, key)
		if err != nil {
			return err
		}
		cur.Tokens += t.Tokens
		cur.Cost += t.Cost
		data, _ := json.Marshal(cur)
		if rev == 0 {
			_, err = s.kv.Create(ctx, key, data, jetstream.KeyTTL(spendTTL))
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
		} else {
			m := &nats.Msg{Subject: s.subject + key, Data: data, Header: nats.Header{}}
			_, err = s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(spendTTL))
			if revisionMismatch(err) {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("usage: write %s: %w", key, err)
		}
		return nil
	}
	return ErrContention
}

func (s *Spend) read(ctx context.Context, key string) (Tally, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return Tally{}, 0, nil
	case err != nil:
		return Tally{}, 0, fmt.Errorf("usage: get %s: %w", key, err)
	}
	var t Tally
	_ = json.Unmarshal(e.Value(), &t) // a value that is no tally counts from zero
	return t, e.Revision(), nil
}
