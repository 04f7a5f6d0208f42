package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

// The gateway offers the tools the mesh hosts, named <server>.<tool>. A
// call is a conversation of direct calls (mesh.Conversation.Direct) with
// the default agent, which runs it as it runs a model's call: through the
// catalog, and for a destructive tool through an approval whose signed
// decision the tool host checks. The bridge never calls a tool itself.
//
// A destructive call waits for its decision. When the client can elicit
// and the caller may decide, the client's user is asked, with the exact
// arguments, and the answer is the caller's decision; otherwise a person
// with the approver role decides it (the web inbox, mesh approve, REST),
// and the call completes then, with progress meanwhile. A call the client
// cancels while it waits leaves the approval pending: deciding it later
// runs the tool, as in any conversation.

// GatewayToolName is the MCP name of a hosted tool.
func GatewayToolName(e mesh.ToolEntry) string { return e.Server + "." + e.Name }

// ApprovalWaitTool waits for the decision of an approval a hosted tool's
// call answered with when the person took longer than the call may wait.
const ApprovalWaitTool = "approval_wait"

// ApprovalWaitInput is what approval_wait takes.
type ApprovalWaitInput struct {
	ApprovalID string `json:"approval_id" jsonschema:"the approval a call answered with"`
}

func (s *server) addGateway(srv *mcp.Server, caller core.Caller, entries []mesh.ToolEntry) {
	if len(entries) > 0 {
		mcp.AddTool(srv, &mcp.Tool{Name: ApprovalWaitTool, Title: "Wait for an approval",
			Description: "Waits for a person's decision on an approval a destructive tool's call answered with, and answers with the call's result once it ran (or was rejected), or with the approval still waiting.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.approvalWait(caller))
	}
	for _, e := range entries {
		schema := json.RawMessage(e.InputSchema)
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		desc := e.Description
		if e.DestructiveHint {
			desc = strings.TrimSpace(desc + " A person approves each call before it runs.")
		}
		srv.AddTool(&mcp.Tool{
			Name: GatewayToolName(e), Title: e.Title, Description: desc, InputSchema: schema,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: e.ReadOnlyHint, DestructiveHint: ptr(e.DestructiveHint)},
		}, s.gateway(caller, e))
	}
}

// GatewayOutput is the structured content of a hosted tool's answer.
type GatewayOutput struct {
	ConversationID string `json:"conversation_id"`
	// Approval is the approval a destructive call waited for, decided.
	Approval *mesh.PendingApproval `json:"approval,omitempty"`
	// Decision is the approval's status once decided: approved or rejected.
	Decision string `json:"decision,omitempty"`
	IsError  bool   `json:"is_error"`
}

func (s *server) gateway(caller core.Caller, e mesh.ToolEntry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := s.cfg.Core
		args := map[string]any{}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return failed(mesh.ErrBadRequest.With("the arguments are not a JSON object: " + err.Error())), nil
			}
		}
		conv, err := c.CreateDirect(ctx, mesh.NewID(), caller)
		if err != nil {
			return failed(err), nil
		}
		call, _ := json.Marshal(mesh.DirectCall{Server: e.Server, Tool: e.Name, Arguments: args})
		run, out, err := s.runTurn(ctx, req, conv.ID, string(call), caller)
		switch {
		case run == nil:
			return failed(err), nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return failed(err), nil
		}
		res := core.ResultOf(out.Conversation, run.ID, out.Event)
		o := GatewayOutput{ConversationID: conv.ID}
		if res.WaitingApproval && res.Approval != nil {
			o.Approval = res.Approval
			answer, _, err := s.waitResume(ctx, req, s.decision(ctx, req, caller, res.Approval), o)
			return answer, err
		}
		answer, _ := s.gatewayAnswer(ctx, out, res, o)
		return answer, nil
	}
}

// waitResume waits, with its progress, for the resume of o's approval to
// end, up to the approval wait: the call's answer then, or the approval
// still waiting. A request cancelled meanwhile leaves the approval to a
// person: deciding it runs the call. The output is the answer's structured
// content (none for a failure of the wait itself).
func (s *server) waitResume(ctx context.Context, req *mcp.CallToolRequest, resume *core.Run, o GatewayOutput) (*mcp.CallToolResult, GatewayOutput, error) {
	flushed := s.followProgress(ctx, req, o.ConversationID, resume)
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ApprovalWait)
	out, err := resume.Wait(wctx)
	cancel()
	flushed()
	switch {
	case ctx.Err() != nil:
		return nil, GatewayOutput{}, ctx.Err()
	case err != nil:
		return failed(err), GatewayOutput{}, nil
	case !out.Finished:
		return stillWaiting(o)
	}
	answer, o := s.gatewayAnswer(ctx, out, core.ResultOf(out.Conversation, resume.ID, out.Event), o)
	return answer, o, nil
}

// gatewayAnswer is the answer of a direct call whose run ended, and its
// structured content.
func (s *server) gatewayAnswer(ctx context.Context, out *core.Outcome, res core.Result, o GatewayOutput) (*mcp.CallToolResult, GatewayOutput) {
	if res.Error != "" {
		return failed(fmt.Errorf("%s: %s", res.ErrorCode, res.Error)), o
	}
	text, isErr := toolResult(out.Conversation)
	o.IsError = isErr
	if o.Approval != nil {
		if ap, err := s.cfg.Core.Approvals.Get(context.WithoutCancel(ctx), o.Approval.UUID); err == nil {
			o.Decision = string(ap.Status)
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isErr, StructuredContent: o}, o
}

// stillWaiting answers a call whose approval no one decided within the
// wait: the approval, and how to wait on.
func stillWaiting(o GatewayOutput) (*mcp.CallToolResult, GatewayOutput, error) {
	o.Decision = string(mesh.ApprovalPending)
	text := fmt.Sprintf("This call waits for a person to approve it (approval %s: %s). Call %s with approval_id %s to wait for the decision and the result.",
		o.Approval.UUID, o.Approval.Description, ApprovalWaitTool, o.Approval.UUID)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: o}, o, nil
}

// approvalWait is the handler of approval_wait: the caller's own approvals
// (or, for an approver, any), waited on as the call would have.
func (s *server) approvalWait(caller core.Caller) mcp.ToolHandlerFor[ApprovalWaitInput, GatewayOutput] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in ApprovalWaitInput) (*mcp.CallToolResult, GatewayOutput, error) {
		c := s.cfg.Core
		if err := core.CheckApprovalID(in.ApprovalID); err != nil {
			return failed(err), GatewayOutput{}, nil
		}
		ap, err := c.Approvals.Get(ctx, in.ApprovalID)
		if err == nil {
			// Another's approval is as unknown as none.
			_, err = c.HeadFor(ctx, ap.ConversationID, caller)
		}
		if err != nil {
			return failed(mesh.ErrApprovalNotFound.With("no approval " + mesh.Clip(in.ApprovalID))), GatewayOutput{}, nil
		}
		o := GatewayOutput{ConversationID: ap.ConversationID, Approval: ap.Pending()}
		return s.waitResume(ctx, req, c.Await(ap.ConversationID, ap.UUID), o)
	}
}

// decision is the resume of approval ap to wait for: decided by the
// client's user through elicitation when the client can elicit and the
// caller may decide, else by a person elsewhere.
func (s *server) decision(ctx context.Context, req *mcp.CallToolRequest, caller core.Caller, ap *mesh.PendingApproval) *core.Run {
	c := s.cfg.Core
	if c.May(caller, auth.Decide) && canElicit(req) {
		args, _ := json.MarshalIndent(ap.ToolArgs, "", "  ")
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message: fmt.Sprintf("Approve %s on %s with these arguments?\n%s", ap.ToolName, ap.Server, args),
			RequestedSchema: map[string]any{"type": "object", "required": []string{"approve"},
				"properties": map[string]any{"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "run " + ap.ToolName + " with the arguments shown"}}},
		})
		if err == nil && (res.Action == "accept" || res.Action == "decline") {
			approved := res.Action == "accept" && res.Content["approve"] == true
			// The hash of the arguments shown: a decision on other ones is refused.
			body, _ := json.Marshal(map[string]any{"approved": approved, "args_hash": ap.ArgsHash, "reason": "decided in the MCP client"})
			if _, run, err := c.Decide(ctx, ap.UUID, body, caller); err == nil {
				return run
			}
			// Decided elsewhere meanwhile: wait for that decision's resume.
		}
	}
	return c.Await(ap.ConversationID, ap.UUID)
}

// canElicit says whether the client declared elicitation (form mode).
func canElicit(req *mcp.CallToolRequest) bool {
	p := req.Session.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// toolResult is the answer of the direct call in conv: the tool's result,
// and whether it is an error (a rejected call is one).
func toolResult(conv *mesh.Conversation) (text string, isErr bool) {
	for i := len(conv.Messages) - 1; i >= 0; i-- {
		if m := conv.Messages[i]; m.Role == mesh.RoleTool {
			return m.Content, m.IsError
		}
	}
	return "(no result)", true
}
