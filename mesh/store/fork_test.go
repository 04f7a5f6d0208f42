package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// grow saves n turns of two messages (prefix-u<i>, prefix-a<i>) to c, one
// record each.
func grow(t *testing.T, s *SessionStore, id, prefix string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := s.Update(t.Context(), id, func(c *mesh.Conversation) error {
			c.Messages = append(c.Messages,
				mesh.Message{ID: fmt.Sprintf("%s-u%d", prefix, i), Role: mesh.RoleUser, Content: fmt.Sprintf("question %d", i)},
				mesh.Message{ID: fmt.Sprintf("%s-a%d", prefix, i), Role: mesh.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// allIDs pages the whole history of id, newest page first, pages of n,
// and returns the message ids oldest first.
func allIDs(t *testing.T, s *SessionStore, id string, n int) []string {
	t.Helper()
	var out []string
	before := ""
	for {
		d, err := s.GetPage(t.Context(), id, n, before)
		if err != nil {
			t.Fatalf("page of %s before %q: %v", id, before, err)
		}
		var page []string
		for _, m := range d.Messages {
			var v struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(m, &v); err != nil {
				t.Fatal(err)
			}
			page = append(page, v.ID)
		}
		out = append(page, out...)
		if d.Before == "" {
			return out
		}
		before = d.Before
	}
}

func forkAt(t *testing.T, s *SessionStore, base string, id string, after bool) *mesh.Conversation {
	t.Helper()
	ctx := t.Context()
	c, err := s.Get(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Find(ctx, c, func(m *mesh.Message) bool { return m.ID == id })
	if err != nil || f == nil {
		t.Fatalf("find %s in %s: %v %v", id, base, f, err)
	}
	cut := f.After
	if !after {
		cut = f.Before
	}
	b := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, ForkedFrom: &mesh.ForkPoint{Conversation: base, Message: cut.Last}}
	if err := s.Fork(ctx, c, cut, b, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

func want(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-u%d", prefix, i), fmt.Sprintf("%s-a%d", prefix, i))
	}
	return out
}

// A branch reads the original's records up to its point, not copies:
// the history for the model, every page and cursor, the count; what it
// adds is its own, and the original does not change.
func TestForkSharesRecords(t *testing.T) {
	s, js := testStore(t)
	ctx := t.Context()
	orig := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
	if err := s.Create(ctx, orig); err != nil {
		t.Fatal(err)
	}
	grow(t, s, orig.ID, "o", 0, 40) // 80 messages: past the tail
	st, _ := js.Stream(ctx, "MESH_MESSAGES")
	info, _ := st.Info(ctx)
	before := info.State.Msgs

	b := forkAt(t, s, orig.ID, "o-u30", false) // the branch keeps o-u0 … o-a29
	info, _ = st.Info(ctx)
	if added := info.State.Msgs - before; added != 2 {
		t.Fatalf("the fork added %d stream messages, want 2 (its grant, the record of what it shares): the history is shared, not copied", added)
	}
	got, err := s.Get(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.MessageCount != 60 || len(got.Messages) != 60 || got.Messages[len(got.Messages)-1].ID != "o-a29" {
		t.Fatalf("branch: count %d, %d messages, last %s", got.MessageCount, len(got.Messages), got.Messages[len(got.Messages)-1].ID)
	}
	for _, n := range []int{7, 50, 64} {
		if ids := allIDs(t, s, b.ID, n); strings.Join(ids, ",") != strings.Join(want("o", 30), ",") {
			t.Fatalf("pages of %d: %v", n, ids)
		}
	}
	// New turns diverge.
	grow(t, s, b.ID, "b", 0, 3)
	grow(t, s, orig.ID, "o", 40, 1)
	bw := append(want("o", 30), want("b", 3)...)
	if ids := allIDs(t, s, b.ID, 9); strings.Join(ids, ",") != strings.Join(bw, ",") {
		t.Fatalf("branch after its turns: %v", ids)
	}
	if ids := allIDs(t, s, orig.ID, 50); strings.Join(ids, ",") != strings.Join(want("o", 41), ",") {
		t.Fatalf("original after its turn: %v", ids)
	}
	bc, _ := s.Get(ctx, b.ID)
	if bc.MessageCount != 66 || bc.Messages[len(bc.Messages)-1].ID != "b-a2" {
		t.Fatalf("branch count %d, last %s", bc.MessageCount, bc.Messages[len(bc.Messages)-1].ID)
	}
	if ok, err := s.HoldsTurn(ctx, bc, "o-u1"); err != nil || !ok {
		t.Fatalf("the branch holds the original's o-u1: %v %v", ok, err)
	}
	if ok, err := s.HoldsTurn(ctx, bc, "o-u35"); err != nil || ok {
		t.Fatalf("the branch does not hold o-u35, after its point: %v %v", ok, err)
	}
}

// A point inside a record (a save of several messages) keeps only the
// record's first messages; a cursor past them is refused.
func TestForkInsideRecord(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	orig := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
	if err := s.Create(ctx, orig); err != nil {
		t.Fatal(err)
	}
	grow(t, s, orig.ID, "o", 0, 3)
	b := forkAt(t, s, orig.ID, "o-u1", true) // o-u1's record also holds o-a1
	if ids := allIDs(t, s, b.ID, 1); strings.Join(ids, ",") != "o-u0,o-a0,o-u1" {
		t.Fatalf("branch: %v", ids)
	}
	c, _ := s.Get(ctx, b.ID)
	if c.MessageCount != 3 || ids(c.Messages) != "o-u0,o-a0,o-u1" {
		t.Fatalf("branch history: %d %s", c.MessageCount, ids(c.Messages))
	}
	seq := c.MessageTail[2].Seq
	if _, err := s.GetPage(ctx, b.ID, 5, fmt.Sprintf("%d.2", seq)); err == nil {
		t.Fatal("a cursor past the branch's point in the shared record was read")
	}
	// The original's record after the point is on the original's subject,
	// not the branch's: a cursor at it reads nothing.
	o, _ := s.Get(ctx, orig.ID)
	if _, err := s.GetPage(ctx, b.ID, 5, fmt.Sprint(o.MessageTail[len(o.MessageTail)-1].Seq)); err == nil {
		t.Fatal("a cursor at the original's newer record was read through the branch")
	}
	// Before the first message: an empty branch.
	e := forkAt(t, s, orig.ID, "o-u0", false)
	if c, _ := s.Get(ctx, e.ID); c.MessageCount != 0 || len(c.Messages) != 0 || len(c.Shared) != 0 {
		t.Fatalf("empty branch: %+v", c)
	}
}

// Forks of forks: a branch of a branch reads both logs, each up to its
// point, whether its point is in the branch's own part or the original's.
func TestForkOfFork(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	orig := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
	if err := s.Create(ctx, orig); err != nil {
		t.Fatal(err)
	}
	grow(t, s, orig.ID, "o", 0, 5)
	b1 := forkAt(t, s, orig.ID, "o-a2", true)
	grow(t, s, b1.ID, "b1", 0, 4)
	// In b1's own part.
	b2 := forkAt(t, s, b1.ID, "b1-a1", true)
	grow(t, s, b2.ID, "b2", 0, 2)
	w2 := append(append(want("o", 3), want("b1", 2)...), want("b2", 2)...)
	if ids := allIDs(t, s, b2.ID, 3); strings.Join(ids, ",") != strings.Join(w2, ",") {
		t.Fatalf("fork of fork: %v", ids)
	}
	c2, _ := s.Get(ctx, b2.ID)
	if len(c2.Shared) != 2 || c2.Shared[0].Conversation != b1.ID || c2.Shared[1].Conversation != orig.ID || c2.MessageCount != len(w2) {
		t.Fatalf("b2 shares %+v, count %d", c2.Shared, c2.MessageCount)
	}
	// In the original's part, through b1: b3 reads the original alone.
	b3 := forkAt(t, s, b1.ID, "o-u1", true)
	if ids := allIDs(t, s, b3.ID, 2); strings.Join(ids, ",") != "o-u0,o-a0,o-u1" {
		t.Fatalf("fork of fork in the original's part: %v", ids)
	}
	c3, _ := s.Get(ctx, b3.ID)
	if len(c3.Shared) != 1 || c3.Shared[0].Conversation != orig.ID {
		t.Fatalf("b3 shares %+v", c3.Shared)
	}
}

// A head written by hand that names another conversation's records
// reads none of them: the grant, on that conversation's own log, names
// another branch or none.
func TestForkForgedHeadRefused(t *testing.T) {
	s, js := testStore(t)
	ctx := t.Context()
	victim := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Owner: "victim"}
	if err := s.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	grow(t, s, victim.ID, "v", 0, 2)
	mine := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Owner: "me"}
	if err := s.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	grow(t, s, mine.ID, "m", 0, 1)
	legit := forkAt(t, s, mine.ID, "m-a0", true)
	v, _ := s.Get(ctx, victim.ID)
	vseq := v.MessageTail[len(v.MessageTail)-1].Seq
	kv, err := js.KeyValue(ctx, "mesh_sessions")
	if err != nil {
		t.Fatal(err)
	}
	lc, _ := s.Get(ctx, legit.ID)
	for name, shared := range map[string][]mesh.SharedRecords{
		"no grant":             {{Conversation: victim.ID, Seq: vseq, Count: 2}},
		"another branch grant": {{Conversation: victim.ID, Seq: vseq, Count: 2, Grant: lc.Shared[0].Grant}},
		"grant of another log": {{Conversation: victim.ID, Seq: lc.Shared[0].Seq, Count: 2, Grant: lc.Shared[0].Grant}},
		"a message record":     {{Conversation: victim.ID, Seq: vseq, Count: 2, Grant: vseq}},
	} {
		forged := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Owner: "me", MessageCount: 2,
			MessageTail: mesh.MessageTail{{Seq: vseq, Bytes: 10}, {Seq: vseq, Bytes: 10}}, Shared: shared}
		data, _ := json.Marshal(headOf(forged))
		if _, err := kv.Put(ctx, forged.ID, data); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, forged.ID); !errors.Is(err, ErrForeignRecords) {
			t.Errorf("%s: read of the forged branch: %v, want refused", name, err)
		}
		if _, err := s.GetPage(ctx, forged.ID, 10, ""); !errors.Is(err, ErrForeignRecords) {
			t.Errorf("%s: page of the forged branch: %v, want refused", name, err)
		}
	}
	// The same forgery of a legitimate branch's own grant, altered count.
	lc.Shared[0].Count++
	data, _ := json.Marshal(headOf(lc))
	if _, err := kv.Put(ctx, lc.ID, data); err != nil {
		t.Fatal(err)
	}
	fresh := NewSessionStore(kv, NewMessageLog(js, mesh.DefaultNamespace())) // no grant checked yet
	if _, err := fresh.Get(context.Background(), lc.ID); !errors.Is(err, ErrForeignRecords) {
		t.Fatalf("altered branch: %v, want refused", err)
	}
}

// logSize counts the stream messages of conversation id's log.
func logSize(t *testing.T, js jetstream.JetStream, id string) uint64 {
	t.Helper()
	st, err := js.Stream(t.Context(), "MESH_MESSAGES")
	if err != nil {
		t.Fatal(err)
	}
	subj := "mesh.msg." + id
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

// Deleting or purging the original leaves its branches whole: the records
// a living branch shares stay, and go with the last branch that reads
// them; a fork of a fork holds on to both logs.
func TestForkOutlivesOriginal(t *testing.T) {
	s, js := testStore(t)
	ctx := t.Context()
	orig := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
	if err := s.Create(ctx, orig); err != nil {
		t.Fatal(err)
	}
	grow(t, s, orig.ID, "o", 0, 4)
	b := forkAt(t, s, orig.ID, "o-a1", true)
	grow(t, s, b.ID, "b", 0, 2)
	b2 := forkAt(t, s, b.ID, "b-a0", true)
	lone := forkAt(t, s, orig.ID, "o-a0", true) // deleted below: it holds nothing
	wantB := strings.Join(append(want("o", 2), want("b", 2)...), ",")
	wantB2 := strings.Join(append(want("o", 2), want("b", 1)...), ",")
	check := func(when string) {
		t.Helper()
		if ids := allIDs(t, s, b.ID, 3); strings.Join(ids, ",") != wantB {
			t.Fatalf("%s: branch %v", when, ids)
		}
		if ids := allIDs(t, s, b2.ID, 3); strings.Join(ids, ",") != wantB2 {
			t.Fatalf("%s: fork of the branch %v", when, ids)
		}
		// A process that never read them: nothing cached.
		fresh := NewSessionStore(s.kv, NewMessageLog(js, mesh.DefaultNamespace()))
		if c, err := fresh.Get(ctx, b2.ID); err != nil || ids(c.Messages) != wantB2 {
			t.Fatalf("%s: fresh read of the fork of the branch: %v", when, err)
		}
	}
	if _, err := s.Delete(ctx, lone.ID, "me"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, orig.ID, "me"); err != nil {
		t.Fatal(err)
	}
	check("original deleted")
	if err := s.Purge(ctx, orig.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, orig.ID); !errors.Is(err, mesh.ErrSessionNotFound) {
		t.Fatalf("purged original: %v, want not found", err)
	}
	if logSize(t, js, orig.ID) == 0 {
		t.Fatal("the purge emptied the log the branches share")
	}
	check("original purged")
	if err := s.Purge(ctx, b.ID); err != nil { // b2 still shares b's and the original's
		t.Fatal(err)
	}
	if logSize(t, js, b.ID) == 0 || logSize(t, js, orig.ID) == 0 {
		t.Fatal("a purge emptied a log the fork of the branch shares")
	}
	if ids := allIDs(t, s, b2.ID, 2); strings.Join(ids, ",") != wantB2 {
		t.Fatalf("after the branch's purge: %v", ids)
	}
	// The last reader goes (as an expired head does): every log goes.
	if err := s.kv.Purge(ctx, b2.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.PurgeMessages(ctx, b2.ID); err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]string{"original": orig.ID, "branch": b.ID, "fork of the branch": b2.ID} {
		if n := logSize(t, js, id); n != 0 {
			t.Errorf("the %s's log holds %d messages after the last branch went", name, n)
		}
	}
}
