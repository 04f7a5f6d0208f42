package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// MetaCallID is the key of the call id in the _meta of every MCP tools/call
// the mesh sends; servers that deduplicate by it make a call that is sent
// again after a crash run once (config dedupe_call_ids).
const MetaCallID = "agentmesh/call_id"

// ToolRequest is the body of a request on mesh.tool.<server>.<tool>.
type ToolRequest struct {
	// CallID identifies the call. A toolhost records calls to tools that are
	// not read-only under this id and answers a repeated id with the first
	// result instead of running the tool again.
	CallID    string         `json:"call_id"`
	Arguments map[string]any `json:"arguments"`
	// Session is the conversation the call is made for (for logs).
	Session string `json:"session,omitempty"`
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

// CallTool calls a tool through the mesh and waits for its result. A tool's
// own failure is a result with IsError; errors are for the mesh's failures,
// and match [ErrToolUnavailable] when no toolhost serves the tool (and
// nats.ErrNoResponders when the request reached no toolhost at all).
func CallTool(ctx context.Context, nc *nats.Conn, ns Namespace, server, tool string, req ToolRequest, hdr nats.Header) (*ToolResult, error) {
	subj, err := ns.Tool(server, tool)
	if err != nil {
		return nil, err
	}
	if req.Arguments == nil {
		req.Arguments = map[string]any{}
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode tool request: %w", err)
	}
	m := nats.NewMsg(subj)
	m.Data = data
	for k, v := range hdr {
		m.Header[k] = v
	}
	reply, err := nc.RequestMsgWithContext(ctx, m)
	if errors.Is(err, nats.ErrNoResponders) {
		// Both match: callers may wait for a toolhost to come back, since
		// this request reached none.
		return nil, fmt.Errorf("%w (%w)", ErrToolUnavailable.With(fmt.Sprintf("tool server %q is unavailable: no toolhost serves %s", server, tool)), nats.ErrNoResponders)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("call %s: %w", subj, ctx.Err())
		}
		return nil, fmt.Errorf("call %s: %w", subj, err)
	}
	if err := ErrorFromMsg(reply); err != nil {
		return nil, err
	}
	var res ToolResult
	if err := json.Unmarshal(reply.Data, &res); err != nil {
		return nil, fmt.Errorf("decode reply of %s: %w", subj, err)
	}
	return &res, nil
}

// ContentText joins the text blocks of an MCP content array; blocks of other
// kinds are named by their type.
func ContentText(content json.RawMessage) string {
	var blocks []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		MimeType string `json:"mimeType"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
			continue
		}
		parts = append(parts, fmt.Sprintf("[%s %s]", b.Type, b.MimeType))
	}
	return strings.Join(parts, "\n")
}
