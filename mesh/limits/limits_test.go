package limits_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// twoBridges are two Limits on one bucket, each with its own connection:
// two bridges of one mesh.
func twoBridges(t *testing.T) (*limits.Store, *limits.Store) {
	m := meshtest.New(t)
	other := meshtest.Conn(t, m.Server.ClientURL())
	js2, err := jetstream.New(other)
	if err != nil {
		t.Fatal(err)
	}
	kv2, err := js2.KeyValue(t.Context(), m.NS.Bucket(mesh.BucketLimits))
	if err != nil {
		t.Fatal(err)
	}
	return limits.New(m.JS, m.Limits), limits.New(js2, kv2)
}

// Two bridges taking turns spend one budget: 10 a minute lets 10 through,
// whichever bridge serves them, and refuses the 11th with a resetAt about
// 6 s (a minute / 10) ahead.
func TestLimitsBudgetIsSharedByTwoBridges(t *testing.T) {
	a, b := twoBridges(t)
	ctx := t.Context()
	key := limits.Key(limits.RatePrincipal, "alice")
	for i := range 10 {
		l := a
		if i%2 == 1 {
			l = b
		}
		d, err := l.Take(ctx, key, 10, time.Minute)
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v; want allowed", i+1, d, err)
		}
	}
	for _, l := range []*limits.Store{a, b} {
		d, err := l.Take(ctx, key, 10, time.Minute)
		if err != nil || d.Allowed {
			t.Fatalf("11th request: %+v, %v; want refused", d, err)
		}
		if wait := time.Until(d.ResetAt); wait < 4*time.Second || wait > 7*time.Second {
			t.Errorf("resetAt in %s, want about 6s", wait)
		}
	}
	// Another principal has a budget of its own.
	if d, err := b.Take(ctx, limits.Key(limits.RatePrincipal, "bob"), 10, time.Minute); err != nil || !d.Allowed {
		t.Errorf("bob: %+v, %v", d, err)
	}
}

// The budget refills with time: a clock moved 6 s on gives one request back.
func TestLimitsBudgetRefills(t *testing.T) {
	a, b := twoBridges(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a.SetClock(clock)
	b.SetClock(clock)
	key := limits.Key(limits.RateIP, "192.0.2.1")
	for range 10 {
		if d, _ := a.Take(t.Context(), key, 10, time.Minute); !d.Allowed {
			t.Fatal("refused within the budget")
		}
	}
	if d, _ := b.Take(t.Context(), key, 10, time.Minute); d.Allowed {
		t.Fatal("allowed past the budget")
	}
	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	if d, _ := b.Take(t.Context(), key, 10, time.Minute); !d.Allowed {
		t.Fatal("refused after a refill")
	}
	if d, _ := a.Take(t.Context(), key, 10, time.Minute); d.Allowed {
		t.Fatal("allowed twice after one refill")
	}
}

// A budget over another window: 5 in 10 s refuses the 6th with a resetAt
// 2 s (10 s / 5) ahead, and gives one request back 2 s later.
func TestLimitsBudgetOverAWindow(t *testing.T) {
	a, _ := twoBridges(t)
	now := time.Now()
	a.SetClock(func() time.Time { return now })
	key := limits.Key(limits.RatePrincipal, "carol")
	for i := range 5 {
		if d, err := a.Take(t.Context(), key, 5, 10*time.Second); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v; want allowed", i+1, d, err)
		}
	}
	d, err := a.Take(t.Context(), key, 5, 10*time.Second)
	if err != nil || d.Allowed {
		t.Fatalf("6th request: %+v, %v; want refused", d, err)
	}
	if wait := d.ResetAt.Sub(now); wait != 2*time.Second {
		t.Errorf("resetAt %s after now, want 2s", wait)
	}
	now = now.Add(2 * time.Second)
	if d, _ := a.Take(t.Context(), key, 5, 10*time.Second); !d.Allowed {
		t.Error("refused 2 s later, after a refill")
	}
}

// Under concurrency, from two bridges at once, no more requests get
// through than the budget holds.
func TestLimitsBudgetUnderConcurrency(t *testing.T) {
	a, b := twoBridges(t)
	key := limits.Key(limits.RatePrincipal, "carol")
	var allowed, failed atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			for range 5 {
				d, err := l.Take(t.Context(), key, 30, time.Minute)
				switch {
				case err != nil:
					failed.Add(1)
				case d.Allowed:
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// 80 requests in well under 2 s: 30, and one more per 2 s refilled.
	if n := allowed.Load(); n < 30-failed.Load() || n > 31 {
		t.Errorf("%d allowed (%d errors), want 30 or 31", n, failed.Load())
	}
}

// A principal's set of active conversations holds at most its limit
// across bridges; a full set admits again once one of its conversations
// is no longer active.
func TestLimitsAdmitActiveConversations(t *testing.T) {
	a, b := twoBridges(t)
	ctx := t.Context()
	var mu sync.Mutex
	active := map[string]bool{}
	isActive := func(_ context.Context, id string) bool { mu.Lock(); defer mu.Unlock(); return active[id] }
	admit := func(l *limits.Store, id string) bool {
		t.Helper()
		ok, err := l.Admit(ctx, limits.Key(limits.ActiveOwner, "alice"), id, 2, isActive)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			mu.Lock()
			active[id] = true
			mu.Unlock()
		}
		return ok
	}
	if !admit(a, "c1") || !admit(b, "c2") {
		t.Fatal("refused within the limit")
	}
	if !admit(b, "c1") {
		t.Error("a conversation already in the set was refused")
	}
	if admit(b, "c3") || admit(a, "c3") {
		t.Fatal("a third conversation admitted with two active")
	}
	mu.Lock()
	active["c1"] = false
	mu.Unlock()
	if !admit(a, "c3") {
		t.Fatal("refused after a conversation ended")
	}
	set, err := b.ActiveSet(ctx, limits.Key(limits.ActiveOwner, "alice"))
	if err != nil || len(set) != 2 || set["c1"] != 0 {
		t.Errorf("set %v, %v; want c2 and c3", set, err)
	}
}

// Concurrent admissions from two bridges never admit more than the limit.
func TestLimitsAdmitUnderConcurrency(t *testing.T) {
	a, b := twoBridges(t)
	always := func(context.Context, string) bool { return true }
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			ok, err := l.Admit(t.Context(), limits.ActiveAll, mesh.NewID(), 5, always)
			if err != nil && err != limits.ErrContention {
				t.Error(err)
			}
			if ok {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n > 5 || n == 0 {
		t.Errorf("%d admitted, want 1 to 5", n)
	}
}
