package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/nodes/agent/llm"
)

// Outcomes of claiming a conversation for a turn.
var (
	errAlreadyApplied = errors.New("agent: turn already applied")
	errBusy           = errors.New("agent: another turn runs in this conversation")
	errWaiting        = errors.New("agent: conversation waits for an approval")
	errStaleResume    = errors.New("agent: resume of an approval the conversation no longer waits for")
	errLostClaim      = errors.New("agent: the conversation was taken over by another turn")
)

// approvalNamespace derives approval ids from run and call ids, so that a
// run executed again after a crash creates the same approval, not a second.
var approvalNamespace = uuid.MustParse("8f3c1a52-6f0e-4f0a-9a39-3f7f1c2b9e11")

// turn is one execution of one work item.
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

	added      []mesh.Message // messages this run adds
	iterations int
	usage      llm.Usage
	resumed    *mesh.Approval // the decided approval a resume carries on from
	paused     *mesh.Approval // the approval this run waits for
	notices    int

	outcome  string // mesh.OutcomeSuccess, OutcomeInterrupt, OutcomeCancelled, OutcomeError
	errCode  string
	errText  string
	response string
}

func (t *turn) runID() string { return t.item.TurnID }

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

// run executes the turn; nil means it is settled (applied, or nothing to do).
func (t *turn) run(ctx context.Context) error {
	c, err := t.claim(ctx)
	switch {
	case errors.Is(err, errAlreadyApplied), errors.Is(err, errStaleResume):
		t.log.Info().Err(err).Msg("nothing to do")
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
	t.a.register(c.ID, t.runID(), t.cancel)
	t.ev = t.a.events.Run(t.item.Session, t.runID(), t.attempt)
	if t.attempt > 1 {
		t.emit(mesh.Custom(mesh.CustomRunRetried, map[string]any{"attempt": t.attempt, "runId": t.runID()}))
	}
	t.emit(mesh.RunStarted(c.ID, t.runID()))
	// Clients start every run from the whole session state; later changes
	// come as STATE_DELTA.
	t.emit(mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: stateOf(c)})

	if t.item.Kind == mesh.WorkResume {
		if err := t.loadResume(ctx); err != nil {
			return err
		}
	}
	t.loop(ctx)
	if errors.Is(context.Cause(ctx), errShutdown) {
		return context.Cause(ctx)
	}
	return t.finish(context.WithoutCancel(ctx))
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

func (t *turn) claimChange(c *mesh.Conversation) error {
	id := t.item.TurnID
	if c.HasTurn(id) {
		return errAlreadyApplied
	}
	if c.Turn != nil && c.Turn.ID != id && time.Since(c.Turn.StartedAt) < t.a.cfg.StaleTurn {
		return errBusy
	}
	switch t.item.Kind {
	case mesh.WorkResume:
		if c.PendingApproval == nil || c.PendingApproval.UUID != t.item.ApprovalID {
			return errStaleResume
		}
	default:
		if c.Status == mesh.StatusWaitingApproval && (c.Turn == nil || c.Turn.ID != id) {
			return errWaiting
		}
		if !c.HasMessage(id) {
			c.Messages = append(c.Messages, mesh.Message{
				ID: id, Role: mesh.RoleUser, Content: t.item.Message, TurnID: id, CreatedAt: time.Now().UTC(),
			})
		}
	}
	if c.Agent == "" {
		c.Agent = t.a.name
	}
	c.Turn = &mesh.Turn{ID: id, Kind: t.item.Kind, Node: t.a.cfg.NodeID, Attempt: t.attempt, StartedAt: time.Now().UTC()}
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
	if p := t.conv.PipelineState; p != nil {
		t.iterations = p.Iterations
	}
	return nil
}

// history is the conversation as the model sees it: every message but the
// system prompt and the notices meant for people.
func (t *turn) history() []llm.Message {
	all := append(append([]mesh.Message(nil), t.conv.Messages...), t.added...)
	out := make([]llm.Message, 0, len(all))
	for _, m := range all {
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
		msg := mesh.Message{ID: msgID, Role: mesh.RoleAssistant, Content: resp.Text, TurnID: t.runID(), CreatedAt: time.Now().UTC()}
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
	msgID := t.runID() + "-a" + strconv.Itoa(t.iterations)
	started := false
	start := func() {
		if !started {
			started = true
			t.emit(mesh.Event{Type: mesh.EventTextMessageStart, MessageID: msgID, Role: string(mesh.RoleAssistant)})
		}
	}
	streamed := false
	t.offer = t.a.offer(t.remoteSet())
	req := llm.Request{
		System:   t.a.cfg.Agent.Prompt,
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
	resp, err := t.a.cfg.Provider.Generate(t.log.WithContext(ctx), req)
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
		ID:   fmt.Sprintf("%s-c%d-%d", t.runID(), t.iterations, index),
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
		o = t.a.offer(t.remoteSet())
	}
	if r, ok := o.remote[c.Name]; ok {
		call.Server, call.Tool, call.Destructive = remoteServerPrefix+r.cfg.Name, r.cfg.Name, r.cfg.IsDestructive()
	} else if e, ok := o.mcp[c.Name]; ok {
		call.Server, call.Tool, call.Destructive = e.Server, e.Name, e.DestructiveHint
	}
	return call
}

// lastCalls finds the most recent assistant message with tool calls.
func (t *turn) lastCalls() []mesh.ToolCall {
	for i := len(t.added) - 1; i >= 0; i-- {
		if m := t.added[i]; m.Role == mesh.RoleAssistant && len(m.ToolCalls) > 0 {
			return m.ToolCalls
		}
	}
	for i := len(t.conv.Messages) - 1; i >= 0; i-- {
		m := t.conv.Messages[i]
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
		switch {
		case remote && !call.Destructive:
			if t.callRemote(ctx, call, call.ID, false) {
				return true
			}
		case call.Server == "":
			t.result(call, fmt.Sprintf("error: unknown tool %q", call.Name), true)
		case call.Destructive:
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
	t.added = append(t.added, mesh.Message{
		ID: id, Role: mesh.RoleTool, Content: content, ToolCallID: call.ID, ToolName: call.Name,
		IsError: isError, TurnID: t.runID(), CreatedAt: time.Now().UTC(),
	})
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
	id := t.runID() + "-n" + strconv.Itoa(t.notices)
	t.added = append(t.added, mesh.Message{ID: id, Role: mesh.RoleAssistant, Content: text, Notice: true, TurnID: t.runID(), CreatedAt: time.Now().UTC()})
	t.emit(mesh.Event{Type: mesh.EventTextMessageStart, MessageID: id, Role: string(mesh.RoleAssistant), Metadata: map[string]any{"notice": true}})
	t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: id, Delta: text})
	t.emit(mesh.Event{Type: mesh.EventTextMessageEnd, MessageID: id})
	t.response = text
}

func (t *turn) cancelled(ctx context.Context) {
	if errors.Is(context.Cause(ctx), errShutdown) {
		return
	}
	t.outcome = mesh.OutcomeCancelled
	t.notice("The turn was cancelled.")
}

// finish saves the conversation and publishes the end of the run.
func (t *turn) finish(ctx context.Context) error {
	summary := &mesh.RunSummary{ID: t.runID(), Outcome: t.outcome, Response: t.response, ErrorCode: t.errCode, Error: t.errText, FinishedAt: time.Now().UTC()}
	if t.usage != (llm.Usage{}) {
		summary.Usage = &mesh.Usage{InputTokens: t.usage.InputTokens, OutputTokens: t.usage.OutputTokens}
	}
	_, err := t.a.sessions.UpdateLoaded(ctx, t.conv, func(c *mesh.Conversation) error {
		if c.Turn == nil || c.Turn.ID != t.runID() {
			if c.HasTurn(t.runID()) {
				return mesh.ErrNoChange
			}
			return errLostClaim
		}
		for _, m := range t.added {
			if !c.HasMessage(m.ID) {
				c.Messages = append(c.Messages, m)
			}
		}
		c.Turn = nil
		c.MarkTurn(t.runID())
		c.LastRun = summary
		if t.outcome == mesh.OutcomeInterrupt {
			// The paused call may belong to an earlier run's message (a
			// resume that paused again): mark it there too.
			for i := range c.Messages {
				for j := range c.Messages[i].ToolCalls {
					if c.Messages[i].ToolCalls[j].ID == t.paused.ToolCallID {
						c.Messages[i].ToolCalls[j].ApprovalID = t.paused.UUID
					}
				}
			}
			c.Status = mesh.StatusWaitingApproval
			c.PendingApproval = t.paused.Pending()
			c.PipelineState = &mesh.PipelineState{PausedNodePath: []int{}, RunID: t.runID(), Iterations: t.iterations, UserMessage: t.userMessage(c)}
			return nil
		}
		c.Status = mesh.StatusActive
		c.PendingApproval = nil
		c.PipelineState = nil
		return nil
	})
	if errors.Is(err, errLostClaim) {
		t.log.Warn().Msg("conversation was taken over; this run's result is dropped")
		return nil
	}
	if err != nil {
		return err
	}
	switch t.outcome {
	case mesh.OutcomeError:
		t.emit(mesh.RunError(t.errCode, t.errText))
	case mesh.OutcomeInterrupt:
		t.emit(mesh.RunFinished(t.conv.ID, t.runID(), mesh.Outcome{Type: mesh.OutcomeInterrupt, Interrupts: []mesh.Interrupt{{
			ID: t.paused.UUID, Reason: mesh.InterruptReasonToolApproval, ToolCallID: t.paused.ToolCallID, Message: t.paused.Description,
		}}}, runResult(t.response, summary.Usage)))
	default:
		t.emit(mesh.RunFinished(t.conv.ID, t.runID(), mesh.Outcome{Type: t.outcome}, runResult(t.response, summary.Usage)))
	}
	if err := t.ev.Flush(ctx); err != nil {
		return err
	}
	t.log.Info().Str("outcome", t.outcome).Int("iterations", t.iterations).Msg("turn done")
	return nil
}

func runResult(response string, usage *mesh.Usage) map[string]any {
	r := map[string]any{"response": response}
	if usage != nil {
		r["usage"] = usage
	}
	return r
}

// userMessage is the request the run answers: the last user message.
func (t *turn) userMessage(c *mesh.Conversation) string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == mesh.RoleUser {
			return c.Messages[i].Content
		}
	}
	return ""
}

// fail records a turn given up after its last delivery, so the conversation
// does not stay running forever.
func (t *turn) fail(ctx context.Context, code, text string) {
	_, err := t.a.sessions.Update(ctx, t.item.Session, func(c *mesh.Conversation) error {
		if c.HasTurn(t.runID()) {
			return mesh.ErrNoChange
		}
		if c.Turn != nil && c.Turn.ID == t.runID() {
			c.Turn = nil
			c.Status = mesh.StatusActive
		}
		c.MarkTurn(t.runID())
		c.Messages = append(c.Messages, mesh.Message{ID: t.runID() + "-failed", Role: mesh.RoleAssistant, Content: text, Notice: true, TurnID: t.runID(), CreatedAt: time.Now().UTC()})
		c.LastRun = &mesh.RunSummary{ID: t.runID(), Outcome: mesh.OutcomeError, ErrorCode: code, Error: text, FinishedAt: time.Now().UTC()}
		return nil
	})
	if err != nil && !errors.Is(err, mesh.ErrSessionNotFound) {
		t.log.Error().Err(err).Msg("record failed turn")
	}
	ev := t.a.events.Run(t.item.Session, t.runID(), t.attempt)
	ev.Emit(mesh.RunError(code, text))
	_ = ev.Flush(ctx)
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
