package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// This file is the queue of a conversation: a user's message the bridge
// accepted, from the moment it is recorded (Conversation.Queued, status
// queued) until an agent or the group role claims it. The record comes
// first, by compare-and-set, then the work item on
// mesh.work.<role>.<name>.<session>; the claim clears the record in the save
// that claims. A queued turn whose work item left the stream unclaimed (a
// bridge that died between the record and the publish, a purged stream) is
// found by the next bridge that reads or writes the conversation, and
// published again, or failed.

// Defaults of the queue.
const (
	// DefaultQueueCheckAfter is how old a queued turn must be before its
	// work item is looked for, unless its writer is gone: longer than its
	// writer may take to publish it, or to take the record back after a
	// failed publish (publishTimeout each), so that a turn being published
	// is not taken for lost.
	DefaultQueueCheckAfter = 3 * publishTimeout
	// publishTimeout bounds the record and publishes of one message, and
	// apart the undo of a failed publish: generous, for a loaded server.
	publishTimeout = 10 * time.Second
	// maxRepublish is how often a lost work item is published again before
	// the turn is failed with RUN_ERROR TURN_LOST.
	maxRepublish = 3
	// maxScan bounds the items of one conversation's subject read to find
	// its queued turn; past it the turn is taken to be there.
	maxScan = 64
)

// target is where the work of a conversation goes: its group role, or its
// agent (the core's agent when the conversation names none).
func (c *Core) target(agent, group string) (role, name string) {
	if group != "" {
		return mesh.RoleGroup, group
	}
	if agent == "" {
		agent = c.cfg.Agent
	}
	return mesh.RoleAgent, agent
}

// turnQ is a turn to queue: its id and message, and for a regenerate the
// message count of the conversation read that found that message.
type turnQ struct {
	id, text   string
	files      []mesh.File
	metadata   map[string]any
	regenerate bool
	count      int
	// claimAtOnce: the caller answers once an agent holds the turn
	// (mesh.WorkItem.ClaimAtOnce).
	claimAtOnce bool
}

// publishTimeout bounds the record and publishes of one message: the
// constant, and the time its operations may wait out a leader election.
func (c *Core) publishTimeout() time.Duration {
	return publishTimeout + store.ElectionWait(c.cfg.JS)
}

// enqueue records turnID as the conversation's queued turn, then publishes
// CUSTOM run_queued and the work item. It refuses a conversation that runs
// or has queued a turn, or waits for an approval. When a publish fails the
// record is taken back and the run ends with RUN_ERROR UNAVAILABLE; the
// error then matches [mesh.ErrUnavailable].
func (c *Core) enqueue(ctx context.Context, id string, tq turnQ, caller Caller) (queuedAt uint64, err error) {
	turnID, text, files := tq.id, tq.text, tq.files
	// A client leaving mid-way must not leave the record without its item.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.publishTimeout())
	defer cancel()
	var spent dailySpend // read once, whatever the compare-and-set's tries
	// The record touches only the head: the messages are not decoded.
	conv, err := c.updateHead(ctx, id, func(cv *mesh.Conversation) error {
		switch {
		case !c.Sees(caller, cv.Owner):
			return notFound(id) // someone else's: as if it did not exist (owner.go)
		case cv.Status == mesh.StatusWaitingApproval:
			return &PendingError{
				Err:      mesh.ErrWaitingApproval.With(fmt.Sprintf("conversation %s is waiting for approval %s; decide it first with POST /approvals/%s", id, approvalID(cv.PendingApproval), approvalID(cv.PendingApproval))),
				Approval: cv.PendingApproval,
			}
		case cv.Turn != nil:
			return mesh.ErrTurnInProgress.With(fmt.Sprintf("conversation %s is running turn %s; send the next message when it ends", id, cv.Turn.ID))
		case cv.Queued != nil:
			return mesh.ErrTurnInProgress.With(fmt.Sprintf("conversation %s has turn %s queued for an agent; send the next message when it ends", id, cv.Queued.ID))
		case cv.HasTurn(turnID):
			return ErrRunIDUsed.With(fmt.Sprintf("run id %s was already used in conversation %s", mesh.Clip(turnID), id))
		case tq.regenerate && cv.MessageCount != tq.count:
			// A turn ended since the read that found the user message.
			return mesh.ErrTurnInProgress.With(fmt.Sprintf("conversation %s changed while its answer was to be regenerated; try again", id))
		}
		if err := c.overBudget(ctx, cv, &spent); err != nil {
			return err
		}
		cv.Queued = &mesh.QueuedTurn{ID: turnID, Message: text, Files: files, Metadata: tq.metadata, At: c.now().UTC(), By: c.cfg.NodeID, Regenerate: tq.regenerate}
		cv.Status = mesh.StatusQueued
		return nil
	})
	if err != nil {
		return 0, c.hideGone(caller, id, err)
	}
	c.indexConversation(conv) // its watch need not decode it again
	noteConversation(ctx, conv.ID, conv.SessionID)
	role, name := c.target(conv.Agent, groupName(conv.Group))
	value := map[string]any{"runId": turnID, "message": text}
	if tq.regenerate {
		value["regenerate"] = true
	}
	seq, err := c.events.Publish(ctx, id, turnID, turnID+":queued", mesh.Custom(mesh.CustomRunQueued, value))
	if err == nil {
		item := mesh.WorkItem{Kind: mesh.WorkTurn, Session: id, TurnID: turnID, Message: text, Files: files, Metadata: tq.metadata, Regenerate: tq.regenerate, ClaimAtOnce: tq.claimAtOnce}
		err = workloop.Publish(ctx, c.cfg.JS, c.ns, role, name, item, caller.headers(conv.SessionID))
	}
	if err != nil {
		// The publish may have used the whole deadline: the undo has its own.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.publishTimeout())
		defer cancel()
		c.unqueue(uctx, id, turnID)
		return 0, mesh.ErrUnavailable.With("the mesh did not take the turn: " + err.Error())
	}
	return seq, nil
}

// unqueue takes back the record of a turn whose publish failed, unless an
// agent claimed it meanwhile (the item was stored after all), and ends its
// run. It does what it can: a record left behind is found lost later.
func (c *Core) unqueue(ctx context.Context, id, turnID string) {
	var taken bool
	_, err := c.Sessions.Update(ctx, id, func(cv *mesh.Conversation) error {
		taken = cv.Unqueue(turnID)
		if !taken {
			return store.ErrNoChange
		}
		return nil
	})
	if err != nil {
		c.log.Warn().Err(err).Str("session", id).Str("turn", turnID).Msg("could not take back the record of a turn whose publish failed")
		return
	}
	if !taken {
		return
	}
	ev := mesh.RunError(mesh.CodeUnavailable, "the mesh did not take the message; send it again")
	if _, err := c.events.Publish(ctx, id, turnID, turnID+":unqueued", ev); err != nil {
		c.log.Warn().Err(err).Str("session", id).Str("turn", turnID).Msg("could not end the run of a turn whose publish failed")
	}
}

func approvalID(p *mesh.PendingApproval) string {
	if p == nil {
		return ""
	}
	return p.UUID
}

func groupName(g *mesh.GroupRun) string {
	if g == nil {
		return ""
	}
	return g.Name
}

// queuedRef is what checking a queued turn needs of its conversation.
type queuedRef struct {
	id, sid, agent, group string
	q                     mesh.QueuedTurn
}

func refOf(conv *mesh.Conversation) *queuedRef {
	if conv.Queued == nil {
		return nil
	}
	return &queuedRef{id: conv.ID, sid: conv.SessionID, agent: conv.Agent, group: groupName(conv.Group), q: *conv.Queued}
}

func refOfHead(h *store.SessionHead) *queuedRef {
	if h.Queued == nil {
		return nil
	}
	ref := &queuedRef{id: h.ID, sid: h.SessionID, agent: h.Agent, q: *h.Queued}
	if h.Group != nil {
		ref.group = h.Group.Name
	}
	return ref
}

// Conversation reads conversation id for a client; one the caller may not
// see is not found (owner.go). A queued turn older than QueueCheckAfter
// whose work item is no longer in the work stream is repaired first (see
// [Core.CheckQueued]), with caller's credentials.
func (c *Core) Conversation(ctx context.Context, id string, caller Caller) (*mesh.Conversation, error) {
	conv, err := c.GetFor(ctx, id, caller)
	if err != nil {
		return nil, err
	}
	if c.checkQueued(ctx, refOf(conv), caller) {
		return c.Sessions.Get(ctx, id)
	}
	return conv, nil
}

// MaxPageSize bounds the messages of a page (GET
// /conversations/{id}?messages=N).
const MaxPageSize = 500

// ConversationPage is [Core.Conversation] with a page of up to n messages
// (0: mesh.DefaultPageSize) older than the cursor before (empty: the
// newest), left as stored.
func (c *Core) ConversationPage(ctx context.Context, id string, caller Caller, n int, before string) (*store.ConversationDoc, error) {
	if n < 0 || n > MaxPageSize {
		return nil, mesh.ErrBadRequest.With(fmt.Sprintf("messages=%d: a page holds 1 to %d messages", n, MaxPageSize))
	}
	h, err := c.HeadFor(ctx, id, caller)
	if err != nil {
		return nil, err
	}
	c.checkQueued(ctx, refOfHead(h), caller)
	return c.Sessions.GetPage(ctx, id, n, before)
}

// CheckQueued repairs the queued turn of conversation id, if it has one
// older than QueueCheckAfter whose work item is no longer in the work
// stream: the item is published again (a new Nats-Msg-Id, caller's
// credentials) up to 3 times, then the turn fails with RUN_ERROR
// TURN_LOST. It reports whether it changed the conversation. Errors are
// logged: a check that cannot tell leaves the turn as it is.
func (c *Core) CheckQueued(ctx context.Context, id string, caller Caller) bool {
	h, err := c.HeadFor(ctx, id, caller)
	if err != nil {
		return false
	}
	return c.checkQueued(ctx, refOfHead(h), caller)
}

func (c *Core) checkQueued(ctx context.Context, ref *queuedRef, caller Caller) bool {
	if ref == nil || c.now().Sub(ref.q.At) < c.cfg.QueueCheckAfter && !c.writerGone(ctx, ref.q) {
		return false
	}
	log := c.log.With().Str("session", ref.id).Str("turn", ref.q.ID).Logger()
	role, name := c.target(ref.agent, ref.group)
	there, err := c.inWorkStream(ctx, role, name, ref.id, ref.q.ID)
	if err != nil {
		log.Warn().Err(err).Msg("could not look for a queued turn's work item")
		return false
	}
	if there {
		return false // an agent will take it, once one runs
	}
	republish := ref.q.Republished < maxRepublish
	text := fmt.Sprintf("the message %q waited in the queue, but its work item was lost and published again %d times; send it again", clip(ref.q.Message), ref.q.Republished)
	var applied bool
	_, err = c.Sessions.Update(ctx, ref.id, func(cv *mesh.Conversation) error {
		applied = false
		q := cv.Queued
		// Only the turn checked, as checked: another bridge may have acted.
		if q == nil || q.ID != ref.q.ID || q.Republished != ref.q.Republished {
			return store.ErrNoChange
		}
		applied = true
		now := c.now().UTC()
		if republish {
			q.Republished++
			q.At, q.By = now, c.cfg.NodeID
			return nil
		}
		cv.Unqueue(q.ID)
		cv.MarkTurn(q.ID)
		cv.Messages = append(cv.Messages, mesh.Message{ID: q.ID + "-lost", Role: mesh.RoleAssistant, Content: "This message was lost before an agent took it up: " + text, Notice: true, TurnID: q.ID, CreatedAt: now})
		cv.LastRun = &mesh.RunSummary{ID: q.ID, Outcome: mesh.OutcomeError, ErrorCode: mesh.CodeTurnLost, Error: text, FinishedAt: now}
		return nil
	})
	if err != nil {
		log.Warn().Err(err).Msg("could not record the repair of a queued turn")
		return false
	}
	if !applied {
		return true // changed by someone else: read it again
	}
	if !republish {
		log.Error().Int("republished", ref.q.Republished).Msg("queued turn lost: failed")
		if _, err := c.events.Publish(ctx, ref.id, ref.q.ID, ref.q.ID+":lost", mesh.RunError(mesh.CodeTurnLost, text)); err != nil {
			log.Warn().Err(err).Msg("could not end the run of a lost turn")
		}
		return true
	}
	log.Warn().Int("republished", ref.q.Republished+1).Msg("queued turn's work item lost: published again")
	item := mesh.WorkItem{Kind: mesh.WorkTurn, Session: ref.id, TurnID: ref.q.ID, Message: ref.q.Message, Files: ref.q.Files, Metadata: ref.q.Metadata, Regenerate: ref.q.Regenerate}
	m, err := workloop.Msg(c.ns, role, name, item, caller.headers(ref.sid))
	if err != nil {
		log.Warn().Err(err).Msg("could not publish a lost turn again")
		return true
	}
	// A new id: the lost item's may still be in the duplicate window. An
	// agent drops a copy of a turn that is already claimed or done.
	m.Header.Set(mesh.HeaderMsgID, fmt.Sprintf("%s:r%d", workloop.MsgID(item), ref.q.Republished+1))
	telemetry.Inject(ctx, m.Header)
	if _, err := c.cfg.JS.PublishMsg(ctx, m); err != nil {
		// The record says republished: the next check, QueueCheckAfter
		// later, finds the item missing again and tries again.
		log.Warn().Err(err).Msg("could not publish a lost turn again")
	}
	return true
}

// writerGone reports whether the bridge that recorded q (or last published
// it) is gone: this process's earlier life, or a node that mesh_nodes
// shows restarted or marked down since, or no longer lists. Its publish
// will not come, so its turn need not wait QueueCheckAfter to be checked.
func (c *Core) writerGone(ctx context.Context, q mesh.QueuedTurn) bool {
	if q.By == "" {
		return false
	}
	if q.By == c.cfg.NodeID {
		return q.At.Before(c.started)
	}
	e, err := c.cfg.Resources.Nodes.Get(ctx, mesh.NodeInfo{Role: mesh.RoleBridge, Node: q.By}.Key())
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return true
	}
	var info mesh.NodeInfo
	if err != nil || json.Unmarshal(e.Value(), &info) != nil {
		return false
	}
	return info.StartedAt.After(q.At) || info.DownAt.After(q.At)
}

// inWorkStream reports whether the work stream holds the turn item turnID
// of conversation session: the items on mesh.work.<role>.<name>.<session>,
// read one after another by subject (a conversation has a few at most).
func (c *Core) inWorkStream(ctx context.Context, role, name, session, turnID string) (bool, error) {
	subj, err := workloop.Subject(c.ns, role, name, mesh.WorkItem{Kind: mesh.WorkTurn, Session: session})
	if err != nil {
		return false, err
	}
	var seq uint64
	for range maxScan {
		msg, err := c.cfg.Resources.Work.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("get %s: %w", subj, err)
		}
		var item mesh.WorkItem
		if json.Unmarshal(msg.Data, &item) == nil && item.Kind == mesh.WorkTurn && item.TurnID == turnID {
			return true, nil
		}
		seq = msg.Sequence + 1
	}
	return true, nil
}

// cancelQueued cancels the conversation's queued turn, when runID names it
// or is empty: the record goes, the turn is marked done (an agent drops its
// work item) and cancelled, and its run ends with RUN_FINISHED cancelled.
// It reports whether there was such a turn.
func (c *Core) cancelQueued(ctx context.Context, id, runID string) (bool, error) {
	var turnID string
	_, err := c.Sessions.Update(ctx, id, func(cv *mesh.Conversation) error {
		turnID = ""
		q := cv.Queued
		if q == nil || runID != "" && q.ID != runID {
			return store.ErrNoChange
		}
		turnID = q.ID
		cv.Unqueue(q.ID)
		cv.MarkTurn(q.ID)
		cv.LastRun = &mesh.RunSummary{ID: q.ID, Outcome: mesh.OutcomeCancelled, Response: "cancelled before an agent took it up", FinishedAt: time.Now().UTC()}
		return nil
	})
	if err != nil || turnID == "" {
		return false, err
	}
	ev := mesh.RunFinished(id, turnID, mesh.Outcome{Type: mesh.OutcomeCancelled}, nil)
	if _, err := c.events.Publish(ctx, id, turnID, turnID+":cancelled", ev); err != nil {
		return true, fmt.Errorf("publish the end of cancelled turn %s: %w", turnID, err)
	}
	return true, nil
}

// clip shortens a message quoted in a notice.
func clip(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:80]) + "…"
	}
	return s
}
