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
	// SaveRetry are the pauses before each new try of an agent's save of a
	// run's outcome that failed: the third failure in a row raises the
	// alert, and after the last pause the work item is left to its
	// redelivery. 1 to 10 pauses of 10ms to 10m. Empty means 1s, 5s, 30s.
	SaveRetry []Duration `yaml:"save_retry"`
}

// DefaultSaveRetry are the pauses of sessions.save_retry when it is empty.
func DefaultSaveRetry() []time.Duration {
	return []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}
}

// SaveRetryPauses is sessions.save_retry, its default when empty.
func (s Sessions) SaveRetryPauses() []time.Duration {
	if len(s.SaveRetry) == 0 {
		return DefaultSaveRetry()
	}
	out := make([]time.Duration, len(s.SaveRetry))
	for i, d := range s.SaveRetry {
		out[i] = d.Std()
	}
	return out
}

// Bounds of mesh.events_max_age: an hour of events at least (a client
// resuming a stream finds what it missed), 30 days at most (the events
// stream is a replay log, not an archive).
const (
	MinEventsMaxAge = time.Hour
	MaxEventsMaxAge = 30 * 24 * time.Hour
)

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
