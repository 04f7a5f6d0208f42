package llm

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// clock is a limiter's time, moved by the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestLimiter(maxInFlight int) (*limiter, *clock) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	return &limiter{name: "test", max: maxInFlight, now: c.Now}, c
}

// admitted acquires in the background and reports the release once the
// call is admitted.
func admitted(t *testing.T, l *limiter, ctx context.Context) <-chan func(callResult) {
	t.Helper()
	out := make(chan func(callResult), 1)
	go func() {
		release, _, err := l.acquire(ctx, false)
		if err == nil {
			out <- release
		}
		close(out)
	}()
	return out
}

func waitQueued(t *testing.T, l *limiter, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.capacity().Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls waiting, want %d", l.capacity().Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLimiterBoundsCallsInFlightInArrivalOrder(t *testing.T) {
	l, _ := newTestLimiter(2)
	r1, _, _ := l.acquire(t.Context(), false)
	r2, _, _ := l.acquire(t.Context(), false)
	third := admitted(t, l, t.Context())
	waitQueued(t, l, 1)
	fourth := admitted(t, l, t.Context())
	waitQueued(t, l, 2)
	if c := l.capacity(); c.InFlight != 2 || c.Limit != 2 {
		t.Fatalf("capacity %+v, want 2 in flight, limit 2", c)
	}
	r1(callResult{ok: true})
	r3 := <-third
	if r3 == nil {
		t.Fatal("the first call waiting was not admitted when a call ended")
	}
	select {
	case <-fourth:
		t.Fatal("the second call waiting was admitted before a place was free")
	case <-time.After(20 * time.Millisecond):
	}
	r2(callResult{ok: true})
	if r4 := <-fourth; r4 == nil {
		t.Fatal("the second call waiting was not admitted")
	}
}

func TestLimiterRateLimitPausesAndCutsTheBound(t *testing.T) {
	l, c := newTestLimiter(0)
	var releases []func(callResult)
	for range 8 {
		r, _, err := l.acquire(t.Context(), false)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	// The first 429 of eight in flight: six from now on, and a pause.
	releases[0](callResult{throttled: true, wait: 2 * time.Second})
	if got := l.capacity(); got.Limit != 6 || got.PausedUntil.IsZero() {
		t.Fatalf("after a 429 with 8 in flight: %+v, want a bound of 6 and a pause", got)
	}
	// The others answered 429 together: one signal, the bound stays.
	releases[1](callResult{throttled: true, wait: 2 * time.Second})
	if got := l.capacity().Limit; got != 6 {
		t.Errorf("bound %d after a second 429 of the same moment, want 6", got)
	}
	// Paused: a new call waits, even with room under the bound.
	for _, r := range releases[2:] {
		r(callResult{ok: true})
	}
	next := admitted(t, l, t.Context())
	waitQueued(t, l, 1)
	c.add(2 * time.Second)
	l.wake() // the timer's work, at the moved clock
	if r := <-next; r == nil {
		t.Fatal("the call waiting was not admitted after the pause")
	}
	// Successes grow the bound by one for each bound's worth.
	before := l.capacity().Limit
	for range 20 {
		r, _, _ := l.acquire(t.Context(), false)
		r(callResult{ok: true})
	}
	if after := l.capacity().Limit; after <= before {
		t.Errorf("bound %d after 20 successes, want more than %d", after, before)
	}
}

func TestLimiterResumedCallSkipsThePause(t *testing.T) {
	l, _ := newTestLimiter(0)
	r, _, _ := l.acquire(t.Context(), false)
	r(callResult{throttled: true, wait: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := l.acquire(ctx, false); err == nil {
		t.Fatal("a new call was admitted during the pause")
	}
	if c := l.capacity(); c.Waiting != 0 {
		t.Errorf("%d calls waiting after the one waiting gave up, want 0", c.Waiting)
	}
	release, _, err := l.acquire(t.Context(), true)
	if err != nil {
		t.Fatalf("the call that waited the pause out was refused: %v", err)
	}
	release(callResult{ok: true})
}

func TestLimiterPacesRequestsPerMinute(t *testing.T) {
	l := endpointLimiter(limiterKey{provider: "test", base: "http://pace.test", perMinute: 120})
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	l.now = c.Now
	t.Cleanup(func() { limiters.Delete(limiterKey{provider: "test", base: "http://pace.test", perMinute: 120}) })
	// A burst of a second's worth (2), then one every 500 ms.
	for range 2 {
		r, _, _ := l.acquire(t.Context(), false)
		r(callResult{ok: true})
	}
	next := admitted(t, l, t.Context())
	waitQueued(t, l, 1)
	c.add(500 * time.Millisecond)
	l.wake()
	if r := <-next; r == nil {
		t.Fatal("the paced call was not admitted when a token came back")
	}
}

func TestLimiterReadsRateLimitHeaders(t *testing.T) {
	now := time.Unix(1_700_000_000, 0).UTC()
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"openai requests", http.Header{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"1.5s"}}, 1500 * time.Millisecond},
		{"openai tokens", http.Header{"X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}}, time.Minute}, // bounded
		{"anthropic", http.Header{"Anthropic-Ratelimit-Requests-Remaining": {"0"}, "Anthropic-Ratelimit-Requests-Reset": {now.Add(3 * time.Second).Format(time.RFC3339)}}, 3 * time.Second},
		{"some left", http.Header{"X-Ratelimit-Remaining-Requests": {"12"}, "X-Ratelimit-Reset-Requests": {"1s"}}, 0},
		{"unreadable reset", http.Header{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"soon"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &limiter{name: "test", now: func() time.Time { return now }}
			l.observe(tt.header)
			var got time.Duration
			if p := l.capacity().PausedUntil; !p.IsZero() {
				got = p.Sub(now)
			}
			if got != tt.want {
				t.Errorf("paused for %v, want %v", got, tt.want)
			}
		})
	}
}
