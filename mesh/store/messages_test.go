package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
)

// sameMessage must compare every field: a field it does not know would let
// a change made in place to a stored message go unseen.
func TestSameMessageFields(t *testing.T) {
	if n := reflect.TypeFor[mesh.Message]().NumField(); n != 18 {
		t.Errorf("Message has %d fields: compare the new ones in sameMessage, then update this count", n)
	}
	if n := reflect.TypeFor[mesh.ToolCall]().NumField(); n != 7 {
		t.Errorf("ToolCall has %d fields: compare the new ones in sameMessage, then update this count", n)
	}
}

func TestMessageTailJSON(t *testing.T) {
	b, err := json.Marshal(mesh.MessageTail{{Seq: 12, Bytes: 345}, {Seq: 1 << 40, Bytes: 0}})
	if err != nil || string(b) != "[[12,345],[1099511627776,0]]" {
		t.Fatalf("encoded %s, %v", b, err)
	}
	var got mesh.MessageTail
	if err := json.Unmarshal([]byte(" [ [12, 345] ,[1099511627776,0]] "), &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("decoded %d entries, want 2: %+v", len(got), got)
	}
	if got[1].Seq != 1<<40 {
		t.Fatalf("decoded entry 1 seq = %d, want %d", got[1].Seq, uint64(1)<<40)
	}
	if got[0].Bytes != 345 {
		t.Fatalf("decoded entry 0 bytes = %d, want 345", got[0].Bytes)
	}
	for _, bad := range []string{`[[1]]`, `[[1,2,3]]`, `[1,2]`, `[[1,2]`, `[["1",2]]`, `{}`, `[[,2]]`} {
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s decoded as %+v", bad, got)
		}
	}
}

func TestHistoryStart(t *testing.T) {
	tail := []mesh.MessageRef{{Seq: 1, Bytes: 100}, {Seq: 2, Bytes: 100}, {Seq: 3, Bytes: 900}, {Seq: 4, Bytes: 100}, {Seq: 5, Bytes: 50}}
	for _, c := range []struct{ budget, want int }{
		{10_000, 0}, {1250, 0}, {1249, 1}, {1050, 2}, {1049, 3}, {150, 3}, {149, 4}, {10, 4},
	} {
		if got := historyStart(tail, c.budget); got != c.want {
			t.Errorf("budget %d: start %d, want %d", c.budget, got, c.want)
		}
	}
	msgs := []mesh.Message{{ID: "r1", Role: mesh.RoleTool}, {ID: "r2", Role: mesh.RoleTool}, {ID: "a", Role: mesh.RoleAssistant}, {ID: "r3", Role: mesh.RoleTool}}
	if got := cutHistory(msgs); len(got) != 2 || got[0].ID != "a" {
		t.Fatalf("cut: %+v", got)
	}
}

// testStore is a session store on an embedded server of its own.
func testStore(t *testing.T) (*SessionStore, jetstream.JetStream) {
	t.Helper()
	s, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Provision(ctx, js, mesh.DefaultNamespace(), ProvisionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return NewSessionStore(r.Sessions, r.Messages), js
}

func ids(msgs []mesh.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.ID)
	}
	return b.String()
}

// A save whose head write is lost leaves its messages in the log unread:
// neither a later save nor a read shows them, nor the save tried again
// after a conflict.
func TestHalfWrittenSave(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Messages: []mesh.Message{{ID: "u1", Role: mesh.RoleUser, Content: "first"}}}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	// A process killed between its append and its head write.
	if _, err := s.log.append(ctx, c.ID, c.MessageTail[0].Seq, []mesh.Message{{ID: "ghost", Role: mesh.RoleAssistant, Content: "never saved"}}); err != nil {
		t.Fatal(err)
	}
	// A save that loses its compare-and-set once: another writer changes
	// the head between its append and its write.
	tries := 0
	got, err := s.Update(ctx, c.ID, func(cv *mesh.Conversation) error {
		tries++
		if tries == 1 {
			if _, err := s.UpdateHead(ctx, c.ID, func(h *mesh.Conversation) error { h.Status = mesh.StatusRunning; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if cv.HasMessage("a1") {
			return ErrNoChange
		}
		cv.Messages = append(cv.Messages, mesh.Message{ID: "a1", Role: mesh.RoleAssistant, Content: "answer"}, mesh.Message{ID: "u2", Role: mesh.RoleUser, Content: "again"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tries != 2 || got.Status != mesh.StatusRunning {
		t.Fatalf("tries %d, status %s: the conflict did not happen", tries, got.Status)
	}
	read, err := s.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ids(read.Messages) != "u1,a1,u2" || read.MessageCount != 3 {
		t.Fatalf("messages %s (count %d), want u1,a1,u2", ids(read.Messages), read.MessageCount)
	}
	page, err := s.GetDoc(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Messages); n != 3 || strings.Contains(string(appendMessages(nil, page.Messages)), "ghost") {
		t.Fatalf("page: %s", appendMessages(nil, page.Messages))
	}
	// The log holds the records of u1, of the ghost, and of a1 and u2: the
	// attempt that won published the very record the one that lost had
	// (same place in the chain, same messages), which the stream kept
	// once. One unread: the ghost.
	info, err := s.log.js.Stream(ctx, s.log.stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("log holds %d records, want 3", n)
	}
	// A stored message cannot be edited.
	_, err = s.Update(ctx, c.ID, func(cv *mesh.Conversation) error { cv.Messages[0].Content = "edited"; return nil })
	if err == nil {
		t.Fatal("editing a stored message was saved")
	}
}

// Pages go back through the whole conversation, past the tail, each
// message once and in order; the history read for the model keeps to its
// budget.
func TestPagesAndHistory(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	const total = 150
	for i := 0; i < total; i += 10 {
		if _, err := s.Update(ctx, c.ID, func(cv *mesh.Conversation) error {
			for j := i; j < i+10; j++ {
				cv.Messages = append(cv.Messages, mesh.Message{ID: fmt.Sprintf("m%03d", j), Role: mesh.RoleUser, Content: strings.Repeat("x", 100)})
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	read, err := s.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Messages) != TailKept {
		t.Fatalf("history: %d messages, want the %d of the tail", len(read.Messages), TailKept)
	}
	if last := read.Messages[TailKept-1].ID; last != "m149" {
		t.Fatalf("history: last message %s, want m149", last)
	}
	if read.MessageCount != total {
		t.Fatalf("history: message count %d, want %d", read.MessageCount, total)
	}
	if len(read.MessageTail) != TailKept {
		t.Fatalf("history: %d entries in the message tail, want %d", len(read.MessageTail), TailKept)
	}
	// Pages of 40 start at a save's first message (saves add 10); pages of
	// 15 start inside a save's record too. Read from the server, then from
	// the records the store kept.
	cache := s.log.cache
	for i, size := range []int{40, 15, 40, 15} {
		if s.log.cache = nil; i >= 2 {
			s.log.cache = cache
		}
		var all []string
		before := ""
		for pages := 0; ; pages++ {
			if pages > total/size+1 {
				t.Fatal("too many pages")
			}
			p, err := s.GetPage(ctx, c.ID, size, before)
			if err != nil {
				t.Fatal(err)
			}
			var ms []mesh.Message
			if err := json.Unmarshal(appendMessages(nil, p.Messages), &ms); err != nil {
				t.Fatal(err)
			}
			if len(ms) != size && p.Before != "" {
				t.Fatalf("page of %d", len(ms))
			}
			all = append(strings.Split(ids(ms), ","), all...)
			if p.Before == "" {
				break
			}
			before = p.Before
		}
		if len(all) != total {
			t.Fatalf("pages of %d gave %d messages", size, len(all))
		}
		for i, id := range all {
			if id != fmt.Sprintf("m%03d", i) {
				t.Fatalf("pages of %d: message %d is %s", size, i, id)
			}
		}
	}
	s.HistoryBytes = 1000 // about 7 messages of 140 bytes
	read, err = s.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(read.Messages); n < 5 || n > 8 || read.Messages[n-1].ID != "m149" {
		t.Fatalf("history within 1000 bytes: %s", ids(read.Messages))
	}
	if _, err := s.GetPage(ctx, c.ID, 10, "nope"); err == nil {
		t.Fatal("a bad cursor was taken")
	}
}

func TestCursorText(t *testing.T) {
	for _, c := range []Cursor{{Seq: 7}, {Seq: 1 << 40, Index: 3}} {
		if got, ok := ParseCursor(c.String()); !ok || got != c {
			t.Errorf("%+v: text %s read back as %+v, %v", c, c.String(), got, ok)
		}
	}
	for _, bad := range []string{"", "0", "x", "7.", "7.0", "7.-1", "7.+1", ".3", "-7", "7.3.1"} {
		if c, ok := ParseCursor(bad); ok {
			t.Errorf("%q read as %+v", bad, c)
		}
	}
}

// A save whose messages add up to more than recordSplit publishes several
// records; they read back as one history and one page.
func TestBigSaveSplits(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	s.log.cache = nil // every read from the server
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
	for i := range 3 {
		c.Messages = append(c.Messages, mesh.Message{ID: fmt.Sprint("big", i), Role: mesh.RoleUser, Content: strings.Repeat("x", 300<<10)})
	}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	info, err := s.log.js.Stream(ctx, s.log.stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("log holds %d records, want 3", n)
	}
	read, err := s.Get(ctx, c.ID)
	if err != nil || ids(read.Messages) != "big0,big1,big2" {
		t.Fatalf("history %v, %v", read, err)
	}
	p, err := s.GetPage(ctx, c.ID, 10, "")
	if err != nil || len(p.Messages) != 3 || p.Before != "" {
		t.Fatalf("page %v, %v", p, err)
	}
	// A cursor at another conversation's record finds nothing of it.
	other := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Messages: []mesh.Message{{ID: "theirs", Role: mesh.RoleUser}}}
	if err := s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if p, err := s.GetPage(ctx, c.ID, 10, fmt.Sprint(other.MessageTail[0].Seq)); err == nil {
		t.Fatalf("a cursor of another conversation gave %s", appendMessages(nil, p.Messages))
	}
}

// A conversation stored one message per record (the earlier form) reads
// and pages as one stored a record per save.
func TestRecordsOfOneMessage(t *testing.T) {
	s, _ := testStore(t)
	s.log.cache = nil // every read from the server
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	var tail mesh.MessageTail
	prev := uint64(0)
	for i := range 80 {
		refs, err := s.log.append(ctx, c.ID, prev, []mesh.Message{{ID: fmt.Sprintf("m%03d", i), Role: mesh.RoleUser, Content: "one"}})
		if err != nil {
			t.Fatal(err)
		}
		tail, prev = append(tail, refs...), refs[0].Seq
	}
	if _, err := s.UpdateHead(ctx, c.ID, func(h *mesh.Conversation) error {
		h.MessageTail, h.MessageCount = tail[len(tail)-TailKept:], len(tail)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	read, err := s.Get(ctx, c.ID)
	if err != nil || len(read.Messages) != TailKept || read.Messages[0].ID != "m016" {
		t.Fatalf("history %v, %v", read, err)
	}
	// One more save: a record of two messages after those of one.
	if _, err := s.UpdateLoaded(ctx, read, func(cv *mesh.Conversation) error {
		cv.Messages = append(cv.Messages, mesh.Message{ID: "m080", Role: mesh.RoleUser}, mesh.Message{ID: "m081", Role: mesh.RoleAssistant})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var all []string
	for before := ""; ; {
		p, err := s.GetPage(ctx, c.ID, 30, before)
		if err != nil {
			t.Fatal(err)
		}
		var ms []mesh.Message
		if err := json.Unmarshal(appendMessages(nil, p.Messages), &ms); err != nil {
			t.Fatal(err)
		}
		all = append(strings.Split(ids(ms), ","), all...)
		if before = p.Before; before == "" {
			break
		}
	}
	if len(all) != 82 || all[0] != "m000" || all[81] != "m081" {
		t.Fatalf("pages gave %d messages: %v", len(all), all)
	}
}

// The record cache gives a record only to its conversation, and keeps to
// its size.
func TestRecordCache(t *testing.T) {
	c := newRecordCache(4000)
	rec := func(seq uint64) record { return record{seq: seq, msgs: [][]byte{[]byte(strings.Repeat("x", 100))}} }
	c.put("a", rec(1))
	if r, ok := c.get("a", 1); !ok || r.seq != 1 {
		t.Fatal("a kept record was not found")
	}
	if _, ok := c.get("b", 1); ok {
		t.Fatal("conversation b got a record of a")
	}
	for seq := uint64(2); seq < 200; seq++ {
		c.put("a", rec(seq))
	}
	if c.size > 4000 || len(c.byseq) != len(c.order) || len(c.byseq) < 10 {
		t.Fatalf("cache of %d bytes, %d records, %d in order", c.size, len(c.byseq), len(c.order))
	}
	if _, ok := c.get("a", 1); ok {
		t.Fatal("the oldest record was kept past the cache's size")
	}
	if _, ok := c.get("a", 199); !ok {
		t.Fatal("the newest record was dropped")
	}
	c.put("a", record{seq: 500, msgs: [][]byte{make([]byte, 2000)}})
	if _, ok := c.get("a", 500); ok {
		t.Fatal("a record larger than a quarter of the cache was kept")
	}
}

// A record's messages are decoded once per process, and each read gets
// messages of its own: a change to one read's tool calls or files shows
// in no other read, and a save refuses it.
func TestDecodedHistory(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Messages: []mesh.Message{
		{ID: "u1", Role: mesh.RoleUser, Content: "look", Files: []mesh.File{{ID: "f-1", MediaType: "image/png"}}},
		{ID: "a1", Role: mesh.RoleAssistant, ToolCalls: []mesh.ToolCall{{ID: "c1", Name: "get", Arguments: map[string]any{"k": "v"}}}},
	}}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	read := func() *mesh.Conversation {
		t.Helper()
		got, err := s.Get(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := read()
	rec, ok := s.log.cache.get(c.ID, first.MessageTail[0].Seq)
	if !ok || rec.dec == nil || len(rec.dec.msgs) != 2 {
		t.Fatal("the record read was not kept decoded")
	}
	first.Messages[1].ToolCalls[0].Name = "changed"
	second := read()
	second.Messages[0].Files[0].ID = "f-changed"
	third := read()
	if third.Messages[1].ToolCalls[0].Name != "get" || third.Messages[0].Files[0].ID != "f-1" {
		t.Fatalf("a change to one read's messages showed in the next: %+v", third.Messages)
	}
	for _, changed := range []*mesh.Conversation{first, second} {
		if _, err := s.UpdateLoaded(ctx, changed, func(*mesh.Conversation) error { return nil }); !errors.Is(err, errStoredChanged) {
			t.Fatalf("a save of changed stored messages: %v, want errStoredChanged", err)
		}
	}
	if _, err := s.UpdateLoaded(ctx, third, func(c *mesh.Conversation) error {
		c.Messages = append(c.Messages, mesh.Message{ID: "a2", Role: mesh.RoleAssistant, Content: "done"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The next read copies the kept decoded messages, not decoding the
	// record again.
	rec.dec.msgs[0].Content = "from the decoded copy"
	if got := read(); ids(got.Messages) != "u1,a1,a2" || got.Messages[0].Content != "from the decoded copy" {
		t.Fatalf("the next read decoded the record again: %s %q", ids(got.Messages), got.Messages[0].Content)
	}
}

// A process that follows the log keeps the records another appends as they
// are stored: its page of the conversation then comes from what it kept,
// here even after the record is gone from the stream.
func TestFollowKeepsOthersRecords(t *testing.T) {
	writer, js := testStore(t)
	ctx := t.Context()
	kv, err := js.KeyValue(ctx, mesh.DefaultNamespace().Bucket(mesh.BucketSessions))
	if err != nil {
		t.Fatal(err)
	}
	reader := NewSessionStore(kv, NewMessageLog(js, mesh.DefaultNamespace()))
	stop, err := reader.FollowMessages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive, Messages: []mesh.Message{{ID: "u1", Role: mesh.RoleUser, Content: "hello"}}}
	if err := writer.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	seq := c.MessageTail[0].Seq
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := reader.log.cache.get(c.ID, seq); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not keep record %d", seq)
		}
	}
	if _, ok := reader.log.cache.get("another", seq); ok {
		t.Fatal("a kept record is given for another conversation")
	}
	st, err := js.Stream(ctx, mesh.DefaultNamespace().Stream(mesh.StreamMessages))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	doc, err := reader.GetDoc(ctx, c.ID)
	if err != nil || len(doc.Messages) != 1 || !strings.Contains(string(doc.Messages[0]), `"hello"`) {
		t.Fatalf("page %+v, %v: not the kept record", doc, err)
	}
}

// A page is bounded by bytes as well as by count: a conversation of
// messages near a megabyte each answers its newest page with one of them,
// and the cursor leads to the others, one page each.
func TestPagesAreBoundedByBytes(t *testing.T) {
	s, _ := testStore(t)
	ctx := t.Context()
	c := &mesh.Conversation{ID: mesh.NewID(), Status: mesh.StatusActive}
	if err := s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.Update(ctx, c.ID, func(cv *mesh.Conversation) error {
			cv.Messages = append(cv.Messages, mesh.Message{ID: fmt.Sprint("big", i), Role: mesh.RoleUser, Content: strings.Repeat("x", 900<<10)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.GetDoc(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, err := d.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 1500<<10 || len(d.Messages) != 1 || d.Before == "" {
		t.Fatalf("the newest page: %d bytes, %d messages, cursor %q; want under 1.5 MB, 1 message and a cursor", len(body), len(d.Messages), d.Before)
	}
	seen := []string{}
	for before := d.Before; before != ""; {
		p, err := s.GetPage(ctx, c.ID, DefaultPageSize, before)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			var msg mesh.Message
			if err := json.Unmarshal(m, &msg); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, msg.ID)
		}
		before = p.Before
	}
	// Pages go back in time, one message each.
	if got := strings.Join(seen, ","); got != "big2,big1,big0" {
		t.Fatalf("the older pages hold %s, want big2,big1,big0", got)
	}
}
