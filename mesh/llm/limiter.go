package llm

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// A provider's capacity. Each endpoint (provider and base URL) of the
// process has one limiter, shared by every Provider that calls it. It
// bounds the calls in flight: to Options.MaxConcurrency, and, once the
// provider answered 429, to a bound it learns (cut by a quarter at a
// rate-limit answer, grown by one for each bound's worth of calls that
// succeed). It paces the calls' starts to Options.RequestsPerMinute. It holds every new
// call while the provider asked to wait: the Retry-After of a 429, or
// rate-limit headers that say nothing is left before a reset. Calls wait
// in the order they came. A call waiting for capacity is not under way:
// its wait counts against Options.MaxQueueWait, not against Timeout, and
// a 429 is waited for and sent again rather than counted as a failure.

// limiterKey names an endpoint's limiter; its settings are part of it so
// that differently configured providers do not share one.
type limiterKey struct {
	provider, base string
	max, perMinute int
}

var limiters sync.Map // limiterKey → *limiter

func endpointLimiter(k limiterKey) *limiter {
	if l, ok := limiters.Load(k); ok {
		return l.(*limiter)
	}
	l := &limiter{name: k.provider, max: k.max, now: time.Now}
	if k.perMinute > 0 {
		l.rate = float64(k.perMinute) / 60
		// A burst of a second's worth, at least one call.
		l.burst = max(1, l.rate)
		l.tokens = l.burst
	}
	actual, _ := limiters.LoadOrStore(k, l)
	return actual.(*limiter)
}

// cutFactor is what a rate limit leaves of the calls in flight: less than
// the halving of classic AIMD, because the provider's pause (Retry-After,
// its reset headers) already holds the calls, and a bound cut too deep
// leaves its capacity unused once the pause ends.
const cutFactor = 0.75

// limiter admits the calls of one endpoint. See above.
type limiter struct {
	name string // the provider, as metrics label it
	now  func() time.Time

	mu       sync.Mutex
	max      int     // the configured bound of calls in flight; 0 none
	learnt   float64 // the bound learnt from rate limits; 0 none yet
	inFlight int
	queue    []*waiter
	// pausedUntil holds new calls: the provider asked to wait until then.
	pausedUntil time.Time
	// lastCut is when the learnt bound was last cut: every call in
	// flight when a limit is hit may be answered 429, and those answers
	// together are one signal, not many.
	lastCut time.Time
	// The token bucket of RequestsPerMinute: rate tokens a second, up to
	// burst; rate 0 means no pacing.
	rate, burst, tokens float64
	filled              time.Time
	timer               *time.Timer // wakes the queue when a pause or a token is over
}

// waiter is a call waiting for capacity; ready is closed once it is
// admitted.
type waiter struct {
	ready    chan struct{}
	admitted bool
}

// callResult is what an admitted call tells its limiter when it ends.
type callResult struct {
	ok bool
	// throttled: the provider answered 429; wait is how long it asked
	// to wait (or the backoff chosen when it did not say).
	throttled bool
	wait      time.Duration
}

// acquire waits until a call may start, in the order calls came, or until
// ctx ends. It returns how long the call waited and the release to call
// with its result. A call sent again after a rate limit has waited out the
// pause already (resumed): it goes before the queue, within the bound of
// calls in flight.
func (l *limiter) acquire(ctx context.Context, resumed bool) (release func(callResult), waited time.Duration, err error) {
	start := l.now()
	observe, _ := ctx.Value(queueObserverKey{}).(func(bool))
	l.mu.Lock()
	if resumed && l.openAfterPause(start) || len(l.queue) == 0 && l.open(start) {
		l.admit()
		l.report()
		l.mu.Unlock()
		return l.release, 0, nil
	}
	w := &waiter{ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	l.schedule(start)
	l.report()
	l.mu.Unlock()
	if observe != nil {
		observe(true)
		defer observe(false)
	}
	select {
	case <-w.ready:
		return l.release, l.now().Sub(start), nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		if w.admitted {
			// Admitted as ctx ended: give the place to the next.
			l.inFlight--
		} else {
			l.queue = slices.DeleteFunc(l.queue, func(x *waiter) bool { return x == w })
		}
		l.dispatch()
		l.report()
		return nil, l.now().Sub(start), context.Cause(ctx)
	}
}

type queueObserverKey struct{}

// WithQueueObserver returns ctx carrying fn, which a model call made with
// it tells when it begins (true) and ends (false) waiting for its
// provider's capacity: a turn whose calls wait is queued at the provider.
func WithQueueObserver(ctx context.Context, fn func(waiting bool)) context.Context {
	return context.WithValue(ctx, queueObserverKey{}, fn)
}

// bound is the number of calls that may be in flight now; 0 none.
func (l *limiter) bound() int {
	b := l.max
	if l.learnt > 0 && (b == 0 || int(l.learnt) < b) {
		b = max(1, int(l.learnt))
	}
	return b
}

// open says a call may start now; mu is held.
func (l *limiter) open(now time.Time) bool {
	return !now.Before(l.pausedUntil) && l.openAfterPause(now)
}

// openAfterPause is open for a call that waited the pause out.
func (l *limiter) openAfterPause(now time.Time) bool {
	if b := l.bound(); b > 0 && l.inFlight >= b {
		return false
	}
	if l.rate > 0 {
		l.refill(now)
		if l.tokens < 1 {
			return false
		}
	}
	return true
}

func (l *limiter) refill(now time.Time) {
	if !l.filled.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.filled).Seconds()*l.rate)
	}
	l.filled = now
}

// admit starts a call; mu is held and open was true.
func (l *limiter) admit() {
	l.inFlight++
	if l.rate > 0 {
		l.tokens--
	}
}

// dispatch admits the calls at the head of the queue while they may start,
// then arms the timer for the rest; mu is held.
func (l *limiter) dispatch() {
	now := l.now()
	for len(l.queue) > 0 && l.open(now) {
		w := l.queue[0]
		l.queue = l.queue[1:]
		l.admit()
		w.admitted = true
		close(w.ready)
	}
	l.schedule(now)
}

// schedule arms the timer for when the queue's head may start, if what
// holds it is time (a pause, an empty bucket) and not calls in flight;
// mu is held.
func (l *limiter) schedule(now time.Time) {
	if len(l.queue) == 0 {
		return
	}
	var at time.Time
	switch {
	case now.Before(l.pausedUntil):
		at = l.pausedUntil
	case l.rate > 0 && l.tokens < 1:
		at = now.Add(time.Duration((1 - l.tokens) / l.rate * float64(time.Second)))
	default:
		return // a call in flight ends first and dispatches
	}
	d := max(at.Sub(now), time.Millisecond)
	if l.timer == nil {
		l.timer = time.AfterFunc(d, l.wake)
		return
	}
	l.timer.Reset(d)
}

func (l *limiter) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dispatch()
	l.report()
}

// release ends an admitted call with its result.
func (l *limiter) release(r callResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	switch {
	case r.throttled:
		if now.After(l.lastCut.Add(max(r.wait, time.Second))) {
			// The calls in flight were too many: fewer from now on.
			l.learnt = max(1, float64(l.inFlight)*cutFactor)
			l.lastCut = now
		}
		if until := now.Add(r.wait); until.After(l.pausedUntil) {
			l.pausedUntil = until
		}
	case r.ok && l.learnt > 0:
		// One more call in flight for each bound's worth that succeeded.
		l.learnt += 1 / l.learnt
		if l.max > 0 && l.learnt > float64(l.max) {
			l.learnt = float64(l.max)
		}
	}
	l.inFlight--
	l.dispatch()
	l.report()
}

// observe reads a provider's rate-limit headers from an answer: when one
// says no request (or no token) is left, new calls wait for its reset.
func (l *limiter) observe(h http.Header) {
	now := l.now()
	var until time.Time
	for _, p := range rateLimitHeaders {
		rem := strings.TrimSpace(h.Get(p.remaining))
		if rem != "0" {
			continue
		}
		if at, ok := resetAt(h.Get(p.reset), now); ok && at.After(until) {
			until = at
		}
	}
	if until.IsZero() {
		return
	}
	// Bounded: a header that names a reset far away (a daily quota) is
	// for the 429 that follows to report, not for a silent wait.
	until = minTime(until, now.Add(time.Minute))
	l.mu.Lock()
	if until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
	l.mu.Unlock()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// rateLimitHeaders are the providers' headers of what is left of a limit
// and when it is reset: OpenAI's (the reset as a duration, "1s", "6m0s")
// and Anthropic's (an RFC 3339 time).
var rateLimitHeaders = []struct{ remaining, reset string }{
	{"x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
	{"x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
	{"anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"},
	{"anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"},
	{"anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"},
	{"anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"},
}

// resetAt reads a reset header: a duration from now, or a time.
func resetAt(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(d), true
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return now.Add(time.Duration(s * float64(time.Second))), true
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// capacity is what one provider endpoint's limiter holds now.
type capacity struct {
	// Waiting are the calls waiting for capacity, InFlight those sent and
	// not answered; Limit bounds InFlight (0: no bound).
	Waiting, InFlight, Limit int
	// PausedUntil is when new calls may start again, when the provider
	// asked to wait.
	PausedUntil time.Time
}

func (l *limiter) capacity() capacity {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := capacity{Waiting: len(l.queue), InFlight: l.inFlight, Limit: l.bound()}
	if l.now().Before(l.pausedUntil) {
		c.PausedUntil = l.pausedUntil
	}
	return c
}

// report sets the endpoint's gauges; mu is held.
func (l *limiter) report() {
	telemetry.ModelCapacity(l.name, len(l.queue), l.inFlight, l.bound())
}
