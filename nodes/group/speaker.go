package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// The next speaker of a round: picked by the group's selector, then handed
// its turn.

// pick selects the next speaker and makes its turn the pending one.
func (x *exec) pick(ctx context.Context, c *mesh.Conversation) error {
	// The choice is made from c: it holds only while the round has had no
	// other pick since (its Seq). A duplicate handler's c may be older than
	// a pick, and that speaker's whole turn, made meanwhile.
	roundID, seq := c.Group.Round.ID, c.Group.Round.Seq
	started := time.Now()
	choice, err := x.g.sel.Next(ctx, x.selection(ctx, c))
	if err != nil {
		return err
	}
	telemetry.SpeakerSelected(x.g.cfg.Name, choice.Strategy, time.Since(started))
	if choice.Speaker == "" {
		// Only while nothing is pending: a duplicate handler's pick may have
		// found a speaker meanwhile.
		return x.endIf(ctx, c, mesh.GroupEndNoSpeaker, choice.Reason, func(r *mesh.GroupRound) bool { return r.Seq == seq && r.Pending == nil && !r.Waiting })
	}
	if choice.Wait > 0 {
		// min_interval: this speaker spoke too recently.
		x.log.Debug().Str("speaker", choice.Speaker).Dur("wait", choice.Wait).Msg("speaker waits for its min_interval")
		return speakerWait{choice.Wait}
	}
	var pending *mesh.GroupTurn
	c, err = x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		pending = nil
		g := c.Group
		if g == nil || g.Round == nil || g.Round.ID != roundID || g.Round.Seq != seq || g.Round.Pending != nil || g.Round.Waiting {
			return store.ErrNoChange // moved on meanwhile: chosen again below if need be
		}
		g.Round.Seq++
		pending = &mesh.GroupTurn{
			ID: fmt.Sprintf("%s-m%d", roundID, g.Round.Seq), Speaker: choice.Speaker, Strategy: choice.Strategy, Reason: choice.Reason,
			RunID: g.Round.Run(), StartedAt: time.Now().UTC(),
		}
		g.Round.Pending = pending
		c.Turn = &mesh.Turn{ID: roundID, Kind: mesh.WorkTurn, Node: x.r.cfg.NodeID, StartedAt: pending.StartedAt}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		return err
	}
	if pending == nil {
		if c.Group != nil && c.Group.Round != nil && c.Group.Round.ID == roundID {
			return x.drive(ctx, c)
		}
		return nil
	}
	var skips []outMsg
	for i, s := range choice.Skipped {
		ev := mesh.Custom(mesh.CustomSpeakerSkipped, map[string]any{"member": s.Member, "reason": s.Reason, "turn": pending.ID})
		skips = append(skips, x.event(c.ID, pending.RunID, fmt.Sprintf("skip:%s:%d", pending.ID, i), ev))
	}
	if err := x.publishAll(ctx, skips...); err != nil {
		return err
	}
	x.log.Info().Str("speaker", pending.Speaker).Str("strategy", pending.Strategy).Str("reason", pending.Reason).Str("member_turn", pending.ID).Msg("speaker selected")
	return x.handOut(ctx, c, pending)
}

// handOut publishes the selection of the pending turn and gives its member
// the turn, with a check that follows it; all deduplicated, so that a
// redelivery hands it out again safely.
func (x *exec) handOut(ctx context.Context, c *mesh.Conversation, p *mesh.GroupTurn) error {
	sel := mesh.Custom(mesh.CustomSpeakerSelected, map[string]any{"speaker": p.Speaker, "strategy": p.Strategy, "reason": p.Reason, "turn": p.ID})
	// The events are stored before the member gets its turn, so that they
	// come before the member's own in the stream.
	if err := x.publishAll(ctx,
		x.event(c.ID, p.RunID, "selected:"+p.ID, sel),
		x.event(c.ID, p.RunID, "step:"+p.ID, mesh.Event{Type: mesh.EventStepStarted, StepName: p.Speaker}),
	); err != nil {
		return err
	}
	turn := mesh.WorkItem{Kind: mesh.WorkTurn, Session: c.ID, TurnID: p.ID, RunID: p.RunID, Group: x.g.cfg.Name}
	check := mesh.WorkItem{Kind: mesh.WorkGroupCheck, Session: c.ID, TurnID: p.ID, Group: x.g.cfg.Name}
	return x.publishAll(ctx,
		x.work(mesh.RoleAgent, p.Speaker, turn, x.headers(c)),
		x.work(mesh.RoleGroup, x.g.cfg.Name, check, x.headers(c)),
	)
}

// headers are the caller's credentials and the conversation's trace id, for
// the work the group hands out.
func (x *exec) headers(c *mesh.Conversation) nats.Header {
	h := workloop.CopyCallerHeaders(x.hdr)
	if h.Get(mesh.HeaderSessionID) == "" && c.SessionID != "" {
		h.Set(mesh.HeaderSessionID, c.SessionID)
	}
	return h
}

// selection is what the selector reads of the chat.
func (x *exec) selection(ctx context.Context, c *mesh.Conversation) Turn {
	g := c.Group
	t := Turn{Recent: g.Recent, LastSpoke: g.LastSpoke, Now: time.Now().UTC()}
	down := func() map[string]string {
		out := map[string]string{}
		for _, p := range x.g.cfg.Participants {
			if !x.r.live.serves(p.Agent) {
				out[p.Agent] = "no live process serves it"
			}
		}
		return out
	}
	if t.Down = down(); len(t.Down) == len(x.g.cfg.Participants) {
		if err := x.r.live.reload(ctx); err != nil {
			x.log.Warn().Err(err).Msg("rereading the nodes bucket")
		}
		t.Down = down()
	}
	for _, m := range c.Messages {
		if m.Notice || m.Content == "" || len(m.ToolCalls) > 0 {
			continue
		}
		switch m.Role {
		case mesh.RoleUser:
			t.History = append(t.History, Message{Role: "user", Content: m.Content})
		case mesh.RoleAssistant:
			t.History = append(t.History, Message{Role: "assistant", Name: m.Name, Content: m.Content})
		}
	}
	if n := len(t.History); n > 20 {
		t.History = t.History[n-20:]
	}
	if n := len(t.History); n > 0 {
		t.Message = t.History[n-1].Content
	}
	if n := len(g.Recent); n > 0 {
		t.Tools = lastTurnTools(c.Messages, g.Recent[n-1])
	}
	return t
}

// lastTurnTools are the tools speaker called in the last turn of msgs, in
// order: the calls of its messages after the last user message or message
// of another member.
func lastTurnTools(msgs []mesh.Message, speaker string) []string {
	start := len(msgs)
	for start > 0 {
		m := msgs[start-1]
		if m.Role == mesh.RoleUser || m.Role == mesh.RoleSystem || (m.Role == mesh.RoleAssistant && m.Name != speaker) {
			break
		}
		start--
	}
	var tools []string
	for _, m := range msgs[start:] {
		for _, tc := range m.ToolCalls {
			tools = append(tools, tc.Name)
		}
	}
	return tools
}
