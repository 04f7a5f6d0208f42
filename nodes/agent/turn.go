package agent

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// turn is one execution of one work item: a turn, a resume, or the run of
// one step of the agent tree. run is its whole life; the package doc says
// which file holds each part of it.
type turn struct {
	a *Role
	work
	log zerolog.Logger
	// baseLog is log without sid: sid is added once the conversation's
	// session id is known.
	baseLog zerolog.Logger
	cancel  context.CancelCauseFunc

	// queue counts the turn's model calls waiting for their provider.
	queue modelQueue

	conv *mesh.Conversation // as claimed
	// claimPending: the claim is in conv alone, not yet recorded
	// (deferrable): the run's save records it with the outcome.
	claimPending bool
	// tree is the tree run the claim found (conv.Tree.ID): kept apart
	// because a save's first try changes conv in place, and a retry must
	// still name the run it applies to (treeID).
	tree string
	ev   *bus.RunEvents
	// step is the step of the tree this work item runs, gen which run of it.
	step *step
	gen  int
	chat chat // the group chat of the conversation, if any

	ex      exchange       // what the run adds to the conversation
	offer   *offer         // the tools of the last model call
	resumed *mesh.Approval // the decided approval a resume carries on from
	end     ending         // how the run ended
	// outputProblem is what was wrong with the step's answer for its
	// output_schema, sent back with the one retry it gets.
	outputProblem error
	// fileCache holds the bytes of the files the run sent the model, by id.
	fileCache map[string][]byte
}

// work is the work item a turn runs, as it was delivered.
type work struct {
	item    mesh.WorkItem
	hdr     nats.Header // the caller's credentials and trace id
	attempt int         // the delivery, from 1
	seq     uint64      // the item's sequence in the work stream; 0 when unknown
}

// runID is the AG-UI run the work item's events belong to: the turn, the
// approval a resume carries on from, the run that scheduled a step, or the
// group chat's run a member's turn answers in.
func (w *work) runID() string {
	if (w.item.Kind == mesh.WorkStep || w.member()) && w.item.RunID != "" {
		return w.item.RunID
	}
	return w.item.TurnID
}

// member says the work item is a member's turn of a group chat.
func (w *work) member() bool { return w.item.Kind == mesh.WorkTurn && w.item.Group != "" }

// run executes the work item; nil means it is settled (applied, or nothing
// to do).
func (t *turn) run(ctx context.Context) error {
	c, err := t.claimItem(ctx)
	switch {
	case errors.Is(err, errAlreadyApplied), errors.Is(err, errStaleResume), errors.Is(err, errStepGone), errors.Is(err, errDuplicate):
		t.log.Info().Err(err).Msg("nothing to do")
		if t.chat.next != nil {
			return t.enqueueGroupNext(ctx, *t.chat.next)
		}
		return nil
	case errors.Is(err, errWaiting):
		// The bridge refuses such messages; this one raced an approval.
		if err := t.unqueue(ctx); err != nil {
			return err
		}
		t.ev = t.a.events.Run(t.item.Session, t.runID())
		t.emit(mesh.RunError(mesh.CodeWaitingApprove, "the conversation is waiting for an approval; decide it before sending a message"))
		return t.ev.Flush(ctx)
	case err != nil:
		return err
	}
	t.conv = c
	if c.Tree != nil {
		t.tree = c.Tree.ID
	}
	t.setSID(c.SessionID)
	defer t.keepClaim(ctx, c)()
	if t.step.key != rootKey || !t.step.leaf() {
		t.log = t.log.With().Str("step", t.step.key).Str("step_name", t.step.cfg.Name).Logger()
	}
	defer t.a.register(c.ID, t.cancelNames(), t.cancel)()
	t.ev = t.a.events.Run(t.item.Session, t.runID())
	t.announce()
	if !t.step.leaf() {
		return t.startComposite(ctx)
	}
	if !t.a.simple {
		t.emit(mesh.Event{Type: mesh.EventStepStarted, StepName: t.step.cfg.Name})
	}
	if t.item.Kind == mesh.WorkResume {
		if err := t.loadResume(ctx); err != nil {
			return err
		}
	}
	switch {
	case t.step.cfg.Type == config.NodeA2A:
		t.runA2A(ctx)
	case t.overBudget(ctx):
		// Refused before any model call: the outcome says which budget.
	default:
		t.loop(ctx)
		t.addSpend(context.WithoutCancel(ctx))
	}
	if errors.Is(context.Cause(ctx), errShutdown) {
		return context.Cause(ctx)
	}
	return t.settle(context.WithoutCancel(ctx), t.end.stepOutcome(t.ex.iterations))
}

// announce publishes the start of the work: a redelivery says it runs
// again, and a run of its own starts with RUN_STARTED and the state.
func (t *turn) announce() {
	if t.attempt > 1 {
		retried := map[string]any{"attempt": t.attempt, "runId": t.runID()}
		if !t.a.simple {
			retried["node"] = t.step.cfg.Name
			retried["prefixes"] = []string{t.idPrefix() + "-", t.noticePrefix() + "-"}
		}
		t.emit(mesh.Custom(mesh.CustomRunRetried, retried))
	}
	if t.item.Kind != mesh.WorkStep && !t.member() {
		t.emit(mesh.RunStarted(t.conv.ID, t.runID()))
		// Clients start every run from the whole session state; later
		// changes come as STATE_DELTA.
		t.emit(mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: stateOf(t.conv)})
	}
}

// startComposite runs the root of a tree whose root is a composite step: it
// only schedules the children.
func (t *turn) startComposite(ctx context.Context) error {
	c := t.conv
	if c.Tree.Steps[t.step.key].Status != mesh.StepRunning || len(c.Tree.Steps) > 1 {
		// A redelivered turn whose tree already started: what it
		// scheduled may not have been enqueued.
		if err := t.ev.Flush(ctx); err != nil {
			return err
		}
		return t.enqueue(ctx, pendingWork(c))
	}
	t.emit(mesh.Event{Type: mesh.EventStepStarted, StepName: t.step.cfg.Name})
	return t.settle(context.WithoutCancel(ctx), outcome{status: started})
}

// cancelNames are the run ids a cancel request may name to stop this work
// item: its run, its tree's, and the tree's other runs under way.
func (t *turn) cancelNames() []string {
	names := []string{t.runID()}
	if tr := t.conv.Tree; tr != nil {
		names = append(names, tr.ID)
		names = append(names, tr.Runs...)
	}
	return names
}

// workHeaders are the headers of the work this turn enqueues: the caller's
// credentials and the trace id follow the tree's steps.
func (t *turn) workHeaders() nats.Header {
	h := workloop.CopyCallerHeaders(t.hdr)
	if h.Get(mesh.HeaderSessionID) == "" && t.sid() != "" {
		h.Set(mesh.HeaderSessionID, t.sid())
	}
	return h
}

// sid is the conversation's session id, which its log lines and sub-agent
// calls carry: the one stored on the conversation, else the work item's
// X-Session-ID.
func (t *turn) sid() string {
	if t.conv != nil && t.conv.SessionID != "" {
		return t.conv.SessionID
	}
	return t.hdr.Get(mesh.HeaderSessionID)
}

// setSID makes every later log line of the turn carry the conversation's
// session id as sid, even when the work item did not carry it, so that
// every line of a conversation can be found by it.
func (t *turn) setSID(sid string) {
	if sid == "" || sid == t.hdr.Get(mesh.HeaderSessionID) {
		return
	}
	t.log = t.baseLog.With().Str("sid", sid).Logger()
}

// stateOf is the session state clients see: the output_key values.
func stateOf(c *mesh.Conversation) map[string]any {
	if c.State == nil {
		return map[string]any{}
	}
	return c.State
}

// emit publishes an event of the run; every event is a sign of progress
// for the liveness probe.
func (t *turn) emit(ev mesh.Event) {
	t.a.touch()
	t.ev.Emit(ev)
}
