package config

import "time"

// Sessions tunes the sessions bucket.
type Sessions struct {
	// History is how many revisions of each conversation are kept. Zero means 5.
	History uint8 `yaml:"history"`
	// TTL expires conversations untouched for that long (every save
	// renews it). Zero means 7 days; "never" (or a negative duration)
	// means never.
	TTL Duration `yaml:"ttl"`
	// MaxBytes bounds the messages a read of a conversation loads: the
	// history sent to the model (the newest messages whose JSON fits, 64
	// at most) and a page of GET /conversations/{id}. At least
	// http.max_body_bytes (one message always fits), at most 64 MiB. Zero
	// means 4 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// ExpiredKept is how long an expired conversation still answers 410
	// expired (the bucket keeps the key's limit marker that long) before
	// it is not found. At most the TTL (the marker ages out with the
	// bucket's max age). Zero means 24h, or the TTL when that is shorter.
	ExpiredKept Duration `yaml:"expired_kept"`
}

// DefaultSessionTTL and DefaultExpiredKept are the defaults of sessions.ttl
// and sessions.expired_kept.
const (
	DefaultSessionTTL  = 7 * 24 * time.Hour
	DefaultExpiredKept = 24 * time.Hour
)

// ExpireAfter is sessions.ttl: zero when conversations never expire.
func (s Sessions) ExpireAfter() time.Duration {
	if s.TTL < 0 {
		return 0
	}
	return s.TTL.Or(DefaultSessionTTL)
}

// KeptExpired is sessions.expired_kept, its default when zero. The default
// is cut to the TTL: the limit marker that says a key expired is itself a
// message of the bucket, which ages out with the bucket's max age.
func (s Sessions) KeptExpired() time.Duration {
	if s.ExpiredKept == 0 {
		if ttl := s.ExpireAfter(); ttl > 0 && ttl < DefaultExpiredKept {
			return ttl
		}
	}
	return s.ExpiredKept.Or(DefaultExpiredKept)
}
