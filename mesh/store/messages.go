package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// This file holds where a conversation's messages live: apart from its
// head (the sessions bucket), in MESH_MESSAGES on mesh.msg.<conversation>,
// one stream message (a record) per save that adds any. A save publishes
// its record, then writes the head by compare-and-set; the head names the
// records that count (Conversation.MessageTail, and before that each record's prev), so
// a record published by a save whose head write lost (a conflict, a crash)
// is never read: it is left behind in the stream.
//
// A record is "<prev>\n<message JSON>\n<message JSON>…": prev is the
// stream sequence of the conversation's record before it, 0 for its
// first, the chain a reader follows back; each message's JSON is on a line
// of its own (JSON encodes a newline in a string as \n). A record of the
// earlier form, one message each, is the same with one line. prev is in
// the payload, not a header: the server rebuilds every header of each
// message a direct get sends, which cost more than the rest of the read.

// TailKept bounds Conversation.MessageTail: the newest messages a read
// can find without following the chain back, and so the most messages
// the model is sent.
const TailKept = 64

// DefaultPageSize is how many messages a page of a conversation holds
// unless asked otherwise (GET /conversations/{id}?messages=N).
const DefaultPageSize = 50

// PageBytes bounds the messages of one page (one at least, whatever its
// size), below the history's bound: an answer that carries the newest
// page stays about a megabyte when the messages are large, and the rest
// is a cursor away (messages_before).
const PageBytes = 1 << 20

// DefaultHistoryBytes bounds the messages read for the model or a page,
// unless sessions.max_bytes says otherwise.
const DefaultHistoryBytes = 4 << 20

// MessageLog is the stream of conversations' messages.
type MessageLog struct {
	js     jetstream.JetStream
	ns     mesh.Namespace
	stream string
	cache  *recordCache
	grants *grants // the grants of branches' reads checked (fork.go)
}

// remove removes every message of conversation id from the log, seqs
// (what a scan read) one at a time when few (RemoveSubject).
func (l *MessageLog) remove(ctx context.Context, id string, seqs []uint64) error {
	subj, err := l.ns.Messages(id)
	if err != nil {
		return err
	}
	st, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return fmt.Errorf("messages stream: %w", err)
	}
	if err := RemoveSubject(ctx, st, subj, seqs); err != nil {
		return fmt.Errorf("remove the messages of %s: %w", id, err)
	}
	return nil
}

// NewMessageLog returns the message log of namespace ns over js.
func NewMessageLog(js jetstream.JetStream, ns mesh.Namespace) *MessageLog {
	return &MessageLog{js: js, ns: ns, stream: ns.Stream(mesh.StreamMessages), cache: newRecordCache(recordCacheBytes), grants: newGrants()}
}

// record is one record read back: the messages one save added.
type record struct {
	seq, prev uint64
	msgs      [][]byte // each message's JSON, oldest first
	// dec holds msgs decoded once asked for (decodedAt), shared by every
	// copy of the record the cache hands out: a record is never edited.
	dec *decodedRecord
}

// recordSplit bounds the payload of one record: a save whose messages
// would make a larger one publishes them as several records, chained, so
// that none nears the server's max_payload.
const recordSplit = 512 << 10

// append publishes msgs after the record at sequence prev, as one record
// (more for messages that add up to more than recordSplit), and returns
// their references. A record is published once: one whose acknowledgement
// was lost, or whose save then lost its head write, is left unread.
func (l *MessageLog) append(ctx context.Context, conv string, prev uint64, msgs []mesh.Message) ([]mesh.MessageRef, error) {
	subj, err := l.ns.Messages(conv)
	if err != nil {
		return nil, err
	}
	refs := make([]mesh.MessageRef, 0, len(msgs))
	body := strconv.AppendUint(make([]byte, 0, 1024), prev, 10)
	from := 0 // refs[from:] are in body
	publish := func() error {
		// The id makes the publish safe to repeat when its acknowledgement
		// was lost (a leader that died): the stream keeps one copy.
		m := nats.NewMsg(subj)
		m.Data = body
		sum := sha256.Sum256(body)
		m.Header.Set(jetstream.MsgIDHeader, conv+":"+hex.EncodeToString(sum[:16]))
		ack, err := l.js.PublishMsg(ctx, m)
		if err != nil {
			return fmt.Errorf("append messages of %s: %w", conv, err)
		}
		for i := from; i < len(refs); i++ {
			refs[i].Seq = ack.Sequence
		}
		if r, err := parseRecord(ack.Sequence, body); err == nil {
			l.cache.put(conv, r)
		}
		prev, from = ack.Sequence, len(refs)
		body = strconv.AppendUint(make([]byte, 0, 1024), prev, 10)
		return nil
	}
	for _, m := range msgs {
		data, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode message %s: %w", m.ID, err)
		}
		if len(refs) > from && len(body)+1+len(data) > recordSplit {
			if err := publish(); err != nil {
				return nil, err
			}
		}
		body = append(append(body, '\n'), data...)
		refs = append(refs, mesh.MessageRef{Bytes: len(data)})
	}
	if len(refs) > from {
		if err := publish(); err != nil {
			return nil, err
		}
	}
	return refs, nil
}

// read returns the records of src's history at sequences seqs, in order:
// those the cache keeps, and one direct get by sequence for each other,
// all sent at once and answered on one inbox. (A batched get by subject
// makes the server count the subject's pending messages on every request,
// a cost that grows with the stream.) A replica that has not applied the
// newest records yet is asked again, briefly. Each record must be on the
// subject of the conversation src says holds it: its own, or, for a
// branch, the one whose grant lets it read that part ([MessageLog.checkGrant]).
func (l *MessageLog) read(ctx context.Context, src source, seqs []uint64) ([]record, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	if err := src.check(); err != nil {
		return nil, err
	}
	out := make([]record, len(seqs))
	subjs := make([]string, len(seqs))
	convs := make([]string, len(seqs))
	var todo []int // indexes of seqs still to read
	for i, seq := range seqs {
		k, conv, _ := src.at(seq)
		if k >= 0 {
			if err := l.checkGrant(ctx, src.conv, src.shared[k]); err != nil {
				return nil, err
			}
		}
		convs[i] = conv
		if r, ok := l.cache.get(conv, seq); ok {
			out[i] = r
			continue
		}
		subj, err := l.ns.Messages(conv)
		if err != nil {
			return nil, err
		}
		subjs[i] = subj
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return out, nil
	}
	for tries := 0; ; tries++ {
		missing, err := l.gets(ctx, convs, subjs, seqs, todo, out)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			return out, nil
		}
		if tries >= 3 {
			return nil, fmt.Errorf("read messages of %s: %d of %d records not found", src.conv, len(missing), len(seqs))
		}
		select { // a replica behind the others: ask again
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		todo = missing
	}
}

// gets asks for the records at seqs[i] for i in todo, each of
// conversation convs[i] (on subject subjs[i]), fills out[i], keeps them
// in the cache, and returns the indexes not found.
func (l *MessageLog) gets(ctx context.Context, convs, subjs []string, seqs []uint64, todo []int, out []record) (missing []int, err error) {
	nc := l.js.Conn()
	inbox := nc.NewInbox()
	// A channel the size of the answers: SubscribeSync's own (512 Ki
	// slots) cost more to make than the read.
	ch := make(chan *nats.Msg, len(todo))
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	api := "$JS.API.DIRECT.GET." + l.stream
	at := make(map[uint64]int, len(todo))
	req := make([]byte, 0, 32)
	for _, i := range todo {
		at[seqs[i]] = i
		req = append(strconv.AppendUint(append(req[:0], `{"seq":`...), seqs[i], 10), '}')
		if err := nc.PublishRequest(api, inbox, req); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for range todo {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("read messages: %w", ctx.Err())
		}
		switch m.Header.Get("Status") {
		case "":
		case "404": // not there (yet): which one, the answers that came say
			continue
		default:
			return nil, fmt.Errorf("read messages: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
		}
		seq, _ := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		i, ok := at[seq]
		if !ok || m.Header.Get(jetstream.SubjectHeader) != subjs[i] {
			return nil, fmt.Errorf("read messages: record %d is not one of %s", seq, subjs[i])
		}
		r, err := parseRecord(seq, m.Data)
		if err != nil {
			return nil, err
		}
		out[i] = r
		l.cache.put(convs[i], r)
		delete(at, seq)
	}
	for _, i := range at {
		missing = append(missing, i)
	}
	return missing, nil
}

// parseRecord splits a record's payload into its prev and its messages.
func parseRecord(seq uint64, data []byte) (record, error) {
	bad := fmt.Errorf("read messages: record %d is not <prev> and messages, a line each", seq)
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return record{}, bad
	}
	prev, err := strconv.ParseUint(string(data[:nl]), 10, 64)
	if err != nil {
		return record{}, bad
	}
	r := record{seq: seq, prev: prev, msgs: make([][]byte, 0, bytes.Count(data[nl+1:], []byte{'\n'})+1), dec: &decodedRecord{}}
	for line := range bytes.SplitSeq(data[nl+1:], []byte{'\n'}) {
		if len(line) == 0 {
			return record{}, bad
		}
		r.msgs = append(r.msgs, line)
	}
	return r, nil
}

// tailRecords is the sequences of the records tail's messages are in,
// oldest first, and how many of each record's (its last ones) tail holds.
func tailRecords(tail []mesh.MessageRef) (seqs []uint64, counts []int) {
	for _, r := range tail {
		if n := len(seqs); n > 0 && seqs[n-1] == r.Seq {
			counts[n-1]++
			continue
		}
		seqs, counts = append(seqs, r.Seq), append(counts, 1)
	}
	return seqs, counts
}

// historyStart is where the messages read for the model begin in tail:
// the newest ones whose JSON fits in budget bytes (the newest always).
func historyStart(tail []mesh.MessageRef, budget int) int {
	k, sum := len(tail), 0
	for k > 0 {
		if sum+tail[k-1].Bytes > budget && k < len(tail) {
			break
		}
		sum += tail[k-1].Bytes
		k--
	}
	return k
}

// cutHistory drops the tool results at the start of msgs whose call was
// cut off: a model refuses a result without its call.
func cutHistory(msgs []mesh.Message) []mesh.Message {
	i := 0
	for i < len(msgs) && msgs[i].Role == mesh.RoleTool {
		i++
	}
	return msgs[i:]
}

// Page is a page of a conversation's messages, oldest first, as stored.
type Page struct {
	Messages []json.RawMessage
	// Before is the cursor of the page before this one (where this page's
	// oldest message is: [Cursor]); empty when this page starts the
	// conversation.
	Before string
}

// Cursor is where a message is in the log: the sequence of its record and
// its place in the record. Its text is "<seq>", or "<seq>.<index>" past
// the first message of a record.
type Cursor struct {
	Seq   uint64
	Index int
}

// String is the cursor's text.
func (c Cursor) String() string {
	s := strconv.FormatUint(c.Seq, 10)
	if c.Index > 0 {
		s += "." + strconv.Itoa(c.Index)
	}
	return s
}

// ParseCursor reads a cursor's text; ok is false for text that is not one.
func ParseCursor(s string) (c Cursor, ok bool) {
	seq, index, dot := strings.Cut(s, ".")
	var err error
	if c.Seq, err = strconv.ParseUint(seq, 10, 64); err != nil || c.Seq == 0 {
		return Cursor{}, false
	}
	if dot {
		if c.Index, err = strconv.Atoi(index); err != nil || c.Index <= 0 || strings.HasPrefix(index, "+") {
			return Cursor{}, false
		}
	}
	return c, true
}

// pageMsg is a message a page takes: where it is, and the record before.
type pageMsg struct {
	at   Cursor
	prev uint64
	data []byte
}

// page reads up to n messages of c older than the one at before (zero:
// the newest), within budget bytes (one message at least). It reads the
// tail's records it needs in one request and follows the chain of records
// back past it.
func (l *MessageLog) page(ctx context.Context, c *mesh.Conversation, n int, before Cursor, budget int) (*Page, error) {
	seqs, counts := tailRecords(c.MessageTail)
	if len(seqs) == 0 && before.Seq == 0 {
		return &Page{}, nil
	}
	src := sourceOf(c)
	var from []record // newest first; from[0] is cut at before.Index when before is set
	j := len(seqs) - 1
	if before.Seq != 0 {
		j = slices.Index(seqs, before.Seq)
	}
	if j >= 0 {
		// The tail's records from j back, as many as the page may need.
		start, want, size := j, 0, 0
		if before.Seq != 0 {
			want = min(before.Index, counts[j])
		} else {
			want = counts[j]
		}
		for start > 0 && want < n && size <= budget {
			start--
			want += counts[start]
			for _, r := range c.MessageTail {
				if r.Seq == seqs[start] {
					size += r.Bytes
				}
			}
		}
		got, err := l.read(ctx, src, seqs[start:j+1])
		if err != nil {
			return nil, err
		}
		for i := len(got) - 1; i >= 0; i-- {
			from = append(from, got[i])
		}
	} else {
		got, err := l.read(ctx, src, []uint64{before.Seq})
		if err != nil {
			return nil, err
		}
		from = got
	}
	var rev []pageMsg // newest first
	size, full := 0, false
	take := func(r record, upto int) {
		for i := upto - 1; i >= 0 && !full; i-- {
			if len(rev) >= n || (len(rev) > 0 && size+len(r.msgs[i]) > budget) {
				full = true
				return
			}
			size += len(r.msgs[i])
			rev = append(rev, pageMsg{at: Cursor{Seq: r.seq, Index: i}, prev: r.prev, data: r.msgs[i]})
		}
	}
	for i, r := range from {
		upto := src.end(r)
		if i == 0 && before.Seq != 0 {
			if before.Index > upto {
				return nil, fmt.Errorf("read messages of %s: record %d has no message %d", c.ID, r.seq, before.Index)
			}
			upto = before.Index
		}
		take(r, upto)
	}
	// Past the tail: the chain of prevs, one record at a time.
	for cur := from[len(from)-1].prev; cur != 0 && !full; {
		got, err := l.read(ctx, src, []uint64{cur})
		if err != nil {
			return nil, err
		}
		take(got[0], src.end(got[0]))
		cur = got[0].prev
	}
	p := &Page{Messages: make([]json.RawMessage, len(rev))}
	for i, m := range rev {
		p.Messages[len(rev)-1-i] = m.data
	}
	if k := len(rev) - 1; k >= 0 && (rev[k].at.Index > 0 || rev[k].prev != 0) {
		// (A page of a branch whose oldest message is its first shared
		// one has a cursor too: a record's prev is not cut with it.)
		p.Before = rev[k].at.String()
	}
	return p, nil
}

// holdsTurn reports whether a message of c's log, however old, belongs
// to turn turnID: its id, or its turn_id. The messages c holds (the
// newest, or all of a head of an earlier version) answer first; then it
// reads the records newest first (the tail's, then the chain back) and
// stops at the first it finds, so a turn applied not long ago costs a few
// reads; one never applied costs a read of every record, which is why
// only a turn's redelivery asks (see the agent's claim).
func (l *MessageLog) holdsTurn(ctx context.Context, c *mesh.Conversation, turnID string) (bool, error) {
	if slices.ContainsFunc(c.Messages, func(m mesh.Message) bool { return m.ID == turnID || m.TurnID == turnID }) {
		return true, nil
	}
	if c.MessageCount == 0 {
		return false, nil // a head of an earlier version holds its messages itself
	}
	seqs, _ := tailRecords(c.MessageTail)
	if len(seqs) == 0 {
		return false, nil
	}
	src := sourceOf(c)
	recs, err := l.read(ctx, src, seqs)
	if err != nil {
		return false, err
	}
	slices.Reverse(recs)
	quoted := []byte(strconv.Quote(turnID))
	for {
		for _, r := range recs {
			if recordHoldsTurn(r.msgs[:src.end(r)], turnID, quoted) {
				return true, nil
			}
		}
		prev := recs[len(recs)-1].prev
		if prev == 0 {
			return false, nil
		}
		if recs, err = l.read(ctx, src, []uint64{prev}); err != nil {
			return false, err
		}
	}
}

// recordHoldsTurn reports whether a message of msgs (a record's) belongs
// to turn turnID (quoted: turnID as JSON writes it).
func recordHoldsTurn(msgs [][]byte, turnID string, quoted []byte) bool {
	for _, data := range msgs {
		if !bytes.Contains(data, quoted) {
			continue // the common case: not a mention at all
		}
		var m struct {
			ID     string `json:"id"`
			TurnID string `json:"turn_id"`
		}
		if json.Unmarshal(data, &m) == nil && (m.ID == turnID || m.TurnID == turnID) {
			return true
		}
	}
	return false
}

// snapshot copies msgs and their tool calls and files, so that a change
// made in place to one of them shows. A snapshot holds pointers to its
// copies, never changed, so that a save adds its messages' copies to it
// without copying those of the messages before.
func snapshot(msgs []mesh.Message) []*mesh.Message {
	cp := make([]mesh.Message, len(msgs))
	out := make([]*mesh.Message, len(msgs))
	for i, m := range msgs {
		m.ToolCalls, m.Files = slices.Clone(m.ToolCalls), slices.Clone(m.Files)
		cp[i] = m
		out[i] = &cp[i]
	}
	return out
}

// errStoredChanged refuses a save that changed a message already stored:
// the log only appends.
var errStoredChanged = errors.New("store: a stored message was changed; messages are only appended")

// unchanged says msgs start with the snapshot's messages, unchanged. A
// tool call's arguments are compared by identity: nothing edits them in
// place.
func unchanged(snap []*mesh.Message, msgs []mesh.Message) bool {
	if len(msgs) < len(snap) {
		return false
	}
	for i := range snap {
		if !sameMessage(snap[i], &msgs[i]) {
			return false
		}
	}
	return true
}

// sameMessage compares every field of two messages (TestSameMessageFields
// fails when Message or ToolCall gains a field this does not know).
func sameMessage(a, b *mesh.Message) bool {
	if a.ID != b.ID || a.Role != b.Role || a.Content != b.Content || a.Name != b.Name || a.Step != b.Step ||
		a.ToolCallID != b.ToolCallID || a.ToolName != b.ToolName || a.IsError != b.IsError ||
		a.DecidedBy != b.DecidedBy || a.StandIn != b.StandIn || a.Notice != b.Notice || a.TurnID != b.TurnID || a.CreatedAt != b.CreatedAt ||
		a.Reasoning != b.Reasoning || !slices.Equal(a.Thoughts, b.Thoughts) ||
		len(a.ToolCalls) != len(b.ToolCalls) || !slices.Equal(a.Files, b.Files) ||
		len(a.Metadata) != len(b.Metadata) || mapID(a.Metadata) != mapID(b.Metadata) {
		return false
	}
	for i := range a.ToolCalls {
		x, y := &a.ToolCalls[i], &b.ToolCalls[i]
		if x.ID != y.ID || x.Name != y.Name || x.Server != y.Server || x.Tool != y.Tool ||
			x.Destructive != y.Destructive || x.ApprovalID != y.ApprovalID ||
			len(x.Arguments) != len(y.Arguments) || mapID(x.Arguments) != mapID(y.Arguments) {
			return false
		}
	}
	return true
}

func mapID(m map[string]any) uintptr { return reflect.ValueOf(m).Pointer() }

// appendMessages appends the JSON array of msgs to b.
func appendMessages(b []byte, msgs []json.RawMessage) []byte {
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, bytes.TrimSpace(m)...)
	}
	return append(b, ']')
}
