package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/memory"
)

// This file holds branches (mesh/fork.go): a conversation whose history
// starts with another's, up to a point, read from the other's records.
//
// Records are found by stream sequence, and a branch's own records all
// come after the point it was forked at: a sequence up to the nearest
// Shared entry's is the base's, and so on down the entries. Each entry was
// granted by a record of the base's own log (a grant: "fork\n" and
// {"branch", "seq", "count"}), which no message reader takes for a
// record of messages (its first line is no sequence). A read of a shared
// record checks the record is on the base's subject and the grant, on
// the base's subject too, names the reading branch and that part: a head
// written by hand that names a third conversation's records reads
// nothing. The grants a process checked are kept, so a branch's turn
// reads from memory, as any conversation's does.

// ErrForeignRecords refuses a read of records a conversation was not
// granted: its head names another conversation's log without a grant.
var ErrForeignRecords = errors.New("store: the conversation names records of another conversation that were not shared with it")

// grantPrefix starts a grant record's payload.
const grantPrefix = "fork\n"

// grant is what a grant record says: conversation Branch may read this
// log's records up to the one at Seq, and the first Count messages of it.
type grant struct {
	Branch string `json:"branch"`
	Seq    uint64 `json:"seq"`
	Count  int    `json:"count"`
}

// source is where the records of a conversation's history are: its own
// log, and the parts of others' that it shares, nearest first.
type source struct {
	conv   string
	shared []mesh.SharedRecords
}

func sourceOf(c *mesh.Conversation) source { return source{conv: c.ID, shared: c.Shared} }

// check refuses shared parts that are not in the order every branch
// writes them (each older than the one before, of another conversation).
func (s source) check() error {
	for i, sh := range s.shared {
		if mesh.CheckID(sh.Conversation) != nil || sh.Conversation == s.conv || sh.Seq == 0 || sh.Count < 0 ||
			(i > 0 && sh.Seq >= s.shared[i-1].Seq) {
			return fmt.Errorf("read messages of %s: %w", s.conv, ErrForeignRecords)
		}
	}
	return nil
}

// at is where the record at seq is: the index of the shared entry that
// holds it (-1: the conversation's own), its conversation, and how many of
// its messages count (-1: all).
func (s source) at(seq uint64) (k int, conv string, limit int) {
	k, conv, limit = -1, s.conv, -1
	for i, sh := range s.shared {
		if seq > sh.Seq {
			break
		}
		k, conv = i, sh.Conversation
		if seq == sh.Seq {
			limit = sh.Count
			break
		}
	}
	return k, conv, limit
}

// end counts the messages of r that belong to the history: all, but for
// the record a branch was forked at.
func (s source) end(r record) int {
	if _, _, limit := s.at(r.seq); limit >= 0 && limit < len(r.msgs) {
		return limit
	}
	return len(r.msgs)
}

// grantKey is a grant a process checked: branch's shared part sh.
type grantKey struct {
	branch string
	sh     mesh.SharedRecords
}

// grants are the grants this process checked; a grant record is never
// edited, so one checked stays true. A process that gives its memory
// back (memory.Release) forgets them: the next read checks again.
type grants struct{ ok sync.Map } // grantKey → struct{}

func newGrants() *grants {
	g := &grants{}
	memory.OnRelease(g, (*grants).reset)
	return g
}

// reset forgets every grant checked.
func (g *grants) reset() { g.ok.Clear() }

// checkGrant is nil when branch was granted sh: the record at sh.Grant is
// on sh.Conversation's subject and grants branch that part.
func (l *MessageLog) checkGrant(ctx context.Context, branch string, sh mesh.SharedRecords) error {
	key := grantKey{branch: branch, sh: sh}
	if _, ok := l.grants.ok.Load(key); ok {
		return nil
	}
	refused := fmt.Errorf("read messages of %s: %w (%s up to record %d)", branch, ErrForeignRecords, sh.Conversation, sh.Seq)
	subj, err := l.ns.Messages(sh.Conversation)
	if err != nil || sh.Grant == 0 {
		return refused
	}
	at, data, err := l.direct(ctx, sh.Grant)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return refused
		}
		return err
	}
	body, ok := bytes.CutPrefix(data, []byte(grantPrefix))
	var g grant
	if at != subj || !ok || json.Unmarshal(body, &g) != nil || g != (grant{Branch: branch, Seq: sh.Seq, Count: sh.Count}) {
		return refused
	}
	l.grants.ok.Store(key, struct{}{})
	return nil
}

// direct reads the stream message at seq: its subject and payload.
func (l *MessageLog) direct(ctx context.Context, seq uint64) (string, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := strconv.AppendUint([]byte(`{"seq":`), seq, 10)
	for tries := 0; ; tries++ {
		m, err := l.js.Conn().RequestWithContext(ctx, "$JS.API.DIRECT.GET."+l.stream, append(req, '}'))
		if err != nil {
			return "", nil, fmt.Errorf("read record %d: %w", seq, err)
		}
		switch m.Header.Get("Status") {
		case "":
			return m.Header.Get(jetstream.SubjectHeader), m.Data, nil
		case "404":
			if tries < 3 { // a replica behind the others: ask again
				select {
				case <-ctx.Done():
					return "", nil, ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			return "", nil, jetstream.ErrMsgNotFound
		default:
			return "", nil, fmt.Errorf("read record %d: %s %s", seq, m.Header.Get("Status"), m.Header.Get("Description"))
		}
	}
}

// publishGrant appends to conv's log the grant that lets branch read
// its records up to seq (count messages of that one), and returns its
// sequence.
func (l *MessageLog) publishGrant(ctx context.Context, conv, branch string, seq uint64, count int) (uint64, error) {
	subj, err := l.ns.Messages(conv)
	if err != nil {
		return 0, err
	}
	body, _ := json.Marshal(grant{Branch: branch, Seq: seq, Count: count})
	m := nats.NewMsg(subj)
	m.Data = append([]byte(grantPrefix), body...)
	// Published again after a lost acknowledgement, the stream keeps one.
	m.Header.Set(jetstream.MsgIDHeader, conv+":grant:"+branch)
	ack, err := l.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("grant %s the messages of %s: %w", branch, conv, err)
	}
	return ack.Sequence, nil
}

// walkBack calls fn with the records of src's history from the one at
// seq back to the first, newest first, each with how many of its messages
// count; fn returns false to stop.
func (l *MessageLog) walkBack(ctx context.Context, src source, seq uint64, fn func(r record, end int) (bool, error)) error {
	for seq != 0 {
		recs, err := l.read(ctx, src, []uint64{seq})
		if err != nil {
			return err
		}
		r := recs[0]
		if more, err := fn(r, src.end(r)); err != nil || !more {
			return err
		}
		seq = r.prev
	}
	return nil
}

// Cut is a point of a conversation's history, where a branch ends what
// it shares: the record of its last message (0: it keeps none), how many
// of that record's messages it keeps, how many messages it keeps in all,
// and the id of the last.
type Cut struct {
	Seq   uint64
	Count int
	Kept  int
	Last  string
}

// Found is a message of a conversation's history as [SessionStore.Find]
// found it: the message, the cut just after it, the one just before,
// and the message after it (nil when it is the newest).
type Found struct {
	Message       mesh.Message
	After, Before Cut
	Next          *mesh.Message
}

// Find walks the history of c newest first and returns the first message
// match takes, or nil when none does (or c has none in the log).
func (s *SessionStore) Find(ctx context.Context, c *mesh.Conversation, match func(*mesh.Message) bool) (*Found, error) {
	if c.MessageCount == 0 || len(c.MessageTail) == 0 {
		return nil, nil
	}
	src := sourceOf(c)
	// The tail's records in one read: the walk then finds them kept.
	seqs, _ := tailRecords(c.MessageTail)
	if _, err := s.log.read(ctx, src, seqs); err != nil {
		return nil, err
	}
	var found *Found
	var next *mesh.Message // the message read before, the one after in the history
	after := 0             // messages of the history after the record being read
	err := s.log.walkBack(ctx, src, seqs[len(seqs)-1], func(r record, end int) (bool, error) {
		if found != nil { // the message before the one found, in the record before its
			var m mesh.Message
			if end > 0 {
				if err := json.Unmarshal(r.msgs[end-1], &m); err != nil {
					return false, fmt.Errorf("decode message in record %d of %s: %w", r.seq, c.ID, err)
				}
			}
			found.Before = Cut{Seq: r.seq, Count: end, Kept: found.Before.Kept, Last: m.ID}
			return false, nil
		}
		for i := end - 1; i >= 0; i-- {
			var m mesh.Message
			if err := json.Unmarshal(r.msgs[i], &m); err != nil {
				return false, fmt.Errorf("decode message in record %d of %s: %w", r.seq, c.ID, err)
			}
			if !match(&m) {
				next = &m
				continue
			}
			kept := c.MessageCount - after - (end - i - 1)
			found = &Found{Message: m, After: Cut{Seq: r.seq, Count: i + 1, Kept: kept, Last: m.ID}, Next: next}
			found.Before = Cut{Kept: kept - 1}
			if i == 0 {
				return r.prev != 0, nil // the one before is the previous record's last
			}
			var prev mesh.Message
			if err := json.Unmarshal(r.msgs[i-1], &prev); err != nil {
				return false, fmt.Errorf("decode message in record %d of %s: %w", r.seq, c.ID, err)
			}
			found.Before = Cut{Seq: r.seq, Count: i, Kept: kept - 1, Last: prev.ID}
			return false, nil
		}
		after += end
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if found != nil && found.Before.Kept < 0 {
		found.Before.Kept = 0
	}
	return found, nil
}

// Fork stores branch, a new conversation whose history is base's up to
// cut, shared with base's log (and the logs base shares its own from),
// followed by what closing adds (nil: nothing) given the newest messages
// it keeps, as its own first record. It grants branch the read of each
// log it shares, then creates branch's head; it fails if branch's id
// exists. branch's other fields (owner, agent, state, forked_from) are
// the caller's.
func (s *SessionStore) Fork(ctx context.Context, base *mesh.Conversation, cut Cut, branch *mesh.Conversation, closing func(kept []mesh.Message) []mesh.Message) error {
	if err := mesh.CheckID(branch.ID); err != nil {
		return err
	}
	if base.MessageCount == 0 && len(base.Messages) > 0 && cut.Seq != 0 {
		return mesh.ErrBadRequest.With(fmt.Sprintf("conversation %s is stored as an earlier version did: send it a message before forking it", base.ID))
	}
	from := sourceOf(base)
	if err := from.check(); err != nil {
		return err
	}
	var shared []mesh.SharedRecords
	if cut.Seq != 0 {
		recs, err := s.log.read(ctx, from, []uint64{cut.Seq})
		if err != nil {
			return err
		}
		end := from.end(recs[0])
		if cut.Count <= 0 || cut.Count > end {
			return fmt.Errorf("fork %s: record %d holds %d messages of its history, not %d", base.ID, cut.Seq, end, cut.Count)
		}
		k, conv, _ := from.at(cut.Seq)
		shared = append(shared, mesh.SharedRecords{Conversation: conv, Seq: cut.Seq, Count: cut.Count})
		shared = append(shared, base.Shared[k+1:]...)
		for i := range shared {
			g, err := s.log.publishGrant(ctx, shared[i].Conversation, branch.ID, shared[i].Seq, shared[i].Count)
			if err != nil {
				return err
			}
			shared[i].Grant = g
		}
		if err := s.log.publishShares(ctx, branch.ID, shared); err != nil {
			return err
		}
	}
	// The tail: the newest messages the branch keeps, read as the branch
	// reads them (which checks the grants just written).
	src := source{conv: branch.ID, shared: shared}
	var rev []mesh.MessageRef
	titled, whole := false, false
	err := s.log.walkBack(ctx, src, cut.Seq, func(r record, end int) (bool, error) {
		for i := end - 1; i >= 0 && len(rev) < TailKept; i-- {
			rev = append(rev, mesh.MessageRef{Seq: r.seq, Bytes: len(r.msgs[i])})
		}
		for i := range end {
			if bytes.Contains(r.msgs[i], []byte(`"role":"user"`)) {
				titled = true
			}
		}
		whole = r.prev == 0
		return len(rev) < TailKept || !titled, nil
	})
	if err != nil {
		return err
	}
	slices.Reverse(rev)
	branch.Messages = nil
	if closing != nil && len(rev) > 0 {
		kept, _, err := s.log.decodedAt(ctx, src, rev)
		if err != nil {
			return err
		}
		branch.Messages = closing(kept)
	}
	branch.Shared, branch.MessageTail, branch.MessageCount = shared, rev, cut.Kept
	branch.Title = ""
	if titled || !whole && cut.Seq != 0 {
		branch.Title = base.Title
	}
	now := s.now().UTC()
	if branch.CreatedAt.IsZero() {
		branch.CreatedAt = now
	}
	branch.UpdatedAt, branch.Version = now, 1
	branch.SetStored(0, nil)
	return s.save(ctx, branch, true)
}

// sharesPrefix starts the payload of the record a fork appends to the
// branch's own log: the logs it shares ([]mesh.SharedRecords), which
// tell, once the branch's head is gone, whose records it held on to.
const sharesPrefix = "shares\n"

// publishShares appends to branch's log the record of what it shares.
func (l *MessageLog) publishShares(ctx context.Context, branch string, shared []mesh.SharedRecords) error {
	subj, err := l.ns.Messages(branch)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(shared)
	m := nats.NewMsg(subj)
	m.Data = append([]byte(sharesPrefix), body...)
	m.Header.Set(jetstream.MsgIDHeader, branch+":shares")
	if _, err := l.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("record what %s shares: %w", branch, err)
	}
	return nil
}

// scan calls fn with every stream message of conv's log, in order.
func (l *MessageLog) scan(ctx context.Context, conv string, fn func(seq uint64, data []byte)) error {
	subj, err := l.ns.Messages(conv)
	if err != nil {
		return err
	}
	st, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return fmt.Errorf("messages stream: %w", err)
	}
	total, err := subjectCount(ctx, st, subj)
	if err != nil || total == 0 {
		return err
	}
	if err := ReadSubject(ctx, st, subj, total, func(m jetstream.Msg, md *jetstream.MsgMetadata) {
		fn(md.Sequence.Stream, m.Data())
	}); err != nil {
		return fmt.Errorf("read the log of %s: %w", conv, err)
	}
	return nil
}

// ReadSubject calls fn with the messages on subj in st, in order, through
// an ordered consumer, until it has had total of them (the count the
// stream's info gave) or the stream has no more.
func ReadSubject(ctx context.Context, st jetstream.Stream, subj string, total uint64, fn func(m jetstream.Msg, md *jetstream.MsgMetadata)) error {
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return err
	}
	for got := uint64(0); got < total; {
		batch, err := cons.Fetch(int(min(total-got, 256)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		n, pending := 0, uint64(0)
		for m := range batch.Messages() {
			n++
			got++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			pending = md.NumPending
			fn(m, md)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		if n == 0 || pending == 0 {
			return nil
		}
	}
	return nil
}

// purgeLog empties the log of conversation id, whose head is gone or
// going, unless a branch that lives still shares part of it: a branch's
// history is those records, and they go with the last branch that reads
// them. Once the log is emptied, the logs id itself shared whose
// conversations are gone too are purged the same way, if nothing else
// reads them. seen stops a loop of forged records.
func (s *SessionStore) purgeLog(ctx context.Context, id string, seen map[string]bool) error {
	if seen[id] || len(seen) > 64 {
		return nil
	}
	seen[id] = true
	var granted []uint64 // grant sequences, by branch
	var branches []string
	var shared []mesh.SharedRecords
	var seqs []uint64
	err := s.log.scan(ctx, id, func(seq uint64, data []byte) {
		seqs = append(seqs, seq)
		if body, ok := bytes.CutPrefix(data, []byte(grantPrefix)); ok {
			var g grant
			if json.Unmarshal(body, &g) == nil && mesh.CheckID(g.Branch) == nil {
				granted, branches = append(granted, seq), append(branches, g.Branch)
			}
		} else if body, ok := bytes.CutPrefix(data, []byte(sharesPrefix)); ok {
			_ = json.Unmarshal(body, &shared)
		}
	})
	if err != nil {
		return err
	}
	for i, b := range branches {
		h, _, err := getJSON[mesh.Conversation](ctx, s.kv, b, mesh.ErrSessionNotFound)
		if errors.Is(err, mesh.ErrSessionNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if h.Status != mesh.StatusDeleted && slices.ContainsFunc(h.Shared, func(sh mesh.SharedRecords) bool { return sh.Conversation == id && sh.Grant == granted[i] }) {
			s.Logger.Info().Str("session", id).Str("branch", b).Msg("messages kept: a branch still shares them")
			return nil
		}
	}
	if err := s.log.remove(ctx, id, seqs); err != nil {
		return err
	}
	for _, sh := range shared {
		if mesh.CheckID(sh.Conversation) != nil {
			continue
		}
		if _, _, err := getJSON[mesh.Conversation](ctx, s.kv, sh.Conversation, mesh.ErrSessionNotFound); !errors.Is(err, mesh.ErrSessionNotFound) {
			continue // there (or a tombstone): its own purge or expiry decides
		}
		if err := s.purgeLog(ctx, sh.Conversation, seen); err != nil {
			return err
		}
	}
	return nil
}
