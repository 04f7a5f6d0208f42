package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// This file claims a conversation for a work item, by compare-and-set, and
// keeps the claim while the run works. A turn claims the conversation
// itself (one turn at a time) and starts its tree at the root; a step item
// claims its step of the tree; a resume claims the step that waits for the
// decided approval. A member's turn of a group chat is claimed in member.go.

// Outcomes of claiming a conversation for a work item.
var (
	errAlreadyApplied = errors.New("agent: turn already applied")
	errBusy           = errors.New("agent: another turn runs in this conversation")
	errWaiting        = errors.New("agent: conversation waits for an approval")
	errStaleResume    = errors.New("agent: resume of an approval the conversation no longer waits for")
	// errDuplicate: a second copy of a turn (a queued turn's work item
	// published again by a bridge) while the first runs.
	errDuplicate = errors.New("agent: another copy of this turn holds the conversation")
	// errStepGone: the step's run is no longer this work item's to do.
	errStepGone = errors.New("agent: node run already settled or superseded")
)

// claimRefused says err is a claim's refusal: the work item is not, or no
// longer, the one to run the conversation's turn.
func claimRefused(err error) bool {
	return errors.Is(err, errAlreadyApplied) || errors.Is(err, errBusy) || errors.Is(err, errWaiting) || errors.Is(err, errDuplicate)
}

// claimItem claims the conversation as the work item's kind asks.
func (t *turn) claimItem(ctx context.Context) (*mesh.Conversation, error) {
	switch t.item.Kind {
	case mesh.WorkStep:
		return t.claimStep(ctx)
	case mesh.WorkResume:
		return t.claimResume(ctx)
	}
	return t.claim(ctx)
}

// claim marks the conversation as running this turn, waiting while another
// turn holds it; the turn is no longer queued.
func (t *turn) claim(ctx context.Context) (*mesh.Conversation, error) {
	wait := 20 * time.Millisecond
	var waitingSince time.Time
	for first := true; ; first = false {
		c, err := t.a.sessions.Get(ctx, t.item.Session)
		if errors.Is(err, mesh.ErrSessionNotFound) {
			t.log.Warn().Msg("work for an unknown conversation")
			return nil, errAlreadyApplied
		}
		if err != nil {
			return nil, err
		}
		// Once: a turn applied while this one waits is in recent_turns.
		if first {
			if applied, err := t.appliedLongAgo(ctx, c); err != nil {
				return nil, err
			} else if applied {
				t.log.Warn().Msg("a copy of a turn applied long ago, delivered again: dropped")
				return nil, errAlreadyApplied
			}
		}
		if t.deferrable(c) {
			// Claimed here, in memory: the run's own save records it
			// (settle), or keepClaim after ClaimAfter.
			if err := t.claimChange(c); err != nil {
				return nil, err
			}
			t.claimPending = true
			return c, nil
		}
		c, err = t.a.sessions.UpdateLoaded(ctx, c, t.claimChange)
		if !errors.Is(err, errBusy) {
			return c, err
		}
		if waitingSince.IsZero() {
			waitingSince = time.Now()
			t.log.Debug().Msg("conversation busy; waiting")
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(wait):
		}
		if wait < 500*time.Millisecond {
			wait *= 2
		}
	}
}

// appliedLongAgo says this delivery of a turn is a copy of one c applied
// long ago, which the claim alone cannot tell: its first delivery stopped
// after the save that applied it and before its ack (a process paused or
// killed), and came back after the ack wait, by which time a busy
// conversation may have gone past its recent turns and the newest messages
// a read holds. Only a redelivery of a turn neither queued, held nor
// recently applied asks the whole log: a first delivery is the turn's
// first claim (or a raw publish's), and the log of a long conversation is
// not read for every turn.
func (t *turn) appliedLongAgo(ctx context.Context, c *mesh.Conversation) (bool, error) {
	id := t.item.TurnID
	if t.attempt < 2 || t.item.Kind != mesh.WorkTurn || t.member() ||
		(c.Queued != nil && c.Queued.ID == id) || (c.Turn != nil && c.Turn.ID == id) || c.HasTurn(id) {
		return false, nil
	}
	// A message of it, and the turn no longer held: a turn let go of is
	// marked applied, so this one ended, its mark since dropped.
	return t.a.sessions.HoldsTurn(ctx, c, id)
}

// claimChange adds the turn's message and starts its run of the tree at the
// root.
func (t *turn) claimChange(c *mesh.Conversation) error {
	if t.member() {
		return t.claimMemberTurn(c)
	}
	if err := t.recordClaim(c, t.log); err != nil {
		return err
	}
	t.step, t.gen = t.a.root, c.Tree.Steps[rootKey].Gen
	return nil
}

// recordClaim is claimChange's change of c, which leaves t as it is: a
// deferred claim is recorded by keepClaim's goroutine while the run goes on.
func (t *turn) recordClaim(c *mesh.Conversation, log zerolog.Logger) error {
	id := t.item.TurnID
	if c.HasTurn(id) {
		return errAlreadyApplied
	}
	if c.Turn != nil && c.Turn.ID == id && c.Turn.Seq != 0 && c.Turn.Seq != t.seq {
		// Only a redelivery of the item that claimed the turn takes it
		// over: another copy (a lost item published again) finds it held,
		// and the holder's item is unacked (or the tree it started runs).
		return errDuplicate
	}
	if c.Turn != nil && c.Turn.ID != id && time.Since(lastProgress(c)) < t.a.cfg.StaleTurn {
		return errBusy
	}
	if c.Status == mesh.StatusWaitingApproval && (c.Turn == nil || c.Turn.ID != id) {
		return errWaiting
	}
	// The claim takes the queued turn up in the same save.
	c.Unqueue(id)
	now := time.Now().UTC()
	switch {
	case t.item.Regenerate:
		// The answer to the last user message is kept, marked superseded
		// (once: a redelivery finds it marked, and its own messages left).
		if _, ok := c.Supersede(id); !ok {
			log.Warn().Msg("regenerate: no user message among the newest messages; the turn runs on its message")
		}
	case !c.HasMessage(id):
		c.Messages = append(c.Messages, t.userMessage(now))
	}
	if c.Agent == "" {
		c.Agent = t.a.name
	}
	t.newTree(c, t.item.Message, []string{id})
	c.Turn = &mesh.Turn{ID: id, Kind: t.item.Kind, Node: t.a.cfg.NodeID, Attempt: t.attempt, Seq: t.seq, StartedAt: now}
	c.Status = mesh.StatusRunning
	return nil
}

// deferrable says the claim of c, as read, may wait for the run's own save,
// which then claims and settles the turn in one revision. That holds for
// the first claim of the conversation's queued turn by an item of the
// agent's own tree whose root does all the work: the bridge's queue record
// keeps every other turn out (it refuses messages while one is queued),
// and the work item's lease (unacked, in progress) keeps its redelivery
// and the bridge's lost-turn check away while this run lives. Runs that
// outlive ClaimAfter, items whose caller waits for the claim (ClaimAtOnce),
// and everything else, record their claim first.
func (t *turn) deferrable(c *mesh.Conversation) bool {
	return t.a.cfg.ClaimAfter > 0 && t.item.Kind == mesh.WorkTurn && !t.item.ClaimAtOnce && !t.member() && t.a.root.leaf() &&
		c.Status == mesh.StatusQueued && t.queuedIn(c)
}

// queuedIn says c still queues this work item's turn, neither claimed nor
// applied.
func (t *turn) queuedIn(c *mesh.Conversation) bool {
	id := t.item.TurnID
	return c.Queued != nil && c.Queued.ID == id && c.Turn == nil && !c.HasTurn(id)
}

// userMessage is the user's message the turn's work item carries.
func (t *turn) userMessage(at time.Time) mesh.Message {
	id := t.item.TurnID
	return mesh.Message{ID: id, Role: mesh.RoleUser, Content: t.item.Message, Files: t.item.Files, Metadata: t.item.Metadata, TurnID: id, CreatedAt: at}
}

// claimedIn says c holds this work item's claim: recorded, or, for a
// deferred claim, made in memory on the copy the run read.
func (t *turn) claimedIn(c *mesh.Conversation) bool {
	return c.Turn != nil && c.Turn.ID == t.item.TurnID && c.Turn.Seq == t.seq
}

// withClaim is change preceded, for a deferred claim, by the claim itself
// on a copy that does not hold it yet (a fresh read after a conflict).
func (t *turn) withClaim(change func(*mesh.Conversation) error) func(*mesh.Conversation) error {
	if !t.claimPending {
		return change
	}
	return func(c *mesh.Conversation) error {
		if !t.claimedIn(c) {
			if err := t.recordClaim(c, t.log); err != nil {
				return err
			}
		}
		return change(c)
	}
}

// unqueue takes a refused turn off the conversation's queue: its run ends
// with the refusal, and the conversation takes messages again.
func (t *turn) unqueue(ctx context.Context) error {
	_, err := t.a.sessions.Update(ctx, t.item.Session, func(c *mesh.Conversation) error {
		if !c.Unqueue(t.item.TurnID) {
			return store.ErrNoChange
		}
		c.MarkTurn(t.item.TurnID)
		return nil
	})
	if errors.Is(err, mesh.ErrSessionNotFound) {
		return nil
	}
	return err
}

// lastProgress is when the turn holding c last showed life: its claim, its
// holder's last refresh (keepClaim), or the latest start or end of a step of
// its tree, so that a long run is not taken for an abandoned turn.
func lastProgress(c *mesh.Conversation) time.Time {
	last := latest(c.Turn.StartedAt, c.Turn.AliveAt)
	if c.Tree != nil {
		for _, sr := range c.Tree.Steps {
			last = latest(last, sr.StartedAt, sr.FinishedAt)
		}
	}
	return last
}

func latest(t time.Time, more ...time.Time) time.Time {
	for _, u := range more {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// keepClaim refreshes the conversation's claim (Turn.AliveAt) every quarter
// of StaleTurn while this run works, so that however long it runs no queued
// turn takes it for abandoned; the returned func stops it. Most runs end
// long before the first refresh. A deferred claim is recorded first, once
// the run has lasted ClaimAfter: people then see the turn running.
func (t *turn) keepClaim(ctx context.Context, c *mesh.Conversation) (stop func()) {
	if c.Turn == nil {
		return func() {}
	}
	// The run goes on changing t and c: the goroutine keeps its own copies.
	id, holder, log, every := c.ID, c.Turn.ID, t.log, t.a.cfg.StaleTurn/4
	pending, claimAfter := t.claimPending, t.a.cfg.ClaimAfter
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if pending && !t.recordDeferredClaim(ctx, done, claimAfter, log) {
			return
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := t.a.sessions.Update(ctx, id, func(c *mesh.Conversation) error {
				if c.Turn == nil || c.Turn.ID != holder {
					return store.ErrNoChange
				}
				c.Turn.AliveAt = time.Now().UTC()
				return nil
			})
			if err != nil && !errors.Is(err, store.ErrNoChange) {
				log.Debug().Err(err).Msg("could not refresh the turn's claim")
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// recordDeferredClaim records the run's claim after it has lasted
// claimAfter and none of its model calls waits for the provider, unless the conversation no longer queues its turn (settled,
// cancelled or deleted meanwhile). It reports whether the run goes on.
func (t *turn) recordDeferredClaim(ctx context.Context, done <-chan struct{}, claimAfter time.Duration, log zerolog.Logger) bool {
	timer := time.NewTimer(claimAfter)
	defer timer.Stop()
	select {
	case <-done:
		return false
	case <-ctx.Done():
		return false
	case <-timer.C:
	}
	// A turn whose model call waits for its provider is not under way yet:
	// its conversation shows it queued until the provider takes the call.
	if !t.queue.idle(ctx, done) {
		return false
	}
	_, err := t.a.sessions.Update(ctx, t.item.Session, func(c *mesh.Conversation) error {
		if !t.queuedIn(c) {
			return store.ErrNoChange
		}
		return t.recordClaim(c, log)
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		// The run's own save claims the turn all the same.
		log.Debug().Err(err).Msg("could not record the turn's claim")
	}
	return true
}

// startTree starts the run of the tree this turn begins, at the root,
// unless a delivery before this one started it. runs are the AG-UI runs it
// ends.
func (t *turn) startTree(c *mesh.Conversation, message string, runs []string) {
	t.newTree(c, message, runs)
	t.step, t.gen = t.a.root, c.Tree.Steps[rootKey].Gen
}

// newTree is startTree's change of c, which leaves t as it is.
func (t *turn) newTree(c *mesh.Conversation, message string, runs []string) {
	id := t.item.TurnID
	if c.Tree == nil || c.Tree.ID != id {
		// A new run of the tree; one left by a turn taken over as stale is
		// dropped with its pending approvals.
		now := time.Now().UTC()
		root := newStepRun(t.a.root, 1, mesh.StepRunning, t.runID())
		root.Worker, root.StartedAt = t.a.cfg.NodeID, now
		c.Tree = &mesh.TreeRun{ID: id, UserMessage: message, Steps: map[string]*mesh.StepRun{rootKey: root}, Runs: runs, StartedAt: now}
		c.PendingApproval, c.PendingApprovals, c.PipelineState = nil, nil, nil
	}
}

// claimStep marks the step a step work item runs as running here. A step
// already settled, or running elsewhere on a first delivery, is not this
// item's to run: what its tree has pending is enqueued again instead, in
// case the replica that scheduled it died before it enqueued it.
func (t *turn) claimStep(ctx context.Context) (*mesh.Conversation, error) {
	t.step, t.gen = t.a.steps[t.item.Step], t.item.Gen
	if t.step == nil || !t.step.leaf() {
		return nil, fmt.Errorf("agent: node %q is not a leaf of this agent's tree (was the tree changed?)", t.item.Step)
	}
	c, err := t.a.sessions.Get(ctx, t.item.Session)
	if errors.Is(err, mesh.ErrSessionNotFound) {
		return nil, errStepGone
	}
	if err != nil {
		return nil, err
	}
	var requeue []mesh.WorkItem
	c, err = t.a.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		requeue = nil
		t.chat.reset(c)
		tr := c.Tree
		if tr == nil || tr.ID != t.item.TurnID {
			return errStepGone
		}
		sr := tr.Steps[t.item.Step]
		takeover := sr != nil && sr.Status == mesh.StepRunning && t.attempt > 1
		if sr == nil || sr.Gen != t.item.Gen || (sr.Status != mesh.StepPending && !takeover) {
			requeue = pendingWork(c)
			return errStepGone
		}
		if takeover {
			t.log.Warn().Str("worker", sr.Worker).Msg("taking over a node whose run was cut off")
		}
		sr.Status, sr.Worker, sr.StartedAt = mesh.StepRunning, t.a.cfg.NodeID, time.Now().UTC()
		t.ex.iterations = sr.Iterations
		return nil
	})
	if errors.Is(err, errStepGone) && len(requeue) > 0 {
		if err := t.enqueue(ctx, requeue); err != nil {
			return nil, err
		}
	}
	return c, err
}

// claimResume marks the step that waits for the decided approval as
// running again here.
func (t *turn) claimResume(ctx context.Context) (*mesh.Conversation, error) {
	c, err := t.a.sessions.Get(ctx, t.item.Session)
	if errors.Is(err, mesh.ErrSessionNotFound) {
		return nil, errStaleResume
	}
	if err != nil {
		return nil, err
	}
	return t.a.sessions.UpdateLoaded(ctx, c, t.claimResumeChange)
}

func (t *turn) claimResumeChange(c *mesh.Conversation) error {
	id := t.item.ApprovalID
	t.chat.reset(c)
	if c.HasTurn(t.item.TurnID) {
		t.chat.next = pendingGroupNext(c, t.item.TurnID)
		return errAlreadyApplied
	}
	tr := c.Tree
	if tr == nil {
		return errStaleResume
	}
	sr := waitingStep(tr, id, t.attempt > 1)
	if sr == nil {
		return errStaleResume
	}
	t.step, t.gen = t.a.steps[sr.Key], sr.Gen
	if t.step == nil {
		return fmt.Errorf("agent: node %q waits for approval %s but is not in this agent's tree (was the tree changed?)", sr.Key, id)
	}
	now := time.Now().UTC()
	sr.Status, sr.Worker, sr.StartedAt, sr.Resumed = mesh.StepRunning, t.a.cfg.NodeID, now, id
	sr.Approvals = slices.DeleteFunc(sr.Approvals, func(a string) bool { return a == id })
	t.ex.iterations = sr.Iterations
	c.PendingApprovals = slices.DeleteFunc(c.PendingApprovals, func(p mesh.PendingApproval) bool { return p.UUID == id })
	c.PendingApproval = nil
	if len(c.PendingApprovals) > 0 {
		first := c.PendingApprovals[0]
		c.PendingApproval = &first
	}
	if !slices.Contains(tr.Runs, t.item.TurnID) {
		tr.Runs = append(tr.Runs, t.item.TurnID)
	}
	c.PipelineState = nil
	turnID := tr.ID
	if g := c.Group; g != nil && g.Round != nil {
		turnID = g.Round.ID // the chat's round holds the conversation
		g.Round.Waiting = false
	}
	c.Turn = &mesh.Turn{ID: turnID, Kind: mesh.WorkResume, Node: t.a.cfg.NodeID, Attempt: t.attempt, Seq: t.seq, StartedAt: now}
	c.Status = mesh.StatusRunning
	return nil
}

// waitingStep is the run of the step that waits for approval id, or, on a
// redelivery, that a resume of it claimed before it was cut off.
func waitingStep(tr *mesh.TreeRun, id string, redelivered bool) *mesh.StepRun {
	var found *mesh.StepRun
	for _, sr := range tr.Steps {
		if sr.Status == mesh.StepWaiting && slices.Contains(sr.Approvals, id) {
			found = sr
		} else if sr.Status == mesh.StepRunning && sr.Resumed == id && redelivered {
			// This resume was cut off after it claimed the step.
			found = sr
		}
	}
	return found
}
