package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// One round of a chat: the answer to a user's message, from its start to
// its end, one member's turn after another.

// exec is the handling of one work item.
type exec struct {
	r       *Role
	g       *group
	item    mesh.WorkItem
	attempt int // the item's delivery
	hdr     nats.Header
	log     zerolog.Logger
}

// Errors of a user's message that the run reports.
var (
	errNotGroup = errors.New("not a group chat")
	errBusy     = errors.New("busy")
	errWaiting  = errors.New("waiting")
)

// start handles a user's message: append it, start a round, drive it.
func (x *exec) start(ctx context.Context) error {
	id := x.item.TurnID
	c, err := x.load(ctx)
	if err != nil {
		return err
	}
	if applied, err := x.appliedLongAgo(ctx, c); err != nil {
		return err
	} else if applied {
		x.log.Warn().Msg("a copy of a message answered long ago, delivered again: dropped")
		return nil
	}
	var refused error
	c, err = x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		refused = nil
		switch {
		case c.Group == nil || c.Group.Name != x.g.cfg.Name:
			refused = errNotGroup
		case c.HasTurn(id), c.Group.Round != nil && c.Group.Round.ID == id:
			return store.ErrNoChange // started by an earlier delivery
		case c.Group.Round != nil:
			refused = errBusy
		case c.Status == mesh.StatusWaitingApproval:
			refused = errWaiting
		}
		if refused != nil {
			// A refused message leaves the queue: its run ends with the
			// refusal.
			if !c.Unqueue(id) {
				return store.ErrNoChange
			}
			c.MarkTurn(id)
			return nil
		}
		// The round takes the queued message up in the same save.
		c.Unqueue(id)
		now := time.Now().UTC()
		if !c.HasMessage(id) {
			c.Messages = append(c.Messages, mesh.Message{ID: id, Role: mesh.RoleUser, Content: x.item.Message, Files: x.item.Files, Metadata: x.item.Metadata, TurnID: id, CreatedAt: now})
		}
		c.Group.Round = &mesh.GroupRound{ID: id, Runs: []string{id}, StartedAt: now}
		c.Group.Asked()
		c.Turn = &mesh.Turn{ID: id, Kind: mesh.WorkTurn, Node: x.r.cfg.NodeID, StartedAt: now}
		c.Status = mesh.StatusRunning
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		return err
	}
	switch {
	case errors.Is(refused, errNotGroup):
		return x.refuse(ctx, id, mesh.CodeConflict, fmt.Sprintf("conversation %s is not a chat of group %s", c.ID, x.g.cfg.Name))
	case errors.Is(refused, errBusy):
		return x.refuse(ctx, id, mesh.CodeConflict, fmt.Sprintf("conversation %s is answering another message; send this one when it is done", c.ID))
	case errors.Is(refused, errWaiting):
		return x.refuse(ctx, id, mesh.CodeWaitingApprove, "the conversation is waiting for an approval; decide it before sending a message")
	}
	round := c.Group.Round
	if round == nil || round.ID != id {
		return nil // done already
	}
	if err := x.publishAll(ctx,
		x.event(c.ID, id, "start:"+id, mesh.RunStarted(c.ID, id)),
		x.event(c.ID, id, "snapshot:"+id, mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: stateOf(c)}),
	); err != nil {
		return err
	}
	x.log.Info().Msg("round started")
	err = x.drive(ctx, c)
	var wait speakerWait
	if errors.As(err, &wait) {
		// The first speaker waits for its min_interval on an item of its
		// own (m0 names no turn): a redelivered start would publish
		// RUN_STARTED again once the duplicate window has passed.
		item := mesh.WorkItem{Kind: mesh.WorkGroupNext, Session: c.ID, TurnID: id + "-m0", RunID: id, Group: x.g.cfg.Name}
		return x.publishAll(ctx, x.work(mesh.RoleGroup, x.g.cfg.Name, item, x.headers(c)))
	}
	return err
}

// appliedLongAgo says this delivery of a user's message is a copy of one
// c answered long ago: its first delivery's process stopped after the
// save, before the ack, and a busy chat went past its recent turns (a
// round marks one per member turn) and the newest messages a read holds
// before the ack wait brought it back. Only such a redelivery asks the
// whole log (as the agent's claim does).
func (x *exec) appliedLongAgo(ctx context.Context, c *mesh.Conversation) (bool, error) {
	id := x.item.TurnID
	if x.attempt < 2 || (c.Queued != nil && c.Queued.ID == id) || (c.Group != nil && c.Group.Round != nil && c.Group.Round.ID == id) || c.HasTurn(id) {
		return false, nil
	}
	return x.r.sessions.HoldsTurn(ctx, c, id)
}

// load reads the conversation of the item; a message for a conversation
// that does not exist yet (sent with the nats CLI) creates it as a chat of
// the group.
func (x *exec) load(ctx context.Context) (*mesh.Conversation, error) {
	c, err := x.r.sessions.Get(ctx, x.item.Session)
	if !errors.Is(err, mesh.ErrSessionNotFound) || x.item.Kind != mesh.WorkTurn {
		return c, err
	}
	sid := x.hdr.Get(mesh.HeaderSessionID)
	if !mesh.ValidTraceID(sid) {
		sid = mesh.NewTraceID()
	}
	c = &mesh.Conversation{ID: x.item.Session, SessionID: sid, Status: mesh.StatusActive, Group: &mesh.GroupRun{Name: x.g.cfg.Name}}
	if err := x.r.sessions.Create(ctx, c); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, err
	}
	return x.r.sessions.Get(ctx, x.item.Session)
}

// refuse ends the run of a message the chat cannot take.
func (x *exec) refuse(ctx context.Context, runID, code, text string) error {
	x.log.Warn().Str("code", code).Msg(text)
	return x.publish(ctx, x.item.Session, runID, "end:"+runID, mesh.RunError(code, text))
}

// drive moves the round on: hands the pending turn out (again), settles a
// pending turn whose result is in, or picks the next speaker.
func (x *exec) drive(ctx context.Context, c *mesh.Conversation) error {
	round := c.Group.Round
	switch {
	case round == nil, round.Waiting:
		return nil
	case round.Pending != nil && round.Pending.Result != nil:
		return x.settle(ctx, c, round.Pending)
	case round.Pending != nil && !mesh.MemberStarted(c, round.Pending):
		return x.handOut(ctx, c, round.Pending)
	case round.Pending != nil:
		return nil // its member and its group_check carry it on
	}
	return x.pick(ctx, c)
}

// next handles the end of a member's turn.
func (x *exec) next(ctx context.Context) error {
	c, err := x.r.sessions.Get(ctx, x.item.Session)
	if errors.Is(err, mesh.ErrSessionNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if x.reopens(c) {
		return x.drive(ctx, c)
	}
	if g := c.Group; g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != x.item.TurnID || g.Round.Pending.Result == nil {
		return nil // the round moved on without it (stopped, skipped)
	}
	return x.settle(ctx, c, c.Group.Round.Pending)
}

// reopens reports whether the item's round may be stalled: open with no
// pending turn, or with one its member has not taken up. The handler that
// settled or skipped the item's turn may have died (or been asked to wait)
// before the next pick was saved or handed out, and this redelivery must
// carry the round on. Duplicates are harmless: the pick is a
// compare-and-set, the hand-out's messages have deterministic ids, and an
// agent drops a first delivery of a member turn already under way.
func (x *exec) reopens(c *mesh.Conversation) bool {
	g := c.Group
	if g == nil || g.Round == nil || g.Round.Waiting || !strings.HasPrefix(x.item.TurnID, g.Round.ID+"-m") {
		return false
	}
	p := g.Round.Pending
	return p == nil || p.Result == nil && !mesh.MemberStarted(c, p)
}

// settle acts on the result of pending turn p: a pause for an approval
// ends the round's runs as interrupted until the decision's resume; any
// other outcome is recorded, then the round ends on a termination rule or
// goes on with the next speaker.
func (x *exec) settle(ctx context.Context, c *mesh.Conversation, p *mesh.GroupTurn) error {
	res := p.Result
	if res.Outcome == mesh.OutcomeInterrupt {
		return x.pause(ctx, c, p)
	}
	roundID := c.Group.Round.ID
	var ending, detail string
	var applied bool
	var ended *mesh.GroupRound
	c, err := x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		ending, detail, applied, ended = "", "", false, nil
		g := c.Group
		if g == nil || g.Round == nil || g.Round.ID != roundID || g.Round.Pending == nil || g.Round.Pending.ID != p.ID || g.Round.Pending.Result == nil {
			return store.ErrNoChange
		}
		round, pt := g.Round, g.Round.Pending
		now := time.Now().UTC()
		g.Spoke(pt.Speaker, now)
		round.Turns++
		round.Pending = nil
		round.Waiting = false
		for _, run := range pt.Result.Runs {
			// The resumes that carried the turn on are the round's runs now.
			if !slices.Contains(round.Runs, run) {
				round.Runs = append(round.Runs, run)
			}
		}
		switch pt.Result.Outcome {
		case mesh.OutcomeSuccess:
			round.Response = pt.Result.Response
			switch {
			case strings.Contains(pt.Result.Response, x.g.cfg.TerminationPhrase):
				ending, detail = mesh.GroupEndPhrase, fmt.Sprintf("%s said %s", pt.Speaker, x.g.cfg.TerminationPhrase)
			case pt.EndChat:
				ending, detail = mesh.GroupEndDone, pt.Speaker+" ended the chat"
			}
		case mesh.OutcomeCancelled:
			ending, detail = mesh.GroupEndStopped, pt.Speaker+"'s turn was cancelled"
		}
		if ending == "" && round.Turns >= x.g.cfg.MaxTurns {
			ending, detail = mesh.GroupEndMaxTurns, fmt.Sprintf("%d turns", round.Turns)
		}
		if ending != "" {
			// The round ends in the same save.
			ended = endRound(c, ending, detail)
		}
		applied = true
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		return err
	}
	if !applied {
		return x.drive(ctx, c)
	}
	x.log.Info().Str("speaker", p.Speaker).Str("outcome", res.Outcome).Str("member_turn", p.ID).Msg("member turn done")
	stepEnd := x.event(c.ID, p.RunID, "stepend:"+p.ID, mesh.Event{Type: mesh.EventStepFinished, StepName: p.Speaker})
	if ended != nil {
		return x.ended(ctx, c, ended, ending, detail, stepEnd)
	}
	if err := x.publishAll(ctx, stepEnd); err != nil {
		return err
	}
	return x.pick(ctx, c)
}

// pause ends the round's runs as interrupted: the pending turn waits for
// an approval, whose resume carries the round on.
func (x *exec) pause(ctx context.Context, c *mesh.Conversation, p *mesh.GroupTurn) error {
	var runs []string
	c, err := x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		runs = nil
		g := c.Group
		if g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != p.ID || g.Round.Pending.Result == nil ||
			g.Round.Pending.Result.Outcome != mesh.OutcomeInterrupt || len(g.Round.Runs) == 0 {
			return store.ErrNoChange
		}
		runs = g.Round.Runs
		g.Round.Runs = nil
		for _, id := range runs {
			c.MarkTurn(id)
		}
		c.LastRun = &mesh.RunSummary{ID: g.Round.ID, Runs: runs, Outcome: mesh.OutcomeInterrupt, Response: g.Round.Pending.Result.Response, FinishedAt: time.Now().UTC()}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		return err
	}
	var interrupts []mesh.Interrupt
	for _, pa := range c.PendingApprovals {
		interrupts = append(interrupts, mesh.Interrupt{ID: pa.UUID, Reason: mesh.InterruptReasonToolApproval, ToolCallID: pa.ToolCallID, Message: pa.Description})
	}
	for _, id := range runs {
		ev := mesh.RunFinished(c.ID, id, mesh.Outcome{Type: mesh.OutcomeInterrupt, Interrupts: interrupts}, map[string]any{"response": p.Result.Response})
		if err := x.publish(ctx, c.ID, id, "end:"+id, ev); err != nil {
			return err
		}
	}
	if len(runs) > 0 {
		x.log.Info().Str("speaker", p.Speaker).Strs("runs", runs).Msg("round waits for an approval")
	}
	return nil
}

// check reports whether the pending turn it follows still needs checking;
// a turn whose member no live process serves is skipped, and the round
// goes on without it.
func (x *exec) check(ctx context.Context) (again bool, err error) {
	c, err := x.r.sessions.Get(ctx, x.item.Session)
	if errors.Is(err, mesh.ErrSessionNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// A check of the pending turn itself proves its hand-out happened.
	if x.reopens(c) && (c.Group.Round.Pending == nil || c.Group.Round.Pending.ID != x.item.TurnID) {
		return false, x.drive(ctx, c)
	}
	g := c.Group
	if g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != x.item.TurnID {
		return false, nil
	}
	p := g.Round.Pending
	if p.Result != nil {
		// The result is in; make sure it is acted on (its group_next may
		// have been lost with an agent).
		return false, x.settle(ctx, c, p)
	}
	if g.Round.Waiting || x.r.live.serves(p.Speaker) {
		return !g.Round.Waiting, nil
	}
	reason := "no live process serves it"
	var skipped bool
	c, err = x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		skipped = false
		g := c.Group
		if g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != p.ID || g.Round.Pending.Result != nil {
			return store.ErrNoChange
		}
		g.Round.Pending = nil
		c.Tree = nil // the member's unfinished turn, if it had begun
		skipped = true
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		return false, err
	}
	if !skipped {
		return false, nil
	}
	x.log.Warn().Str("member", p.Speaker).Str("member_turn", p.ID).Msg("member down: its turn is skipped")
	ev := mesh.Custom(mesh.CustomSpeakerSkipped, map[string]any{"member": p.Speaker, "reason": reason, "turn": p.ID})
	if err := x.publish(ctx, c.ID, p.RunID, "skip:"+p.ID, ev); err != nil {
		return false, err
	}
	if err := x.publish(ctx, c.ID, p.RunID, "stepend:"+p.ID, mesh.Event{Type: mesh.EventStepFinished, StepName: p.Speaker}); err != nil {
		return false, err
	}
	return false, x.drive(ctx, c)
}

// stateOf is the session state clients see.
func stateOf(c *mesh.Conversation) map[string]any {
	if c.State == nil {
		return map[string]any{}
	}
	return c.State
}
