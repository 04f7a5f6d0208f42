package mesh

import (
	"encoding/json"
	"time"
)

const (
	// MetaCallID is the key of the call id in the _meta of every MCP tools/call
	// the mesh sends; servers that deduplicate by it make a call that is sent
	// again after a crash run once (config dedupe_call_ids).
	MetaCallID = "agentmesh/call_id"

	// Headers of the acknowledgement of a tool call: a request carrying
	// HeaderCallAck gets, as soon as a toolhost takes it, an empty message with
	// HeaderCallHost naming that toolhost, before the result.
	HeaderCallAck  = "Mesh-Call-Ack"
	HeaderCallHost = "Mesh-Call-Host"

	// SubAgentCallPrefix starts the keys of the call records an agent keeps in
	// the calls bucket for its sub-agent (A2A) calls: agents may write only
	// those keys, the tool hosts' records are the tool hosts' alone.
	SubAgentCallPrefix = "a2a."
)

// ToolRequest is the body of a request on mesh.tool.<server>.<tool>.
type ToolRequest struct {
	// CallID identifies the call. A toolhost records calls to tools that are
	// not read-only under this id and answers a repeated id with the first
	// result instead of running the tool again.
	CallID    string         `json:"call_id"`
	Arguments map[string]any `json:"arguments"`
	// Session is the conversation the call is made for (for logs).
	Session string `json:"session,omitempty"`
	// Approval is the approver's signed decision for this call. A toolhost
	// runs a tool that is not read-only only with one that approves this
	// exact call (call id, server, tool, hash of Arguments); see
	// [ApprovalStatement.Permits]. Read-only tools need none.
	Approval *ApprovalStatement `json:"approval,omitempty"`
}

// ToolResult is the reply to a tool request: the MCP result, plus its text.
type ToolResult struct {
	// Content is the MCP content array as the server sent it.
	Content           json.RawMessage `json:"content,omitempty"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	// IsError is the tool's own failure: data for the model, not a Go error.
	IsError bool `json:"isError,omitempty"`
	// Text joins the text of the content blocks; it is what the model reads.
	Text string `json:"text"`
	// State is the result's state patch, _meta[StateMetaKey] as the server
	// sent it: a JSON object of at most MaxStatePatch bytes (see
	// [MergeState]).
	State json.RawMessage `json:"state,omitempty"`
}

// CallState is the state of a recorded tool call.
type CallState string

// Call states.
const (
	CallStarted CallState = "started"
	CallDone    CallState = "done"
)

// CallRecord is what the calls bucket holds under a call id.
type CallRecord struct {
	CallID     string      `json:"call_id"`
	Server     string      `json:"server"`
	Tool       string      `json:"tool"`
	State      CallState   `json:"state"`
	Result     *ToolResult `json:"result,omitempty"`
	Host       string      `json:"host,omitempty"`
	StartedAt  time.Time   `json:"started_at"`
	FinishedAt time.Time   `json:"finished_at,omitzero"`
}

// SubAgentCallKey is the key of the record of sub-agent call id.
func SubAgentCallKey(id string) string { return SubAgentCallPrefix + id }
