package store_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// removeFixture is a stream T on t.> with n messages on each of subjects,
// and the count of purges and deletions of single messages the server was
// asked for (the JetStream API's requests, seen by a plain subscriber).
func removeFixture(t *testing.T, n int, subjects ...string) (jetstream.Stream, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	m := meshtest.New(t)
	ctx := t.Context()
	st, err := m.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range subjects {
		for i := range n {
			if _, err := m.JS.PublishAsync(subj, fmt.Appendf(nil, "%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	<-m.JS.PublishAsyncComplete()
	var purges, deletes atomic.Int32
	for subj, count := range map[string]*atomic.Int32{"$JS.API.STREAM.PURGE.T": &purges, "$JS.API.STREAM.MSG.DELETE.T": &deletes} {
		sub, err := m.NC.Subscribe(subj, func(*nats.Msg) { count.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := m.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return st, &purges, &deletes
}

// left is how many messages st holds on subj.
func left(t *testing.T, st jetstream.Stream, subj string) uint64 {
	t.Helper()
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// TestRemoveSubjectDeletesFewMessagesOneAtATime: a subject of a few
// messages goes by deletions of one message each, which spare the server
// the recount of every consumer a purge makes; other subjects stay.
func TestRemoveSubjectDeletesFewMessagesOneAtATime(t *testing.T) {
	st, purges, deletes := removeFixture(t, 5, "t.a.x", "t.a.y", "t.b")
	if err := store.RemoveSubject(t.Context(), st, "t.a.>", nil); err != nil {
		t.Fatal(err)
	}
	if n := left(t, st, "t.a.>"); n != 0 {
		t.Errorf("%d messages left on t.a.>", n)
	}
	if n := left(t, st, "t.b"); n != 5 {
		t.Errorf("t.b holds %d messages, want its 5", n)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return deletes.Load() == 10 }, "10 deletions, saw %d", deletes.Load())
	if n := purges.Load(); n != 0 {
		t.Errorf("%d purges, want none", n)
	}
}

// TestRemoveSubjectPurgesManyMessages: past RemoveOneByOne, one purge.
func TestRemoveSubjectPurgesManyMessages(t *testing.T) {
	st, purges, deletes := removeFixture(t, store.RemoveOneByOne+1, "t.a", "t.b")
	if err := store.RemoveSubject(t.Context(), st, "t.a", nil); err != nil {
		t.Fatal(err)
	}
	if n := left(t, st, "t.a"); n != 0 {
		t.Errorf("%d messages left on t.a", n)
	}
	if n := left(t, st, "t.b"); n != store.RemoveOneByOne+1 {
		t.Errorf("t.b holds %d messages, want %d", n, store.RemoveOneByOne+1)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return purges.Load() == 1 }, "one purge, saw %d", purges.Load())
	if n := deletes.Load(); n != 0 {
		t.Errorf("%d deletions, want none", n)
	}
}

// TestRemoveSubjectPurgesWhatItWasNotGiven: the sequences a caller read
// may miss what was stored since; what is left goes with a purge.
func TestRemoveSubjectPurgesWhatItWasNotGiven(t *testing.T) {
	st, purges, _ := removeFixture(t, 3, "t.a")
	first, err := st.GetLastMsgForSubject(t.Context(), "t.a")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RemoveSubject(t.Context(), st, "t.a", []uint64{first.Sequence}); err != nil {
		t.Fatal(err)
	}
	if n := left(t, st, "t.a"); n != 0 {
		t.Errorf("%d messages left on t.a", n)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return purges.Load() == 1 }, "one purge for the rest, saw %d", purges.Load())
}
