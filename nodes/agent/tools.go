package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// This file holds the tools of a model call: what the model is offered (the
// catalog, the step's sub-agents, exit_loop and end_chat), and calling an
// MCP tool through the mesh.

// toolSet is the catalog as the model sees it, rebuilt on every change of the
// tools bucket.
type toolSet struct {
	byFunc map[string]mesh.ToolEntry
	llm    []llm.Tool
}

// forwardsAuth reports whether the catalog says that server's host sends
// the caller's Authorization on to it (an HTTP MCP server).
func (s *toolSet) forwardsAuth(server, tool string) bool {
	for _, e := range s.byFunc {
		if e.Server == server && e.Name == tool {
			return e.ForwardAuth
		}
	}
	return false
}

func newToolSet(entries []mesh.ToolEntry) *toolSet {
	byFunc := functionNames(entries)
	ts := &toolSet{byFunc: byFunc}
	names := make([]string, 0, len(byFunc))
	for n := range byFunc {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := byFunc[n]
		telemetry.Tool(e.Server, e.Name)
		schema := e.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		desc := e.Description
		if desc == "" {
			desc = e.Title
		}
		ts.llm = append(ts.llm, llm.Tool{Name: n, Description: desc, Parameters: schema, ReadOnly: e.ReadOnlyHint, Destructive: e.DestructiveHint})
	}
	return ts
}

// readOnly reports whether the catalog says the tool is read-only.
func (ts *toolSet) readOnly(server, tool string) bool {
	for _, e := range ts.byFunc {
		if e.Server == server && e.Name == tool {
			return e.ReadOnlyHint
		}
	}
	return false
}

// offer is the tools of one model call: the catalog's and the sub-agents'.
type offer struct {
	tools  []llm.Tool
	mcp    map[string]mesh.ToolEntry
	remote map[string]*remoteAgent
	// exitLoop: exit_loop is offered (a step that may end its loop);
	// endChat: end_chat is (a member of a group chat); setState: set_state
	// is (a step with state_tool).
	exitLoop, endChat, setState bool
}

// offer joins the catalog and the sub-agents of rs. A sub-agent keeps its
// a2a_<name>; an MCP tool whose name is the same is offered as
// <server>__<name> instead, or left out when that is taken too.
func (a *Role) offer(rs *remoteSet) *offer {
	ts := a.tools.Load()
	o := &offer{mcp: make(map[string]mesh.ToolEntry, len(ts.byFunc)), remote: make(map[string]*remoteAgent, len(rs.list))}
	for _, r := range rs.list {
		o.remote[r.fn] = r
	}
	for _, t := range ts.llm {
		e := ts.byFunc[t.Name]
		if _, taken := o.remote[t.Name]; taken {
			t.Name = functionName(e.Server + "__" + e.Name)
			if _, taken := o.remote[t.Name]; taken || ts.byFunc[t.Name].Server != "" {
				continue
			}
		}
		o.tools = append(o.tools, t)
		o.mcp[t.Name] = e
	}
	for _, r := range rs.list {
		o.tools = append(o.tools, r.tool())
	}
	return o
}

// exitLoopTool is the function offered to llm steps with can_exit_loop: a
// call ends the loop around them after their step.
const exitLoopTool = "exit_loop"

var exitLoopSpec = llm.Tool{
	Name:        exitLoopTool,
	Description: "End the loop this step runs in: call it once the loop's goal is reached, then give your final answer.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	ReadOnly:    true,
}

// stepOffer is the tools offered to the step's model: the catalog and its
// sub-agents, cut to the step's tools list when it has one, exit_loop when
// the step may end its loop, and end_chat to a member of a group chat.
func (t *turn) stepOffer() *offer {
	o := t.a.stepTools(t.step)
	if t.step.cfg.CanExitLoop {
		o.tools = append(o.tools, exitLoopSpec)
		o.exitLoop = true
	}
	if t.chat.name != "" && t.step.cfg.Type == config.NodeLLM {
		o.tools = append(o.tools, endChatSpec)
		o.endChat = true
	}
	return o
}

// stepTools is the catalog and the sub-agents of an llm step, cut to its
// tools list when it has one.
func (a *Role) stepTools(s *step) *offer {
	o := a.offer(s.remotes)
	if allow := s.cfg.Tools; allow != nil {
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
	if s.cfg.StateTool && s.cfg.Type == config.NodeLLM {
		// The built-in tool takes its name over from a catalog tool.
		o.tools = slices.DeleteFunc(o.tools, func(tool llm.Tool) bool { return tool.Name == setStateTool })
		delete(o.mcp, setStateTool)
		delete(o.remote, setStateTool)
		o.tools = append(o.tools, setStateSpec)
		o.setState = true
	}
	return o
}

// toolCallTimeout bounds one call as the agent waits for it; the toolhost
// enforces each server's own timeout below that.
const toolCallTimeout = 2 * time.Minute

// approvedToolWait is how long an approved call waits for a toolhost to come
// back: a human decided it, so a restart in progress should not lose it.
const approvedToolWait = 30 * time.Second

// callTool runs a call through the mesh, with the approver's signed
// approval when it has one. When no toolhost serves the tool it waits up
// to wait for one (a restart in progress). Failures of the mesh come back
// as an error result the model and the user can read, not as a Go error:
// the turn goes on, and the model may try another way or say what failed.
func (t *turn) callTool(ctx context.Context, call mesh.ToolCall, callID string, wait time.Duration, approval *mesh.ApprovalStatement) toolAnswer {
	start := time.Now()
	res, err := t.requestTool(ctx, call, callID, wait, approval)
	return timed(t.toolOutcome(call, res, err), start)
}

// timed is a with the time since start as its duration.
func timed(a toolAnswer, start time.Time) toolAnswer {
	a.took, a.timed = time.Since(start), true
	return a
}

// toolOutcome is the result the model and the user read, and the state
// patch it carries.
func (t *turn) toolOutcome(call mesh.ToolCall, res *mesh.ToolResult, err error) toolAnswer {
	if err != nil {
		t.log.Warn().Err(err).Str("server", call.Server).Str("tool", call.Tool).Str("error_kind", mesh.ErrorKind(err)).Msg("tool call failed")
		return toolAnswer{content: fmt.Sprintf("error: tool %s could not run: %v", call.Name, err), isError: true}
	}
	return toolAnswer{content: res.Text, isError: res.IsError, state: res.State}
}

// callUnattended runs a call that no person approves: a read-only tool as
// it is; another (not destructive, or destructive in a step that allows
// it) with the approver's decision by policy, which the tool host needs
// before it runs anything that is not read-only. The tool host's reading of
// the tool prevails: a tool the catalog took for read-only that the host
// refuses without an approval is asked for one, then called again.
func (t *turn) callUnattended(ctx context.Context, call mesh.ToolCall) toolAnswer {
	var approval *mesh.ApprovalStatement
	var err error
	start := time.Now()
	if !t.a.tools.Load().readOnly(call.Server, call.Tool) {
		if approval, err = t.policyApproval(ctx, call); err != nil {
			return t.toolOutcome(call, nil, err)
		}
	}
	res, err := t.requestTool(ctx, call, call.ID, t.a.toolWait, approval)
	if t.a.cfg.Replay != nil && errors.Is(err, mesh.ErrApprovalRequired) {
		// The host does not take the tool for read-only: a replay asks
		// for no approval, by policy or otherwise.
		return t.standIn()
	}
	if approval == nil && errors.Is(err, mesh.ErrApprovalRequired) {
		if approval, err = t.policyApproval(ctx, call); err == nil {
			res, err = t.requestTool(ctx, call, call.ID, t.a.toolWait, approval)
		}
	}
	return timed(t.toolOutcome(call, res, err), start)
}

// errReplayApproval refuses an approval a replay's run would ask for: its
// identity may not ask either.
var errReplayApproval = mesh.ErrApprovalPolicy.With("a replay asks for no approval")

// standIn is the answer to a call a replay does not run.
func (t *turn) standIn() toolAnswer {
	return toolAnswer{content: t.a.cfg.Replay.StandIn, standIn: true}
}

// policyApproval asks the approver to approve the call by policy: a tool
// that is not destructive, or a destructive one in a step with
// allow_destructive. The approver checks the policy for itself. Its id
// derives from the call id and the arguments, so a run executed again asks
// for the same approval, and other arguments get one of their own.
func (t *turn) policyApproval(ctx context.Context, call mesh.ToolCall) (*mesh.ApprovalStatement, error) {
	if t.a.cfg.Replay != nil {
		return nil, errReplayApproval
	}
	hash, err := mesh.ArgsHash(call.Arguments)
	if err != nil {
		return nil, mesh.ErrBadRequest.With("arguments: " + err.Error())
	}
	ap := t.newApproval(call)
	ap.UUID = uuid.NewSHA1(approvalNamespace, []byte("policy/"+call.ID+"/"+hash)).String()
	ap.CallID = call.ID
	ap.Policy = mesh.PolicyNonDestructive
	if call.Destructive {
		ap.Policy = mesh.PolicyAllowDestructive
	}
	rctx, cancel := context.WithTimeout(ctx, approvalWait)
	defer cancel()
	got, err := bus.RequestApproval(rctx, t.a.cfg.NC, t.a.ns, ap)
	if err != nil {
		return nil, err
	}
	if got.Status != mesh.ApprovalApproved || got.Decision == nil || got.Decision.Statement == nil {
		return nil, mesh.ErrApprovalPolicy.With(fmt.Sprintf("the approver did not approve the call by policy (approval %s is %s)", got.UUID, got.Status))
	}
	return got.Decision.Statement, nil
}

// requestTool sends a call to the tool hosts, waiting up to wait for one
// while none serves the tool.
func (t *turn) requestTool(ctx context.Context, call mesh.ToolCall, callID string, wait time.Duration, approval *mesh.ApprovalStatement) (*mesh.ToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, toolCallTimeout)
	defer cancel()
	// The caller's token goes only to a host that forwards it to an HTTP
	// MCP server: no other toolhost sees it.
	hdr := nats.Header{}
	if v := t.hdr.Get(mesh.HeaderSessionID); v != "" {
		hdr.Set(mesh.HeaderSessionID, v)
	}
	if v := t.hdr.Get(mesh.HeaderAuthorization); v != "" && t.a.tools.Load().forwardsAuth(call.Server, call.Tool) {
		hdr.Set(mesh.HeaderAuthorization, v)
	}
	ctx, observed := observeTool(ctx, t.a.ns, call, hdr)
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	var res *mesh.ToolResult
	var err error
	defer func() { observed(res, err) }()
	cb := t.a.servers.get(call.Server)
	for {
		done, berr := cb.Allow()
		if berr != nil {
			err = t.a.servers.errOpen(call.Server)
			break
		}
		res, err = bus.CallToolWatched(ctx, t.a.cfg.NC, t.a.ns, t.a.cfg.Resources.Nodes, call.Server, call.Tool, mesh.ToolRequest{
			CallID: callID, Arguments: call.Arguments, Session: t.item.Session, Approval: approval,
		}, hdr)
		// The server's failures (it crashed, timed out) count against it; a
		// tool's own failure (isError), a request refused as bad and no
		// toolhost at all (waited for below) do not.
		if !errors.Is(err, nats.ErrNoResponders) && (errors.Is(err, mesh.ErrToolUnavailable) || errors.Is(err, mesh.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) {
			done(err)
		} else {
			done(nil)
		}
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().Add(pause).After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(pause*2, time.Second)
	}
	t.a.touch()
	return res, err
}

// describeCall is the human-readable text of an approval.
func describeCall(call mesh.ToolCall) string {
	if name, ok := remoteName(call); ok {
		msg, _ := json.Marshal(call.Arguments["message"])
		return fmt.Sprintf("delegate to sub-agent %s (%s) the message %s", name, call.Name, msg)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s", call.Name)
	if call.Server != "" {
		fmt.Fprintf(&b, " (server %s)", call.Server)
	}
	keys := make([]string, 0, len(call.Arguments))
	for k := range call.Arguments {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		b.WriteString(" with no arguments")
	}
	for i, k := range keys {
		if i == 0 {
			b.WriteString(" with ")
		} else {
			b.WriteString(", ")
		}
		v, _ := json.Marshal(call.Arguments[k])
		fmt.Fprintf(&b, "%s=%s", k, v)
	}
	return b.String()
}
