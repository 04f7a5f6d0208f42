package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// This file ends a run. settle applies the step's outcome to the tree (see
// tree.go) by compare-and-set and publishes what that decided: the steps
// that began and ended, state changes, the next steps' work items, and the
// end of the AG-UI runs when the tree completed, failed or waits. fail does
// the same for a work item given up after its last delivery.

// ending is how the run of a step ended, as the model loop (or an a2a step)
// leaves it.
type ending struct {
	outcome string // mesh.OutcomeSuccess, OutcomeInterrupt, OutcomeCancelled, OutcomeError
	errCode string
	errText string
	// resetAt is when a rate-limited provider said to try again.
	resetAt  time.Time
	response string         // the answer, or the last notice
	paused   *mesh.Approval // the approval this run waits for
	exitLoop bool           // the step called exit_loop
	endChat  bool           // the member called end_chat
	rejected string         // the call of a tree step a person rejected
}

// stepOutcome is how the step's run ended, to be applied to the tree;
// iterations are the model calls it made.
func (e *ending) stepOutcome(iterations int) outcome {
	switch e.outcome {
	case mesh.OutcomeInterrupt:
		return outcome{status: mesh.StepWaiting, paused: []*mesh.Approval{e.paused}, iterations: iterations}
	case mesh.OutcomeError:
		return outcome{status: mesh.StepFailed, errCode: e.errCode, errText: e.errText, resetAt: e.resetAt}
	case mesh.OutcomeCancelled:
		text := e.errText
		if text == "" {
			text = "the turn was cancelled"
		}
		return outcome{status: mesh.StepCancelled, errCode: mesh.CodeCancelled, errText: text}
	}
	return outcome{status: mesh.StepDone, output: e.response, exitLoop: e.exitLoop}
}

// cancelled ends the run as cancelled, unless the role is shutting down:
// then the work item is handed back and runs again elsewhere.
func (t *turn) cancelled(ctx context.Context) {
	if errors.Is(context.Cause(ctx), errShutdown) {
		return
	}
	t.end.outcome = mesh.OutcomeCancelled
	t.notice("The turn was cancelled.")
}

// stopRejected ends a tree step whose call a person rejected: the
// rejection cancels the whole tree, so that no later step carries on with
// a plan the approver refused. The tree ends as cancelled (the
// conversation is active again) and the notice says what stopped.
func (t *turn) stopRejected() {
	root := t.a.steps[rootKey].cfg.Name
	t.end.outcome = mesh.OutcomeCancelled
	t.end.errText = fmt.Sprintf("%s was rejected; %s was cancelled", t.end.rejected, root)
	t.notice(fmt.Sprintf("The call %s was rejected, so %s stopped at step %s: the steps after it did not run.", t.end.rejected, root, t.step.cfg.Name))
}

// settle applies the step's outcome to the tree by compare-and-set, then
// publishes what it decided: steps, state changes, the end of runs, and the
// work to do next.
func (t *turn) settle(ctx context.Context, o outcome) error {
	var p plan
	_, err := t.save(ctx, t.conv, t.withClaim(func(c *mesh.Conversation) error {
		return t.apply(c, t.step.key, t.gen, o, &p)
	}))
	if t.claimPending && claimRefused(err) {
		// A deferred claim lost its turn to whoever recorded theirs first:
		// the bridge cancelled it while queued, or a copy claimed it.
		t.log.Info().Err(err).Msg("the turn was settled without this run; its outcome is dropped")
		return t.ev.Flush(ctx)
	}
	if mesh.IsGone(err) {
		// Deleted (or expired) while it ran: the outcome applies to
		// nothing; the run ends so that its followers stop.
		t.log.Info().Err(err).Msg("conversation gone; the run's outcome is dropped")
		t.ev.EmitAs(t.runID(), "end:"+t.runID(), mesh.RunError(mesh.ErrorKind(err), err.Error()))
		return t.ev.Flush(ctx)
	}
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		return err
	}
	if p.dropped {
		t.log.Info().Msg("the tree moved on without this node's outcome")
		return t.ev.Flush(ctx)
	}
	t.publishPlan(&p)
	// With nothing to enqueue first, the end of the runs goes with the
	// run's other events: one wait for the stream's acks.
	joined := len(p.schedule) == 0 && p.groupNext == nil
	if joined {
		for _, id := range p.endRuns {
			t.ev.EmitAs(id, "end:"+id, t.endEvent(&p, id))
		}
	}
	if err := t.ev.Flush(ctx); err != nil {
		return err
	}
	if err := t.enqueue(ctx, p.schedule); err != nil {
		return err
	}
	if p.groupNext != nil {
		// A member's turn ended: the group role ends the runs when the
		// chat's round ends.
		if err := t.enqueueGroupNext(ctx, *p.groupNext); err != nil {
			return err
		}
		if p.runOutcome == mesh.OutcomeError || p.runOutcome == mesh.OutcomeCancelled {
			t.a.cancelRuns(t.conv.ID, p.treeRunID)
		}
		t.log.Info().Str("outcome", p.runOutcome).Str("group", p.group).Int("iterations", t.ex.iterations).Msg("member turn done")
		return nil
	}
	return t.endRuns(ctx, &p, joined)
}

// publishPlan emits the events of an applied outcome: the steps it began,
// the state it changed, its notices and the steps it ended.
func (t *turn) publishPlan(p *plan) {
	for _, name := range p.stepsBegun {
		t.emit(mesh.Event{Type: mesh.EventStepStarted, StepName: name})
	}
	if p.snapshot != nil {
		t.emit(mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: p.snapshot})
	}
	if len(p.delta) > 0 {
		t.emit(mesh.Event{Type: mesh.EventStateDelta, Delta: p.delta})
	}
	for _, n := range p.notices {
		t.streamNotice(n.ID, n.Content)
	}
	if !t.a.simple {
		for _, name := range p.stepsEnded {
			t.emit(mesh.Event{Type: mesh.EventStepFinished, StepName: name})
		}
	}
}

// endRuns publishes the end of the runs the plan ends (RUN_FINISHED, or
// RUN_ERROR), unless they were published with the run's events (published),
// and stops what still runs of a tree that failed.
func (t *turn) endRuns(ctx context.Context, p *plan, published bool) error {
	for _, id := range p.endRuns {
		if !published {
			if _, err := t.a.events.Publish(ctx, t.conv.ID, id, "end:"+id, t.endEvent(p, id)); err != nil {
				return err
			}
		}
		telemetry.TurnFinished(t.a.name, p.runOutcome)
	}
	if p.runOutcome == mesh.OutcomeError || p.runOutcome == mesh.OutcomeCancelled {
		// Branches still running elsewhere have nothing left to do.
		t.a.cancelRuns(t.conv.ID, p.treeRunID)
	}
	if len(p.endRuns) > 0 {
		t.log.Info().Str("outcome", p.runOutcome).Strs("runs", p.endRuns).Int("iterations", t.ex.iterations).Msg("turn done")
	}
	return nil
}

// endEvent is the event that ends run id as the plan decided.
func (t *turn) endEvent(p *plan, id string) mesh.Event {
	switch p.runOutcome {
	case mesh.OutcomeError:
		ev := mesh.RunError(p.errCode, p.errText)
		if !p.resetAt.IsZero() {
			// When to try again, as the dialects' and the limits' refusals
			// say it: whole seconds, and the time itself.
			wait := max(1, int(math.Ceil(time.Until(p.resetAt).Seconds())))
			ev.Metadata = map[string]any{"retryAfter": wait, "resetAt": p.resetAt.UTC().Format(time.RFC3339)}
		}
		return ev
	case mesh.OutcomeInterrupt:
		ev := mesh.RunFinished(t.conv.ID, id, mesh.Outcome{Type: p.runOutcome}, runResult(p))
		ev.Outcome.Interrupts = p.interrupts
		return ev
	}
	return mesh.RunFinished(t.conv.ID, id, mesh.Outcome{Type: p.runOutcome}, runResult(p))
}

// runResult is RUN_FINISHED's result: the answer, the run's usage and the
// conversation's since it began. Usage goes here rather than into the
// state, which is the user's (clients send it back with their next run),
// and costs no event of its own.
func runResult(p *plan) map[string]any {
	r := map[string]any{"response": p.response}
	if p.usage != nil {
		r["usage"] = p.usage
	}
	if p.convUsage != nil {
		r["conversationUsage"] = p.convUsage
	}
	return r
}

// cancelRuns asks every replica to stop what still runs of a tree that
// failed or was cancelled.
func (a *Role) cancelRuns(session, treeID string) {
	subj, err := a.ns.SessionCancel(session)
	if err != nil || treeID == "" {
		return
	}
	body, _ := json.Marshal(mesh.CancelRequest{RunID: treeID})
	if err := a.cfg.NC.Publish(subj, body); err != nil {
		a.log.Warn().Err(err).Str("session", session).Msg("cancel the rest of a failed tree")
	}
}

// failure is what recording a given-up work item decided: the runs that
// end with an error, or, for a member's turn, the group_next that tells the
// group instead.
type failure struct {
	runs      []string
	groupNext *mesh.WorkItem
}

// fail records a work item given up after its last delivery, so the
// conversation does not stay running forever: the runs of its tree end
// with an error. An error says the failure was not recorded: the item is
// to come back and be given up again.
func (t *turn) fail(ctx context.Context, code, text string) error {
	f := failure{runs: []string{t.runID()}}
	_, err := t.a.sessions.Update(ctx, t.item.Session, func(c *mesh.Conversation) error {
		return t.failChange(c, code, text, &f)
	})
	if err != nil && !errors.Is(err, mesh.ErrSessionNotFound) && !errors.Is(err, store.ErrNoChange) {
		t.log.Error().Err(err).Msg("record failed turn")
		return err
	}
	if f.groupNext != nil {
		if err := t.enqueueGroupNext(ctx, *f.groupNext); err != nil {
			t.log.Error().Err(err).Msg("tell the group a member's turn failed")
			return err
		}
		return nil
	}
	for _, id := range f.runs {
		if _, err := t.a.events.Publish(ctx, t.item.Session, id, "end:"+id, mesh.RunError(code, text)); err != nil {
			t.log.Error().Err(err).Str("run", id).Msg("publish the end of a failed run")
			return err
		}
		telemetry.TurnFinished(t.a.name, mesh.OutcomeError)
	}
	return nil
}

// failChange is the change fail applies to c, deciding f.
func (t *turn) failChange(c *mesh.Conversation, code, text string, f *failure) error {
	*f = failure{runs: []string{t.runID()}}
	tr := c.Tree
	if tr != nil {
		if pt := memberTurn(c, tr.ID); pt != nil && (tr.ID == t.item.TurnID || slices.Contains(tr.Runs, t.item.TurnID)) {
			// A member's turn of a group chat: the group carries on.
			f.groupNext = failMemberTurn(c, pt, t.item.TurnID, code, text)
			return nil
		}
	}
	ours := tr != nil && (tr.ID == t.item.TurnID || slices.Contains(tr.Runs, t.item.TurnID) || slices.Contains(tr.Runs, t.runID()))
	if !ours {
		if c.HasTurn(t.runID()) {
			return store.ErrNoChange
		}
		// A turn given up before its claim was recorded (a deferred one, or
		// a claim that never saved) leaves the queue too, keeping the
		// user's message it carried.
		if c.Unqueue(t.runID()) && t.item.Kind == mesh.WorkTurn && !t.member() && !t.item.Regenerate && !c.HasMessage(t.runID()) {
			c.Messages = append(c.Messages, t.userMessage(time.Now().UTC()))
		}
		if c.Turn != nil && c.Turn.ID == t.runID() {
			c.Turn = nil
			c.Status = c.IdleStatus()
		}
	} else {
		for _, id := range tr.Runs {
			if !slices.Contains(f.runs, id) {
				f.runs = append(f.runs, id)
			}
		}
		c.Tree, c.Turn, c.Status = nil, nil, c.IdleStatus()
		c.PendingApproval, c.PendingApprovals, c.PipelineState = nil, nil, nil
	}
	for _, id := range f.runs {
		c.MarkTurn(id)
	}
	c.Messages = append(c.Messages, mesh.Message{ID: t.runID() + "-failed", Role: mesh.RoleAssistant, Content: text, Notice: true, TurnID: t.runID(), CreatedAt: time.Now().UTC()})
	c.LastRun = &mesh.RunSummary{ID: t.runID(), Runs: f.runs, Outcome: mesh.OutcomeError, ErrorCode: code, Error: text, FinishedAt: time.Now().UTC()}
	return nil
}
