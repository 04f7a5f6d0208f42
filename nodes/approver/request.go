package approver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// This file creates approvals when agents ask for them, and holds what the
// approver signs: the seal of what was asked and the statement of each
// decision.

func (a *Role) handleRequest(ctx context.Context, req micro.Request) {
	id := approvalIDFromSubject(req.Subject())
	if err := mesh.CheckToken(id); err != nil {
		_ = mesh.RespondError(req, mesh.ErrBadRequest.With(fmt.Sprintf("approval id %q: use a UUID", short(id))))
		return
	}
	var ask mesh.Approval
	if err := json.Unmarshal(req.Data(), &ask); err != nil {
		_ = mesh.RespondError(req, mesh.ErrBadRequest.With("approval request: "+mesh.JSONErrorText(err)))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ap, err := a.Request(ctx, id, &ask)
	if err != nil {
		if mesh.HTTPStatus(err) >= 500 {
			a.log.Error().Err(err).Str("approval", id).Msg("approval request")
		} else {
			a.log.Info().Err(err).Str("approval", id).Str("session", ask.ConversationID).Str("policy", ask.Policy).Msg("approval request refused")
		}
		_ = mesh.RespondError(req, err)
		return
	}
	_ = req.RespondJSON(ap)
}

// Request creates the approval ask describes under id, sealed, and returns
// it; an approval that exists under id is returned as it stands. With
// ask.Policy set, the approval is decided and signed at once when that
// policy covers the call, and refused ([mesh.ErrApprovalPolicy]) when not.
func (a *Role) Request(ctx context.Context, id string, ask *mesh.Approval) (*mesh.Approval, error) {
	if cur, err := a.store.Get(ctx, id); err == nil {
		return cur, nil
	} else if !errors.Is(err, mesh.ErrApprovalNotFound) {
		return nil, err
	}
	ap, err := asked(id, ask)
	if err != nil {
		return nil, err
	}
	ap.Traceparent = ask.Traceparent
	if ap.Policy != "" {
		if err := a.checkPolicy(ctx, ap); err != nil {
			return nil, err
		}
	}
	now := a.now().UTC()
	if ap.ArgsHash, err = mesh.ArgsHash(ap.ToolArgs); err != nil {
		return nil, mesh.ErrBadRequest.With("approval request: arguments: " + err.Error())
	}
	ap.CreatedAt = now
	if ap.Seal, err = a.seal(ap, now); err != nil {
		return nil, err
	}
	if ap.Policy != "" {
		by := mesh.PolicyBy(ap.Policy)
		st, err := a.sign(ap, mesh.ApprovalApproved, by, now)
		if err != nil {
			return nil, err
		}
		ap.Status, ap.DecidedAt = mesh.ApprovalApproved, now
		ap.Decision = &mesh.Decision{Approved: true, By: by, Statement: st}
	}
	if err := a.store.Create(ctx, ap); err != nil {
		return nil, err
	}
	telemetry.ApprovalRequested(ap.Policy)
	if ap.Policy != "" {
		a.log.Debug().Str("approval", ap.UUID).Str("session", ap.ConversationID).Str("policy", ap.Policy).Str("tool", ap.Tool).Msg("approved by policy")
	} else {
		withSID(a.log.Info().Str("approval", ap.UUID).Str("session", ap.ConversationID), ap.SessionID).Str("tool", ap.Tool).Msg("approval requested")
	}
	return ap, nil
}

// asked is the approval to create from what an agent sent: its fields
// that describe the call; what only the approver may say (status,
// decision, hash, seal, times) starts afresh.
func asked(id string, ask *mesh.Approval) (*mesh.Approval, error) {
	if err := mesh.CheckToken(ask.ConversationID); err != nil {
		return nil, mesh.ErrBadRequest.With("approval request: conversation_id: " + err.Error())
	}
	if err := mesh.CheckToken(ask.Agent); err != nil {
		return nil, mesh.ErrBadRequest.With("approval request: agent: " + err.Error())
	}
	ap := &mesh.Approval{
		UUID: id, ConversationID: ask.ConversationID, SessionID: ask.SessionID, Agent: ask.Agent, RunID: ask.RunID,
		ToolCallID: ask.ToolCallID, ToolName: ask.ToolName, Server: ask.Server, Tool: ask.Tool,
		CallID: id, ToolArgs: ask.ToolArgs, Description: ask.Description,
		RemoteTaskID: ask.RemoteTaskID, RemoteAgentName: ask.RemoteAgentName, StepPath: ask.StepPath,
		Policy: ask.Policy, Status: mesh.ApprovalPending,
	}
	if ap.Tool == "" {
		ap.Tool = ap.ToolName
	}
	if ap.ToolArgs == nil {
		ap.ToolArgs = map[string]any{}
	}
	if ap.Policy != "" {
		// A policy approves the model's own call id; a person's decision
		// is run under the approval id.
		if err := mesh.CheckToken(ask.CallID); err != nil {
			return nil, mesh.ErrBadRequest.With("approval request: call_id: " + err.Error())
		}
		ap.CallID = ask.CallID
	}
	return ap, nil
}

// sign is the approver's signed statement of decision on ap at at.
func (a *Role) sign(ap *mesh.Approval, decision mesh.ApprovalStatus, by string, at time.Time) (*mesh.ApprovalStatement, error) {
	st := &mesh.ApprovalStatement{
		ApprovalID: ap.UUID, CallID: ap.CallID, Server: ap.Server, Tool: ap.Tool, ArgsHash: ap.ArgsHash,
		Decision: decision, By: by, At: at.UTC().Format(time.RFC3339Nano),
	}
	if err := st.Sign(a.cfg.Signer); err != nil {
		return nil, mesh.ErrInternal.With(err.Error())
	}
	return st, nil
}

// seal is the approver's signed statement of what ap asks, pending: its
// call, and the hash of the whole record as created.
func (a *Role) seal(ap *mesh.Approval, at time.Time) (*mesh.ApprovalStatement, error) {
	asked, err := ap.AskedHash()
	if err != nil {
		return nil, mesh.ErrBadRequest.With("approval request: " + err.Error())
	}
	st := &mesh.ApprovalStatement{
		ApprovalID: ap.UUID, CallID: ap.CallID, Server: ap.Server, Tool: ap.Tool, ArgsHash: ap.ArgsHash,
		Decision: mesh.ApprovalPending, At: at.UTC().Format(time.RFC3339Nano), Asked: asked,
	}
	if err := st.Sign(a.cfg.Signer); err != nil {
		return nil, mesh.ErrInternal.With(err.Error())
	}
	return st, nil
}

// checkIntact reports whether ap still holds what its seal says was asked:
// the record may have been rewritten in the bucket since (its arguments,
// after the person read them, or what it says of the conversation, the
// agent or the step). The error matches [mesh.ErrApprovalTampered].
func (a *Role) checkIntact(ap *mesh.Approval) error {
	tampered := func(why string) error {
		return mesh.ErrApprovalTampered.With(fmt.Sprintf("approval %s cannot be approved: %s; reject it, and ask again", ap.UUID, why))
	}
	if ap.Seal == nil {
		return tampered("it has no seal: a release before 0.1.0 asked for it (an admin reads it and seals it with `mesh migrate --apply`), or no approver created it")
	}
	if err := ap.Seal.Verify(a.trusted); err != nil {
		return tampered("its seal is not valid (" + err.Error() + ")")
	}
	hash, err := mesh.ArgsHash(ap.ToolArgs)
	if err != nil {
		return tampered("its arguments cannot be read: " + err.Error())
	}
	s := ap.Seal
	switch {
	case s.ArgsHash != hash || ap.ArgsHash != hash:
		return tampered("its arguments were changed after it was asked for")
	case s.ApprovalID != ap.UUID || s.CallID != ap.CallID || s.Server != ap.Server || s.Tool != ap.Tool || s.Decision != mesh.ApprovalPending:
		return tampered("the call it names was changed after it was asked for")
	}
	if asked, err := ap.AskedHash(); err != nil || asked != s.Asked {
		return tampered("what it asks was changed after it was asked for")
	}
	return nil
}

// short cuts what a client sent for an error message.
func short(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

func (a *Role) handleReseal(ctx context.Context, req micro.Request) {
	id := approvalIDFromSubject(req.Subject())
	if err := mesh.CheckToken(id); err != nil {
		_ = mesh.RespondError(req, mesh.ErrApprovalNotFound.With(fmt.Sprintf("approval %q not found", short(id))))
		return
	}
	var r mesh.Reseal
	if err := json.Unmarshal(req.Data(), &r); err != nil || r.ArgsHash == "" {
		why := "args_hash is required: the hash of the arguments you read"
		if err != nil {
			why = mesh.JSONErrorText(err)
		}
		_ = mesh.RespondError(req, mesh.ErrBadRequest.With("reseal: "+why))
		return
	}
	if p := req.Headers().Get(mesh.HeaderPrincipal); p != "" {
		r.By = p
	}
	if r.By == "" {
		r.By = "admin"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ap, err := a.Reseal(ctx, id, r)
	if err != nil {
		if mesh.HTTPStatus(err) >= 500 {
			a.log.Error().Err(err).Str("approval", id).Msg("reseal")
		}
		_ = mesh.RespondError(req, err)
		return
	}
	_ = req.RespondJSON(ap.Public())
}

// Reseal seals approval id, which a release before seals recorded pending
// ([mesh.Approval.Unsealed]), after an admin read it: r.ArgsHash must be
// the hash of its arguments as they stand, or nothing changes. The record
// is rebuilt as [Role.Request] would have made it (what only the approver
// says starts afresh), keeping when it was asked, and the conversation is
// shown the approval again (approval_requested) so that a person decides
// it. An approval sealed already is returned as it stands.
func (a *Role) Reseal(ctx context.Context, id string, r mesh.Reseal) (*mesh.Approval, error) {
	sealed := false
	ap, err := a.store.Update(ctx, id, func(ap *mesh.Approval) error {
		switch {
		case ap.Status != mesh.ApprovalPending:
			return mesh.ErrApprovalDecided.With(fmt.Sprintf("approval %s was already %s", id, ap.Status))
		case !ap.Unsealed():
			return store.ErrNoChange
		}
		hash, err := mesh.ArgsHash(ap.ToolArgs)
		if err != nil {
			return mesh.ErrApprovalTampered.With(fmt.Sprintf("approval %s: its arguments cannot be read: %v; reject it", id, err))
		}
		if r.ArgsHash != hash {
			return mesh.ErrApprovalArgsChanged.With(fmt.Sprintf("approval %s: the arguments read (hash %s) are not the approval's (hash %s): read it again", id, short(r.ArgsHash), hash))
		}
		fresh, err := asked(id, ap)
		if err != nil {
			return err
		}
		fresh.CreatedAt, fresh.Traceparent, fresh.ArgsHash = ap.CreatedAt, ap.Traceparent, hash
		if fresh.Seal, err = a.seal(fresh, a.now().UTC()); err != nil {
			return err
		}
		*ap, sealed = *fresh, true
		return nil
	})
	if err != nil || !sealed {
		return ap, err
	}
	withSID(a.log.Info().Str("approval", id).Str("session", ap.ConversationID), ap.SessionID).Str("tool", ap.Tool).Str("by", r.By).Msg("approval asked before seals sealed")
	if _, err := a.publisher.Publish(ctx, ap.ConversationID, "", "approval_resealed:"+id, mesh.Custom(mesh.CustomApprovalRequested, ap.Public())); err != nil {
		a.log.Warn().Err(err).Str("approval", id).Msg("publish approval_requested")
	}
	return ap, nil
}
