package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// groupChat creates a group chat whose round r1 waits for the pending
// member turn r1-m1 of this agent ("tester").
func (f *fixture) groupChat() string {
	f.t.Helper()
	now := time.Now().UTC()
	c := &mesh.Conversation{
		ID: mesh.NewID(), SessionID: mesh.NewTraceID(), Status: mesh.StatusRunning,
		Messages: []mesh.Message{
			{ID: "r1", Role: mesh.RoleUser, Content: "hello all", TurnID: "r1", CreatedAt: now},
			{ID: "x-a1", Role: mesh.RoleAssistant, Content: "I looked already.", Name: "other", TurnID: "r1", CreatedAt: now},
		},
		Turn: &mesh.Turn{ID: "r1", Kind: mesh.WorkTurn, StartedAt: now},
		Group: &mesh.GroupRun{Name: "team", Round: &mesh.GroupRound{ID: "r1", Runs: []string{"r1"}, Seq: 1,
			Pending: &mesh.GroupTurn{ID: "r1-m1", Speaker: "tester", RunID: "r1", StartedAt: now}}},
	}
	if err := f.store.Create(f.t.Context(), c); err != nil {
		f.t.Fatal(err)
	}
	return c.ID
}

// groupNexts collects the group_next items told to group team.
func (f *fixture) groupNexts() func() []mesh.WorkItem {
	f.t.Helper()
	subj, _ := f.m.NS.WorkFilter(mesh.RoleGroup, "team")
	ch := make(chan *nats.Msg, 16)
	sub, err := f.m.NC.ChanSubscribe(subj, ch)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() []mesh.WorkItem {
		var out []mesh.WorkItem
		for {
			select {
			case m := <-ch:
				var item mesh.WorkItem
				_ = json.Unmarshal(m.Data, &item)
				out = append(out, item)
			default:
				return out
			}
		}
	}
}

func TestMemberTurnAnswersOnTheSharedChat(t *testing.T) {
	var seen []llm.Message
	var tools []string
	model := script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		seen, tools = req.Messages, toolNames(req.Tools)
		return &llm.Response{Text: "Here is my view."}, nil
	})
	f := newFixture(t, model, nil)
	nexts := f.groupNexts()
	conv := f.groupChat()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: "r1-m1", RunID: "r1", Group: "team"})
	c := f.waitApplied(conv, "r1-m1")

	pt := c.Group.Round.Pending
	if pt == nil {
		t.Fatal("no pending turn in the round, want the member's")
	}
	if pt.Result == nil {
		t.Fatalf("pending turn %+v has no result", pt)
	}
	if pt.Result.Outcome != mesh.OutcomeSuccess {
		t.Fatalf("pending turn outcome = %s, want %s", pt.Result.Outcome, mesh.OutcomeSuccess)
	}
	if pt.Result.Response != "Here is my view." {
		t.Fatalf("pending turn response = %q, want %q", pt.Result.Response, "Here is my view.")
	}
	// The round holds the chat.
	if c.Status != mesh.StatusRunning {
		t.Errorf("status = %s, want %s: the round holds the chat", c.Status, mesh.StatusRunning)
	}
	if c.Turn == nil {
		t.Error("no turn, want the round's r1: the round holds the chat")
	} else if c.Turn.ID != "r1" {
		t.Errorf("turn = %s, want the round's r1", c.Turn.ID)
	}
	if c.LastRun != nil {
		t.Errorf("last run %+v, want none while the round holds the chat", c.LastRun)
	}
	last := c.Messages[len(c.Messages)-1]
	if last.Name != "tester" || last.Content != "Here is my view." || slices.ContainsFunc(c.Messages, func(m mesh.Message) bool { return m.Role == mesh.RoleUser && m.ID != "r1" }) {
		t.Errorf("messages %+v: want the member's named answer and no new user message", c.Messages)
	}
	// The other member's answer, named in its text.
	if len(seen) != 2 || seen[1].Role != llm.RoleAssistant || seen[1].Content != "other: I looked already." {
		t.Errorf("the model saw %+v", seen)
	}
	if !slices.Contains(tools, endChatTool) {
		t.Errorf("a member is offered %v, without end_chat", tools)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		items := nexts()
		return len(items) == 1 && items[0].Kind == mesh.WorkGroupNext && items[0].TurnID == "r1-m1" && items[0].RunID == "r1"
	}, "no group_next")
	for _, ev := range f.events(conv) {
		if ev.Type == mesh.EventRunStarted || ev.Type == mesh.EventRunFinished {
			t.Errorf("a member's turn published %s: the group's round owns the run", ev.Type)
		}
		if ev.Type == mesh.EventTextMessageStart && ev.Name != "tester" {
			t.Errorf("TEXT_MESSAGE_START names %q, want tester", ev.Name)
		}
	}
}

func TestMemberTurnNoLongerPendingIsDropped(t *testing.T) {
	called := false
	f := newFixture(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		called = true
		return &llm.Response{Text: "late"}, nil
	}), nil)
	conv := f.groupChat()
	// The group skipped this member (r1-m1 is no longer pending): its turn
	// arrives late, as from a process that came back.
	if _, err := f.store.Update(t.Context(), conv, func(c *mesh.Conversation) error {
		c.Group.Round.Pending = &mesh.GroupTurn{ID: "r1-m2", Speaker: "other", RunID: "r1"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: "r1-m1", RunID: "r1", Group: "team"})
	cons, _ := f.m.JS.Consumer(t.Context(), f.m.NS.Stream(mesh.StreamWork), ConsumerName("tester"))
	meshtest.Eventually(t, 10*time.Second, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.AckFloor.Consumer >= 1 && info.NumAckPending == 0
	}, "the stale turn was not acknowledged")
	c, _ := f.store.Get(t.Context(), conv)
	if called || len(c.Messages) != 2 || c.Tree != nil {
		t.Errorf("the stale turn ran (model called %v, %d messages)", called, len(c.Messages))
	}
}

func TestMemberEndChat(t *testing.T) {
	model := script(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if len(toolResults(req)) > 0 {
			return &llm.Response{Text: "That is all."}, nil
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call(endChatTool, `{}`)}}, nil
	})
	f := newFixture(t, model, nil)
	conv := f.groupChat()
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: "r1-m1", RunID: "r1", Group: "team"})
	c := f.waitApplied(conv, "r1-m1")
	if pt := c.Group.Round.Pending; pt == nil || !pt.EndChat || pt.Result.Response != "That is all." {
		t.Errorf("pending turn %+v, want end_chat recorded", pt)
	}
}

// TestMemberTurnHandedOutTwiceRunsOnce: the group hands a member turn out
// again when it may have died before doing so; a second copy arriving
// while the first runs (a first delivery finding the turn under way) is
// dropped, so the member answers once.
func TestMemberTurnHandedOutTwiceRunsOnce(t *testing.T) {
	entered, release := make(chan struct{}, 4), make(chan struct{})
	var calls atomic.Int32
	f := newFixture(t, script(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		calls.Add(1)
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &llm.Response{Text: "Here is my view."}, nil
	}), nil)
	conv := f.groupChat()
	item := mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: "r1-m1", RunID: "r1", Group: "team"}
	f.enqueue(item)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the member turn never reached the model")
	}
	// The copy is published past the streams' deduplication, as one handed
	// out again after the duplicate window would be.
	m, err := workloop.Msg(f.m.NS, mesh.RoleAgent, "tester", item, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Del(mesh.HeaderMsgID)
	if _, err := f.m.JS.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	cons, _ := f.m.JS.Consumer(t.Context(), f.m.NS.Stream(mesh.StreamWork), ConsumerName("tester"))
	meshtest.Eventually(t, 10*time.Second, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.Delivered.Consumer >= 2 && info.NumAckPending == 1
	}, "the copy was not taken and dropped")
	close(release)
	c := f.waitApplied(conv, "r1-m1")
	if n := calls.Load(); n != 1 {
		t.Errorf("the model was called %d times, want once", n)
	}
	var answers int
	for _, msg := range c.Messages {
		if msg.Name == "tester" {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("%d answers by the member, want 1", answers)
	}
}
