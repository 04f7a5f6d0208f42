package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// This file runs the agent tree. A run of the tree lives in the
// conversation (mesh.TreeRun): every step it started, by key, with its
// status. Leaf steps (llm, a2a) run as work items of their own, so the
// branches of a parallel step go to whichever replicas are free; composite
// steps (sequential, parallel, loop) only schedule their children. When a
// step ends, the replica that ran it applies the outcome by compare-and-set
// (apply): it writes the step's output_key, moves its parent on (next
// child, join, next iteration), and plans what to enqueue next and which
// AG-UI runs end; outcome.go publishes the plan. Redelivered work finds its
// step done and only enqueues again what is pending (deduplicated), so
// finished steps never run twice.
//
// A single llm step (an agent without an agent: tree) is the same machinery
// with one step, run inside the turn's own work item.

// newStepRun is the run record of s, scheduled or started now.
func newStepRun(s *step, gen int, status, runID string) *mesh.StepRun {
	return &mesh.StepRun{Key: s.key, Path: s.path, Name: s.cfg.Name, Type: s.cfg.Type, Status: status, Gen: gen, RunID: runID}
}

// outcome is how a step's run ended, to be applied to the tree.
type outcome struct {
	status     string // mesh.StepDone, StepWaiting, StepFailed, StepCancelled, or started (a composite)
	output     string
	iterations int // model calls made, kept for a resume
	exitLoop   bool
	// paused are the approvals a waiting step created.
	paused  []*mesh.Approval
	errCode string
	errText string
	resetAt time.Time // a rate-limited provider's, see ending
}

// started is the outcome of a composite step that scheduled its children.
const started = "started"

// plan is what applying an outcome decided: work to enqueue, events to
// publish and runs to end. It is computed again from scratch whenever the
// compare-and-set is re-applied.
type plan struct {
	schedule   []mesh.WorkItem
	stepsEnded []string
	stepsBegun []string
	delta      []mesh.PatchOp
	// snapshot is the saved state, set when the run's live STATE_DELTAs
	// started from another state than the one saved (see applyState).
	snapshot   map[string]any
	endRuns    []string
	runOutcome string // success, interrupt, cancelled, error: when endRuns is set
	interrupts []mesh.Interrupt
	response   string
	errCode    string
	errText    string
	resetAt    time.Time
	usage      *mesh.Usage
	convUsage  *mesh.ConversationUsage // the conversation's, once the run ended
	treeRunID  string
	treeEnded  bool
	dropped    bool // the tree moved on without this step (cancelled, failed)
	notices    []mesh.Message
	// settled: the tree's run ended or paused (endRuns may still be empty:
	// a member's turn of a group chat is no AG-UI run of its own).
	settled bool
	// group and groupNext: a member's turn ended; the group is told
	// instead of the runs ending.
	group     string
	groupNext *mesh.WorkItem
}

// apply applies o, the outcome of step key's run gen, to c. It is the
// change function of the compare-and-set, so it decides everything from c.
func (t *turn) apply(c *mesh.Conversation, key string, gen int, o outcome, p *plan) error {
	*p = plan{}
	tr := c.Tree
	if tr == nil || tr.ID != t.treeID() {
		p.dropped = true
		return store.ErrNoChange
	}
	sr := tr.Steps[key]
	if sr == nil || sr.Gen != gen || sr.Status != mesh.StepRunning {
		p.dropped = true
		return store.ErrNoChange
	}
	p.treeRunID = tr.ID
	if t.ex.usage != (llm.Usage{}) {
		// The run's and the conversation's usage change in the save that
		// applies the run: no write of their own.
		u := t.runUsage()
		sum := mesh.Usage{}
		if tr.Usage != nil {
			sum = *tr.Usage
		}
		sum.Add(u)
		tr.Usage = &sum
		c.AddUsage(t.ex.model, u)
	}
	if t.ex.model != "" {
		tr.Model = t.ex.model
	}
	now := time.Now().UTC()
	for _, m := range t.ex.added {
		if !c.HasMessage(m.ID) {
			c.Messages = append(c.Messages, m)
			if m.Role == mesh.RoleTool {
				tr.ToolsCalled = append(tr.ToolsCalled, m.ToolName)
			}
		}
	}
	t.applyState(c, p)
	def := t.a.steps[key]
	switch o.status {
	case started:
		sr.Status = mesh.StepRunning
		t.startChildren(c, def, sr, p)
	case mesh.StepWaiting:
		sr.Status, sr.Iterations, sr.Resumed = mesh.StepWaiting, o.iterations, ""
		for _, ap := range o.paused {
			sr.Approvals = append(sr.Approvals, ap.UUID)
			c.PendingApprovals = append(c.PendingApprovals, *ap.Pending())
		}
		markApprovalIDs(c, o.paused)
	case mesh.StepDone:
		t.done(c, def, sr, o.output, o.exitLoop, p)
	case mesh.StepFailed, mesh.StepCancelled:
		sr.Status, sr.Error, sr.FinishedAt = o.status, o.errText, now
		p.errCode, p.errText, p.resetAt = o.errCode, o.errText, o.resetAt
	}
	t.settleTree(c, o, p)
	return nil
}

// startChildren schedules the children a composite step starts with.
func (t *turn) startChildren(c *mesh.Conversation, def *step, sr *mesh.StepRun, p *plan) {
	switch def.cfg.Type {
	case config.NodeParallel:
		for _, ch := range def.children {
			t.schedule(c, ch, p)
		}
	default: // sequential, loop
		sr.Next = 0
		t.schedule(c, def.children[0], p)
	}
}

// schedule makes step def pending, or starts it at once when it is a
// composite (which only schedules its own children).
func (t *turn) schedule(c *mesh.Conversation, def *step, p *plan) {
	gen := 1
	if prev := c.Tree.Steps[def.key]; prev != nil {
		gen = prev.Gen + 1
	}
	// Descendants of a step scheduled again (a loop's next iteration) start
	// afresh: their old runs are forgotten.
	for key := range c.Tree.Steps {
		if strings.HasPrefix(key, def.key+".") {
			delete(c.Tree.Steps, key)
		}
	}
	sr := newStepRun(def, gen, mesh.StepPending, t.runID())
	c.Tree.Steps[def.key] = sr
	if def.leaf() {
		p.schedule = append(p.schedule, mesh.WorkItem{Kind: mesh.WorkStep, Session: c.ID, TurnID: c.Tree.ID, Step: def.key, Gen: gen, RunID: t.runID()})
		return
	}
	sr.Status, sr.StartedAt = mesh.StepRunning, time.Now().UTC()
	p.stepsBegun = append(p.stepsBegun, def.cfg.Name)
	t.startChildren(c, def, sr, p)
}

// done records a step's output and moves its parent on.
func (t *turn) done(c *mesh.Conversation, def *step, sr *mesh.StepRun, output string, exitLoop bool, p *plan) {
	sr.Status, sr.Output, sr.ExitLoop, sr.FinishedAt = mesh.StepDone, output, exitLoop, time.Now().UTC()
	p.stepsEnded = append(p.stepsEnded, def.cfg.Name)
	if key := def.cfg.OutputKey; key != "" {
		if c.State == nil {
			c.State = map[string]any{}
		}
		op := "add"
		if _, ok := c.State[key]; ok {
			op = "replace"
		}
		value := outputValue(def, output)
		c.State[key] = value
		p.delta = append(p.delta, mesh.PatchOp{Op: op, Path: "/" + key, Value: value})
	}
	parent := def.parent
	if parent == nil {
		return // the root: the tree is complete
	}
	pr := c.Tree.Steps[parent.key]
	switch parent.cfg.Type {
	case config.NodeSequential:
		if exitLoop || def.index+1 >= len(parent.children) {
			t.done(c, parent, pr, output, exitLoop, p)
			return
		}
		pr.Next = def.index + 1
		t.schedule(c, parent.children[def.index+1], p)
	case config.NodeParallel:
		var parts []string
		exit := false
		for _, ch := range parent.children {
			cr := c.Tree.Steps[ch.key]
			if cr == nil || cr.Status != mesh.StepDone {
				return // the join waits
			}
			parts = append(parts, ch.cfg.Name+": "+cr.Output)
			exit = exit || cr.ExitLoop
		}
		t.done(c, parent, pr, strings.Join(parts, "\n\n"), exit, p)
	case config.NodeLoop:
		switch {
		case exitLoop:
			t.done(c, parent, pr, output, false, p)
		case def.index+1 < len(parent.children):
			pr.Next = def.index + 1
			t.schedule(c, parent.children[def.index+1], p)
		default:
			pr.Iteration++
			if pr.Iteration >= maxIterations(parent.cfg) {
				text := fmt.Sprintf("The loop %s stopped after %d iterations: no step called exit_loop.", parent.cfg.Name, pr.Iteration)
				id := fmt.Sprintf("%s-%sg%d-stopped", c.Tree.ID, idKey(parent.key), pr.Gen)
				p.notices = append(p.notices, mesh.Message{ID: id, Role: mesh.RoleAssistant, Content: text, Notice: true, Name: parent.cfg.Name, Step: parent.key, TurnID: t.runID(), CreatedAt: time.Now().UTC()})
				t.done(c, parent, pr, output, false, p)
				return
			}
			pr.Next = 0
			t.schedule(c, parent.children[0], p)
		}
	}
}

// settleTree decides whether the tree completed, failed, was cancelled or
// waits, and sets the conversation accordingly.
func (t *turn) settleTree(c *mesh.Conversation, o outcome, p *plan) {
	tr := c.Tree
	root := tr.Steps[rootKey]
	active, waiting, failed := scanSteps(tr)
	for _, n := range p.notices {
		if !c.HasMessage(n.ID) {
			c.Messages = append(c.Messages, n)
		}
	}
	switch {
	case failed != nil:
		p.runOutcome = mesh.OutcomeError
		if failed.Status == mesh.StepCancelled {
			p.runOutcome = mesh.OutcomeCancelled
			if o.status == mesh.StepCancelled {
				p.response = t.end.response // this step's notice of why
			}
		}
		p.schedule = nil
	case root.Status == mesh.StepDone:
		p.runOutcome = mesh.OutcomeSuccess
		p.response = root.Output
		if t.a.simple {
			p.response = t.end.response
		}
	case !active && waiting:
		p.runOutcome = mesh.OutcomeInterrupt
		p.response = t.end.response // the notice of the approval this run asked for
		if o.status != mesh.StepWaiting {
			// This step finished; others of the tree wait.
			p.response = waitingText(c.PendingApprovals)
		}
	default:
		// Steps still run or wait to: the runs go on.
		c.Status = mesh.StatusRunning
		if len(c.PendingApprovals) > 0 {
			first := c.PendingApprovals[0]
			c.PendingApproval = &first
		}
		return
	}
	t.summarize(c, p)
	if p.runOutcome == mesh.OutcomeInterrupt {
		t.waitTree(c, p)
		return
	}
	p.treeEnded = true
	c.Tree = nil
	c.PendingApproval, c.PendingApprovals, c.PipelineState = nil, nil, nil
	if p.group != "" {
		c.Status = mesh.StatusRunning // the group carries the chat on
		return
	}
	c.Turn = nil
	c.Status = c.IdleStatus()
}

// scanSteps tells whether leaf steps of tr still run or wait to (active),
// whether some wait for an approval, and which failed or was cancelled.
func scanSteps(tr *mesh.TreeRun) (active, waiting bool, failed *mesh.StepRun) {
	for _, sr := range tr.Steps {
		switch sr.Status {
		case mesh.StepPending, mesh.StepRunning:
			// A composite runs as long as its children do: only leaves
			// tell whether work goes on.
			if sr.Type == config.NodeLLM || sr.Type == config.NodeA2A {
				active = true
			}
		case mesh.StepWaiting:
			waiting = true
		case mesh.StepFailed, mesh.StepCancelled:
			failed = sr
		}
	}
	return active, waiting, failed
}

// waitingText is the answer of a run whose step finished while others of
// the tree wait: the approvals they wait for.
func waitingText(pending []mesh.PendingApproval) string {
	var b strings.Builder
	for i, pa := range pending {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "Waiting for approval: %s.", strings.TrimRight(pa.Description, ". "))
	}
	return b.String()
}

// summarize ends the runs of a tree that completed, failed or waits: they
// are marked applied, and the run's summary goes on the conversation, or,
// for a member's turn of a group chat, on the chat's pending turn.
func (t *turn) summarize(c *mesh.Conversation, p *plan) {
	tr := c.Tree
	p.settled = true
	p.endRuns = append([]string(nil), tr.Runs...)
	for _, id := range tr.Runs {
		c.MarkTurn(id)
	}
	c.MarkTurn(tr.ID)
	tr.Runs = nil
	p.usage, p.convUsage = tr.Usage, c.Usage
	summary := &mesh.RunSummary{ID: tr.ID, Runs: p.endRuns, Outcome: p.runOutcome, Response: p.response, ErrorCode: p.errCode, Error: p.errText, Usage: p.usage,
		Model: tr.Model, ToolsCalled: tr.ToolsCalled, FinishedAt: time.Now().UTC()}
	if !t.a.simple {
		summary.Steps = stepSummaries(tr)
	}
	if pt := memberTurn(c, tr.ID); pt != nil {
		// A member's turn of a group chat: its outcome is the group's to
		// act on, and the chat's round holds the conversation.
		pt.Result, pt.EndChat = summary, t.end.endChat
		p.group = c.Group.Name
		p.groupNext = groupNextOf(c, pt)
	} else {
		c.LastRun = summary
	}
}

// waitTree leaves the conversation waiting for the approvals of a tree
// whose every running step paused, with the interrupts the runs end on.
func (t *turn) waitTree(c *mesh.Conversation, p *plan) {
	tr := c.Tree
	c.Status = mesh.StatusWaitingApproval
	first := c.PendingApprovals[0]
	c.PendingApproval = &first
	for _, pa := range c.PendingApprovals {
		p.interrupts = append(p.interrupts, mesh.Interrupt{ID: pa.UUID, Reason: mesh.InterruptReasonToolApproval, ToolCallID: pa.ToolCallID, Message: pa.Description})
	}
	// The position is kept for the resumes; PipelineState shows a client
	// where the run paused: the paused step's path and output_key.
	var at *mesh.StepRun
	for _, sr := range tr.Steps {
		if sr.Status == mesh.StepWaiting && (at == nil || sr.Key < at.Key) {
			at = sr
		}
	}
	waitingAt, outputKey, iterations := []int{}, "", 0
	if at != nil {
		waitingAt, outputKey, iterations = at.Path, t.a.steps[at.Key].cfg.OutputKey, at.Iterations
	}
	c.PipelineState = &mesh.PipelineState{PausedStepPath: waitingAt, PausedStepOutputKey: outputKey, SessionState: stringState(c.State), UserMessage: tr.UserMessage, RunID: t.runID(), Iterations: iterations}
	// Counted in this summary: the resumes count afresh.
	tr.Usage, tr.ToolsCalled = nil, nil
	c.Turn = nil
	if p.group != "" {
		c.Group.Round.Waiting = true
	}
}

func stringState(state map[string]any) map[string]string {
	if len(state) == 0 {
		return nil
	}
	out := make(map[string]string, len(state))
	for k, v := range state {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// markApprovalIDs records on each paused call the approval it waits for,
// in the messages this save appends (the log keeps those stored as they
// were written: a call paused again on a resume keeps its first mark).
func markApprovalIDs(c *mesh.Conversation, aps []*mesh.Approval) {
	for _, ap := range aps {
		for i := c.Stored(); i < len(c.Messages); i++ {
			for j := range c.Messages[i].ToolCalls {
				if c.Messages[i].ToolCalls[j].ID == ap.ToolCallID {
					c.Messages[i].ToolCalls[j].ApprovalID = ap.UUID
				}
			}
		}
	}
}

// pendingWork lists the work items of a tree's pending steps: after a
// redelivery they are enqueued again (deduplicated), in case the replica
// that scheduled them died before it enqueued them.
func pendingWork(c *mesh.Conversation) []mesh.WorkItem {
	if c.Tree == nil {
		return nil
	}
	var out []mesh.WorkItem
	for key, sr := range c.Tree.Steps {
		if sr.Status == mesh.StepPending {
			out = append(out, mesh.WorkItem{Kind: mesh.WorkStep, Session: c.ID, TurnID: c.Tree.ID, Step: key, Gen: sr.Gen, RunID: sr.RunID})
		}
	}
	return out
}

// enqueue publishes work items.
func (t *turn) enqueue(ctx context.Context, items []mesh.WorkItem) error {
	for _, item := range items {
		if err := workloop.Publish(ctx, t.a.cfg.JS, t.a.ns, t.a.workRole, t.a.name, item, t.workHeaders()); err != nil {
			return err
		}
	}
	return nil
}

// stepSummaries are the runs of the leaf steps of tr, by key.
func stepSummaries(tr *mesh.TreeRun) []mesh.StepSummary {
	var out []mesh.StepSummary
	for _, sr := range tr.Steps {
		if sr.Type != config.NodeLLM && sr.Type != config.NodeA2A {
			continue
		}
		out = append(out, mesh.StepSummary{Key: sr.Key, Name: sr.Name, Status: sr.Status, Worker: sr.Worker, StartedAt: sr.StartedAt, FinishedAt: sr.FinishedAt})
	}
	slices.SortFunc(out, func(a, b mesh.StepSummary) int { return strings.Compare(a.Key, b.Key) })
	return out
}
