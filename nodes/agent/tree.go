package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file runs the agent tree (FR-021 to FR-026). A run of the tree lives
// in the conversation (mesh.TreeRun): every node it started, by key, with
// its status. Leaf nodes (llm, a2a) run as work items of their own, so the
// branches of a parallel node go to whichever replicas are free; composite
// nodes (sequential, parallel, loop) only schedule their children. When a
// node ends, the replica that ran it applies the outcome by compare-and-set:
// it writes the node's output_key, moves its parent on (next child, join,
// next iteration), and tells what to enqueue next and which AG-UI runs end.
// Redelivered work finds its node done and only enqueues again what is
// pending (deduplicated), so finished nodes never run twice.
//
// A single llm node (an agent without an agent: tree) is the same machinery
// with one node, run inside the turn's own work item.

// rootKey is the key of the tree's root; a child's key is its parent's key
// and its index: r.0, r.0.1 …
const rootKey = "r"

// step is a node of the configured tree, with what its runs need.
type step struct {
	key      string
	path     []int
	cfg      *config.Node
	parent   *step
	index    int // among its parent's children
	children []*step
	remotes  *remoteSet
	provider llm.Provider
}

func (n *step) leaf() bool { return n.cfg.Type == config.NodeLLM || n.cfg.Type == config.NodeA2A }

// buildTree prepares the tree of cfg for runs.
func (a *Agent) buildTree(root *config.Node, providers func(string) (llm.Provider, error)) error {
	a.steps = map[string]*step{}
	var build func(cfg *config.Node, parent *step, key string, path []int, index int) error
	build = func(cfg *config.Node, parent *step, key string, path []int, index int) error {
		n := &step{key: key, path: path, cfg: cfg, parent: parent, index: index, provider: a.cfg.Provider}
		if cfg.Model != "" && cfg.Model != a.cfg.Agent.LLM.Model {
			if providers == nil {
				return fmt.Errorf("agent: node %q uses model %s, but no provider factory was given", cfg.Name, cfg.Model)
			}
			p, err := providers(cfg.Model)
			if err != nil {
				return fmt.Errorf("agent: node %q: %w", cfg.Name, err)
			}
			n.provider = p
		}
		switch cfg.Type {
		case config.NodeA2A:
			n.remotes = a.pool.set([]config.A2AAgent{{Name: cfg.Name, URL: cfg.URL, Description: cfg.Description, Destructive: cfg.Destructive || cfg.DestructiveHint}})
		case config.NodeLLM:
			list := cfg.A2A
			if parent == nil && a.cfg.A2A != nil {
				list = a.cfg.A2A
			}
			n.remotes = a.pool.set(list)
		}
		a.steps[key] = n
		if parent != nil {
			parent.children = append(parent.children, n)
		}
		for i := range cfg.Agents {
			if err := build(&cfg.Agents[i], n, key+"."+strconv.Itoa(i), append(append([]int(nil), path...), i), i); err != nil {
				return err
			}
		}
		return nil
	}
	if err := build(root, nil, rootKey, []int{}, 0); err != nil {
		return err
	}
	a.root = a.steps[rootKey]
	a.remotes = a.root.remotes
	if a.remotes == nil {
		a.remotes = a.pool.set(nil)
	}
	a.simple = a.root.leaf() && a.root.cfg.Type == config.NodeLLM
	return nil
}

// maxIterations of a loop node.
func maxIterations(n *config.Node) int {
	if n.MaxIterations > 0 {
		return n.MaxIterations
	}
	return config.DefaultMaxIterations
}

// resolvePrompt fills {key} placeholders from the session state.
func resolvePrompt(prompt string, state map[string]any) string {
	return config.ResolvePlaceholders(prompt, func(key string) (string, bool) {
		v, ok := state[key]
		if !ok {
			return "", false
		}
		if s, ok := v.(string); ok {
			return s, true
		}
		return fmt.Sprint(v), true
	})
}

// systemPrompt is the node's prompt, its placeholders resolved; a node
// without one has the agent's.
func (t *turn) systemPrompt() string {
	p := t.step.cfg.Prompt
	if p == "" {
		p = t.a.cfg.Agent.Prompt
	}
	return resolvePrompt(p, t.conv.State)
}

// newStepRun is the run record of n, scheduled or started now.
func newStepRun(n *step, gen int, status, runID string) *mesh.StepRun {
	return &mesh.StepRun{Key: n.key, Path: n.path, Name: n.cfg.Name, Type: n.cfg.Type, Status: status, Gen: gen, RunID: runID}
}

// outcome is how a node's run ended, to be applied to the tree.
type outcome struct {
	status     string // mesh.NodeDone, NodeWaiting, NodeFailed, NodeCancelled, or started (a composite)
	output     string
	iterations int // model calls made, kept for a resume
	exitLoop   bool
	// paused are the approvals a waiting node created.
	paused  []*mesh.Approval
	errCode string
	errText string
}

// started is the outcome of a composite node that scheduled its children.
const started = "started"

// plan is what applying an outcome decided: work to enqueue, events to
// publish and runs to end. It is computed again from scratch whenever the
// compare-and-set is re-applied.
type plan struct {
	schedule   []mesh.WorkItem
	stepsEnded []string
	stepsBegun []string
	delta      []mesh.PatchOp
	endRuns    []string
	runOutcome string // success, interrupt, cancelled, error: when endRuns is set
	interrupts []mesh.Interrupt
	response   string
	errCode    string
	errText    string
	usage      *mesh.Usage
	treeRunID  string
	treeEnded  bool
	dropped    bool // the tree moved on without this node (cancelled, failed)
	notices    []mesh.Message
	// settled: the tree's run ended or paused (endRuns may still be empty:
	// a member's turn of a group chat is no AG-UI run of its own).
	settled bool
	// group and groupNext: a member's turn ended; the group is told
	// instead of the runs ending.
	group     string
	groupNext *mesh.WorkItem
}

// apply applies o, the outcome of node key's run gen, to c. It is the
// change function of the compare-and-set, so it decides everything from c.
func (t *turn) apply(c *mesh.Conversation, key string, gen int, o outcome, p *plan) error {
	*p = plan{}
	tr := c.Tree
	if tr == nil || tr.ID != t.treeID() {
		p.dropped = true
		return mesh.ErrNoChange
	}
	nr := tr.Steps[key]
	if nr == nil || nr.Gen != gen || nr.Status != mesh.StepRunning {
		p.dropped = true
		return mesh.ErrNoChange
	}
	p.treeRunID = tr.ID
	if t.usage != (llm.Usage{}) {
		u := mesh.Usage{}
		if tr.Usage != nil {
			u = *tr.Usage
		}
		u.InputTokens += t.usage.InputTokens
		u.OutputTokens += t.usage.OutputTokens
		tr.Usage = &u
	}
	now := time.Now().UTC()
	for _, m := range t.added {
		if !c.HasMessage(m.ID) {
			c.Messages = append(c.Messages, m)
		}
	}
	def := t.a.steps[key]
	switch o.status {
	case started:
		nr.Status = mesh.StepRunning
		t.startChildren(c, def, nr, p)
	case mesh.StepWaiting:
		nr.Status, nr.Iterations, nr.Resumed = mesh.StepWaiting, o.iterations, ""
		for _, ap := range o.paused {
			nr.Approvals = append(nr.Approvals, ap.UUID)
			c.PendingApprovals = append(c.PendingApprovals, *ap.Pending())
		}
		markApprovalIDs(c, o.paused)
	case mesh.StepDone:
		t.done(c, def, nr, o.output, o.exitLoop, p)
	case mesh.StepFailed, mesh.StepCancelled:
		nr.Status, nr.Error, nr.FinishedAt = o.status, o.errText, now
		p.errCode, p.errText = o.errCode, o.errText
	}
	t.settleTree(c, o, p)
	return nil
}

// startChildren schedules the children a composite node starts with.
func (t *turn) startChildren(c *mesh.Conversation, def *step, nr *mesh.StepRun, p *plan) {
	switch def.cfg.Type {
	case config.NodeParallel:
		for _, ch := range def.children {
			t.schedule(c, ch, p)
		}
	default: // sequential, loop
		nr.Next = 0
		t.schedule(c, def.children[0], p)
	}
}

// schedule makes node def pending, or starts it at once when it is a
// composite (which only schedules its own children).
func (t *turn) schedule(c *mesh.Conversation, def *step, p *plan) {
	gen := 1
	if prev := c.Tree.Steps[def.key]; prev != nil {
		gen = prev.Gen + 1
	}
	// Descendants of a node scheduled again (a loop's next iteration) start
	// afresh: their old runs are forgotten.
	for key := range c.Tree.Steps {
		if strings.HasPrefix(key, def.key+".") {
			delete(c.Tree.Steps, key)
		}
	}
	nr := newStepRun(def, gen, mesh.StepPending, t.runID())
	c.Tree.Steps[def.key] = nr
	if def.leaf() {
		p.schedule = append(p.schedule, mesh.WorkItem{Kind: mesh.WorkStep, Session: c.ID, TurnID: c.Tree.ID, Step: def.key, Gen: gen, RunID: t.runID()})
		return
	}
	nr.Status, nr.StartedAt = mesh.StepRunning, time.Now().UTC()
	p.stepsBegun = append(p.stepsBegun, def.cfg.Name)
	t.startChildren(c, def, nr, p)
}

// done records a node's output and moves its parent on.
func (t *turn) done(c *mesh.Conversation, def *step, nr *mesh.StepRun, output string, exitLoop bool, p *plan) {
	nr.Status, nr.Output, nr.ExitLoop, nr.FinishedAt = mesh.StepDone, output, exitLoop, time.Now().UTC()
	p.stepsEnded = append(p.stepsEnded, def.cfg.Name)
	if key := def.cfg.OutputKey; key != "" {
		if c.State == nil {
			c.State = map[string]any{}
		}
		op := "add"
		if _, ok := c.State[key]; ok {
			op = "replace"
		}
		c.State[key] = output
		p.delta = append(p.delta, mesh.PatchOp{Op: op, Path: "/" + key, Value: output})
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
	active, waiting := false, false
	var failed *mesh.StepRun
	for _, nr := range tr.Steps {
		switch nr.Status {
		case mesh.StepPending, mesh.StepRunning:
			// A composite runs as long as its children do: only leaves
			// tell whether work goes on.
			if nr.Type == config.NodeLLM || nr.Type == config.NodeA2A {
				active = true
			}
		case mesh.StepWaiting:
			waiting = true
		case mesh.StepFailed, mesh.StepCancelled:
			failed = nr
		}
	}
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
		}
		p.schedule = nil
	case root.Status == mesh.StepDone:
		p.runOutcome = mesh.OutcomeSuccess
		p.response = root.Output
		if t.a.simple {
			p.response = t.response
		}
	case !active && waiting:
		p.runOutcome = mesh.OutcomeInterrupt
		p.response = t.response // the notice of the approval this run asked for
		if o.status != mesh.StepWaiting {
			// This node finished; others of the tree wait.
			var b strings.Builder
			for i, pa := range c.PendingApprovals {
				if i > 0 {
					b.WriteString("\n")
				}
				fmt.Fprintf(&b, "Waiting for approval: %s. Approve or reject it with the approval UUID %s.", strings.TrimRight(pa.Description, ". "), pa.UUID)
			}
			p.response = b.String()
		}
	default:
		// Nodes still run or wait to: the runs go on.
		c.Status = mesh.StatusRunning
		if len(c.PendingApprovals) > 0 {
			first := c.PendingApprovals[0]
			c.PendingApproval = &first
		}
		return
	}
	p.settled = true
	p.endRuns = append([]string(nil), tr.Runs...)
	for _, id := range tr.Runs {
		c.MarkTurn(id)
	}
	c.MarkTurn(tr.ID)
	tr.Runs = nil
	p.usage = tr.Usage
	summary := &mesh.RunSummary{ID: tr.ID, Runs: p.endRuns, Outcome: p.runOutcome, Response: p.response, ErrorCode: p.errCode, Error: p.errText, Usage: p.usage, FinishedAt: time.Now().UTC()}
	if !t.a.simple {
		summary.Steps = stepSummaries(tr)
	}
	if pt := memberTurn(c, tr.ID); pt != nil {
		// A member's turn of a group chat: its outcome is the group's to
		// act on, and the chat's round holds the conversation.
		pt.Result, pt.EndChat = summary, t.endChat
		p.group = c.Group.Name
		p.groupNext = groupNextOf(c, pt)
	} else {
		c.LastRun = summary
	}
	if p.runOutcome == mesh.OutcomeInterrupt {
		c.Status = mesh.StatusWaitingApproval
		first := c.PendingApprovals[0]
		c.PendingApproval = &first
		for _, pa := range c.PendingApprovals {
			p.interrupts = append(p.interrupts, mesh.Interrupt{ID: pa.UUID, Reason: mesh.InterruptReasonToolApproval, ToolCallID: pa.ToolCallID, Message: pa.Description})
		}
		// The position is kept for the resumes; PipelineState shows it the
		// way seed 002 does.
		var at *mesh.StepRun
		for _, nr := range tr.Steps {
			if nr.Status == mesh.StepWaiting && (at == nil || nr.Key < at.Key) {
				at = nr
			}
		}
		waitingAt, outputKey, steps := []int{}, "", 0
		if at != nil {
			waitingAt, outputKey, steps = at.Path, t.a.steps[at.Key].cfg.OutputKey, at.Iterations
		}
		c.PipelineState = &mesh.PipelineState{PausedStepPath: waitingAt, PausedStepOutputKey: outputKey, SessionState: stringState(c.State), UserMessage: tr.UserMessage, RunID: t.runID(), Iterations: steps}
		tr.Usage = nil // counted in this summary; the resumes count afresh
		c.Turn = nil
		if p.group != "" {
			c.Group.Round.Waiting = true
		}
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
	c.Status = mesh.StatusActive
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
// wherever its message is.
func markApprovalIDs(c *mesh.Conversation, aps []*mesh.Approval) {
	for _, ap := range aps {
		for i := range c.Messages {
			for j := range c.Messages[i].ToolCalls {
				if c.Messages[i].ToolCalls[j].ID == ap.ToolCallID {
					c.Messages[i].ToolCalls[j].ApprovalID = ap.UUID
				}
			}
		}
	}
}

// pendingWork lists the work items of a tree's pending nodes: after a
// redelivery they are enqueued again (deduplicated), in case the replica
// that scheduled them died before it enqueued them.
func pendingWork(c *mesh.Conversation) []mesh.WorkItem {
	if c.Tree == nil {
		return nil
	}
	var out []mesh.WorkItem
	for key, nr := range c.Tree.Steps {
		if nr.Status == mesh.StepPending {
			out = append(out, mesh.WorkItem{Kind: mesh.WorkStep, Session: c.ID, TurnID: c.Tree.ID, Step: key, Gen: nr.Gen, RunID: nr.RunID})
		}
	}
	return out
}

// enqueue publishes work items.
func (t *turn) enqueue(ctx context.Context, items []mesh.WorkItem) error {
	for _, item := range items {
		if err := mesh.PublishWork(ctx, t.a.cfg.JS, t.a.ns, mesh.RoleAgent, t.a.name, item, t.workHeaders()); err != nil {
			return err
		}
	}
	return nil
}

// errStepGone: the node's run is no longer this work item's to do.
var errStepGone = errors.New("agent: node run already settled or superseded")

// cancelRuns asks every replica to stop what still runs of a tree that
// failed or was cancelled.
func (a *Agent) cancelRuns(session, treeID string) {
	subj, err := a.ns.SessionCancel(session)
	if err != nil || treeID == "" {
		return
	}
	body, _ := json.Marshal(mesh.CancelRequest{RunID: treeID})
	if err := a.cfg.NC.Publish(subj, body); err != nil {
		a.log.Warn().Err(err).Str("session", session).Msg("cancel the rest of a failed tree")
	}
}

// exitLoopTool is the function offered to llm nodes with can_exit_loop: a
// call ends the loop around them after their step (FR-024).
const exitLoopTool = "exit_loop"

var exitLoopSpec = llm.Tool{
	Name:        exitLoopTool,
	Description: "End the loop this step runs in: call it once the loop's goal is reached, then give your final answer.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	ReadOnly:    true,
}

// stepOffer is the tools offered to the node's model: the catalog and its
// sub-agents, cut to the node's tools list when it has one, and exit_loop
// when the node may end its loop.
func (t *turn) stepOffer() *offer {
	o := t.a.offer(t.remoteSet())
	if allow := t.step.cfg.Tools; allow != nil {
		keep := map[string]bool{}
		for _, name := range *allow {
			keep[name] = true
		}
		allowed := func(fn string) bool {
			if keep[fn] {
				return true
			}
			if e, ok := o.mcp[fn]; ok {
				return keep[e.Name] || keep[e.Server+"/"+e.Name]
			}
			if r, ok := o.remote[fn]; ok {
				return keep[r.cfg.Name]
			}
			return false
		}
		tools := o.tools[:0:0]
		for _, tool := range o.tools {
			if allowed(tool.Name) {
				tools = append(tools, tool)
			} else {
				delete(o.mcp, tool.Name)
				delete(o.remote, tool.Name)
			}
		}
		o.tools = tools
	}
	if t.step.cfg.CanExitLoop {
		o.tools = append(o.tools, exitLoopSpec)
		o.exitLoop = true
	}
	if t.groupName != "" && t.step.cfg.Type == config.NodeLLM {
		o.tools = append(o.tools, endChatSpec)
		o.endChat = true
	}
	return o
}

// runA2A runs an a2a node: its prompt (placeholders resolved), or without
// one the user's message, goes to the remote agent, whose answer is the
// node's reply. It is a call like a model's call of a sub-agent, so it is
// recorded, approved when the remote agent is destructive, and paused on a
// proxy approval when the remote agent asks for one.
func (t *turn) runA2A(ctx context.Context) {
	r := t.step.remotes.list[0]
	text := resolvePrompt(t.step.cfg.Prompt, t.conv.State)
	if strings.TrimSpace(text) == "" {
		text = t.conv.Tree.UserMessage
	}
	call := mesh.ToolCall{
		ID: t.idPrefix() + "-c0-0", Name: r.fn, Server: remoteServerPrefix + r.cfg.Name, Tool: r.cfg.Name,
		Arguments: map[string]any{"message": text}, Destructive: r.cfg.IsDestructive(),
	}
	if len(t.lastCalls()) == 0 {
		m := t.message(t.idPrefix()+"-a0", mesh.RoleAssistant, "")
		m.ToolCalls = []mesh.ToolCall{call}
		t.added = append(t.added, m)
	}
	if t.resolvePending(ctx) {
		t.outcome = mesh.OutcomeInterrupt
		return
	}
	if ctx.Err() != nil {
		t.cancelled(ctx)
		return
	}
	var res *mesh.Message
	for _, list := range [][]mesh.Message{t.conv.Messages, t.added} {
		for i := range list {
			if list[i].Role == mesh.RoleTool && list[i].ToolCallID == call.ID {
				res = &list[i]
			}
		}
	}
	if res == nil {
		t.errCode, t.errText = mesh.CodeInternal, "the call to the remote agent left no result"
		t.outcome = mesh.OutcomeError
		return
	}
	if res.IsError {
		t.errCode, t.errText = mesh.CodeSubAgentError, res.Content
		t.notice(fmt.Sprintf("Step %s failed: %s", t.step.cfg.Name, res.Content))
		t.outcome = mesh.OutcomeError
		return
	}
	id := t.idPrefix() + "-a1"
	t.added = append(t.added, t.message(id, mesh.RoleAssistant, res.Content))
	t.emit(mesh.Event{Type: mesh.EventTextMessageStart, MessageID: id, Role: string(mesh.RoleAssistant), Name: t.author()})
	t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: id, Delta: res.Content})
	t.emit(mesh.Event{Type: mesh.EventTextMessageEnd, MessageID: id})
	t.response = res.Content
	t.outcome = mesh.OutcomeSuccess
}

// stepSummaries are the leaf node runs of tr, by key.
func stepSummaries(tr *mesh.TreeRun) []mesh.StepSummary {
	var out []mesh.StepSummary
	for _, nr := range tr.Steps {
		if nr.Type != config.NodeLLM && nr.Type != config.NodeA2A {
			continue
		}
		out = append(out, mesh.StepSummary{Key: nr.Key, Name: nr.Name, Status: nr.Status, Worker: nr.Worker, StartedAt: nr.StartedAt, FinishedAt: nr.FinishedAt})
	}
	slices.SortFunc(out, func(a, b mesh.StepSummary) int { return strings.Compare(a.Key, b.Key) })
	return out
}
