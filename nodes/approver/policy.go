package approver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// This file decides by policy: calls that are not read-only but that no
// person needs to approve. The approver believes none of what the agent
// says about the call's safety; it looks for itself.

// remotePrefix starts the Server of an approval for a sub-agent (A2A):
// those calls are made by the agent itself, which enforces their approval.
const remotePrefix = "a2a:"

// checkPolicy reports whether ap.Policy covers the call ap describes. The
// error matches [mesh.ErrApprovalPolicy] and says why not.
func (a *Role) checkPolicy(ctx context.Context, ap *mesh.Approval) error {
	if strings.HasPrefix(ap.Server, remotePrefix) || ap.Server == "" {
		return mesh.ErrApprovalPolicy.With(fmt.Sprintf("policy %s covers calls of MCP tools, not %q", ap.Policy, ap.Server))
	}
	switch ap.Policy {
	case mesh.PolicyNonDestructive:
		return a.nonDestructive(ctx, ap)
	case mesh.PolicyAllowDestructive:
		return a.allowDestructive(ap)
	default:
		return mesh.ErrBadRequest.With(fmt.Sprintf("approval request: unknown policy %q (%s or %s)", short(ap.Policy), mesh.PolicyNonDestructive, mesh.PolicyAllowDestructive))
	}
}

// nonDestructive: the tool's catalog entry, which only a tool host may
// write, from its server's annotations, says it is not destructive. The
// approver's statement names the policy (its By), and the tool host that
// runs the call checks the tool against its own reading of the server
// before it honours it: were the catalog wrong, a destructive tool would
// still wait for a person.
func (a *Role) nonDestructive(ctx context.Context, ap *mesh.Approval) error {
	if a.cfg.Tools == nil {
		return mesh.ErrApprovalPolicy.With("this approver has no tool catalog to check " + ap.Policy + " against")
	}
	key, err := mesh.ToolKey(ap.Server, ap.Tool)
	if err != nil {
		return mesh.ErrApprovalPolicy.With(fmt.Sprintf("tool %s of server %s is not in the catalog", short(ap.Tool), short(ap.Server)))
	}
	e, err := a.cfg.Tools.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return mesh.ErrApprovalPolicy.With(fmt.Sprintf("tool %s of server %s is not in the catalog", short(ap.Tool), short(ap.Server)))
	}
	if err != nil {
		return mesh.ErrUnavailable.With(fmt.Sprintf("read the tool catalog: %v", err))
	}
	var entry mesh.ToolEntry
	if err := json.Unmarshal(e.Value(), &entry); err != nil {
		return mesh.ErrApprovalPolicy.With(fmt.Sprintf("the catalog entry of tool %s of server %s cannot be read: a person must approve its calls", ap.Tool, ap.Server))
	}
	if own, err := mesh.ToolKey(entry.Server, entry.Name); err != nil || own != key {
		return mesh.ErrApprovalPolicy.With(fmt.Sprintf("the catalog entry stored for tool %s of server %s describes another tool: a person must approve its calls", ap.Tool, ap.Server))
	}
	if entry.Destructive() {
		return mesh.ErrApprovalPolicy.With(fmt.Sprintf("tool %s of server %s is destructive: a person must approve its calls", ap.Tool, ap.Server))
	}
	return nil
}

// allowDestructive: in the approver's own configuration, the agent's step
// at ap.StepPath has allow_destructive: true and is offered the tool.
func (a *Role) allowDestructive(ap *mesh.Approval) error {
	refuse := func(why string) error {
		return mesh.ErrApprovalPolicy.With(fmt.Sprintf("%s: %s", ap.Policy, why))
	}
	if a.cfg.Agents == nil {
		return refuse("this approver has no agent configuration to check it against")
	}
	agent := a.cfg.Agents.AgentNamed(ap.Agent)
	if agent == nil {
		return refuse(fmt.Sprintf("agent %q is not in the approver's configuration", short(ap.Agent)))
	}
	step := agent.Tree()
	for _, i := range ap.StepPath {
		if i < 0 || i >= len(step.Agents) {
			return refuse(fmt.Sprintf("agent %s has no step at %v", ap.Agent, ap.StepPath))
		}
		step = &step.Agents[i]
	}
	if !step.AllowDestructive {
		return refuse(fmt.Sprintf("step %q of agent %s does not allow destructive tools: a person must approve this call", step.Name, ap.Agent))
	}
	if !offered(step, ap) {
		return refuse(fmt.Sprintf("step %q of agent %s is not offered tool %s", step.Name, ap.Agent, ap.Tool))
	}
	return nil
}

// offered reports whether the step's tools list (when it has one) names
// the call's tool, as the agent matches it: the function name, the MCP
// name or server/name.
func offered(step *config.Node, ap *mesh.Approval) bool {
	if step.Tools == nil {
		return true
	}
	for _, name := range *step.Tools {
		if name == ap.ToolName || name == ap.Tool || name == ap.Server+"/"+ap.Tool {
			return true
		}
	}
	return false
}
