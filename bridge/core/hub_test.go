package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

func newCore(t *testing.T, m *meshtest.Mesh, buffer int) *Core {
	t.Helper()
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "a", FollowerBuffer: buffer})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func publish(t *testing.T, m *meshtest.Mesh, session string, n int, tag string) []uint64 {
	t.Helper()
	p := bus.NewPublisher(m.JS, m.NS)
	var seqs []uint64
	for i := range n {
		seq, err := p.Publish(t.Context(), session, "run-"+tag, "", mesh.Custom("n", fmt.Sprintf("%s%d", tag, i)))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func next(t *testing.T, f *Follower) StreamEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ev, err := f.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return ev
}

func TestFollowReplaysThenFollowsWithoutGapOrDuplicate(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 0)
	s, other := mesh.NewID(), mesh.NewID()
	old := publish(t, m, s, 5, "old")
	publish(t, m, other, 3, "other")

	f, err := c.Follow(t.Context(), s, old[1]) // resume after the second event
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Published while the follower replays: must come once, after the old ones.
	live := publish(t, m, s, 4, "live")
	var got []uint64
	for range 3 + 4 {
		ev := next(t, f)
		if ev.Session != s || ev.Type != mesh.EventCustom || ev.Run == "" {
			t.Errorf("event %+v", ev)
		}
		got = append(got, ev.Seq)
	}
	want := append(append([]uint64{}, old[2:]...), live...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sequences %v, want %v", got, want)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if ev, err := f.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("extra event %+v, %v", ev, err)
	}
}

func TestFollowFromNowAndFromStart(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 0)
	s := mesh.NewID()
	old := publish(t, m, s, 2, "old")
	now, err := c.Follow(t.Context(), s, FromNow)
	if err != nil {
		t.Fatal(err)
	}
	defer now.Close()
	all, err := c.Follow(t.Context(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	live := publish(t, m, s, 1, "live")
	if ev := next(t, now); ev.Seq != live[0] {
		t.Errorf("from now: first seq %d, want %d", ev.Seq, live[0])
	}
	for _, want := range append(old, live...) {
		if ev := next(t, all); ev.Seq != want {
			t.Errorf("from start: seq %d, want %d", ev.Seq, want)
		}
	}
}

func TestSlowFollowerIsCutOffWithoutSlowingOthers(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 4<<10)
	s := mesh.NewID()
	slow, err := c.Follow(t.Context(), s, FromNow)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := c.Follow(t.Context(), s, FromNow)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	p := bus.NewPublisher(m.JS, m.NS)
	big := strings.Repeat("x", 1000)
	var last uint64
	for i := range 20 {
		seq, err := p.Publish(t.Context(), s, "r", "", mesh.Custom("big", big))
		if err != nil {
			t.Fatal(err)
		}
		last = seq
		if ev := next(t, fast); ev.Seq != seq {
			t.Fatalf("fast follower: event %d seq %d, want %d", i, ev.Seq, seq)
		}
	}
	// The slow one read nothing: it got what fit, then the cut-off.
	var read int
	var err2 error
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err2 = slow.Next(ctx)
		cancel()
		if err2 != nil {
			break
		}
		read++
	}
	if !errors.Is(err2, ErrSlowConsumer) || read != 0 {
		t.Errorf("slow follower: read %d then %v; want ErrSlowConsumer with its buffer dropped", read, err2)
	}
	// It can resume from what it had: nothing lost.
	resumed, err := c.Follow(t.Context(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	var seq uint64
	for seq != last {
		seq = next(t, resumed).Seq
	}
}

// With nobody following, the hub reads no conversation's every event: the
// all consumer starts with the first follower, which still gets every
// event after its resume point exactly once, and stops a while after the
// last one leaves.
func TestFollowerStartsTheAllConsumerWithoutGap(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 0)
	c.hub.linger = 200 * time.Millisecond
	s := mesh.NewID()
	old := publish(t, m, s, 3, "old")
	if c.hub.allRunning() {
		t.Fatal("the all consumer runs with no follower")
	}
	// Events published while the follower starts come once, in order.
	done := make(chan []uint64)
	go func() {
		p := bus.NewPublisher(m.JS, m.NS)
		var seqs []uint64
		for i := range 30 {
			seq, err := p.Publish(context.Background(), s, "run-live", "", mesh.Custom("n", i))
			if err != nil {
				t.Error(err)
				break
			}
			seqs = append(seqs, seq)
		}
		done <- seqs
	}()
	f, err := c.Follow(t.Context(), s, old[0])
	if err != nil {
		t.Fatal(err)
	}
	live := <-done
	want := append(append([]uint64{}, old[1:]...), live...)
	var got []uint64
	for range want {
		got = append(got, next(t, f).Seq)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sequences %v, want %v", got, want)
	}
	noMore(t, f)
	f.Close()
	if !c.hub.allRunning() {
		t.Error("the all consumer stopped as soon as its follower left")
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return !c.hub.allRunning() }, "the all consumer never stopped after its last follower left")
	// And starts again for the next one.
	g, err := c.Follow(t.Context(), s, FromNow)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	again := publish(t, m, s, 1, "again")
	if ev := next(t, g); ev.Seq != again[0] {
		t.Errorf("after a stop: seq %d, want %d", ev.Seq, again[0])
	}
}

// Followers that come and go while the all consumer lingers, stops or
// starts again, each resuming where the last one ended, see every event of
// their session once and in order, while events are published all along.
func TestFollowersComingAsTheAllConsumerStops(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 0)
	c.hub.linger = time.Millisecond
	s := mesh.NewID()
	ctx, cancel := context.WithCancel(t.Context())
	published := make(chan []uint64)
	go func() {
		p := bus.NewPublisher(m.JS, m.NS)
		var seqs []uint64
		for i := 0; ctx.Err() == nil; i++ {
			// Another session's events too: the live consumer reads them.
			if _, err := p.Publish(context.Background(), mesh.NewID(), "r", "", mesh.Custom("x", i)); err != nil {
				t.Error(err)
				break
			}
			seq, err := p.Publish(context.Background(), s, "r", "", mesh.Custom("n", i))
			if err != nil {
				t.Error(err)
				break
			}
			seqs = append(seqs, seq)
		}
		published <- seqs
	}()
	var got []uint64
	var after uint64
	for i := range 40 {
		f, err := c.Follow(t.Context(), s, after)
		if err != nil {
			t.Fatal(err)
		}
		for range 1 + i%4 {
			after = next(t, f).Seq
			got = append(got, after)
		}
		f.Close()
		// Every other follower comes after the linger, as the consumer stops.
		if i%2 == 1 {
			time.Sleep(time.Duration(i%5) * time.Millisecond)
		}
	}
	cancel()
	all := <-published
	want := all[:len(got)]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("followers one after another read %v, want %v", got, want)
	}
}

// noMore fails if f has another event within 100 ms.
func noMore(t *testing.T, f *Follower) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if ev, err := f.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("extra event %+v, %v", ev, err)
	}
}

// A follower opened by a principal whose credential expires (a stream
// token, a JWT) ends then with ErrCredentialExpired: the events it holds,
// and those published after, are not delivered. One of a principal that
// does not expire (a static token) goes on.
func TestFollowerEndsWhenItsCredentialExpires(t *testing.T) {
	m := meshtest.New(t)
	c := newCore(t, m, 0)
	s := mesh.NewID()
	publish(t, m, s, 2, "old")

	expires := time.Now().Add(time.Second)
	ctx := auth.WithPrincipal(t.Context(), &auth.Principal{Name: "u", Roles: []string{"user"}, Via: auth.ViaStream, Expires: expires})
	f, err := c.Follow(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	static, err := c.Follow(auth.WithPrincipal(t.Context(), &auth.Principal{Name: "u", Via: auth.ViaToken}), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer static.Close()
	for range 2 {
		next(t, f)
		next(t, static)
	}
	ended := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		for {
			if _, err := f.Next(ctx); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		if !errors.Is(err, ErrCredentialExpired) {
			t.Fatalf("the follower ended with %v, want %v", err, ErrCredentialExpired)
		}
		if time.Now().Before(expires) {
			t.Errorf("the follower ended %v before its credential expired", time.Until(expires))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follower of an expired credential did not end")
	}
	publish(t, m, s, 1, "late")
	if _, err := f.Next(t.Context()); !errors.Is(err, ErrCredentialExpired) {
		t.Errorf("after its end, the follower gives %v", err)
	}
	if ev := next(t, static); ev.Session != s {
		t.Errorf("the follower of a static token: %+v", ev)
	}
}
