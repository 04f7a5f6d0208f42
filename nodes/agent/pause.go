package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
)

// This file pauses a run on a person and carries it on. A destructive call
// asks the approver for an approval (the agent never writes one) and the
// run ends waiting for it (nothing blocks on a human); the decision comes
// back as a resume work item, whose run executes or rejects the decided
// call and goes on, the approver's signed decision sent with it to the tool
// host. Notices are the assistant messages meant for people that say so: an
// approval asked for, an error, a cancellation.

// approvalNamespace derives approval ids from run and call ids, so that a
// run executed again after a crash creates the same approval, not a second.
var approvalNamespace = uuid.MustParse("8f3c1a52-6f0e-4f0a-9a39-3f7f1c2b9e11")

// approvalWait bounds asking the approver for an approval, an approver
// restart included.
const approvalWait = 30 * time.Second

// pause asks for the approval a destructive call waits for and pauses the
// run on it. An approval that is decided already is returned instead, for
// the run to carry its decision out: a run of this id before this one asked
// for it and was cut off before it saved its pause, so the decision's
// resume found nothing waiting and will not come again.
func (t *turn) pause(ctx context.Context, call mesh.ToolCall) (decided *mesh.Approval, err error) {
	got, err := t.requestApproval(ctx, t.newApproval(call))
	if err != nil {
		return nil, err
	}
	if got.Status != mesh.ApprovalPending {
		t.log.Warn().Str("approval", got.UUID).Str("status", string(got.Status)).Msg("the approval was decided before this run asked for it: its decision is carried out")
		return got, nil
	}
	t.wait(call, got)
	return nil, nil
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
		Tool:           call.Tool,
		ToolArgs:       call.Arguments,
		Description:    describeCall(call),
		StepPath:       t.step.path,
	}
}

// await asks the approver for ap and pauses the run on the approval it
// created (or, asked again, the one it holds).
func (t *turn) await(ctx context.Context, call mesh.ToolCall, ap *mesh.Approval) error {
	got, err := t.requestApproval(ctx, ap)
	if err != nil {
		return err
	}
	t.wait(call, got)
	return nil
}

// requestApproval asks the approver for ap: it creates it, or returns the
// one it holds under ap's id.
func (t *turn) requestApproval(ctx context.Context, ap *mesh.Approval) (*mesh.Approval, error) {
	if t.a.cfg.Replay != nil {
		return nil, errReplayApproval
	}
	rctx, cancel := context.WithTimeout(ctx, approvalWait)
	defer cancel()
	return bus.RequestApproval(rctx, t.a.cfg.NC, t.a.ns, ap)
}

// wait pauses the run on approval got of call.
func (t *turn) wait(call mesh.ToolCall, got *mesh.Approval) {
	ap := got.Public()
	t.ex.markApproval(call.ID, ap.UUID)
	t.end.paused = ap
	t.emit(mesh.Custom(mesh.CustomApprovalRequested, ap))
	// The id travels in the event and the conversation's pending approval;
	// the words are for a person, who decides with a button or a prompt.
	t.notice(fmt.Sprintf("This action requires approval: %s. Approve or reject it to go on.", strings.TrimRight(ap.Description, ". ")))
	t.log.Info().Str("approval", ap.UUID).Str("tool", call.Name).Str("remote_task", ap.RemoteTaskID).Msg("waiting for approval")
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

// resolveDecided executes or rejects the call a resume was decided for. The
// call id sent to the tool host is the approval id, so an approved call runs
// once however often the resume is delivered; the approver's signed
// decision goes with it, and the arguments are the approval's, which the
// tool host checks against the signed hash. A proxy approval's decision
// goes to the sub-agent that asked for it; a sub-agent's call is made by
// the agent itself, which enforces its approval (no tool host checks it).
// It reports whether the run paused again (a sub-agent asking for another
// approval).
func (t *turn) resolveDecided(ctx context.Context, call mesh.ToolCall, ap *mesh.Approval) (paused bool) {
	if ap.RemoteTaskID != "" {
		return t.forwardDecision(ctx, call, ap)
	}
	decider := ""
	if ap.Decision != nil {
		decider = ap.Decision.By
	}
	if ap.Status != mesh.ApprovalApproved {
		by := ""
		if decider != "" {
			by = " (" + decider + ")"
		}
		t.decidedResult(call, toolAnswer{content: "rejected: the approver" + by + " rejected this call; it was not run", isError: true}, decider)
		if !t.a.simple {
			t.end.rejected = call.Name // ends the tree (stopRejected)
		}
		return false
	}
	call.Arguments = ap.ToolArgs // the arguments that were approved, not re-generated
	if _, remote := remoteName(call); remote {
		return t.callRemote(ctx, call, ap.UUID, true)
	}
	var signed *mesh.ApprovalStatement
	if ap.Decision != nil {
		signed = ap.Decision.Statement
	}
	t.answer(call, t.callTool(ctx, call, ap.UUID, approvedToolWait, signed), decider)
	return false
}

// notice adds an assistant message meant for people (models do not see it)
// and streams it.
func (t *turn) notice(text string) {
	t.ex.notices++
	m := t.message(t.noticePrefix()+"-n"+strconv.Itoa(t.ex.notices), mesh.RoleAssistant, text)
	m.Notice = true
	t.ex.add(m)
	t.streamNotice(m.ID, text)
	t.end.response = text
}

// streamNotice streams a notice as a text message marked as one.
func (t *turn) streamNotice(id, text string) {
	t.emit(mesh.Event{Type: mesh.EventTextMessageStart, MessageID: id, Role: string(mesh.RoleAssistant), Name: t.author(), Metadata: map[string]any{"notice": true}})
	t.emit(mesh.Event{Type: mesh.EventTextMessageContent, MessageID: id, Delta: text})
	t.emit(mesh.Event{Type: mesh.EventTextMessageEnd, MessageID: id})
}
