package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// Outcomes of claiming a conversation for a turn.
var (
	errAlreadyApplied = errors.New("agent: turn already applied")
	errBusy           = errors.New("agent: another turn runs in this conversation")
	errWaiting        = errors.New("agent: conversation waits for an approval")
	errStaleResume    = errors.New("agent: resume of an approval the conversation no longer waits for")
)

// approvalNamespace derives approval ids from run and call ids, so that a
// run executed again after a crash creates the same approval, not a second.
var approvalNamespace = uuid.MustParse("8f3c1a52-6f0e-4f0a-9a39-3f7f1c2b9e11")

// turn is one execution of one work item: a turn, a resume, or the run of
// one node of the agent tree.
type turn struct {
	a       *Agent
	item    mesh.WorkItem
	hdr     nats.Header
	attempt int
	log     zerolog.Logger
	// baseLog is log without sid: sid is added once the conversation's
	// session id is known.
	baseLog zerolog.Logger
	cancel  context.CancelCauseFunc

	conv  *mesh.Conversation // as claimed
	ev    *mesh.RunEvents
	offer *offer // the tools of the last model call

	// step is the tree step this work item runs, gen which run of it.
	step *step
	gen  int

	added      []mesh.Message // messages this run adds
	iterations int
	usage      llm.Usage
	resumed    *mesh.Approval // the decided approval a resume carries on from
	paused     *mesh.Approval // the approval this run waits for
	exitLoop   bool           // the node called exit_loop
	endChat    bool           // the member called end_chat
	notices    int

	// groupName is the group chat of the conversation, if any; groupNext,
	// set by a claim that found this member turn already applied, is the
	// group_next to enqueue again (its first enqueue may have been lost).
	groupName string
	groupNext *mesh.WorkItem

	outcome  string // mesh.OutcomeSuccess, OutcomeInterrupt, OutcomeCancelled, OutcomeError
	errCode  string
	errText  string
	response string
}

// runID is the AG-UI run the work item's events belong to: the turn, the
// approval a resume carries on from, the run that scheduled a node, or the
// group chat's run a member's turn answers in.
func (t *turn) runID() string {
	if (t.item.Kind == mesh.WorkStep || t.member()) && t.item.RunID != "" {
		return t.item.RunID
	}
	return t.item.TurnID
}

// member says the work item is a member's turn of a group chat.
func (t *turn) member() bool { return t.item.Kind == mesh.WorkTurn && t.item.Group != "" }

// treeID is the turn whose tree run this work item belongs to.
func (t *turn) treeID() string {
	if t.conv != nil && t.conv.Tree != nil {
		return t.conv.Tree.ID
	}
	return t.item.TurnID
}

// stepRunID names this run of the tree node: the same when the run is
// executed again or resumed, another for each parallel branch and loop
// iteration.
func (t *turn) stepRunID() string {
	return t.treeID() + "-" + idKey(t.step.key) + "g" + strconv.Itoa(t.gen)
}

// idKey is a node key as ids carry it: call ids are tokens, without dots.
func idKey(key string) string { return strings.ReplaceAll(key, ".", "_") }

// idPrefix starts the ids of the model messages and calls of this run, so
// that a run executed again produces the same ids. A tree node's ids stay
// the same across its resumes (they tell its own messages apart); the
// single node of an agent without a tree keeps the run's ids.
func (t *turn) idPrefix() string {
	if t.a.simple {
		return t.item.TurnID
	}
	return t.stepRunID()
}

// noticePrefix starts the ids of the notices of this run: unlike the model
// messages, a resume numbers them afresh.
func (t *turn) noticePrefix() string {
	if t.a.simple {
		return t.item.TurnID
	}
	return t.runID() + "-" + idKey(t.step.key) + "g" + strconv.Itoa(t.gen)
}

// own says whether a message was written by this run of the node.
func (t *turn) own(m mesh.Message) bool {
	return strings.HasPrefix(m.ID, t.idPrefix()+"-")
}

// stepKey is the key that the messages this run writes carry; empty for
// the single node of an agent without a tree.
func (t *turn) stepKey() string {
	if t.a.simple {
		return ""
	}
	return t.step.key
}

// author is the author of the messages this run writes: the tree node,
// or in a group chat the agent.
func (t *turn) author() string {
	if t.a.simple {
		if t.groupName != "" {
			return t.a.name
		}
		return ""
	}
	return t.step.cfg.Name
}

// foreign says a message was written by another group member or another
// node of the tree: of those, a run sees only the answers.
func (t *turn) foreign(m mesh.Message) bool {
	if m.Step != "" {
		return t.a.simple || !t.own(m)
	}
	return m.Name != "" && m.Name != t.author()
}

// message is a message this run writes, with its author.
func (t *turn) message(id string, role mesh.Role, content string) mesh.Message {
	return mesh.Message{ID: id, Role: role, Content: content, Step: t.stepKey(), Name: t.author(), TurnID: t.runID(), CreatedAt: time.Now().UTC()}
}

// workHeaders are the headers of the work this turn enqueues: the caller's
// credentials and the trace id follow the tree's nodes.
func (t *turn) workHeaders() nats.Header {
	h := mesh.CopyCallerHeaders(t.hdr)
	if h.Get(mesh.HeaderSessionID) == "" && t.sid() != "" {
		h.Set(mesh.HeaderSessionID, t.sid())
	}
	return h
}

// sid is the conversation's session id (FR-030): the one stored on the
// conversation, else the work item's X-Session-ID.
func (t *turn) sid() string {
	if t.conv != nil && t.conv.SessionID != "" {
		return t.conv.SessionID
	}
	return t.hdr.Get(mesh.HeaderSessionID)
}

// setSID makes every later log line of the turn carry the conversation's
// session id as sid, even when the work item did not carry it (NFR-015).
func (t *turn) setSID(sid string) {
	if sid == "" || sid == t.hdr.Get(mesh.HeaderSessionID) {
		return
	}
	t.log = t.baseLog.With().Str("sid", sid).Logger()
}

// run executes the work item; nil means it is settled (applied, or nothing
// to do).
func (t *turn) run(ctx context.Context) error {
	var c *mesh.Conversation
	var err error
	switch t.item.Kind {
	case mesh.WorkStep:
		c, err = t.claimStep(ctx)
	case mesh.WorkResume:
		c, err = t.claimResume(ctx)
	default:
		c, err = t.claim(ctx)
	}
	switch {
	case errors.Is(err, errAlreadyApplied), errors.Is(err, errStaleResume), errors.Is(err, errStepGone):
		t.log.Info().Err(err).Msg("nothing to do")
		if t.groupNext != nil {
			return t.enqueueGroupNext(ctx, *t.groupNext)
		}
		return nil
	case errors.Is(err, errWaiting):
		// The bridge refuses such messages; this one raced an approval.
		t.ev = t.a.events.Run(t.item.Session, t.runID(), t.attempt)
		t.emit(mesh.RunError(mesh.CodeWaitingApprove, "the conversation is waiting for an approval; decide it before sending a message"))
		return t.ev.Flush(ctx)
	case err != nil:
		return err
	}
	t.conv = c
	t.setSID(c.SessionID)
	defer t.keepClaim(ctx, c)()
	if t.step.key != rootKey || !t.step.leaf() {
		t.log = t.log.With().Str("tree_node", t.step.key).Str("node_name", t.step.cfg.Name).Logger()
	}
	defer t.a.register(c.ID, t.cancelNames(), t.cancel)()
	t.ev = t.a.events.Run(t.item.Session, t.runID(), t.attempt)
	switch {
	case t.item.Kind == mesh.WorkStep:
		t.ev = t.a.events.RunPart(t.item.Session, t.runID(), t.item.Step+"g"+strconv.Itoa(t.gen), t.attempt)
	case t.member():
		t.ev = t.a.events.RunPart(t.item.Session, t.runID(), t.item.TurnID, t.attempt)
	}
	if t.attempt > 1 {
		retried := map[string]any{"attempt": t.attempt, "runId": t.runID()}
		if !t.a.simple {
			retried["node"] = t.step.cfg.Name
			retried["prefixes"] = []string{t.idPrefix() + "-", t.noticePrefix() + "-"}
		}
		t.emit(mesh.Custom(mesh.CustomRunRetried, retried))
	}
	if t.item.Kind != mesh.WorkStep && !t.member() {
		t.emit(mesh.RunStarted(c.ID, t.runID()))
		// Clients start every run from the whole session state; later
		// changes come as STATE_DELTA.
		t.emit(mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: stateOf(c)})
	}
	if !t.step.leaf() {
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
	if !t.a.simple {
		t.emit(mesh.Event{Type: mesh.EventStepStarted, StepName: t.step.cfg.Name})
	}
	if t.item.Kind == mesh.WorkResume {
		if err := t.loadResume(ctx); err != nil {
			return err
		}
	}
	if t.step.cfg.Type == config.NodeA2A {
		t.runA2A(ctx)
	} else {
		t.loop(ctx)
	}
	if errors.Is(context.Cause(ctx), errShutdown) {
		return context.Cause(ctx)
	}
	return t.settle(context.WithoutCancel(ctx), t.stepOutcome())
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

// stepOutcome is how the node's run ended, from what the loop left.
func (t *turn) stepOutcome() outcome {
	switch t.outcome {
	case mesh.OutcomeInterrupt:
		return outcome{status: mesh.StepWaiting, paused: []*mesh.Approval{t.paused}, iterations: t.iterations}
	case mesh.OutcomeError:
		return outcome{status: mesh.StepFailed, errCode: t.errCode, errText: t.errText}
	case mesh.OutcomeCancelled:
		return outcome{status: mesh.StepCancelled, errCode: mesh.CodeCancelled, errText: "the turn was cancelled"}
	}
	return outcome{status: mesh.StepDone, output: t.response, exitLoop: t.exitLoop}
}

// settle applies the node's outcome to the tree by compare-and-set, then
// publishes what it decided: steps, state changes, the end of runs, and the
// work to do next.
func (t *turn) settle(ctx context.Context, o outcome) error {
	var p plan
	_, err := t.a.sessions.UpdateLoaded(ctx, t.conv, func(c *mesh.Conversation) error {
		return t.apply(c, t.step.key, t.gen, o, &p)
	})
	if err != nil && !errors.Is(err, mesh.ErrNoChange) {
		return err
	}
	if p.dropped {
		t.log.Info().Msg("the tree moved on without this node's outcome")
		return t.ev.Flush(ctx)
	}
	for _, name := range p.stepsBegun {
		t.emit(mesh.Event{Type: mesh.EventStepStarted, StepName: name})
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
		t.log.Info().Str("outcome", p.runOutcome).Str("group", p.group).Int("iterations", t.iterations).Msg("member turn done")
		return nil
	}
	for _, id := range p.endRuns {
		ev := mesh.RunFinished(t.conv.ID, id, mesh.Outcome{Type: p.runOutcome}, runResult(p.response, p.usage))
		switch p.runOutcome {
		case mesh.OutcomeError:
			ev = mesh.RunError(p.errCode, p.errText)
		case mesh.OutcomeInterrupt:
			ev.Outcome.Interrupts = p.interrupts
		}
		if _, err := t.a.events.Publish(ctx, t.conv.ID, id, "end:"+id, ev); err != nil {
			return err
		}
	}
	if p.runOutcome == mesh.OutcomeError || p.runOutcome == mesh.OutcomeCancelled {
		// Branches still running elsewhere have nothing left to do.
		t.a.cancelRuns(t.conv.ID, p.treeRunID)
	}
	if len(p.endRuns) > 0 {
		t.log.Info().Str("outcome", p.runOutcome).Strs("runs", p.endRuns).Int("iterations", t.iterations).Msg("turn done")
	}
	return nil
}

// claim marks the conversation as running this turn, waiting while another
// turn holds it.
func (t *turn) claim(ctx context.Context) (*mesh.Conversation, error) {
	wait := 20 * time.Millisecond
	var waitingSince time.Time
	for {
		c, err := t.a.sessions.Get(ctx, t.item.Session)
		if errors.Is(err, mesh.ErrSessionNotFound) {
			t.log.Warn().Msg("work for an unknown conversation")
			return nil, errAlreadyApplied
		}
		if err != nil {
			return nil, err
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

// claimChange adds the turn's message and starts its run of the tree at the
// root.
func (t *turn) claimChange(c *mesh.Conversation) error {
	id := t.item.TurnID
	if t.member() {
		return t.claimMemberTurn(c)
	}
	if c.HasTurn(id) {
		return errAlreadyApplied
	}
	if c.Turn != nil && c.Turn.ID != id && time.Since(lastProgress(c)) < t.a.cfg.StaleTurn {
		return errBusy
	}
	if c.Status == mesh.StatusWaitingApproval && (c.Turn == nil || c.Turn.ID != id) {
		return errWaiting
	}
	now := time.Now().UTC()
	if !c.HasMessage(id) {
		c.Messages = append(c.Messages, mesh.Message{ID: id, Role: mesh.RoleUser, Content: t.item.Message, TurnID: id, CreatedAt: now})
	}
	if c.Agent == "" {
		c.Agent = t.a.name
	}
	t.startTree(c, t.item.Message, []string{id})
	c.Turn = &mesh.Turn{ID: id, Kind: t.item.Kind, Node: t.a.cfg.NodeID, Attempt: t.attempt, StartedAt: now}
	c.Status = mesh.StatusRunning
	return nil
}

// lastProgress is when the turn holding c last showed life: its claim, its
// holder's last refresh (keepClaim), or the latest start or end of a node of
// its tree, so that a long run is not taken for an abandoned turn.
func lastProgress(c *mesh.Conversation) time.Time {
	last := latest(c.Turn.StartedAt, c.Turn.AliveAt)
	if c.Tree != nil {
		for _, n := range c.Tree.Steps {
			last = latest(last, n.StartedAt, n.FinishedAt)
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
// long before the first refresh.
func (t *turn) keepClaim(ctx context.Context, c *mesh.Conversation) (stop func()) {
	if c.Turn == nil {
		return func() {}
	}
	// The run goes on changing t and c: the goroutine keeps its own copies.
	id, holder, log, every := c.ID, c.Turn.ID, t.log, t.a.cfg.StaleTurn/4
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
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
					return mesh.ErrNoChange
				}
				c.Turn.AliveAt = time.Now().UTC()
				return nil
			})
			if err != nil && !errors.Is(err, mesh.ErrNoChange) {
				log.Debug().Err(err).Msg("could not refresh the turn's claim")
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// startTree starts the run of the tree this turn begins, at the root,
// unless a delivery before this one started it. runs are the AG-UI runs it
// ends.
func (t *turn) startTree(c *mesh.Conversation, message string, runs []string) {
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
	t.step, t.gen = t.a.root, c.Tree.Steps[rootKey].Gen
}

// claimStep marks the node a node work item runs as running here. A node
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
		requeue, t.groupName = nil, ""
		if c.Group != nil {
			t.groupName = c.Group.Name
		}
		tr := c.Tree
		if tr == nil || tr.ID != t.item.TurnID {
			return errStepGone
		}
		nr := tr.Steps[t.item.Step]
		takeover := nr != nil && nr.Status == mesh.StepRunning && t.attempt > 1
		if nr == nil || nr.Gen != t.item.Gen || (nr.Status != mesh.StepPending && !takeover) {
			requeue = pendingWork(c)
			return errStepGone
		}
		if takeover {
			t.log.Warn().Str("worker", nr.Worker).Msg("taking over a node whose run was cut off")
		}
		nr.Status, nr.Worker, nr.StartedAt = mesh.StepRunning, t.a.cfg.NodeID, time.Now().UTC()
		t.iterations = nr.Iterations
		return nil
	})
	if errors.Is(err, errStepGone) && len(requeue) > 0 {
		if err := t.enqueue(ctx, requeue); err != nil {
			return nil, err
		}
	}
	return c, err
}

// claimResume marks the node that waits for the decided approval as
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
	t.groupName, t.groupNext = "", nil
	if c.Group != nil {
		t.groupName = c.Group.Name
	}
	if c.HasTurn(t.item.TurnID) {
		t.groupNext = pendingGroupNext(c, t.item.TurnID)
		return errAlreadyApplied
	}
	tr := c.Tree
	if tr == nil {
		return errStaleResume
	}
	var nr *mesh.StepRun
	for _, n := range tr.Steps {
		if n.Status == mesh.StepWaiting && slices.Contains(n.Approvals, id) {
			nr = n
		} else if n.Status == mesh.StepRunning && n.Resumed == id && t.attempt > 1 {
			// This resume was cut off after it claimed the node.
			nr = n
		}
	}
	if nr == nil {
		return errStaleResume
	}
	t.step, t.gen = t.a.steps[nr.Key], nr.Gen
	if t.step == nil {
		return fmt.Errorf("agent: node %q waits for approval %s but is not in this agent's tree (was the tree changed?)", nr.Key, id)
	}
	now := time.Now().UTC()
	nr.Status, nr.Worker, nr.StartedAt, nr.Resumed = mesh.StepRunning, t.a.cfg.NodeID, now, id
	nr.Approvals = slices.DeleteFunc(nr.Approvals, func(a string) bool { return a == id })
	t.iterations = nr.Iterations
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
	c.Turn = &mesh.Turn{ID: turnID, Kind: mesh.WorkResume, Node: t.a.cfg.NodeID, Attempt: t.attempt, StartedAt: now}
	c.Status = mesh.StatusRunning
	return nil
}

// loadResume reads the decision the resume carries on from.
func (t *turn) loadResume(ctx context.Context) error {
	ap, err := t.a.approvals.Get(ctx, t.item.ApprovalID)
	if err != nil {
		return err
	}
	if ap.Status == mesh.ApprovalPending {
		return fmt.Errorf("approval %s is still pending", ap.UUID)
	}
	t.resumed = ap
	return nil
}

// history is the conversation as the model sees it: every message but the
// system prompt and the notices meant for people. Of the messages of tree
// nodes, a node sees its own run's whole exchange but only the answers of
// the others, and only those written before its run began: their tool
// traffic is theirs, and a sibling's answer between a call and its result
// would break the exchange no model API takes apart.
func (t *turn) history() []llm.Message {
	all := append(append([]mesh.Message(nil), t.conv.Messages...), t.added...)
	firstOwn := len(all)
	if !t.a.simple {
		firstOwn = slices.IndexFunc(all, t.own)
		if firstOwn < 0 {
			firstOwn = len(all)
		}
	}
	out := make([]llm.Message, 0, len(all))
	for i, m := range all {
		if t.foreign(m) {
			if i > firstOwn || m.Role != mesh.RoleAssistant || len(m.ToolCalls) > 0 || m.Content == "" || m.Notice {
				continue
			}
			if m.Step == "" {
				// Another member of a group chat: models take no author
				// on an assistant message, so the text names it.
				out = append(out, llm.Message{Role: llm.RoleAssistant, Content: m.Name + ": " + m.Content})
				continue
			}
		}
		switch m.Role {
		case mesh.RoleUser:
			out = append(out, llm.Message{Role: llm.RoleUser, Content: m.Content})
		case mesh.RoleAssistant:
			if m.Notice {
				continue
			}
			lm := llm.Message{Role: llm.RoleAssistant, Content: m.Content, Name: m.Name}
			for _, c := range m.ToolCalls {
				lm.ToolCalls = append(lm.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.ArgumentsJSON())})
			}
			out = append(out, lm)
		case mesh.RoleTool:
			out = append(out, llm.Message{Role: llm.RoleTool, Content: m.Content, ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError})
		}
	}
	return out
}

// loop alternates between the model and the tools until the model answers
// with text, a destructive call needs approval, or the iteration cap is hit.
func (t *turn) loop(ctx context.Context) {
	for {
		if paused := t.resolvePending(ctx); paused {
			t.outcome = mesh.OutcomeInterrupt
			return
		}
		if ctx.Err() != nil {
			t.cancelled(ctx)
			return
		}
		if t.iterations >= t.a.maxIter {
			t.notice(fmt.Sprintf("I stopped after %d tool iterations without reaching an answer.", t.a.maxIter))
			t.outcome = mesh.OutcomeSuccess
			return
		}
		t.iterations++
		resp, msgID, err := t.generate(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.cancelled(ctx)
				return
			}
			t.errCode, t.errText = llmErrorCode(err), err.Error()
			t.notice("LLM error: " + err.Error())
			t.outcome = mesh.OutcomeError
			return
		}
		msg := t.message(msgID, mesh.RoleAssistant, resp.Text)
		for i, c := range resp.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, t.toToolCall(c, i))
		}
		t.added = append(t.added, msg)
		if len(msg.ToolCalls) == 0 {
			t.response = resp.Text
			t.outcome = mesh.OutcomeSuccess
			return
		}
	}
}

// generate calls the model, streaming its text as TEXT_MESSAGE events.
func (t *turn) generate(ctx context.Context) (*llm.Response, string, error) {
	msgID := t.idPrefix() + "-a" + strconv.Itoa(t.iterations)
	started := false
	start := func() {
		if !started {
			started = true
			t.emit(mesh.Event{Type: mesh.EventTextMessageStart, MessageID: msgID, Role: string(mesh.RoleAssistant), Name: t.author()})
		}
	}
	streamed := false
	t.offer = t.stepOffer()
	req := llm.Request{
		System:   t.systemPrompt(),
		Messages: t.history(),
		Tools:    t.offer.tools,
		OnText: func(delta string) {
			if delta == "" {
				return
			}
			streamed = true
			start()
			t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: msgID, Delta: delta})
		},
	}
	resp, err := t.step.provider.Generate(t.log.WithContext(ctx), req)
	if err == nil {
		t.usage = t.usage.Add(resp.Usage)
		if !streamed && resp.Text != "" {
			start()
			t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: msgID, Delta: resp.Text})
		}
	}
	if started {
		t.emit(mesh.Event{Type: mesh.EventTextMessageEnd, MessageID: msgID})
	}
	return resp, msgID, err
}

// toToolCall resolves a model's call against the catalog. The call gets an id
// derived from the run, so a run executed again produces the same ids.
func (t *turn) toToolCall(c llm.ToolCall, index int) mesh.ToolCall {
	call := mesh.ToolCall{
		ID:   fmt.Sprintf("%s-c%d-%d", t.idPrefix(), t.iterations, index),
		Name: c.Name,
	}
	if len(c.Arguments) > 0 {
		_ = json.Unmarshal(c.Arguments, &call.Arguments)
	}
	if call.Arguments == nil {
		call.Arguments = map[string]any{}
	}
	o := t.offer
	if o == nil {
		o = t.stepOffer()
	}
	if c.Name == exitLoopTool && o.exitLoop {
		call.Tool = exitLoopTool
	} else if c.Name == endChatTool && o.endChat {
		call.Tool = endChatTool
	} else if r, ok := o.remote[c.Name]; ok {
		call.Server, call.Tool, call.Destructive = remoteServerPrefix+r.cfg.Name, r.cfg.Name, r.cfg.IsDestructive()
	} else if e, ok := o.mcp[c.Name]; ok {
		call.Server, call.Tool, call.Destructive = e.Server, e.Name, e.DestructiveHint
	}
	return call
}

// lastCalls finds the most recent assistant message of this run with tool
// calls.
func (t *turn) lastCalls() []mesh.ToolCall {
	for i := len(t.added) - 1; i >= 0; i-- {
		if m := t.added[i]; m.Role == mesh.RoleAssistant && len(m.ToolCalls) > 0 {
			return m.ToolCalls
		}
	}
	for i := len(t.conv.Messages) - 1; i >= 0; i-- {
		m := t.conv.Messages[i]
		if !t.a.simple {
			if t.own(m) && m.Role == mesh.RoleAssistant && len(m.ToolCalls) > 0 {
				return m.ToolCalls
			}
			continue
		}
		if m.Role == mesh.RoleUser {
			return nil // a new request: earlier calls belong to earlier turns
		}
		if m.Role == mesh.RoleAssistant && len(m.ToolCalls) > 0 {
			return m.ToolCalls
		}
	}
	return nil
}

func (t *turn) hasResult(callID string) bool {
	for _, list := range [][]mesh.Message{t.conv.Messages, t.added} {
		for i := len(list) - 1; i >= 0; i-- {
			if list[i].Role == mesh.RoleTool && list[i].ToolCallID == callID {
				return true
			}
		}
	}
	return false
}

// resolvePending answers every call of the last assistant message that has
// no result yet: safe calls run, the decided call of a resume runs or is
// rejected, and the first other destructive call pauses the run, as does a
// sub-agent that waits for an approval of its own.
func (t *turn) resolvePending(ctx context.Context) (paused bool) {
	for _, call := range t.lastCalls() {
		if t.hasResult(call.ID) {
			continue
		}
		if ctx.Err() != nil {
			return false
		}
		if t.resumed != nil && t.resumed.ToolCallID == call.ID {
			if t.resolveDecided(ctx, call) {
				return true
			}
			continue
		}
		t.emitCall(call)
		_, remote := remoteName(call)
		allowed := t.step.cfg.AllowDestructive
		switch {
		case call.Tool == exitLoopTool && call.Server == "":
			t.exitLoop = true
			t.result(call, "The loop ends after this step. Now give your final answer.", false)
		case call.Tool == endChatTool && call.Server == "":
			t.endChat = true
			t.result(call, "The group chat ends after your answer. Now give your final answer.", false)
		case remote && (!call.Destructive || allowed):
			// An allowed destructive call is treated as an approved one:
			// cut off mid-flight, it is not sent again.
			if t.callRemote(ctx, call, call.ID, call.Destructive) {
				return true
			}
		case call.Server == "":
			t.result(call, fmt.Sprintf("error: unknown tool %q", call.Name), true)
		case call.Destructive && !allowed:
			if err := t.pause(ctx, call); err != nil {
				t.result(call, "error: could not request an approval: "+err.Error(), true)
				continue
			}
			return true
		default:
			content, isErr := t.callTool(ctx, call, call.ID, t.a.toolWait)
			t.result(call, content, isErr)
		}
	}
	return false
}

// resolveDecided executes or rejects the call a resume was decided for. The
// call id sent to the tool host is the approval id, so an approved call runs
// once however often the resume is delivered. A proxy approval's decision
// goes to the sub-agent that asked for it. It reports whether the run paused
// again (a sub-agent asking for another approval).
func (t *turn) resolveDecided(ctx context.Context, call mesh.ToolCall) (paused bool) {
	ap := t.resumed
	if ap.RemoteTaskID != "" {
		return t.forwardDecision(ctx, call, ap)
	}
	if ap.Status != mesh.ApprovalApproved {
		by := ""
		if ap.Decision != nil && ap.Decision.By != "" {
			by = " (" + ap.Decision.By + ")"
		}
		t.result(call, "rejected: the approver"+by+" rejected this call; it was not run", true)
		return false
	}
	call.Arguments = ap.ToolArgs // the arguments that were approved, not re-generated
	if _, remote := remoteName(call); remote {
		return t.callRemote(ctx, call, ap.UUID, true)
	}
	content, isErr := t.callTool(ctx, call, ap.UUID, approvedToolWait)
	t.result(call, content, isErr)
	return false
}

func (t *turn) emitCall(call mesh.ToolCall) {
	parent := ""
	for i := len(t.added) - 1; i >= 0; i-- {
		if len(t.added[i].ToolCalls) > 0 {
			parent = t.added[i].ID
			break
		}
	}
	t.emit(mesh.Event{Type: mesh.EventToolCallStart, ToolCallID: call.ID, ToolCallName: call.Name, ParentMessageID: parent})
	t.emit(mesh.Event{Type: mesh.EventToolCallArgs, ToolCallID: call.ID, Delta: call.ArgumentsJSON()})
	t.emit(mesh.Event{Type: mesh.EventToolCallEnd, ToolCallID: call.ID})
}

// result records a tool's answer as a tool message and a TOOL_CALL_RESULT.
func (t *turn) result(call mesh.ToolCall, content string, isError bool) {
	id := call.ID + "-result"
	m := t.message(id, mesh.RoleTool, content)
	m.ToolCallID, m.ToolName, m.IsError = call.ID, call.Name, isError
	t.added = append(t.added, m)
	ev := mesh.Event{Type: mesh.EventToolCallResult, MessageID: id, ToolCallID: call.ID, Content: content, Role: string(mesh.RoleTool)}
	if isError {
		// AG-UI's result has no error flag; streams that show failures read this.
		ev.Metadata = map[string]any{"isError": true}
	}
	t.emit(ev)
}

// pause creates the approval a destructive call waits for.
func (t *turn) pause(ctx context.Context, call mesh.ToolCall) error {
	return t.await(ctx, call, t.newApproval(call))
}

// newApproval is the approval of a call, its id derived from run and call
// ids so that a run executed again creates the same one.
func (t *turn) newApproval(call mesh.ToolCall) *mesh.Approval {
	return &mesh.Approval{
		UUID:           uuid.NewSHA1(approvalNamespace, []byte(t.runID()+"/"+call.ID)).String(),
		ConversationID: t.conv.ID,
		SessionID:      t.conv.SessionID,
		Agent:          t.a.name,
		RunID:          t.runID(),
		ToolCallID:     call.ID,
		ToolName:       call.Name,
		Server:         call.Server,
		ToolArgs:       call.Arguments,
		Description:    describeCall(call),
		StepPath:       t.step.path,
	}
}

// await stores ap and pauses the run on it.
func (t *turn) await(ctx context.Context, call mesh.ToolCall, ap *mesh.Approval) error {
	if err := t.a.approvals.Create(ctx, ap); err != nil {
		return err
	}
	for i := range t.added {
		for j := range t.added[i].ToolCalls {
			if t.added[i].ToolCalls[j].ID == call.ID {
				t.added[i].ToolCalls[j].ApprovalID = ap.UUID
			}
		}
	}
	t.paused = ap
	t.emit(mesh.Custom(mesh.CustomApprovalRequested, ap))
	t.notice(fmt.Sprintf("This action requires approval: %s. Approve or reject it with the approval UUID %s.", strings.TrimRight(ap.Description, ". "), ap.UUID))
	t.log.Info().Str("approval", ap.UUID).Str("tool", call.Name).Str("remote_task", ap.RemoteTaskID).Msg("waiting for approval")
	return nil
}

// notice adds an assistant message meant for people (models do not see it)
// and streams it.
func (t *turn) notice(text string) {
	t.notices++
	m := t.message(t.noticePrefix()+"-n"+strconv.Itoa(t.notices), mesh.RoleAssistant, text)
	m.Notice = true
	t.added = append(t.added, m)
	t.streamNotice(m.ID, text)
	t.response = text
}

// streamNotice streams a notice as a text message marked as one.
func (t *turn) streamNotice(id, text string) {
	t.emit(mesh.Event{Type: mesh.EventTextMessageStart, MessageID: id, Role: string(mesh.RoleAssistant), Name: t.author(), Metadata: map[string]any{"notice": true}})
	t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: id, Delta: text})
	t.emit(mesh.Event{Type: mesh.EventTextMessageEnd, MessageID: id})
}

func (t *turn) cancelled(ctx context.Context) {
	if errors.Is(context.Cause(ctx), errShutdown) {
		return
	}
	t.outcome = mesh.OutcomeCancelled
	t.notice("The turn was cancelled.")
}

func runResult(response string, usage *mesh.Usage) map[string]any {
	r := map[string]any{"response": response}
	if usage != nil {
		r["usage"] = usage
	}
	return r
}

// fail records a work item given up after its last delivery, so the
// conversation does not stay running forever: the runs of its tree end
// with an error.
func (t *turn) fail(ctx context.Context, code, text string) {
	runs := []string{t.runID()}
	var groupNext *mesh.WorkItem
	_, err := t.a.sessions.Update(ctx, t.item.Session, func(c *mesh.Conversation) error {
		runs, groupNext = []string{t.runID()}, nil
		tr := c.Tree
		if tr != nil {
			if pt := memberTurn(c, tr.ID); pt != nil && (tr.ID == t.item.TurnID || slices.Contains(tr.Runs, t.item.TurnID)) {
				// A member's turn of a group chat: the group carries on.
				now := time.Now().UTC()
				c.Messages = append(c.Messages, mesh.Message{ID: t.item.TurnID + "-failed", Role: mesh.RoleAssistant, Content: text, Notice: true, Name: pt.Speaker, TurnID: pt.RunID, CreatedAt: now})
				pt.Result = &mesh.RunSummary{ID: tr.ID, Runs: tr.Runs, Outcome: mesh.OutcomeError, ErrorCode: code, Error: text, FinishedAt: now}
				c.MarkTurn(tr.ID)
				for _, id := range tr.Runs {
					c.MarkTurn(id)
				}
				c.Tree, c.PendingApproval, c.PendingApprovals, c.PipelineState = nil, nil, nil, nil
				c.Status = mesh.StatusRunning
				groupNext = groupNextOf(c, pt)
				return nil
			}
		}
		ours := tr != nil && (tr.ID == t.item.TurnID || slices.Contains(tr.Runs, t.item.TurnID) || slices.Contains(tr.Runs, t.runID()))
		if !ours {
			if c.HasTurn(t.runID()) {
				return mesh.ErrNoChange
			}
			if c.Turn != nil && c.Turn.ID == t.runID() {
				c.Turn = nil
				c.Status = mesh.StatusActive
			}
		} else {
			for _, id := range tr.Runs {
				if !slices.Contains(runs, id) {
					runs = append(runs, id)
				}
			}
			c.Tree, c.Turn, c.Status = nil, nil, mesh.StatusActive
			c.PendingApproval, c.PendingApprovals, c.PipelineState = nil, nil, nil
		}
		for _, id := range runs {
			c.MarkTurn(id)
		}
		c.Messages = append(c.Messages, mesh.Message{ID: t.runID() + "-failed", Role: mesh.RoleAssistant, Content: text, Notice: true, TurnID: t.runID(), CreatedAt: time.Now().UTC()})
		c.LastRun = &mesh.RunSummary{ID: t.runID(), Runs: runs, Outcome: mesh.OutcomeError, ErrorCode: code, Error: text, FinishedAt: time.Now().UTC()}
		return nil
	})
	if err != nil && !errors.Is(err, mesh.ErrSessionNotFound) && !errors.Is(err, mesh.ErrNoChange) {
		t.log.Error().Err(err).Msg("record failed turn")
	}
	if groupNext != nil {
		if err := t.enqueueGroupNext(ctx, *groupNext); err != nil {
			t.log.Error().Err(err).Msg("tell the group a member's turn failed")
		}
		return
	}
	for _, id := range runs {
		if _, err := t.a.events.Publish(ctx, t.item.Session, id, "end:"+id, mesh.RunError(code, text)); err != nil {
			t.log.Error().Err(err).Str("run", id).Msg("publish the end of a failed run")
		}
	}
}

// llmErrorCode maps a provider error to a RUN_ERROR code.
func llmErrorCode(err error) string {
	var coded interface{ RunErrorCode() string }
	if errors.As(err, &coded) {
		return coded.RunErrorCode()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return mesh.CodeLLMTimeout
	}
	return mesh.CodeLLMError
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
