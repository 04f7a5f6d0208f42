package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// What the core does for the bridge's limits (package bridge, limit.go):
// it asks [Config.Admit] before a message makes its conversation active,
// [Config.StreamLimit] before a stream starts, and answers a refusal with
// its resetAt.

// Kinds of limit refusals: the "code" of their JSON body.
var (
	// ErrRateLimited refuses a request past its principal's or client IP's
	// budget (429).
	ErrRateLimited = mesh.NewError("rate_limited", http.StatusTooManyRequests, "too many requests")
	// ErrTooManyConversations refuses a message that would make one more
	// conversation of its principal active (429).
	ErrTooManyConversations = mesh.NewError("too_many_conversations", http.StatusTooManyRequests, "too many active conversations").WithRetryAfter(30)
	// ErrOverCapacity refuses a message that would make one more
	// conversation of the mesh active past limits.max_active_sessions (503).
	ErrOverCapacity = mesh.NewError("over_capacity", http.StatusServiceUnavailable, "the mesh has as many active conversations as it takes").WithRetryAfter(60)
	// ErrTooManyStreams refuses a stream past http.max_streams (503), or,
	// with status 429, past one principal's limits.streams_per_principal.
	ErrTooManyStreams = mesh.NewError("too_many_streams", http.StatusServiceUnavailable, "too many concurrent streams on this bridge; retry shortly").WithRetryAfter(1)
)

// LimitError is a refusal by a limit: its kind and status, and when the
// client may try again (Retry-After, and resetAt in the body).
type LimitError struct {
	Err     *mesh.Error
	ResetAt time.Time
}

func (e *LimitError) Error() string { return e.Err.Error() }
func (e *LimitError) Unwrap() error { return e.Err }

// Refusal is a [LimitError] of kind err that may be tried again at reset:
// resetAt is reset rounded up to a second, Retry-After the seconds until
// then (at least 1).
func Refusal(err *mesh.Error, reset time.Time, msg string) *LimitError {
	if reset.Truncate(time.Second) != reset {
		reset = reset.Truncate(time.Second).Add(time.Second)
	}
	out := err.With(msg)
	out = out.WithRetryAfter(max(1, int((time.Until(reset)+time.Second-1)/time.Second)))
	return &LimitError{Err: out, ResetAt: reset.UTC()}
}

// RefusalFor is a [LimitError] of kind err that says to try again in d
// (Retry-After: d, resetAt: now + d).
func RefusalFor(err *mesh.Error, d time.Duration, msg string) *LimitError {
	le := Refusal(err, time.Now().Add(d), msg)
	le.Err = le.Err.WithRetryAfter(int(d / time.Second))
	return le
}

// LimitOf returns the refusal err carries, or nil.
func LimitOf(err error) *LimitError {
	var le *LimitError
	if errors.As(err, &le) {
		return le
	}
	return nil
}

type limitKey struct{}

type limitWho struct{ who, ip string }

// WithLimitKey returns ctx naming who the limits count a request against
// (a principal, or a client IP for the anonymous principal) and its
// client IP.
func WithLimitKey(ctx context.Context, who, ip string) context.Context {
	return context.WithValue(ctx, limitKey{}, limitWho{who, ip})
}

// LimitKeyOf is who ctx names for the limits, or "".
func LimitKeyOf(ctx context.Context) string {
	w, _ := ctx.Value(limitKey{}).(limitWho)
	return w.who
}

// LimitIPOf is the client IP ctx names for the limits, or "".
func LimitIPOf(ctx context.Context) string {
	w, _ := ctx.Value(limitKey{}).(limitWho)
	return w.ip
}

// Take spends one request of ctx's caller's budgets, for what starts
// work without a request of its own (a run frame on a socket): nil, or a
// [LimitError] (429).
func (c *Core) Take(ctx context.Context) error {
	if c.cfg.Take == nil {
		return nil
	}
	return c.cfg.Take(ctx)
}

// OpenStream takes one of the bridge's stream slots and, with limits on,
// one of its caller's (ctx's); it returns the function that gives them
// back (once, however often it is called). A refusal is [ErrTooManyStreams] (503 for the bridge's, 429 for
// the caller's).
func (c *Core) OpenStream(ctx context.Context) (release func(), err error) {
	if !c.AcquireStream() {
		telemetry.LimitRefused(telemetry.LimitStreams)
		return nil, RefusalFor(ErrTooManyStreams, time.Second, fmt.Sprintf("too many concurrent streams on this bridge (http.max_streams: %d); retry shortly", c.cfg.MaxStreams))
	}
	done := func() {}
	if c.cfg.StreamLimit != nil {
		var err error
		if done, err = c.cfg.StreamLimit(ctx); err != nil {
			c.ReleaseStream()
			return nil, err
		}
	}
	var once sync.Once
	return func() { once.Do(func() { done(); c.ReleaseStream() }) }, nil
}

// Active reports whether conversation id holds a turn: queued for an
// agent, run by one, or paused for an approval. A conversation that cannot
// be read is not.
func (c *Core) Active(ctx context.Context, id string) bool {
	h, err := c.Sessions.Head(ctx, id)
	if err != nil {
		return false
	}
	return h.Queued != nil || h.Turn != nil || h.Status == mesh.StatusQueued || h.Status == mesh.StatusRunning || h.Status == mesh.StatusWaitingApproval
}

// admit asks the limits whether conversation id may take a turn.
func (c *Core) admit(ctx context.Context, id string) error {
	if c.cfg.Admit == nil {
		return nil
	}
	return c.cfg.Admit(ctx, id)
}
