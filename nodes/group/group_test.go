package group

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// These tests run the group role on an embedded mesh with fake members:
// each answers its turns the way an agent does by the protocol of
// mesh/group.go (the result on the pending turn, then group_next), so the
// role's handling of duplicates, dead members and ends can be driven
// exactly. cmd/mesh's group tests run it with real agents.

// fakeMember is a fake member of the group chat.
type fakeMember struct {
	name string
	// answer says what the member answers; nil answers "<name> says hi".
	answer func(turn string) string
	// twice makes the member tell the group twice, as a redelivery would.
	twice bool
	// silent members take their turn and never answer (a process that dies).
	silent bool

	mu    sync.Mutex
	turns []string
}

type harness struct {
	t       *testing.T
	m       *meshtest.Mesh
	store   *store.SessionStore
	members map[string]*fakeMember
}

// newHarness runs the group role for g with the given members, each
// announced as served by a live node unless down.
func newHarness(t *testing.T, g config.Group, members []*fakeMember, down ...string) *harness {
	t.Helper()
	return newHarnessWith(t, g, members, nil, down...)
}

// newHarnessWith is newHarness with the role's configuration changed by opt.
func newHarnessWith(t *testing.T, g config.Group, members []*fakeMember, opt func(*Config), down ...string) *harness {
	t.Helper()
	m := meshtest.New(t)
	h := &harness{t: t, m: m, store: store.NewSessionStore(m.Sessions, m.Messages), members: map[string]*fakeMember{}}
	for _, mem := range members {
		h.members[mem.name] = mem
		if !contains(down, mem.name) {
			h.announce(mem.name)
		}
		h.serve(mem)
	}
	cfg := Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-group", Logger: zerolog.Nop()}, Resources: m.Resources, Groups: []config.Group{g},
		AckWait: 2 * time.Second, CheckInterval: 50 * time.Millisecond}
	if opt != nil {
		opt(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	meshtest.Eventually(t, 5*time.Second, func() bool { return r.Health(ctx) == nil }, "group role not consuming")
	return h
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// announce puts a live agent node serving name in the nodes bucket.
func (h *harness) announce(name string) {
	info := mesh.NodeInfo{Node: "node-" + name, Role: mesh.RoleAgent, State: mesh.NodeReady, Serves: []string{name}}
	data, _ := json.Marshal(info)
	if _, err := h.m.Nodes.Put(h.t.Context(), info.Key(), data); err != nil {
		h.t.Fatal(err)
	}
}

// kill removes name's node, as when its key expires.
func (h *harness) kill(name string) {
	if err := h.m.Nodes.Delete(h.t.Context(), mesh.RoleAgent+".node-"+name); err != nil {
		h.t.Fatal(err)
	}
}

// serve answers mem's turns like an agent.
func (h *harness) serve(mem *fakeMember) {
	subj, _ := h.m.NS.WorkFilter(mesh.RoleAgent, mem.name)
	sub, err := h.m.NC.Subscribe(subj, func(msg *nats.Msg) {
		var item mesh.WorkItem
		if json.Unmarshal(msg.Data, &item) != nil || item.Group == "" {
			return
		}
		mem.mu.Lock()
		mem.turns = append(mem.turns, item.TurnID)
		mem.mu.Unlock()
		if mem.silent {
			return
		}
		text := mem.name + " says hi"
		if mem.answer != nil {
			text = mem.answer(item.TurnID)
		}
		go h.answer(mem, item, text)
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func (h *harness) answer(mem *fakeMember, item mesh.WorkItem, text string) {
	ctx := context.Background()
	var next *mesh.WorkItem
	_, err := h.store.Update(ctx, item.Session, func(c *mesh.Conversation) error {
		next = nil
		g := c.Group
		if g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != item.TurnID || g.Round.Pending.Result != nil {
			return store.ErrNoChange
		}
		c.Messages = append(c.Messages, mesh.Message{ID: item.TurnID + "-a1", Role: mesh.RoleAssistant, Content: text, Name: mem.name, TurnID: item.RunID})
		c.MarkTurn(item.TurnID)
		g.Round.Pending.Result = &mesh.RunSummary{ID: item.TurnID, Outcome: mesh.OutcomeSuccess, Response: text}
		next = &mesh.WorkItem{Kind: mesh.WorkGroupNext, Session: c.ID, TurnID: item.TurnID, RunID: item.RunID, Group: item.Group}
		return nil
	})
	if err != nil || next == nil {
		return
	}
	subj, _ := h.m.NS.Work(mesh.RoleGroup, item.Group, item.Session)
	data, _ := json.Marshal(next)
	n := 1
	if mem.twice {
		n = 2
	}
	for range n {
		// Published without a dedupe id: the role must cope with a second
		// copy on its own.
		if _, err := h.m.JS.Publish(ctx, subj, data); err != nil {
			h.t.Error(err)
		}
	}
}

// chat creates a chat of the group and sends it text; it returns the
// conversation once the round ended.
func (h *harness) chat(group, text string) *mesh.Conversation {
	h.t.Helper()
	id, turn := h.post(group, text)
	return h.waitRound(id, turn)
}

// post creates a chat of the group and sends it text; it returns the
// conversation's id and the message's turn.
func (h *harness) post(group, text string) (id, turn string) {
	h.t.Helper()
	id = mesh.NewID()
	c := &mesh.Conversation{ID: id, SessionID: mesh.NewTraceID(), Status: mesh.StatusActive, Group: &mesh.GroupRun{Name: group}}
	if err := h.store.Create(h.t.Context(), c); err != nil {
		h.t.Fatal(err)
	}
	return id, h.send(group, id, text)
}

// send sends text to the chat id of the group; it returns the message's turn.
func (h *harness) send(group, id, text string) (turn string) {
	h.t.Helper()
	turn = mesh.NewID()
	if err := workloop.Publish(h.t.Context(), h.m.JS, h.m.NS, mesh.RoleGroup, group, mesh.WorkItem{Kind: mesh.WorkTurn, Session: id, TurnID: turn, Message: text}, nil); err != nil {
		h.t.Fatal(err)
	}
	return turn
}

// waitRound returns the conversation once the round of turn ended.
func (h *harness) waitRound(id, turn string) *mesh.Conversation {
	h.t.Helper()
	var c *mesh.Conversation
	meshtest.Eventually(h.t, 10*time.Second, func() bool {
		var err error
		c, err = h.store.Get(h.t.Context(), id)
		return err == nil && c.HasTurn(turn) && c.Group.Round == nil
	}, "the round of %s in %s did not end", turn, id)
	return c
}

// events reads the events stored for a conversation.
func (h *harness) events(conv string) []mesh.Event {
	h.t.Helper()
	return h.m.Events(h.t, conv)
}

func speakersOf(c *mesh.Conversation) string {
	var out []string
	for _, m := range c.Messages {
		if m.Role == mesh.RoleAssistant {
			out = append(out, m.Name)
		}
	}
	return strings.Join(out, ",")
}

func customsOf(evs []mesh.Event, name string) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e.Type == mesh.EventCustom && e.Name == name {
			v, _ := e.Value.(map[string]any)
			out = append(out, v)
		}
	}
	return out
}

func trio(maxTurns int) config.Group {
	return config.Group{Name: "team", Strategy: config.StrategyRoundRobin, MaxTurns: maxTurns, MaxConsecutive: 1, TerminationPhrase: config.DefaultTerminationPhrase,
		Participants: []config.Participant{{Agent: "a"}, {Agent: "b"}, {Agent: "c"}}}
}

func TestRoundRobinRoundWithDuplicateEnds(t *testing.T) {
	h := newHarness(t, trio(5), []*fakeMember{{name: "a", twice: true}, {name: "b", twice: true}, {name: "c"}})
	c := h.chat("team", "hello")
	if got := speakersOf(c); got != "a,b,c,a,b" {
		t.Errorf("speakers %s, want a,b,c,a,b: each turn once despite the repeated group_next", got)
	}
	if c.Group.Ended != mesh.GroupEndMaxTurns {
		t.Errorf("group ended = %q, want %q", c.Group.Ended, mesh.GroupEndMaxTurns)
	}
	if c.Status != mesh.StatusActive {
		t.Errorf("status = %q, want %q", c.Status, mesh.StatusActive)
	}
	if c.Turn != nil {
		t.Errorf("a turn is left open: %+v", c.Turn)
	}
	if c.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Errorf("last run outcome = %q, want %q", c.LastRun.Outcome, mesh.OutcomeSuccess)
	}
	if c.LastRun.Response != "b says hi" {
		t.Errorf("last run response = %q, want %q", c.LastRun.Response, "b says hi")
	}
	evs := h.events(c.ID)
	if n := len(customsOf(evs, mesh.CustomSpeakerSelected)); n != 5 {
		t.Errorf("%d speaker_selected, want 5", n)
	}
	var finished, started, steps int
	for _, e := range evs {
		switch e.Type {
		case mesh.EventRunFinished:
			finished++
		case mesh.EventRunStarted:
			started++
		case mesh.EventStepStarted:
			steps++
		}
	}
	if started != 1 || finished != 1 || steps != 5 {
		t.Errorf("RUN_STARTED %d, RUN_FINISHED %d, STEP_STARTED %d; want 1, 1, 5", started, finished, steps)
	}
}

func TestTerminationPhraseEndsTheRound(t *testing.T) {
	h := newHarness(t, trio(10), []*fakeMember{{name: "a"}, {name: "b", answer: func(string) string { return "we are done TERMINATE" }}, {name: "c"}})
	c := h.chat("team", "hello")
	if speakersOf(c) != "a,b" || c.Group.Ended != mesh.GroupEndPhrase {
		t.Errorf("speakers %s, ended %q", speakersOf(c), c.Group.Ended)
	}
}

func TestDownMembersAreSkipped(t *testing.T) {
	// b has no live node from the start; c stops answering and its node
	// goes away during its turn.
	c := &fakeMember{name: "c", silent: true}
	h := newHarness(t, trio(3), []*fakeMember{{name: "a"}, {name: "b"}, c}, "b")
	go func() {
		meshtest.Eventually(t, 10*time.Second, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.turns) > 0
		}, "c never got a turn")
		h.kill("c")
	}()
	conv := h.chat("team", "hello")
	// a spoke, b was down, c died in its turn, and a may not speak twice
	// in a row: nobody is left.
	if got := speakersOf(conv); got != "a" || conv.Group.Ended != mesh.GroupEndNoSpeaker || conv.LastRun.Outcome != mesh.OutcomeSuccess {
		t.Errorf("speakers %s, ended %q, outcome %s; want a alone, then no speaker", got, conv.Group.Ended, conv.LastRun.Outcome)
	}
	skipped := customsOf(h.events(conv.ID), mesh.CustomSpeakerSkipped)
	var who []string
	for _, s := range skipped {
		who = append(who, fmt.Sprint(s["member"]))
	}
	if !contains(who, "b") || !contains(who, "c") {
		t.Errorf("speaker_skipped for %v, want b and c", who)
	}
}

func TestCancelStopsTheRound(t *testing.T) {
	b := &fakeMember{name: "b", silent: true}
	h := newHarness(t, trio(10), []*fakeMember{{name: "a"}, b, {name: "c"}})
	go func() {
		meshtest.Eventually(t, 10*time.Second, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.turns) > 0
		}, "b never got a turn")
		sessions, _ := h.m.Sessions.ListKeys(context.Background())
		for k := range sessions.Keys() {
			subj, _ := h.m.NS.SessionCancel(k)
			_ = h.m.NC.Publish(subj, nil)
		}
	}()
	c := h.chat("team", "hello")
	if c.Group.Ended != mesh.GroupEndStopped || c.LastRun.Outcome != mesh.OutcomeCancelled || speakersOf(c) != "a" {
		t.Errorf("ended %q, outcome %s, speakers %s", c.Group.Ended, c.LastRun.Outcome, speakersOf(c))
	}
}

// TestMinIntervalWaitHoldsNoWorker: a speaker waiting out its min_interval
// waits in the work queue, not in a worker: with one worker, a second chat
// goes on during the first one's wait, and the wait is kept.
func TestMinIntervalWaitHoldsNoWorker(t *testing.T) {
	const minInterval = 2 * time.Second
	var mu sync.Mutex
	began := map[string]time.Time{} // member turn -> when the member got it
	solo := &fakeMember{name: "a", answer: func(turn string) string {
		mu.Lock()
		began[turn] = time.Now()
		mu.Unlock()
		return "a says hi"
	}}
	g := config.Group{Name: "solo", Strategy: config.StrategyRoundRobin, MaxTurns: 2, MaxConsecutive: 2, MinInterval: config.Duration(minInterval),
		TerminationPhrase: config.DefaultTerminationPhrase, Participants: []config.Participant{{Agent: "a"}}}
	h := newHarnessWith(t, g, []*fakeMember{solo}, func(c *Config) { c.Workers = 1 })

	idA, turnA := h.post("solo", "first chat")
	meshtest.Eventually(t, 10*time.Second, func() bool {
		c, err := h.store.Get(t.Context(), idA)
		return err == nil && c.Group.Round != nil && c.Group.Round.Turns == 1
	}, "the first chat's first turn did not end")
	idB, turnB := h.post("solo", "second chat")
	a, b := h.waitRound(idA, turnA), h.waitRound(idB, turnB)
	for _, c := range []*mesh.Conversation{a, b} {
		if speakersOf(c) != "a,a" || c.Group.Ended != mesh.GroupEndMaxTurns {
			t.Errorf("%s: speakers %s, ended %q; want a,a by max_turns", c.ID, speakersOf(c), c.Group.Ended)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	a1, a2, b1 := began[turnA+"-m1"], began[turnA+"-m2"], began[turnB+"-m1"]
	if a1.IsZero() || a2.IsZero() || b1.IsZero() {
		t.Fatalf("member turns %v", began)
	}
	if a2.Sub(a1) < minInterval {
		t.Errorf("a spoke again %v after its first turn, want at least min_interval %v", a2.Sub(a1), minInterval)
	}
	if !b1.Before(a2) {
		t.Errorf("the second chat's first turn began %v after the first chat's wait ended: the wait held the only worker", b1.Sub(a2))
	}
}

// TestFirstSpeakerWaitsWithoutRestartingTheRun: a message answered by a
// member that spoke within min_interval waits on an item of its own, so
// the round's run starts once and the member speaks when the wait is over.
func TestFirstSpeakerWaitsWithoutRestartingTheRun(t *testing.T) {
	const minInterval = time.Second
	g := config.Group{Name: "solo", Strategy: config.StrategyRoundRobin, MaxTurns: 1, MinInterval: config.Duration(minInterval),
		TerminationPhrase: config.DefaultTerminationPhrase, Participants: []config.Participant{{Agent: "a"}}}
	h := newHarness(t, g, []*fakeMember{{name: "a"}})
	id, first := h.post("solo", "one")
	h.waitRound(id, first)
	sent := time.Now()
	second := h.send("solo", id, "two")
	c := h.waitRound(id, second)
	if speakersOf(c) != "a,a" || c.Group.Ended != mesh.GroupEndMaxTurns {
		t.Errorf("speakers %s, ended %q; want a,a by max_turns", speakersOf(c), c.Group.Ended)
	}
	if took := time.Since(sent); took < minInterval/2 {
		t.Errorf("the second round ended %v after its message: a did not wait for its min_interval", took)
	}
	started := map[string]int{}
	for _, e := range h.events(id) {
		if e.Type == mesh.EventRunStarted {
			started[e.RunID]++
		}
	}
	if started[first] != 1 || started[second] != 1 || len(started) != 2 {
		t.Errorf("RUN_STARTED by run %v, want one for each message", started)
	}
}

// TestRoundGoesOnWhenItsPickWasLost: the handler that settled a member's
// turn (or skipped it) died before saving the next pick, or after saving it
// but before handing it out; the redelivery of its group_next (or
// group_check) finds the round stalled and carries it on, instead of
// leaving the chat stuck.
func TestRoundGoesOnWhenItsPickWasLost(t *testing.T) {
	for _, tc := range []struct {
		kind   mesh.WorkKind
		picked bool // the next turn was saved, not handed out
	}{
		{mesh.WorkGroupNext, false}, {mesh.WorkGroupCheck, false},
		{mesh.WorkGroupNext, true}, {mesh.WorkGroupCheck, true},
	} {
		name := string(tc.kind) + "/not picked"
		if tc.picked {
			name = string(tc.kind) + "/picked, not handed out"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, trio(3), []*fakeMember{{name: "a"}, {name: "b"}, {name: "c"}})
			id, round := mesh.NewID(), mesh.NewID()
			now := time.Now().UTC()
			gr := &mesh.GroupRun{Name: "team", Round: &mesh.GroupRound{ID: round, Runs: []string{round}, Turns: 1, Seq: 1, StartedAt: now}}
			gr.Asked()
			gr.Spoke("a", now)
			if tc.picked {
				gr.Round.Seq = 2
				gr.Round.Pending = &mesh.GroupTurn{ID: round + "-m2", Speaker: "b", Strategy: config.StrategyRoundRobin, Reason: "next in turn", RunID: round, StartedAt: now}
			}
			c := &mesh.Conversation{ID: id, SessionID: mesh.NewTraceID(), Status: mesh.StatusRunning, Group: gr,
				Turn: &mesh.Turn{ID: round, Kind: mesh.WorkTurn, Node: "dead-group", StartedAt: now},
				Messages: []mesh.Message{
					{ID: round, Role: mesh.RoleUser, Content: "hello", TurnID: round, CreatedAt: now},
					{ID: round + "-m1-a1", Role: mesh.RoleAssistant, Content: "a says hi", Name: "a", TurnID: round},
				}}
			if err := h.store.Create(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			item := mesh.WorkItem{Kind: tc.kind, Session: id, TurnID: round + "-m1", RunID: round, Group: "team"}
			if err := workloop.Publish(t.Context(), h.m.JS, h.m.NS, mesh.RoleGroup, "team", item, nil); err != nil {
				t.Fatal(err)
			}
			c = h.waitRound(id, round)
			if speakersOf(c) != "a,b,c" || c.Group.Ended != mesh.GroupEndMaxTurns {
				t.Errorf("speakers %s, ended %q; want a,b,c by max_turns", speakersOf(c), c.Group.Ended)
			}
		})
	}
}

// TestStopWhileStartingIsNotAFailure: a role asked to stop before it got
// going returns nil, as it does once running.
func TestStopWhileStartingIsNotAFailure(t *testing.T) {
	m := meshtest.New(t)
	r, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-group", Logger: zerolog.Nop()}, Resources: m.Resources, Groups: []config.Group{trio(3)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Run(ctx); err != nil {
		t.Errorf("Run with a cancelled context: %v, want nil", err)
	}
}

// blockingModel is a selector model that answers only once its call is
// cancelled.
type blockingModel struct{ called chan struct{} }

func (blockingModel) Model() string { return "blocking" }

func (m blockingModel) Generate(ctx context.Context, _ llm.Request) (*llm.Response, error) {
	select {
	case m.called <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestDrainDeadlineHandsTheItemBack: an item still in hand when the role's
// drain deadline passes is handed back for redelivery, even on its last
// delivery, instead of ending its round as a failure.
func TestDrainDeadlineHandsTheItemBack(t *testing.T) {
	m := meshtest.New(t)
	g := trio(3)
	g.Strategy = config.StrategyLLM
	model := blockingModel{called: make(chan struct{}, 1)}
	r, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-group", Logger: zerolog.Nop()}, Resources: m.Resources, Groups: []config.Group{g},
		Providers: func(string) (llm.Provider, error) { return model, nil }, DefaultModel: "blocking",
		AckWait: 30 * time.Second, MaxDeliver: 1, DrainTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, m: m, store: store.NewSessionStore(m.Sessions, m.Messages)}
	for _, p := range g.Participants {
		h.announce(p.Agent)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	meshtest.Eventually(t, 5*time.Second, func() bool { return r.Health(ctx) == nil }, "group role not consuming")

	id, turn := h.post("team", "hello")
	select {
	case <-model.called:
	case <-time.After(10 * time.Second):
		t.Fatal("the selector model was not asked")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its drain deadline")
	}

	c, err := h.store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Group.Round == nil || c.Group.Round.ID != turn {
		t.Errorf("round %+v, want the round of %s still open", c.Group.Round, turn)
	}
	for _, ev := range h.events(id) {
		if ev.Type == mesh.EventRunError || ev.Type == mesh.EventRunFinished || ev.Type == mesh.EventCustom && ev.Name == mesh.CustomGroupEnded {
			t.Errorf("event %s %s: the stop ended the round", ev.Type, ev.Name)
		}
	}
	cons, err := m.JS.Consumer(t.Context(), m.NS.Stream(mesh.StreamWork), ConsumerName(g.Name))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg := <-batch.Messages()
	if msg == nil {
		t.Fatal("the item was not handed back")
	}
	var item mesh.WorkItem
	if err := json.Unmarshal(msg.Data(), &item); err != nil || item.TurnID != turn {
		t.Errorf("handed back %s (%v), want the turn %s", msg.Data(), err, turn)
	}
}

// A user's message delivered again long after its round ended (its first
// delivery's process stopped after the save, before the ack, and the chat
// went on past its recent turns and the newest messages a read holds) is
// dropped: the round does not run, or store its messages, a second time.
func TestMessageDeliveredAgainLongAfterItsRoundIsDropped(t *testing.T) {
	id, first := mesh.NewID(), mesh.NewID()
	var held jetstream.Msg
	h := newHarnessWith(t, trio(3), []*fakeMember{{name: "a"}, {name: "b"}, {name: "c"}}, func(cfg *Config) {
		// Before the role runs: a copy of the message, taken from the
		// role's consumer and neither acked nor given back until the chat
		// has moved on.
		ctx := t.Context()
		data, _ := json.Marshal(mesh.WorkItem{Kind: mesh.WorkTurn, Session: id, TurnID: first, Message: "first"})
		subj, err := mesh.DefaultNamespace().Work(mesh.RoleGroup, "team", id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.JS.Publish(ctx, subj, data); err != nil {
			t.Fatal(err)
		}
		filter, _ := mesh.DefaultNamespace().WorkFilter(mesh.RoleGroup, "team")
		cons, err := cfg.JS.CreateOrUpdateConsumer(ctx, mesh.DefaultNamespace().Stream(mesh.StreamWork), jetstream.ConsumerConfig{
			Durable: ConsumerName("team"), Description: "chats of group team", FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: cfg.AckWait, MaxDeliver: -1, MaxAckPending: 4096})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			held = m
		}
		if held == nil {
			t.Fatal("the copy was not delivered")
		}
	})
	if err := workloop.Publish(t.Context(), h.m.JS, h.m.NS, mesh.RoleGroup, "team", mesh.WorkItem{Kind: mesh.WorkTurn, Session: id, TurnID: first, Message: "first"}, nil); err != nil {
		t.Fatal(err)
	}
	h.waitRound(id, first)
	// Rounds enough to pass the recent turns kept (a round marks four) and
	// the messages a read loads.
	for i := range 20 {
		_ = held.InProgress()
		h.waitRound(id, h.send("team", id, fmt.Sprintf("message %d", i)))
	}
	if err := held.Nak(); err != nil {
		t.Fatal(err)
	}
	// The members' items stay in the stream (the fakes answer on a core
	// subscription): the role's own consumer says when the copy is done.
	meshtest.Eventually(t, 10*time.Second, func() bool {
		cons, err := h.m.Work.Consumer(t.Context(), ConsumerName("team"))
		if err != nil {
			return false
		}
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, "the copy stays in the queue")
	time.Sleep(200 * time.Millisecond) // a round it started would have asked a member by now
	doc, err := h.store.GetPage(t.Context(), id, 500, "")
	if err != nil {
		t.Fatal(err)
	}
	users, answers := 0, 0
	for _, raw := range doc.Messages {
		var m mesh.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		switch {
		case m.ID == first:
			users++
		case m.TurnID == first:
			answers++
		}
	}
	if users != 1 || answers != 3 {
		t.Errorf("the first message %d times with %d answers; want once, with 3", users, answers)
	}
}

// A pick chosen from a conversation that another handler has moved on
// since chooses again from the conversation as it is. Here a duplicate
// group_next of a's turn read the round right after a's turn was settled;
// meanwhile b was picked and its turn settled too. Round robin on the old
// round says b: b must not be handed a second turn in a row, c is next.
// (TestRoundRobinRoundWithDuplicateEnds met this about once in 40 runs.)
func TestPickFromAnOutdatedRound(t *testing.T) {
	m := meshtest.New(t)
	h := &harness{t: t, m: m, store: store.NewSessionStore(m.Sessions, m.Messages)}
	for _, name := range []string{"a", "b", "c"} {
		h.announce(name)
	}
	r, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS, NodeID: "test-group", Logger: zerolog.Nop()}, Resources: m.Resources, Groups: []config.Group{trio(5)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id, roundID := mesh.NewID(), mesh.NewID()
	now := time.Now().UTC()
	g := &mesh.GroupRun{Name: "team", Round: &mesh.GroupRound{ID: roundID, Runs: []string{roundID}, Seq: 1, StartedAt: now}}
	g.Recent = []string{mesh.RecentUser}
	g.Spoke("a", now)
	c := &mesh.Conversation{ID: id, SessionID: mesh.NewTraceID(), Status: mesh.StatusRunning, Group: g,
		Turn:     &mesh.Turn{ID: roundID, Kind: mesh.WorkTurn},
		Messages: []mesh.Message{{ID: roundID, Role: mesh.RoleUser, Content: "hello", TurnID: roundID}, {ID: roundID + "-m1-a1", Role: mesh.RoleAssistant, Name: "a", Content: "a says hi", TurnID: roundID}}}
	if err := h.store.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	outdated, err := h.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// What the other handler did meanwhile: picked b, whose turn was settled.
	if _, err := h.store.Update(ctx, id, func(c *mesh.Conversation) error {
		c.Group.Round.Seq = 2
		c.Group.Spoke("b", time.Now().UTC())
		c.Messages = append(c.Messages, mesh.Message{ID: roundID + "-m2-a1", Role: mesh.RoleAssistant, Name: "b", Content: "b says hi", TurnID: roundID})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	x := &exec{r: r, g: r.groups["team"], item: mesh.WorkItem{Kind: mesh.WorkGroupNext, Session: id, TurnID: roundID + "-m1", RunID: roundID, Group: "team"},
		attempt: 1, hdr: nats.Header{}, log: zerolog.Nop()}
	if err := x.pick(ctx, outdated); err != nil {
		t.Fatal(err)
	}
	got, err := h.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Group.Round.Pending; p == nil || p.Speaker != "c" || p.ID != roundID+"-m3" {
		t.Fatalf("pending turn %+v after a pick from the outdated round; want c's, %s-m3", p, roundID)
	}
}
