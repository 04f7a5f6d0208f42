package bridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
)

const forkYAML = `name: forks
llm:
  model: offline
auth:
  stream_key: "0123456789abcdef0123456789abcdef"
  tokens:
    - {name: alice, token: "alice-token-0123456789", roles: [user]}
    - {name: bob, token: "bob-token-0123456789", roles: [user]}
`

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789"
	peer       = "192.0.2.7:1000"
)

// forkBridge is a bridge with authentication on over a mesh of its own
// (no agent: the conversation forked is written as an agent would).
func forkBridge(t *testing.T) (*Role, *meshtest.Mesh) {
	t.Helper()
	m := meshtest.New(t)
	cfg, err := config.Parse("agent.yaml", []byte(forkYAML), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: cfg, StreamKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.auth.Close)
	return b, m
}

// recorded is a conversation of alice's with two runs, written as an agent
// writes them: r1 (u1, a1) sets x to 1; r2 (u2, a2 calling a tool, its
// result t2, a3) sets x to 2 with the tool's result.
type recorded struct {
	id     string
	seq    map[string]uint64 // stream sequence of each event, by name
	events []string
}

func recordConversation(t *testing.T, b *Role, m *meshtest.Mesh) *recorded {
	t.Helper()
	w := call(b, "POST", "/conversations", aliceToken, peer, `{}`)
	var created struct{ Conversation mesh.Conversation }
	if err := json.Unmarshal(w.Body.Bytes(), &created); w.Code != http.StatusCreated || err != nil {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	rc := &recorded{id: created.Conversation.ID, seq: map[string]uint64{}}
	publish := func(name, run string, ev mesh.Event) {
		t.Helper()
		rc.seq[name] = publishEvent(t, m, rc.id, run, ev)
		rc.events = append(rc.events, name)
	}
	save := func(msgs ...mesh.Message) {
		t.Helper()
		if _, err := b.core.Sessions.Update(t.Context(), rc.id, func(c *mesh.Conversation) error {
			c.Messages = append(c.Messages, msgs...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	delta := func(v float64) any {
		return []mesh.PatchOp{{Op: "add", Path: "/x", Value: v}}
	}
	publish("r1.queued", "r1", mesh.Custom(mesh.CustomRunQueued, map[string]any{"runId": "r1"}))
	publish("r1.start", "r1", mesh.Event{Type: mesh.EventRunStarted})
	publish("r1.snapshot", "r1", mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: map[string]any{}})
	publish("r1.a1", "r1", mesh.Event{Type: mesh.EventTextMessageStart, MessageID: "a1"})
	publish("r1.delta", "r1", mesh.Event{Type: mesh.EventStateDelta, Delta: delta(1)})
	save(mesh.Message{ID: "r1", Role: mesh.RoleUser, Content: "one", TurnID: "r1"}, mesh.Message{ID: "a1", Role: mesh.RoleAssistant, Content: "first", TurnID: "r1"})
	publish("r1.end", "r1", mesh.Event{Type: mesh.EventRunFinished})

	publish("r2.queued", "r2", mesh.Custom(mesh.CustomRunQueued, map[string]any{"runId": "r2"}))
	publish("r2.start", "r2", mesh.Event{Type: mesh.EventRunStarted})
	publish("r2.snapshot", "r2", mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: map[string]any{"x": 1}})
	publish("r2.call", "r2", mesh.Event{Type: mesh.EventToolCallStart, ToolCallID: "c1", ParentMessageID: "a2"})
	publish("r2.result", "r2", mesh.Event{Type: mesh.EventToolCallResult, ToolCallID: "c1", MessageID: "t2"})
	publish("r2.delta", "r2", mesh.Event{Type: mesh.EventStateDelta, Delta: delta(2)})
	publish("r2.a3", "r2", mesh.Event{Type: mesh.EventTextMessageStart, MessageID: "a3"})
	save(mesh.Message{ID: "r2", Role: mesh.RoleUser, Content: "two", TurnID: "r2"},
		mesh.Message{ID: "a2", Role: mesh.RoleAssistant, TurnID: "r2", ToolCalls: []mesh.ToolCall{{ID: "c1", Name: "tool", Arguments: map[string]any{}}}},
		mesh.Message{ID: "t2", Role: mesh.RoleTool, Content: "done", ToolCallID: "c1", ToolName: "tool", TurnID: "r2"},
		mesh.Message{ID: "a3", Role: mesh.RoleAssistant, Content: "second", TurnID: "r2"})
	publish("r2.end", "r2", mesh.Event{Type: mesh.EventRunFinished})
	return rc
}

// publishEvent stores ev of run on conversation conv's events, as an
// agent does, and returns its stream sequence.
func publishEvent(t *testing.T, m *meshtest.Mesh, conv, run string, ev mesh.Event) uint64 {
	t.Helper()
	msg := nats.NewMsg(fmt.Sprintf("mesh.evt.%s.%s", conv, ev.Type))
	msg.Header.Set(mesh.HeaderRun, run)
	ev.RunID = run
	msg.Data, _ = json.Marshal(ev)
	ack, err := m.JS.PublishMsg(t.Context(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// fork forks conv with body as alice, and fails unless it is made.
func fork(t *testing.T, b *Role, conv, body string) forkAnswer {
	t.Helper()
	w := call(b, "POST", "/conversations/"+conv+"/fork", aliceToken, peer, body)
	var got forkAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusCreated || err != nil {
		t.Fatalf("fork %s %s: %d %s", conv, body, w.Code, w.Body)
	}
	return got
}

// A branch forked again: at a message of the part it shares, the point
// maps on the original's events; at its own events, the part it shares
// counts as before them, and its state before its first run is the one
// it was forked with.
func TestForkOfBranchPoints(t *testing.T) {
	t.Parallel()
	b, m := forkBridge(t)
	rc := recordConversation(t, b, m)
	br := fork(t, b, rc.id, `{"after":"a3"}`)
	ev := func(name string, e mesh.Event) uint64 { return publishEvent(t, m, br.ID, "r3", e) }
	queued := ev("queued", mesh.Custom(mesh.CustomRunQueued, map[string]any{"runId": "r3"}))
	ev("start", mesh.Event{Type: mesh.EventRunStarted})
	ev("snapshot", mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: map[string]any{"x": 2}})
	ev("delta", mesh.Event{Type: mesh.EventStateDelta, Delta: []mesh.PatchOp{{Op: "replace", Path: "/x", Value: 3}}})
	if _, err := b.core.Sessions.Update(t.Context(), br.ID, func(c *mesh.Conversation) error {
		c.Messages = append(c.Messages, mesh.Message{ID: "r3", Role: mesh.RoleUser, Content: "three", TurnID: "r3"}, mesh.Message{ID: "a4", Role: mesh.RoleAssistant, Content: "third", TurnID: "r3"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	end := ev("end", mesh.Event{Type: mesh.EventRunFinished})
	all := "r1,a1,r2,a2,t2,a3"
	for _, c := range []struct {
		name, body, ids string
		x               float64
		from            string // whose events forked_from names
		seq             uint64
	}{
		{"after a1, shared", `{"after":"a1"}`, "r1,a1", 1, rc.id, rc.seq["r1.end"]},
		{"before r2, shared", `{"before":"r2"}`, "r1,a1", 1, rc.id, rc.seq["r1.end"]},
		{"after a3, its point", `{"after":"a3"}`, all, 2, rc.id, rc.seq["r2.end"]},
		{"its run queued", fmt.Sprintf(`{"event_seq":%d}`, queued), all, 2, br.ID, queued},
		{"its run ended", fmt.Sprintf(`{"event_seq":%d}`, end), all + ",r3,a4", 3, br.ID, end},
		{"after a4", `{"after":"a4"}`, all + ",r3,a4", 3, br.ID, end},
	} {
		got := fork(t, b, br.ID, c.body)
		v := getConv(t, b, aliceToken, got.ID)
		ids := v.ids()
		if i := strings.Index(ids, "r1"); i > 0 {
			ids = ids[i:] // the system prompt
		}
		if ids != c.ids || v.State["x"] != c.x || got.ForkedFrom.Conversation != br.ID || got.ForkedFrom.EventSeq != c.seq {
			t.Errorf("%s: %s, state %v, forked_from %+v; want %s, x=%v, event %d (of %s)", c.name, ids, v.State, got.ForkedFrom, c.ids, c.x, c.seq, c.from)
		}
	}
}

// forkAnswer is the part of a fork's answer the tests read.
type forkAnswer struct {
	ID           string          `json:"id"`
	Conversation json.RawMessage `json:"conversation"`
	ForkedFrom   mesh.ForkPoint  `json:"forked_from"`
	Code         string          `json:"code"`
}

type convView struct {
	ID           string
	Owner        string
	Status       mesh.Status
	State        map[string]any
	MessageCount int `json:"message_count"`
	Messages     []mesh.Message
	ForkedFrom   *mesh.ForkPoint `json:"forked_from"`
	Pending      any             `json:"pending_approval"`
	Superseded   map[string]string
	Queued       any `json:"queued_turn"`
}

func (v convView) ids() string {
	var out []string
	for _, m := range v.Messages {
		out = append(out, m.ID)
	}
	return strings.Join(out, ",")
}

func getConv(t *testing.T, b *Role, token, id string) convView {
	t.Helper()
	w := call(b, "GET", "/conversations/"+id, token, peer, "")
	var out struct{ Conversation convView }
	if err := json.Unmarshal(w.Body.Bytes(), &out); w.Code != http.StatusOK || err != nil {
		t.Fatalf("GET %s: %d %s", id, w.Code, w.Body)
	}
	return out.Conversation
}

// A fork at a message or an event keeps the history and the state the
// original had there, and names its point; the original is unchanged.
func TestForkPoints(t *testing.T) {
	t.Parallel()
	b, m := forkBridge(t)
	rc := recordConversation(t, b, m)
	// As if r2 had regenerated a1: the mark holds on a branch that keeps both.
	if _, err := b.core.Sessions.UpdateHead(t.Context(), rc.id, func(c *mesh.Conversation) error {
		c.Superseded = map[string]string{"a1": "r2"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	orig := getConv(t, b, aliceToken, rc.id)
	origIDs := orig.ids()
	sys := ""
	if len(orig.Messages) > 0 && orig.Messages[0].Role == mesh.RoleSystem {
		sys = orig.Messages[0].ID + ","
	}
	for _, c := range []struct {
		name, body, ids string
		state           float64 // x; 0: no state
		seq             string  // the event forked_from names
		last            string
	}{
		{"after a1", `{"after":"a1"}`, "r1,a1", 1, "r1.end", "a1"},
		{"before r2", `{"before":"r2"}`, "r1,a1", 1, "r1.end", "a1"},
		{"before r1", `{"before":"r1"}`, "", 0, "", ""},
		{"after a3", `{"after":"a3"}`, "r1,a1,r2,a2,t2,a3", 2, "r2.end", "a3"},
		{"after t2", `{"after":"t2"}`, "r1,a1,r2,a2,t2", 2, "r2.delta", "t2"},
		{"event r1.end", `{"event_seq":%d}`, "r1,a1", 1, "r1.end", "a1"},
		{"event r2.queued", `{"event_seq":%d}`, "r1,a1", 1, "r2.queued", "a1"},
		{"event r2.end", `{"event_seq":%d}`, "r1,a1,r2,a2,t2,a3", 2, "r2.end", "a3"},
	} {
		body := c.body
		if strings.Contains(body, "%d") {
			body = fmt.Sprintf(body, rc.seq[strings.TrimPrefix(c.name, "event ")])
		}
		w := call(b, "POST", "/conversations/"+rc.id+"/fork", aliceToken, peer, body)
		var got forkAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusCreated || err != nil {
			t.Errorf("%s: %d %s", c.name, w.Code, w.Body)
			continue
		}
		wantIDs := strings.TrimSuffix(sys+c.ids, ",")
		if c.ids == "" {
			wantIDs = strings.TrimSuffix(sys, ",")
		}
		last := c.last
		if last == "" && sys != "" {
			last = strings.TrimSuffix(sys, ",")
		}
		if got.ForkedFrom != (mesh.ForkPoint{Conversation: rc.id, Message: last, EventSeq: rc.seq[c.seq]}) {
			t.Errorf("%s: forked_from %+v, want %s, %q, %d", c.name, got.ForkedFrom, rc.id, last, rc.seq[c.seq])
		}
		br := getConv(t, b, aliceToken, got.ID)
		if br.ids() != wantIDs || br.MessageCount != len(br.Messages) {
			t.Errorf("%s: branch messages %s (count %d), want %s", c.name, br.ids(), br.MessageCount, wantIDs)
		}
		if x, _ := br.State["x"].(float64); x != c.state || (c.state == 0 && len(br.State) != 0) {
			t.Errorf("%s: branch state %v, want x=%v", c.name, br.State, c.state)
		}
		if keeps := strings.Contains(wantIDs, "r2"); keeps != (br.Superseded["a1"] == "r2") || len(br.Superseded) > 1 {
			t.Errorf("%s: superseded %v; the branch keeps r2: %v", c.name, br.Superseded, keeps)
		}
		if br.Owner != "alice" || br.Status != mesh.StatusActive || br.ForkedFrom == nil || *br.ForkedFrom != got.ForkedFrom || br.Pending != nil || br.Queued != nil {
			t.Errorf("%s: branch %+v", c.name, br)
		}
	}
	// A point after a call whose result the branch does not keep: the
	// call is answered there as not run, so that a model takes the history.
	w := call(b, "POST", "/conversations/"+rc.id+"/fork", aliceToken, peer, `{"after":"a2"}`)
	var got forkAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusCreated || err != nil {
		t.Fatalf("after a2: %d %s", w.Code, w.Body)
	}
	br := getConv(t, b, aliceToken, got.ID)
	if n := len(br.Messages); n == 0 || br.Messages[n-1].ToolCallID != "c1" || !br.Messages[n-1].IsError || got.ForkedFrom.EventSeq != rc.seq["r2.call"] {
		t.Errorf("after a2: %s, forked_from %+v", br.ids(), got.ForkedFrom)
	}
	if x, _ := br.State["x"].(float64); x != 1 {
		t.Errorf("after a2: state %v, want x=1 (before the tool's result)", br.State)
	}
	if now := getConv(t, b, aliceToken, rc.id); now.ids() != origIDs || now.ForkedFrom != nil {
		t.Errorf("the original changed: %s, want %s", now.ids(), origIDs)
	}
	// The family: the original first, then its branches by creation.
	w = call(b, "GET", "/conversations/"+got.ID+"/branches", aliceToken, peer, "")
	var fam struct {
		Root     string
		Branches []struct {
			ID         string
			ForkedFrom *mesh.ForkPoint `json:"forked_from"`
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &fam); w.Code != http.StatusOK || err != nil {
		t.Fatalf("branches: %d %s", w.Code, w.Body)
	}
	if fam.Root != rc.id || len(fam.Branches) != 10 || fam.Branches[0].ID != rc.id || fam.Branches[0].ForkedFrom != nil || fam.Branches[9].ID != got.ID {
		t.Errorf("branches: %s", w.Body)
	}
}

// Bad forks are refused with a clear error and make nothing; a
// conversation the caller may not read is not found.
func TestForkRefusals(t *testing.T) {
	t.Parallel()
	b, m := forkBridge(t)
	rc := recordConversation(t, b, m)
	other := recordConversation(t, b, m)
	for _, c := range []struct {
		name, token, id, body string
		status                int
		code                  string
	}{
		{"malformed JSON", aliceToken, rc.id, `{"after":`, 400, "bad_request"},
		{"not an object", aliceToken, rc.id, `[1]`, 400, "bad_request"},
		{"empty body", aliceToken, rc.id, ``, 400, "bad_request"},
		{"no point", aliceToken, rc.id, `{"message":"hi"}`, 400, "bad_request"},
		{"two points", aliceToken, rc.id, `{"after":"a1","before":"r2"}`, 400, "bad_request"},
		{"after a number", aliceToken, rc.id, `{"after":12}`, 400, "bad_request"},
		{"unknown message", aliceToken, rc.id, `{"after":"nowhere"}`, 400, "bad_request"},
		{"another's message", aliceToken, rc.id, `{"after":"../a1"}`, 400, "bad_request"},
		{"negative event", aliceToken, rc.id, `{"event_seq":-1}`, 400, "bad_request"},
		{"event zero", aliceToken, rc.id, `{"event_seq":0}`, 400, "bad_request"},
		{"event past the stream", aliceToken, rc.id, `{"event_seq":99999999}`, 400, "bad_request"},
		{"event of another conversation", aliceToken, rc.id, fmt.Sprintf(`{"event_seq":%d}`, other.seq["r1.end"]), 400, "bad_request"},
		{"event inside a run", aliceToken, rc.id, fmt.Sprintf(`{"event_seq":%d}`, rc.seq["r2.delta"]), 409, "conflict"},
		{"bad metadata", aliceToken, rc.id, `{"after":"a1","metadata":"x"}`, 400, "bad_request"},
		{"another's conversation", bobToken, rc.id, `{"after":"a1"}`, 404, mesh.ErrSessionNotFound.Kind()},
		{"unknown conversation", aliceToken, "nowhere", `{"after":"a1"}`, 404, mesh.ErrSessionNotFound.Kind()},
		{"no token", "", rc.id, `{"after":"a1"}`, 401, ""},
		{"oversize body", aliceToken, rc.id, `{"after":"a1","message":"` + strings.Repeat("x", 2<<20) + `"}`, 413, "body_too_large"},
	} {
		w := call(b, "POST", "/conversations/"+c.id+"/fork", c.token, peer, c.body)
		var out struct{ Code, Error string }
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		if w.Code != c.status || (c.code != "" && out.Code != c.code) {
			t.Errorf("%s: %d %s, want %d %s", c.name, w.Code, w.Body, c.status, c.code)
		}
		if c.status != 401 && out.Error == "" {
			t.Errorf("%s: no error text: %s", c.name, w.Body)
		}
	}
	// Events that aged out: the state at the point cannot be told.
	if err := store.PurgeEvents(t.Context(), m.JS, m.NS, other.id); err != nil {
		t.Fatal(err)
	}
	w := call(b, "POST", "/conversations/"+other.id+"/fork", aliceToken, peer, `{"after":"a1"}`)
	if w.Code != http.StatusGone || !strings.Contains(w.Body.String(), `"events_expired"`) {
		t.Errorf("fork at a point whose events are gone: %d %s, want 410 events_expired", w.Code, w.Body)
	}
	if w := call(b, "GET", "/conversations/"+rc.id+"/branches", bobToken, peer, ""); w.Code != http.StatusNotFound {
		t.Errorf("branches of another's conversation: %d %s, want 404", w.Code, w.Body)
	}
	// Nothing was made: alice's family is her two conversations alone.
	w = call(b, "GET", "/conversations/"+rc.id+"/branches", aliceToken, peer, "")
	var fam struct{ Branches []any }
	if err := json.Unmarshal(w.Body.Bytes(), &fam); err != nil || len(fam.Branches) != 1 {
		t.Errorf("family after refusals: %s", w.Body)
	}
	sums, err := b.core.Sessions.Summaries(t.Context())
	if err != nil || len(sums) != 2 {
		t.Errorf("conversations after refusals: %d, %v; want the two recorded", len(sums), err)
	}
}
