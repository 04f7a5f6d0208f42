package mesh

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func storedConv() *Conversation {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	return &Conversation{
		ID: "c1", SessionID: "0123abcd", Agent: "a", Status: StatusActive, RecentTurns: []string{"t0"},
		State: map[string]any{"k": `va"l\`},
		Messages: []Message{
			{ID: "t0", Role: RoleUser, Content: `say "}]{[" \ twice`, TurnID: "t0", CreatedAt: at},
			{ID: "t0-a1", Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call1", Name: "x", Arguments: map[string]any{"q": "]"}}}, CreatedAt: at},
			{ID: "t0-r1", Role: RoleTool, ToolCallID: "call1", Content: "{\"a\":[1,2]}\\", CreatedAt: at},
		},
		CreatedAt: at, UpdatedAt: at,
	}
}

// sameJSON decodes a and b and compares them as values.
func sameJSON(t *testing.T, a, b []byte) {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if !reflect.DeepEqual(x, y) {
		t.Fatalf("different:\n%s\n%s", a, b)
	}
}

func TestStoredConversationRoundTrip(t *testing.T) {
	c := storedConv()
	want, _ := json.Marshal(c)
	// As encoding/json wrote it (messages in the middle), then as stored.
	for _, data := range [][]byte{want, must(c.encodeStored())} {
		got := &Conversation{}
		if err := got.decodeStored(data); err != nil {
			t.Fatal(err)
		}
		if got.stored == nil {
			t.Fatal("messages not kept as stored")
		}
		full, _ := json.Marshal(got)
		sameJSON(t, want, full)
		again := must(got.encodeStored())
		sameJSON(t, want, again)
		if !strings.HasSuffix(string(again), `"created_at":"2026-01-02T03:04:05.000000006Z"}]}`) {
			t.Fatalf("messages not last: %s", again)
		}
		d := &ConversationDoc{}
		if err := d.decodeStored(data); err != nil {
			t.Fatal(err)
		}
		if d.Conversation.Messages != nil || d.ID != "c1" || d.State["k"] != `va"l\` {
			t.Fatalf("doc head: %+v", d.Conversation)
		}
		sameJSON(t, want, must(d.encodeStored()))
		sameJSON(t, want, must(json.Marshal(d)))
	}
}

// A save appends to the messages as read, and only when they are unchanged.
func TestStoredConversationAppends(t *testing.T) {
	c := &Conversation{}
	if err := c.decodeStored(must(storedConv().encodeStored())); err != nil {
		t.Fatal(err)
	}
	raw := string(c.stored.raw)
	c.Messages = append(c.Messages, Message{ID: "t1", Role: RoleUser, Content: "next"})
	c.Status = StatusRunning
	data := must(c.encodeStored())
	if !strings.Contains(string(data), strings.TrimSuffix(raw, "]")+`,{"id":"t1",`) {
		t.Fatalf("not appended to the stored messages: %s", data)
	}
	want := storedConv()
	want.Messages = append(want.Messages, Message{ID: "t1", Role: RoleUser, Content: "next"})
	want.Status = StatusRunning
	sameJSON(t, must(json.Marshal(want)), data)

	edits := map[string]func(c *Conversation){
		"approval id in place": func(c *Conversation) { c.Messages[1].ToolCalls[0].ApprovalID = "ap" },
		"content":              func(c *Conversation) { c.Messages[0].Content = "other" },
		"arguments replaced":   func(c *Conversation) { c.Messages[1].ToolCalls[0].Arguments = map[string]any{"q": "]"} },
		"dropped":              func(c *Conversation) { c.Messages = c.Messages[1:] },
		"emptied":              func(c *Conversation) { c.Messages = nil },
	}
	for name, edit := range edits {
		c := &Conversation{}
		if err := c.decodeStored(must(storedConv().encodeStored())); err != nil {
			t.Fatal(err)
		}
		edit(c)
		want := storedConv()
		edit(want)
		sameJSON(t, must(json.Marshal(want)), must(c.encodeStored()))
		if name == "content" {
			// A second save after the first starts from what it wrote.
			c.Messages = append(c.Messages, Message{ID: "x"})
			want.Messages = append(want.Messages, Message{ID: "x"})
			sameJSON(t, must(json.Marshal(want)), must(c.encodeStored()))
		}
	}
}

// A read of messages this process saved copies them from the memo; what a
// reader changes in its copy stays its own.
func TestStoredConversationMemo(t *testing.T) {
	c := storedConv()
	c.ID = "memo1"
	c.Messages[0].Content = strings.Repeat("x", memo.min)
	data := must(c.encodeStored())
	a, b := &Conversation{}, &Conversation{}
	if err := a.decodeStored(data); err != nil {
		t.Fatal(err)
	}
	if a.stored != memo.entries["memo1"] {
		t.Fatal("not read from the memo")
	}
	a.Messages[1].ToolCalls[0].ApprovalID = "ap"
	a.Messages[0].Content = "changed"
	if err := b.decodeStored(data); err != nil {
		t.Fatal(err)
	}
	want := storedConv()
	want.ID, want.Messages[0].Content = "memo1", strings.Repeat("x", memo.min)
	sameJSON(t, must(json.Marshal(want)), must(json.Marshal(b)))
	// Another writer's messages: decoded, not taken from the memo.
	other := storedConv()
	other.ID = "memo1"
	other.Messages[2].Content = "other"
	d, _ := json.Marshal(other)
	e := &Conversation{}
	if err := e.decodeStored(d); err != nil || e.Messages[2].Content != "other" || e.stored == memo.entries["memo1"] {
		t.Fatalf("%v %+v", err, e.Messages[2])
	}
}

func TestMessageMemoBound(t *testing.T) {
	m := &messageMemo{min: 50, max: 3000, entries: map[string]*storedMessages{}}
	for i := range 50 {
		m.put(strings.Repeat("x", i+1), &storedMessages{raw: make([]byte, 100)})
		if m.size > m.max || m.size != 300*len(m.entries) {
			t.Fatalf("size %d with %d entries", m.size, len(m.entries))
		}
	}
	m.put("big", &storedMessages{raw: make([]byte, 1000)})
	m.put("small", &storedMessages{raw: make([]byte, 40)})
	if m.entries["big"] != nil || m.entries["small"] != nil {
		t.Fatal("an entry over an eighth of the bound, or under the least kept, kept")
	}
}

func TestSplitMessages(t *testing.T) {
	for in, want := range map[string][2]string{
		`{"messages":[1],"id":"x"}`:            {`{"id":"x"}`, `[1]`},
		` { "id" : "x" , "messages" : null } `: {` { "id" : "x"  } `, `null`},
		`{"messages":[{"a":"}\""}]}`:           {`{}`, `[{"a":"}\""}]`},
		`{"id":"x"}`:                           {`{"id":"x"}`, `null`},
		`{}`:                                   {`{}`, `null`},
		`{"a":"\\","messages":[],"b":true}`:    {`{"a":"\\","b":true}`, `[]`},
	} {
		head, msgs, err := splitMessages([]byte(in))
		if err != nil || string(head) != want[0] || string(msgs) != want[1] {
			t.Errorf("%s: %s %s %v; want %s %s", in, head, msgs, err, want[0], want[1])
		}
	}
	for _, in := range []string{``, `[]`, `{"messages":[}`, `{"a":1`, `{"a":"x}`, `{"a":1}x`, `{"messages":1,"messages":2}`, `{"a" 1}`} {
		if _, _, err := splitMessages([]byte(in)); err == nil {
			t.Errorf("%s: split", in)
		}
	}
	// What it does not split, encoding/json decodes as before.
	c := &Conversation{}
	if err := c.decodeStored([]byte(`{"id":"x","Messages":[{"id":"m"}]}`)); err != nil || len(c.Messages) != 1 || c.stored != nil {
		t.Fatalf("%+v %v", c, err)
	}
}

// sameMessage must compare every field: a field it does not know would let
// a change made in place to a stored message be lost.
func TestSameMessageFields(t *testing.T) {
	if n := reflect.TypeFor[Message]().NumField(); n != 13 {
		t.Errorf("Message has %d fields: compare the new ones in sameMessage, then update this count", n)
	}
	if n := reflect.TypeFor[ToolCall]().NumField(); n != 7 {
		t.Errorf("ToolCall has %d fields: compare the new ones in sameMessage, then update this count", n)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
