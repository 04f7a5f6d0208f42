package mesh

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sync"
)

// This file holds how the sessions bucket stores a conversation: its JSON
// with the messages last. The messages are the bulk of a long conversation
// and most saves only append to them, so a conversation keeps the messages
// as it read them, encoded, and a save encodes only those it appended; a
// reader that does not need them (ConversationDoc) finds them with a plain
// bracket scan instead of encoding/json's validating one. Every save is
// still a compare-and-set of the whole value.

// storedValue is a value of a bucket with its own stored encoding (getJSON
// and updateJSON use it instead of encoding/json).
type storedValue interface {
	decodeStored(data []byte) error
	encodeStored() ([]byte, error)
}

// storedMessages are the messages of a conversation as they were read or
// last written: raw, their JSON array, and snap, a copy of what raw
// decodes to (tool calls copied too), to tell whether they are unchanged.
type storedMessages struct {
	raw  []byte
	snap []Message
}

// convHead encodes a conversation without its messages.
type convHead struct {
	*Conversation
	Messages *struct{} `json:"messages,omitempty"`
}

// memo keeps the messages of long conversations this process saved last,
// so that reading them back (the next turn's claim) copies them instead of
// decoding them: an entry serves only a read whose stored bytes are equal.
// Short ones decode quickly and are not kept: many conversations of a few
// turns cost no memory. (An entry's raw is part of the value it saved,
// whose head is small beside such messages.)
var memo = &messageMemo{min: 8 << 10, max: 24 << 20, entries: map[string]*storedMessages{}}

type messageMemo struct {
	mu      sync.Mutex
	min     int // the encoding of the messages kept, at least
	max     int // bytes, counting an entry as thrice its encoding
	size    int
	entries map[string]*storedMessages
}

func (m *messageMemo) get(id string, raw []byte) *storedMessages {
	m.mu.Lock()
	s := m.entries[id]
	m.mu.Unlock()
	if s != nil && bytes.Equal(s.raw, raw) {
		return s
	}
	return nil
}

func (m *messageMemo) put(id string, s *storedMessages) {
	cost := 3 * len(s.raw)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.entries[id]; old != nil {
		m.size -= 3 * len(old.raw)
		delete(m.entries, id)
	}
	if id == "" || len(s.raw) < m.min || cost > m.max/8 {
		return
	}
	for k, e := range m.entries { // map order: evicts at random
		if m.size+cost <= m.max {
			break
		}
		m.size -= 3 * len(e.raw)
		delete(m.entries, k)
	}
	m.entries[id] = s
	m.size += cost
}

var errNotSplit = errors.New("mesh: stored conversation not split")

// decodeStored decodes a stored conversation and keeps its messages as
// stored, for a later save to append to. Messages this process saved
// last are not decoded again: they are copied from the memo.
func (c *Conversation) decodeStored(data []byte) error {
	head, msgs, err := splitMessages(data)
	if err == nil {
		*c = Conversation{}
		if err = json.Unmarshal(head, c); err == nil && c.Messages != nil {
			err = errNotSplit // a second "messages", spelled otherwise
		}
	}
	if err == nil {
		if s := memo.get(c.ID, msgs); s != nil {
			c.Messages, c.stored = snapshot(s.snap), s
			return nil
		}
		if err = json.Unmarshal(msgs, &c.Messages); err == nil {
			c.stored = &storedMessages{raw: msgs, snap: snapshot(c.Messages)}
			return nil
		}
	}
	*c = Conversation{}
	return json.Unmarshal(data, c)
}

// encodeStored encodes c with its messages last; when the messages read
// are unchanged, only those appended since are encoded.
func (c *Conversation) encodeStored() ([]byte, error) {
	head, err := json.Marshal(convHead{Conversation: c})
	if err != nil {
		return nil, err
	}
	s := c.stored
	if s == nil || len(c.Messages) == 0 || !s.prefixOf(c.Messages) {
		s = &storedMessages{raw: []byte("null")}
		if c.Messages != nil {
			s.raw = []byte("[]")
		}
	}
	out, start, err := spliceMessages(head, s.raw, c.Messages[len(s.snap):])
	if err != nil {
		return nil, err
	}
	// The snapshot grows by copies of the messages appended.
	snap := append(slices.Clip(s.snap), snapshot(c.Messages[len(s.snap):])...)
	c.stored = &storedMessages{raw: out[start : len(out)-1], snap: snap}
	memo.put(c.ID, c.stored)
	return out, nil
}

// decodeStored decodes the head of a stored conversation and leaves its
// messages encoded.
func (d *ConversationDoc) decodeStored(data []byte) error {
	head, msgs, err := splitMessages(data)
	if err == nil {
		d.Conversation = &Conversation{}
		if err = json.Unmarshal(head, d.Conversation); err == nil && d.Conversation.Messages == nil {
			d.Messages = msgs
			return nil
		}
	}
	*d = ConversationDoc{}
	return json.Unmarshal(data, d)
}

func (d *ConversationDoc) encodeStored() ([]byte, error) {
	d.ensure()
	head, err := json.Marshal(convHead{Conversation: d.Conversation})
	if err != nil {
		return nil, err
	}
	msgs := []byte(d.Messages)
	if len(msgs) == 0 {
		msgs = []byte("null")
	}
	out, _, err := spliceMessages(head, msgs, nil)
	return out, err
}

// AppendJSON appends the conversation's JSON to b, its messages as stored:
// unlike json.Marshal, it does not scan them again.
func (d *ConversationDoc) AppendJSON(b []byte) ([]byte, error) {
	data, err := d.encodeStored()
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

// MarshalJSON encodes the conversation, its messages as stored.
func (d *ConversationDoc) MarshalJSON() ([]byte, error) { return d.encodeStored() }

// spliceMessages is the object head with "messages" added last: the JSON
// array raw with the messages add appended; start is where the array
// begins in out.
func spliceMessages(head, raw []byte, add []Message) (out []byte, start int, err error) {
	out = make([]byte, 0, len(head)+len(raw)+13+512*len(add))
	out = append(out, head[:len(head)-1]...)
	if len(head) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"messages":`...)
	start = len(out)
	body := bytes.TrimSpace(raw)
	if len(add) == 0 {
		return append(append(out, body...), '}'), start, nil
	}
	out = append(out, '[')
	if len(body) >= 2 && body[0] == '[' {
		body = bytes.TrimSpace(body[1 : len(body)-1])
		out = append(out, body...)
	} else {
		body = nil // null: no messages before
	}
	for i, m := range add {
		if i > 0 || len(body) > 0 {
			out = append(out, ',')
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, b...)
	}
	return append(out, ']', '}'), start, nil
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

// prefixOf says the snapshot's messages start msgs, unchanged. A tool
// call's arguments are compared by identity: nothing edits them in place.
func (s *storedMessages) prefixOf(msgs []Message) bool {
	if len(msgs) < len(s.snap) {
		return false
	}
	for i := range s.snap {
		if !sameMessage(&s.snap[i], &msgs[i]) {
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
		len(a.ToolCalls) != len(b.ToolCalls) {
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

// splitMessages splits a stored conversation (a JSON object) into its other
// members, head, and the value of its "messages" member, msgs ("null" when
// it has none). It checks only the structure it walks: head is decoded by
// encoding/json afterwards, and the bucket's writers are the mesh's own.
func splitMessages(data []byte) (head, msgs []byte, err error) {
	bad := errors.New("mesh: stored conversation is not a JSON object")
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, nil, bad
	}
	i++
	start, end := -1, -1 // the messages member, key to value
	var prevComma int    // the comma before the member being read
	for first := true; ; first = false {
		i = skipSpace(data, i)
		if i >= len(data) {
			return nil, nil, bad
		}
		if data[i] == '}' && first {
			break
		}
		keyStart := i
		keyEnd := skipString(data, i)
		if keyEnd < 0 {
			return nil, nil, bad
		}
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return nil, nil, bad
		}
		vs := skipSpace(data, i+1)
		ve := skipValue(data, vs)
		if ve < 0 {
			return nil, nil, bad
		}
		if string(data[keyStart:keyEnd]) == `"messages"` {
			if start >= 0 {
				return nil, nil, bad // twice: let encoding/json decide
			}
			msgs = data[vs:ve]
			start, end = keyStart, ve
			if !first {
				start = prevComma
			}
		}
		i = skipSpace(data, ve)
		if i >= len(data) {
			return nil, nil, bad
		}
		if data[i] == '}' {
			break
		}
		if data[i] != ',' {
			return nil, nil, bad
		}
		if start == keyStart {
			end = i + 1 // the first member: its comma goes with it
		}
		prevComma = i
		i++
	}
	if skipSpace(data, i+1) != len(data) {
		return nil, nil, bad
	}
	if start < 0 {
		return data, []byte("null"), nil
	}
	head = make([]byte, 0, len(data)-(end-start))
	head = append(append(head, data[:start]...), data[end:]...)
	return head, msgs, nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string that starts at data[i], or -1.
func skipString(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	for j := i + 1; ; {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0 // backslashes before the quote
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipValue returns the end of the JSON value that starts at data[i], or -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				j := skipString(data, i)
				if j < 0 {
					return -1
				}
				i = j - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(data); j++ {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
	}
	return -1 // a bare literal cannot end the object
}
