package group

import (
	"context"
	"errors"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// The end of a round: on a termination rule, a stop, or a failure.

// end ends the round: the conversation takes messages again, and its runs
// finish.
func (x *exec) end(ctx context.Context, c *mesh.Conversation, reason, detail string) error {
	return x.endIf(ctx, c, reason, detail, nil)
}

// endIf is end, unless still says the round no longer ends.
func (x *exec) endIf(ctx context.Context, c *mesh.Conversation, reason, detail string, still func(*mesh.GroupRound) bool) error {
	roundID := c.Group.Round.ID
	var round *mesh.GroupRound
	c, err := x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		round = nil
		if g := c.Group; g == nil || g.Round == nil || g.Round.ID != roundID || still != nil && !still(g.Round) {
			return store.ErrNoChange
		}
		round = endRound(c, reason, detail)
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		return err
	}
	if round == nil {
		return nil
	}
	return x.ended(ctx, c, round, reason, detail)
}

// endRound ends c's round in a change of the conversation: it takes
// messages again, and the round's runs are recorded as done.
func endRound(c *mesh.Conversation, reason, detail string) *mesh.GroupRound {
	g := c.Group
	round := g.Round
	g.Round, g.Ended = nil, reason
	for _, id := range append([]string{round.ID}, round.Runs...) {
		c.MarkTurn(id)
	}
	// A stopped round may leave a member's paused turn: nobody will carry
	// it on.
	c.Tree, c.PendingApproval, c.PendingApprovals, c.PipelineState = nil, nil, nil, nil
	c.Turn, c.Status = nil, c.IdleStatus()
	c.LastRun = &mesh.RunSummary{ID: round.ID, Runs: round.Runs, Outcome: roundOutcome(reason, round), Response: round.Response, FinishedAt: time.Now().UTC()}
	if c.LastRun.Outcome == mesh.OutcomeError {
		c.LastRun.ErrorCode, c.LastRun.Error = mesh.CodeNoSpeaker, detail
	}
	return round
}

// ended publishes the end of round, after more (events that come first).
func (x *exec) ended(ctx context.Context, c *mesh.Conversation, round *mesh.GroupRound, reason, detail string, more ...outMsg) error {
	outcome := roundOutcome(reason, round)
	ev := mesh.Custom(mesh.CustomGroupEnded, map[string]any{"reason": reason, "detail": detail, "turns": round.Turns})
	msgs := append(more, x.event(c.ID, round.Run(), "ended:"+round.ID, ev))
	for _, id := range round.Runs {
		ev := mesh.RunFinished(c.ID, id, mesh.Outcome{Type: outcome}, map[string]any{"response": round.Response, "ended": reason})
		if outcome == mesh.OutcomeError {
			ev = mesh.RunError(mesh.CodeNoSpeaker, "the group chat could not go on: "+detail)
		}
		msgs = append(msgs, x.event(c.ID, id, "end:"+id, ev))
	}
	if err := x.publishAll(ctx, msgs...); err != nil {
		return err
	}
	x.log.Info().Str("reason", reason).Str("detail", detail).Int("turns", round.Turns).Msg("round ended")
	telemetry.GroupRound(x.g.cfg.Name, reason)
	return nil
}

// roundOutcome is the AG-UI outcome of a round that ended for reason.
func roundOutcome(reason string, round *mesh.GroupRound) string {
	switch {
	case reason == mesh.GroupEndStopped:
		return mesh.OutcomeCancelled
	case reason == mesh.GroupEndNoSpeaker && round.Turns == 0, reason == mesh.GroupEndMemberError:
		return mesh.OutcomeError
	}
	return mesh.OutcomeSuccess
}

// giveUp ends the round of an item that failed on every delivery.
func (x *exec) giveUp(ctx context.Context, cause error) {
	c, err := x.r.sessions.Get(ctx, x.item.Session)
	if err != nil || c.Group == nil || c.Group.Round == nil {
		return
	}
	if err := x.end(ctx, c, mesh.GroupEndMemberError, cause.Error()); err != nil {
		x.log.Error().Err(err).Msg("end the round")
	}
}
