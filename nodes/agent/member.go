package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// This file runs an agent's turn as a member of a group chat. The group
// role picks the speaker and sends it a turn (WorkItem.Group set, TurnID
// the member turn, RunID the chat's AG-UI run); the member answers on the
// shared conversation like any turn, but adds no user message, publishes
// into the chat's run (no RUN_STARTED or RUN_FINISHED of its own), names
// its messages after itself, and may call end_chat. When its tree ends or
// pauses, it writes the outcome on the chat's pending turn and tells the
// group with a group_next work item; the group decides what comes next.

// endChatTool is offered to the members of a group chat: a call ends the
// chat after the member's answer.
const endChatTool = "end_chat"

var endChatSpec = llm.Tool{
	Name:        endChatTool,
	Description: "End the group chat: call it when the user's request is fully answered and nobody needs to speak after you, then give your final answer.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	ReadOnly:    true,
}

// chat is the group chat of a turn's conversation, as its claim found it.
type chat struct {
	name string // the group; empty outside a group chat
	// next, set by a claim that found this member turn already applied, is
	// the group_next to enqueue again (its first enqueue may have been
	// lost).
	next *mesh.WorkItem
}

// reset reads the chat from c, as a claim's change function begins.
func (ch *chat) reset(c *mesh.Conversation) {
	ch.name, ch.next = "", nil
	if c.Group != nil {
		ch.name = c.Group.Name
	}
}

// claimMemberTurn starts the member's turn, unless the chat no longer
// expects it: already answered, skipped (its member was down), or the
// chat stopped.
func (t *turn) claimMemberTurn(c *mesh.Conversation) error {
	id := t.item.TurnID
	t.chat.reset(c)
	if c.HasTurn(id) {
		t.chat.next = pendingGroupNext(c, id)
		return errAlreadyApplied
	}
	pt := memberTurn(c, id)
	if pt == nil || pt.Result != nil {
		return errAlreadyApplied
	}
	if t.attempt == 1 && mesh.MemberStarted(c, pt) {
		// A second copy of the turn (the group handed it out again, in
		// case it had died before doing so): the first one runs it. A
		// redelivery takes over from a holder that died, like any turn.
		return errAlreadyApplied
	}
	t.startTree(c, "", nil)
	c.Status = mesh.StatusRunning
	return nil
}

// memberTurn is the chat's pending turn when it is treeID, else nil.
func memberTurn(c *mesh.Conversation, treeID string) *mesh.GroupTurn {
	if g := c.Group; g != nil && g.Round != nil && g.Round.Pending != nil && g.Round.Pending.ID == treeID {
		return g.Round.Pending
	}
	return nil
}

// groupNextOf is the group_next work item telling that pending turn pt
// ended: deduplicated by the turn and the last run it ended, so each of
// its ends (a pause, then the end after the resume) is told once.
func groupNextOf(c *mesh.Conversation, pt *mesh.GroupTurn) *mesh.WorkItem {
	run := pt.RunID
	if r := pt.Result; r != nil && len(r.Runs) > 0 {
		run = r.Runs[len(r.Runs)-1]
	}
	return &mesh.WorkItem{Kind: mesh.WorkGroupNext, Session: c.ID, TurnID: pt.ID, RunID: run, Group: c.Group.Name}
}

// pendingGroupNext is the group_next to enqueue again for a work item
// found already applied: the chat's pending turn has a result covering
// run, and the group may not have been told.
func pendingGroupNext(c *mesh.Conversation, run string) *mesh.WorkItem {
	g := c.Group
	if g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.Result == nil {
		return nil
	}
	pt := g.Round.Pending
	if pt.ID != run && !pt.Result.Covers(run) {
		return nil
	}
	return groupNextOf(c, pt)
}

// enqueueGroupNext tells the group that a member's turn ended.
func (t *turn) enqueueGroupNext(ctx context.Context, item mesh.WorkItem) error {
	return workloop.Publish(ctx, t.a.cfg.JS, t.a.ns, mesh.RoleGroup, item.Group, item, t.workHeaders())
}

// failMemberTurn records a member's turn given up after its last delivery
// (turnID, the work item that failed): the chat's pending turn pt ends with
// an error, and the returned group_next tells the group, which carries the
// chat on.
func failMemberTurn(c *mesh.Conversation, pt *mesh.GroupTurn, turnID, code, text string) *mesh.WorkItem {
	tr := c.Tree
	now := time.Now().UTC()
	c.Messages = append(c.Messages, mesh.Message{ID: turnID + "-failed", Role: mesh.RoleAssistant, Content: text, Notice: true, Name: pt.Speaker, TurnID: pt.RunID, CreatedAt: now})
	pt.Result = &mesh.RunSummary{ID: tr.ID, Runs: tr.Runs, Outcome: mesh.OutcomeError, ErrorCode: code, Error: text, FinishedAt: now}
	c.MarkTurn(tr.ID)
	for _, id := range tr.Runs {
		c.MarkTurn(id)
	}
	c.Tree, c.PendingApproval, c.PendingApprovals, c.PipelineState = nil, nil, nil, nil
	c.Status = mesh.StatusRunning
	return groupNextOf(c, pt)
}
