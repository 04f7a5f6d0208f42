package core

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// register makes the Run a caller waits on, before its work is published:
// its end event ends it (onRunEnd), or a read finds it over.
func (c *Core) register(runID, session string) *Run {
	r := &Run{ID: runID, session: session, core: c, done: make(chan struct{})}
	c.mu.Lock()
	c.waiters[runID] = r
	if session != "" {
		c.watched[session] = r
	}
	c.mu.Unlock()
	return r
}

// Run is a run the caller waits for.
type Run struct {
	ID      string
	session string
	core    *Core
	// caller sent the run's message: a repair of its queued turn publishes
	// it again with the caller's credentials.
	caller Caller
	// queuedSeq is the events stream sequence of the run's run_queued
	// event; zero when unknown.
	queuedSeq uint64

	once sync.Once
	done chan struct{}
	last *mesh.Event
	// head is the newest save of the conversation the watch delivered
	// while the run waited (watch.go).
	head atomic.Pointer[watchedHead]
}

// Session is the conversation the run belongs to.
func (r *Run) Session() string { return r.session }

// EventsURL is where a client follows the run: the conversation's AG-UI
// events from the run's run_queued on, or all of them when that is not
// known.
func (r *Run) EventsURL() string {
	u := "/conversations/" + r.session + "/events"
	if r.queuedSeq > 0 {
		u += fmt.Sprintf("?after=%d", r.queuedSeq-1)
	}
	return u
}

// EventsAfter is the events stream sequence to follow the run after: its
// run_queued's, less one, or 0 (the start) when that is not known.
func (r *Run) EventsAfter() uint64 {
	if r.queuedSeq > 0 {
		return r.queuedSeq - 1
	}
	return 0
}

func (r *Run) end(ev *mesh.Event) {
	r.once.Do(func() {
		r.last = ev
		close(r.done)
	})
}

// lastEvent is the run's last event once the run is known to have ended:
// a wait that ends on the poll or its deadline may race with end.
func (r *Run) lastEvent() *mesh.Event {
	select {
	case <-r.done:
		return r.last
	default:
		return nil
	}
}

// Close stops waiting. It is idempotent.
func (r *Run) Close() {
	r.core.mu.Lock()
	if r.core.waiters[r.ID] == r {
		delete(r.core.waiters, r.ID)
	}
	if r.core.watched[r.session] == r {
		delete(r.core.watched, r.session)
	}
	r.core.mu.Unlock()
}

// Started waits until an agent has taken the run up (the conversation is
// running) or the run is over, and reports whether it did before ctx ended.
// A caller that answers before the run ends (an A2A non-blocking send)
// waits for this first, so that a read right after its answer sees the run
// and not the conversation as it was before the message. Call it before
// [Run.Close].
func (r *Run) Started(ctx context.Context) bool {
	if r.session == "" {
		return false
	}
	pause := 2 * time.Millisecond
	for {
		h, err := r.core.Sessions.Head(ctx, r.session)
		if err == nil && (h.Status == mesh.StatusRunning || slices.Contains(h.RecentTurns, r.ID)) {
			return true
		}
		select {
		case <-r.done:
			return true
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Outcome is how a run ended, as its caller sees it.
type Outcome struct {
	Conversation *mesh.Conversation
	// Doc is the conversation with its messages left encoded, from
	// [Run.WaitDoc]; Conversation is then its head, without messages.
	Doc *store.ConversationDoc
	// Finished is false when the wait ended before the run did.
	Finished bool
	// Event is the run's last event (RUN_FINISHED or RUN_ERROR) when known,
	// without a RUN_FINISHED's result: the conversation's last_run holds
	// it.
	Event *mesh.Event
}

// Wait waits until the run ends or ctx ends, then reads the conversation.
// When ctx ends first, Finished is false and the conversation is as it is.
func (r *Run) Wait(ctx context.Context) (*Outcome, error) { return r.wait(ctx, false) }

// WaitDoc is [Run.Wait] for a caller that passes the messages on as they
// are stored (the REST answer): they are not decoded.
func (r *Run) WaitDoc(ctx context.Context) (*Outcome, error) { return r.wait(ctx, true) }

func (r *Run) wait(ctx context.Context, doc bool) (*Outcome, error) {
	defer r.Close()
	p := &headPoll{every: r.core.cfg.PollInterval}
	timer := time.NewTimer(p.every)
	defer timer.Stop()
	for {
		select {
		case <-r.done:
			return r.outcome(context.WithoutCancel(ctx), true, doc)
		case <-ctx.Done():
			return r.outcome(context.WithoutCancel(ctx), false, doc)
		case <-timer.C:
		}
		if r.session != "" {
			h, err := p.head(ctx, r)
			if mesh.IsGone(err) {
				return nil, err // deleted or expired meanwhile: the run will not end
			}
			if err == nil && slices.Contains(h.RecentTurns, r.ID) && (h.Turn == nil || h.Turn.ID != r.ID) {
				return r.outcome(context.WithoutCancel(ctx), true, doc)
			}
			if err == nil && h.Queued != nil && h.Queued.ID == r.ID {
				r.core.checkQueued(ctx, refOfHead(h), r.caller)
			}
		}
		timer.Reset(p.next())
	}
}

// headPoll is how a waiting run looks at its conversation in case its end
// event was missed, or its queued turn lost. The sessions watch hands the
// run every save of its conversation (watch.go), so a look reads that, and
// decodes it only when it changed: a run waiting seconds on its model costs
// a timer, not a read a second. Only while the watch has handed nothing is
// the head read from the bucket, less and less often (up to 16 times the
// poll interval), in case the watch itself is behind.
type headPoll struct {
	every   time.Duration
	reads   int // reads of the bucket in a row
	seen    uint64
	decoded *store.SessionHead
}

func (p *headPoll) head(ctx context.Context, r *Run) (*store.SessionHead, error) {
	if w := r.head.Load(); w != nil {
		p.reads = 0
		if w.rev != p.seen || p.decoded == nil {
			h, err := store.HeadOf(r.session, w.data)
			if err != nil {
				return nil, err
			}
			p.seen, p.decoded = w.rev, h
		}
		return p.decoded, nil
	}
	p.reads++
	return r.core.Sessions.Head(ctx, r.session)
}

// next is the pause before the next look.
func (p *headPoll) next() time.Duration {
	return p.every << min(p.reads, 4)
}

func (r *Run) outcome(ctx context.Context, finished, doc bool) (*Outcome, error) {
	if r.session == "" {
		return &Outcome{Finished: finished, Event: r.lastEvent()}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second+store.ElectionWait(r.core.cfg.JS))
	defer cancel()
	if doc {
		if d := r.watchedDoc(ctx, finished); d != nil {
			return &Outcome{Conversation: d.Conversation, Doc: d, Finished: finished, Event: r.lastEvent()}, nil
		}
		d, err := r.core.Sessions.GetDoc(ctx, r.session)
		if err != nil {
			return nil, err
		}
		return &Outcome{Conversation: d.Conversation, Doc: d, Finished: finished, Event: r.lastEvent()}, nil
	}
	conv, err := r.core.Sessions.Get(ctx, r.session)
	if err != nil {
		return nil, err
	}
	return &Outcome{Conversation: conv, Finished: finished, Event: r.lastEvent()}, nil
}

// Result is the answer of a synchronous turn: {"response",
// "waiting_approval", "approval"}, what a client needs to show the answer
// or ask for a decision.
type Result struct {
	RunID           string                `json:"run_id"`
	Outcome         string                `json:"outcome"`
	Response        string                `json:"response"`
	WaitingApproval bool                  `json:"waiting_approval"`
	Approval        *mesh.PendingApproval `json:"approval,omitempty"`
	// Approvals lists every approval the conversation waits for: more than
	// one when parallel branches of an agent tree each paused.
	Approvals []mesh.PendingApproval `json:"approvals,omitempty"`
	ErrorCode string                 `json:"error_code,omitempty"`
	Error     string                 `json:"error,omitempty"`
	Usage     *mesh.Usage            `json:"usage,omitempty"`
	// Model is the model that answered; empty when none was called.
	Model string `json:"model,omitempty"`
	// ToolsCalled are the tools the turn called, one name per call, in
	// order (since its last pause for an approval, for a resumed turn);
	// absent when it called none. Optional in the API's schema too: a
	// bridge of an older release, beside this one during a rolling
	// upgrade, answers without it.
	ToolsCalled []string `json:"tools_called,omitempty"`
}

// ResultOf is the result of run runID in conv.
func ResultOf(conv *mesh.Conversation, runID string, last *mesh.Event) Result {
	res := Result{RunID: runID, WaitingApproval: conv.Status == mesh.StatusWaitingApproval}
	if res.WaitingApproval {
		res.Approval = conv.PendingApproval
		res.Approvals = conv.PendingApprovals
	}
	if lr := conv.LastRun; lr.Covers(runID) {
		res.Outcome, res.Response, res.ErrorCode, res.Error, res.Usage = lr.Outcome, lr.Response, lr.ErrorCode, lr.Error, lr.Usage
		res.Model, res.ToolsCalled = lr.Model, lr.ToolsCalled
	} else if last != nil && last.Type == mesh.EventRunError {
		res.Outcome, res.ErrorCode, res.Error = mesh.OutcomeError, last.Code, last.Message
	}
	return res
}
