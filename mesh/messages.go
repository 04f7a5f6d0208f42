package mesh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// This file holds where a conversation's messages live: apart from its
// head (the sessions bucket), one stream message each in MESH_MESSAGES on
// mesh.msg.<conversation>. A save publishes only the messages it adds,
// then writes the head by compare-and-set; the head names the messages
// that count (MessageTail, and before that each message's prev), so
// messages published by a save whose head write lost (a conflict, a crash)
// are never read: they are left behind in the stream.
//
// A stored message is "<prev>\n<message JSON>": prev is the stream sequence
// of the conversation's message before it, 0 for its first, the chain a
// reader follows back. It is in the payload, not a header: the server
// rebuilds every header of each message a batched direct get sends, which
// cost more than the rest of the read.

// TailKept bounds Conversation.MessageTail: the newest messages a read
// can find without following the chain back, and so the most messages
// the model is sent.
const TailKept = 64

// DefaultPageSize is how many messages a page of a conversation holds
// unless asked otherwise (GET /conversations/{id}?messages=N).
const DefaultPageSize = 50

// DefaultHistoryBytes bounds the messages read for the model or a page,
// unless sessions.max_bytes says otherwise.
const DefaultHistoryBytes = 4 << 20

// MessageRef locates one stored message: its stream sequence and the size
// of its JSON.
type MessageRef struct {
	Seq   uint64
	Bytes int
}

// MessageTail is the places of a conversation's newest messages, oldest
// first. It is encoded as [[seq, bytes], …], by hand: the head is decoded
// on every read, and encoding/json's way with 64 small arrays cost more
// than the rest of the head.
type MessageTail []MessageRef

// MarshalJSON encodes the tail as [[seq, bytes], …].
func (t MessageTail) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(t)*20)
	b = append(b, '[')
	for i, r := range t {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendUint(b, r.Seq, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(r.Bytes), 10)
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

// UnmarshalJSON decodes [[seq, bytes], …] (or null).
func (t *MessageTail) UnmarshalJSON(data []byte) error {
	bad := errors.New("mesh: message_tail is not [[seq, bytes], …]")
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		*t = nil
		return nil
	}
	if len(data) < 2 || data[0] != '[' || data[len(data)-1] != ']' {
		return bad
	}
	var out MessageTail
	var nums [2]uint64
	n, inPair, digits := 0, false, false
	for _, c := range data[1 : len(data)-1] {
		switch {
		case c >= '0' && c <= '9' && inPair && n < 2:
			nums[n] = nums[n]*10 + uint64(c-'0')
			digits = true
		case c == '[' && !inPair:
			inPair, n, nums, digits = true, 0, [2]uint64{}, false
		case c == ',' && inPair && digits && n == 0:
			n, digits = 1, false
		case c == ']' && inPair && digits && n == 1:
			out = append(out, MessageRef{Seq: nums[0], Bytes: int(nums[1])})
			inPair = false
		case c == ',' && !inPair, c == ' ' || c == '\n' || c == '\t' || c == '\r':
		default:
			return bad
		}
	}
	if inPair {
		return bad
	}
	*t = out
	return nil
}

// MessageLog is the stream of conversations' messages.
type MessageLog struct {
	js     jetstream.JetStream
	ns     Namespace
	stream string
}

// purge removes every message of conversation id from the log.
func (l *MessageLog) purge(ctx context.Context, id string) error {
	subj, err := l.ns.Messages(id)
	if err != nil {
		return err
	}
	st, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return fmt.Errorf("messages stream: %w", err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("purge messages of %s: %w", id, err)
	}
	return nil
}

// NewMessageLog returns the message log of namespace ns over js.
func NewMessageLog(js jetstream.JetStream, ns Namespace) *MessageLog {
	return &MessageLog{js: js, ns: ns, stream: ns.Stream(StreamMessages)}
}

// storedMsg is one message read back: its JSON and where it sits.
type storedMsg struct {
	seq, prev uint64
	data      []byte
}

// append publishes msgs after the message at sequence prev and returns
// their references. Each is published once: one whose acknowledgement was
// lost, or whose save then lost its head write, is left unread.
func (l *MessageLog) append(ctx context.Context, conv string, prev uint64, msgs []Message) ([]MessageRef, error) {
	subj, err := l.ns.Messages(conv)
	if err != nil {
		return nil, err
	}
	refs := make([]MessageRef, 0, len(msgs))
	for _, m := range msgs {
		data, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode message %s: %w", m.ID, err)
		}
		body := make([]byte, 0, len(data)+21)
		body = append(strconv.AppendUint(body, prev, 10), '\n')
		ack, err := l.js.Publish(ctx, subj, append(body, data...))
		if err != nil {
			return nil, fmt.Errorf("append message %s: %w", m.ID, err)
		}
		refs = append(refs, MessageRef{Seq: ack.Sequence, Bytes: len(data)})
		prev = ack.Sequence
	}
	return refs, nil
}

// read returns the messages of conv at the sequences refs names (in
// order), by batched direct gets; a message published by a save that lost
// its head write may sit between them and is skipped. A replica that has
// not applied the newest messages yet is asked again, briefly.
func (l *MessageLog) read(ctx context.Context, conv string, refs []MessageRef) ([]storedMsg, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	subj, err := l.ns.Messages(conv)
	if err != nil {
		return nil, err
	}
	want := make(map[uint64]int, len(refs))
	size := 0
	for i, r := range refs {
		want[r.Seq] = i
		size += r.Bytes + 256
	}
	out := make([]storedMsg, len(refs))
	found, from := 0, refs[0].Seq
	for tries := 0; found < len(refs); {
		got, next, err := l.batch(ctx, subj, from, len(refs)-found, size)
		if err != nil {
			return nil, err
		}
		for _, m := range got {
			if i, ok := want[m.seq]; ok && out[i].data == nil {
				out[i] = m
				found++
			}
		}
		if next > refs[len(refs)-1].Seq || len(got) == 0 {
			if found == len(refs) {
				break
			}
			if tries++; tries > 3 {
				return nil, fmt.Errorf("read messages of %s: %d of %d not found", conv, len(refs)-found, len(refs))
			}
			select { // a replica behind the others: ask again
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			from = refs[0].Seq
			continue
		}
		from = next
	}
	return out, nil
}

// get returns the message of conv at sequence seq.
func (l *MessageLog) get(ctx context.Context, conv string, seq uint64) (storedMsg, error) {
	got, err := l.read(ctx, conv, []MessageRef{{Seq: seq}})
	if err != nil {
		return storedMsg{}, err
	}
	return got[0], nil
}

// batch asks for up to n messages on subj from sequence from (at most
// about maxBytes of them); next is the sequence after the last
// one received.
func (l *MessageLog) batch(ctx context.Context, subj string, from uint64, n, maxBytes int) (out []storedMsg, next uint64, err error) {
	nc := l.js.Conn()
	inbox := nc.NewInbox()
	// A channel the size of the batch and its end: SubscribeSync's own
	// (512 Ki messages) cost more to make than the read.
	ch := make(chan *nats.Msg, n+2)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(map[string]any{"seq": from, "next_by_subj": subj, "batch": n, "max_bytes": maxBytes})
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+l.stream, inbox, req); err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next = from
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("read messages: %w", ctx.Err())
		}
		switch m.Header.Get("Status") {
		case "":
		case "204", "404": // end of the batch; nothing (more) there
			return out, next, nil
		default:
			return nil, 0, fmt.Errorf("read messages: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
		}
		seq, _ := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		i := bytes.IndexByte(m.Data, '\n')
		prev, err := strconv.ParseUint(string(m.Data[:max(i, 0)]), 10, 64)
		if i < 0 || err != nil {
			return nil, 0, fmt.Errorf("read messages: message %d is not <prev> and a message", seq)
		}
		out = append(out, storedMsg{seq: seq, prev: prev, data: m.Data[i+1:]})
		next = seq + 1
	}
}

// historyStart is where the messages read for the model begin in tail:
// the newest ones whose JSON fits in budget bytes (the newest always).
func historyStart(tail []MessageRef, budget int) int {
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
func cutHistory(msgs []Message) []Message {
	i := 0
	for i < len(msgs) && msgs[i].Role == RoleTool {
		i++
	}
	return msgs[i:]
}

// Page is a page of a conversation's messages, oldest first, as stored.
type Page struct {
	Messages []json.RawMessage
	// Before is the cursor of the page before this one (the sequence of
	// this page's oldest message); 0 when this page starts the
	// conversation.
	Before uint64
}

// page reads up to n messages of c older than the one at sequence before
// (0: the newest), within budget bytes (one message at least). It reads
// the tail's messages in one batch and follows the chain back past it.
func (l *MessageLog) page(ctx context.Context, c *Conversation, n int, before uint64, budget int) (*Page, error) {
	tail := c.MessageTail
	end := len(tail) // tail[:end] are older than before
	if before != 0 {
		end = slices.IndexFunc(tail, func(r MessageRef) bool { return r.Seq >= before })
		if end < 0 {
			end = len(tail)
		}
	}
	var rev []storedMsg // newest first
	size := 0
	if end > 0 {
		start := end
		for start > 0 && end-start < n && (size+tail[start-1].Bytes <= budget || start == end) {
			size += tail[start-1].Bytes
			start--
		}
		got, err := l.read(ctx, c.ID, tail[start:end])
		if err != nil {
			return nil, err
		}
		for i := len(got) - 1; i >= 0; i-- {
			rev = append(rev, got[i])
		}
	}
	// Past the tail: the chain of prevs, one message at a time.
	cur := uint64(0)
	switch {
	case len(rev) > 0:
		cur = rev[len(rev)-1].prev
	case before != 0:
		m, err := l.get(ctx, c.ID, before)
		if err != nil {
			return nil, err
		}
		cur = m.prev
	}
	for cur != 0 && len(rev) < n {
		m, err := l.get(ctx, c.ID, cur)
		if err != nil {
			return nil, err
		}
		if len(rev) > 0 && size+len(m.data) > budget {
			break
		}
		size += len(m.data)
		rev = append(rev, m)
		cur = m.prev
	}
	p := &Page{Messages: make([]json.RawMessage, len(rev))}
	for i, m := range rev {
		p.Messages[len(rev)-1-i] = m.data
	}
	if len(rev) > 0 && rev[len(rev)-1].prev != 0 {
		p.Before = rev[len(rev)-1].seq
	}
	return p, nil
}

// snapshot copies msgs and their tool calls, so that a change made in place
// to one of them shows.
func snapshot(msgs []Message) []Message {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].ToolCalls = slices.Clone(out[i].ToolCalls)
	}
	return out
}

// errStoredChanged refuses a save that changed a message already stored:
// the log only appends.
var errStoredChanged = errors.New("mesh: a stored message was changed; messages are only appended")

// unchanged says msgs start with the snapshot's messages, unchanged. A
// tool call's arguments are compared by identity: nothing edits them in
// place.
func unchanged(snap, msgs []Message) bool {
	if len(msgs) < len(snap) {
		return false
	}
	for i := range snap {
		if !sameMessage(&snap[i], &msgs[i]) {
			return false
		}
	}
	return true
}

// sameMessage compares every field of two messages (TestSameMessageFields
// fails when Message or ToolCall gains a field this does not know).
func sameMessage(a, b *Message) bool {
	if a.ID != b.ID || a.Role != b.Role || a.Content != b.Content || a.Name != b.Name || a.Step != b.Step ||
		a.ToolCallID != b.ToolCallID || a.ToolName != b.ToolName || a.IsError != b.IsError ||
		a.DecidedBy != b.DecidedBy || a.Notice != b.Notice || a.TurnID != b.TurnID || a.CreatedAt != b.CreatedAt ||
		len(a.ToolCalls) != len(b.ToolCalls) || !slices.Equal(a.Files, b.Files) {
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

// joinMessages is the JSON array of msgs.
func joinMessages(msgs []json.RawMessage) json.RawMessage {
	if len(msgs) == 0 {
		return json.RawMessage("[]")
	}
	n := 2
	for _, m := range msgs {
		n += len(m) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, bytes.TrimSpace(m)...)
	}
	return append(out, ']')
}
