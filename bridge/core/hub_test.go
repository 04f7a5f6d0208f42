package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

func newCore(t *testing.T, m *meshtest.Mesh, buffer int) *Core {
	t.Helper()
	c, err := New(Config{NC: m.NC, JS: m.JS, Resources: m.Resources, Agent: "a", FollowerBuffer: buffer})
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
	p := mesh.NewEventPublisher(m.JS, m.NS)
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
	p := mesh.NewEventPublisher(m.JS, m.NS)
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
