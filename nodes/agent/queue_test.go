package agent

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// queueTurn records turn id as conv's queued turn, as the bridge does
// before it publishes the work item.
func (f *fixture) queueTurn(conv, id, text string) {
	f.t.Helper()
	if _, err := f.store.Update(f.t.Context(), conv, func(c *mesh.Conversation) error {
		c.Queued = &mesh.QueuedTurn{ID: id, Message: text, At: time.Now().UTC()}
		c.Status = mesh.StatusQueued
		return nil
	}); err != nil {
		f.t.Fatal(err)
	}
}

// blockedModel answers "ok" once release is closed, counting its calls in
// calls (if not nil).
func blockedModel(release <-chan struct{}, calls *atomic.Int32) llm.Provider {
	return script(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		if calls != nil {
			calls.Add(1)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &llm.Response{Text: "ok"}, nil
	})
}

// revisions are the stored revisions of conv, oldest first.
func (f *fixture) revisions(conv string) []mesh.Conversation {
	f.t.Helper()
	hist, err := f.m.Sessions.History(f.t.Context(), conv)
	if err != nil {
		f.t.Fatal(err)
	}
	revs := make([]mesh.Conversation, len(hist))
	for i, e := range hist {
		if err := json.Unmarshal(e.Value(), &revs[i]); err != nil {
			f.t.Fatal(err)
		}
		revs[i].Revision = e.Revision()
	}
	return revs
}

// The claim takes a queued turn up in the save that claims: no revision of
// the conversation is without both the queued record and the claim. A turn
// whose claim is deferred (ClaimAfter) is claimed by the save that settles
// it: the revision after the record holds the whole turn, unless its work
// item asks for the claim at once (a caller that answers when it is made).
func TestClaimTakesTheQueuedTurnUpInOneSave(t *testing.T) {
	for _, tc := range []struct {
		name        string
		claimAfter  time.Duration
		claimAtOnce bool
	}{{"recorded at once", -1, false}, {"deferred", time.Minute, false}, {"asked for at once", time.Minute, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureWith(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
				return &llm.Response{Text: "ok"}, nil
			}), nil, func(c *Config) { c.ClaimAfter = tc.claimAfter })
			deferred := tc.claimAfter > 0 && !tc.claimAtOnce
			conv := f.conversation()
			id := mesh.NewID()
			f.queueTurn(conv, id, "hello")
			f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "hello", ClaimAtOnce: tc.claimAtOnce})
			c := f.waitApplied(conv, id)
			if c.Queued != nil || c.Status != mesh.StatusActive {
				t.Fatalf("after the turn: status %s, queued %+v; want active, nothing queued", c.Status, c.Queued)
			}
			var queued, claimed bool
			after := 0 // revisions after the record's
			for _, rev := range f.revisions(conv) {
				switch {
				case rev.Queued != nil:
					queued = true
				case queued && !claimed && deferred:
					// The first revision without the record is the turn.
					claimed = true
					// Taken off and settled in one revision.
					if !rev.HasTurn(id) {
						t.Errorf("revision %d took the queued turn off without recording turn %s", rev.Revision, id)
					}
					if rev.Turn != nil {
						t.Errorf("revision %d took the queued turn off with a turn open: %+v", rev.Revision, rev.Turn)
					}
					if rev.Status != mesh.StatusActive {
						t.Errorf("revision %d took the queued turn off with status %s, want %s", rev.Revision, rev.Status, mesh.StatusActive)
					}
					if rev.MessageCount != 2 {
						t.Errorf("revision %d took the queued turn off with %d messages, want 2", rev.Revision, rev.MessageCount)
					}
				case queued && !claimed:
					// The first revision without the record is the claim.
					claimed = true
					// Taken off and claimed in one revision.
					if rev.Turn == nil {
						t.Errorf("revision %d took the queued turn off without claiming it: no turn", rev.Revision)
					} else {
						if rev.Turn.ID != id {
							t.Errorf("revision %d took the queued turn off claiming turn %s, want %s", rev.Revision, rev.Turn.ID, id)
						}
						if rev.Turn.Seq == 0 {
							t.Errorf("revision %d claimed the turn without a sequence: %+v", rev.Revision, rev.Turn)
						}
					}
					if rev.Status != mesh.StatusRunning {
						t.Errorf("revision %d took the queued turn off with status %s, want %s", rev.Revision, rev.Status, mesh.StatusRunning)
					}
				}
				if queued && rev.Queued == nil {
					after++
				}
			}
			if !queued || !claimed {
				t.Errorf("history: queued %v, claimed %v; want both", queued, claimed)
			}
			want := 2 // the claim, the outcome
			if deferred {
				want = 1
			}
			if after != want {
				t.Errorf("%d revisions after the queued one, want %d", after, want)
			}
			if got := roles(c); got != "user,assistant" {
				t.Errorf("roles = %s, want the turn once", got)
			}
		})
	}
}

// A turn that runs longer than ClaimAfter records its claim while it runs:
// people see it running.
func TestLongTurnRecordsItsClaim(t *testing.T) {
	release := make(chan struct{})
	f := newFixtureWith(t, blockedModel(release, nil), nil, func(c *Config) { c.ClaimAfter = 50 * time.Millisecond })
	conv := f.conversation()
	id := mesh.NewID()
	f.queueTurn(conv, id, "slow")
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "slow"})
	meshtest.Eventually(t, 5*time.Second, func() bool {
		c, err := f.store.Get(t.Context(), conv)
		return err == nil && c.Status == mesh.StatusRunning && c.Turn != nil && c.Turn.ID == id && c.Queued == nil && roles(c) == "user"
	}, "the long turn's claim was never recorded")
	close(release)
	c := f.waitApplied(conv, id)
	if got := roles(c); got != "user,assistant" || c.Status != mesh.StatusActive {
		t.Errorf("roles = %s, status %s; want user,assistant, active", got, c.Status)
	}
}

// A queued turn cancelled by the bridge while an agent runs it with its
// claim deferred ends as the bridge recorded it: the run's outcome is
// dropped, and the work item settled.
func TestDeferredTurnCancelledWhileQueued(t *testing.T) {
	started := make(chan struct{}, 1)
	f := newFixtureWith(t, script(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}), nil, func(c *Config) { c.ClaimAfter = time.Minute })
	conv := f.conversation()
	id := mesh.NewID()
	f.queueTurn(conv, id, "cancel me")
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "cancel me"})
	<-started
	// As the bridge's Cancel does it for a queued turn: the record, then
	// the request to stop.
	if _, err := f.store.Update(t.Context(), conv, func(c *mesh.Conversation) error {
		if !c.Unqueue(id) {
			t.Errorf("the turn was not queued any more while it ran: status %s, turn %+v", c.Status, c.Turn)
		}
		c.MarkTurn(id)
		c.LastRun = &mesh.RunSummary{ID: id, Outcome: mesh.OutcomeCancelled, FinishedAt: time.Now().UTC()}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	subj, _ := f.m.NS.SessionCancel(conv)
	body, _ := json.Marshal(mesh.CancelRequest{RunID: id})
	if err := f.m.NC.Publish(subj, body); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool {
		info, err := f.m.Work.Info(t.Context())
		return err == nil && info.State.Msgs == 0
	}, "the cancelled turn's work item was never settled")
	c, err := f.store.Get(t.Context(), conv)
	if err != nil {
		t.Fatal(err)
	}
	// The bridge's record alone.
	if got := roles(c); got != "" {
		t.Errorf("after the cancel: roles %q, want no message", got)
	}
	if c.Turn != nil {
		t.Errorf("after the cancel: a turn is open: %+v", c.Turn)
	}
	if c.Status != mesh.StatusActive {
		t.Errorf("after the cancel: status %s, want %s", c.Status, mesh.StatusActive)
	}
	if c.LastRun == nil {
		t.Error("after the cancel: no last run, want the bridge's cancelled record")
	} else if c.LastRun.Outcome != mesh.OutcomeCancelled {
		t.Errorf("after the cancel: last run outcome %s, want %s", c.LastRun.Outcome, mesh.OutcomeCancelled)
	}
	for _, ev := range f.events(conv) {
		if ev.Type == mesh.EventRunFinished || ev.Type == mesh.EventRunError {
			t.Errorf("the agent ended a run the bridge cancelled: %s", ev.Type)
		}
	}
}

// A second copy of a turn (its lost work item published again while the
// first copy was only slow) never runs the turn twice: while the first
// runs, the copy is dropped. That holds for a turn taken up from the
// conversation's queue once its claim is recorded (ClaimAfter).
func TestCopyOfARunningTurnIsDropped(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(map[bool]string{false: "claimed", true: "queued"}[queued], func(t *testing.T) {
			release := make(chan struct{})
			var calls atomic.Int32
			f := newFixtureWith(t, blockedModel(release, &calls), nil, func(c *Config) { c.ClaimAfter = 50 * time.Millisecond })
			conv := f.conversation()
			id := mesh.NewID()
			item := mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "once"}
			if queued {
				f.queueTurn(conv, id, "once")
			}
			f.enqueue(item)
			meshtest.Eventually(t, 5*time.Second, func() bool {
				c, err := f.store.Get(t.Context(), conv)
				return calls.Load() == 1 && err == nil && c.Turn != nil && c.Turn.ID == id
			}, "the turn never called its model with its claim recorded")
			// The copy as a bridge publishes it again: a new Nats-Msg-Id.
			cp, err := workloop.Msg(f.m.NS, mesh.RoleAgent, "tester", item, nil)
			if err != nil {
				t.Fatal(err)
			}
			cp.Header.Set(mesh.HeaderMsgID, "turn:"+id+":r1")
			if _, err := f.m.JS.PublishMsg(t.Context(), cp); err != nil {
				t.Fatal(err)
			}
			// The copy is settled (acknowledged) while the first still runs.
			meshtest.Eventually(t, 5*time.Second, func() bool {
				info, err := f.m.Work.Info(t.Context())
				return err == nil && info.State.Msgs == 1
			}, "the copy was not settled while the first copy ran")
			close(release)
			c := f.waitApplied(conv, id)
			if n := calls.Load(); n != 1 {
				t.Errorf("the model was called %d times for one turn, want 1", n)
			}
			if got := roles(c); got != "user,assistant" {
				t.Errorf("roles = %s, want the turn once", got)
			}
		})
	}
}

// A turn from the queue whose claim was never recorded (every save of its
// deferred claim and outcome failed) and that is given up keeps the user's
// message beside the failure notice.
func TestDeferredTurnGivenUpKeepsItsMessage(t *testing.T) {
	f := newFixtureWith(t, script(func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "ok"}, nil
	}), func(c *config.Config) { c.Mesh.MaxDeliver = 1 }, func(c *Config) {
		c.ClaimAfter = time.Minute
		c.SaveRetry = []time.Duration{}
		c.saveFault = func(int) error { return errors.New("injected: the server lost its disk") }
	})
	conv := f.conversation()
	id := mesh.NewID()
	f.queueTurn(conv, id, "keep me")
	f.enqueue(mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv, TurnID: id, Message: "keep me"})
	c := f.waitApplied(conv, id)
	// Given up.
	if c.Queued != nil {
		t.Fatalf("after the turn: still queued: %+v", c.Queued)
	}
	if c.Turn != nil {
		t.Fatalf("after the turn: a turn is open: %+v", c.Turn)
	}
	if c.LastRun == nil {
		t.Fatal("after the turn: no last run, want it given up")
	}
	if c.LastRun.ErrorCode != mesh.CodeMaxDeliveries {
		t.Fatalf("after the turn: last run error code %q, want %q", c.LastRun.ErrorCode, mesh.CodeMaxDeliveries)
	}
	if got := roles(c); got != "user,assistant(notice)" || c.Messages[0].ID != id || c.Messages[0].Content != "keep me" {
		t.Errorf("messages %s (%+v); want the user's message, then the notice", got, c.Messages)
	}
}
