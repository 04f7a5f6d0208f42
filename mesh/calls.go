package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MetaCallID is the key of the call id in the _meta of every MCP tools/call
// the mesh sends; servers that deduplicate by it make a call that is sent
// again after a crash run once (config dedupe_call_ids).
const MetaCallID = "agentmesh/call_id"

// Headers of the acknowledgement of a tool call: a request carrying
// HeaderCallAck gets, as soon as a toolhost takes it, an empty message with
// HeaderCallHost naming that toolhost, before the result.
const (
	HeaderCallAck  = "Mesh-Call-Ack"
	HeaderCallHost = "Mesh-Call-Host"
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

// CallTool calls a tool through the mesh and waits for its result. A tool's
// own failure is a result with IsError; errors are for the mesh's failures,
// and match [ErrToolUnavailable] when no toolhost serves the tool (and
// nats.ErrNoResponders when the request reached no toolhost at all).
func CallTool(ctx context.Context, nc *nats.Conn, ns Namespace, server, tool string, req ToolRequest, hdr nats.Header) (*ToolResult, error) {
	return CallToolWatched(ctx, nc, ns, nil, server, tool, req, hdr)
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

// CallToolWatched is [CallTool] for callers that must not wait for a
// toolhost that died: the toolhost that takes the call says so at once
// (HeaderCallHost), and while the result is awaited its key in the nodes
// bucket is checked every second; once it is gone or marked down, or the
// caller's connection moved to another server (the reply may be lost), the
// call is sent again with the same call id (so too when the toolhost's own
// connection moved: the server it moved to refuses its reply), for a live toolhost to take over
// (which replies the recorded result, or runs the call again only where that
// is safe). With nodes nil it only waits, as [CallTool] does.
func CallToolWatched(ctx context.Context, nc *nats.Conn, ns Namespace, nodes jetstream.KeyValue, server, tool string, req ToolRequest, hdr nats.Header) (*ToolResult, error) {
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
	inbox := nc.NewRespInbox()
	replies := make(chan *nats.Msg, 8)
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", subj, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	send := func() error {
		m := nats.NewMsg(subj)
		m.Data, m.Reply = data, inbox
		for k, v := range hdr {
			m.Header[k] = v
		}
		m.Header.Set(HeaderCallAck, "1")
		return nc.PublishMsg(m)
	}
	if err := send(); err != nil {
		return nil, fmt.Errorf("call %s: %w", subj, err)
	}
	// A reply sent while this connection was moving to another server of a
	// cluster is lost: a reconnection since the last send sends it again.
	reconnects := nc.Stats().Reconnects
	// A ticker even without nodes keeps the select simple; it does nothing then.
	check := time.NewTicker(time.Second)
	defer check.Stop()
	host := ""
	taken := time.Now()
	// The host's reconnections when it was first seen after taking the
	// call (-1: not yet): a move since then lost its reply.
	hostMoves := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("call %s: %w", subj, ctx.Err())
		case m := <-replies:
			if h := m.Header.Get(HeaderCallHost); h != "" && len(m.Data) == 0 && m.Header.Get(HeaderServiceError) == "" {
				host, taken = h, time.Now()
				continue
			}
			if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
				return nil, fmt.Errorf("%w (%w)", ErrToolUnavailable.With(fmt.Sprintf("tool server %q is unavailable: no toolhost serves %s", server, tool)), nats.ErrNoResponders)
			}
			if err := ErrorFromMsg(m); err != nil {
				return nil, err
			}
			var res ToolResult
			if err := json.Unmarshal(m.Data, &res); err != nil {
				return nil, fmt.Errorf("decode reply of %s: %w", subj, err)
			}
			return &res, nil
		case <-check.C:
			switch {
			case nodes == nil:
				continue
			case nc.Stats().Reconnects != reconnects && nc.IsConnected():
				// The toolhost still runs the call, or answers its record.
			case host == "" && time.Since(taken) > 5*time.Second:
				// Nobody said it took the call (lost on the way): send it again.
			case host != "":
				gone, moves := hostState(ctx, nodes, RoleToolhost+"."+host)
				if !gone && (moves < 0 || hostMoves < 0) {
					hostMoves = max(hostMoves, moves) // the first count known
					continue
				}
				if !gone && moves == hostMoves {
					continue
				}
			default:
				continue
			}
			host, taken, reconnects, hostMoves = "", time.Now(), nc.Stats().Reconnects, -1
			if err := send(); err != nil {
				return nil, fmt.Errorf("call %s: %w", subj, err)
			}
		}
	}
}

// hostState reports whether a node's key expired (it stopped beating) or a
// monitor marked it down, and how often its connection moved to another
// server (-1 when unknown: the bucket did not answer).
func hostState(ctx context.Context, nodes jetstream.KeyValue, key string) (gone bool, moves int64) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	e, err := nodes.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return true, -1
	}
	if err != nil {
		return false, -1
	}
	var info NodeInfo
	if json.Unmarshal(e.Value(), &info) != nil {
		return false, -1
	}
	return info.State == NodeDown, int64(info.Reconnects)
}

// SubAgentCallPrefix starts the keys of the call records an agent keeps in
// the calls bucket for its sub-agent (A2A) calls: agents may write only
// those keys, the tool hosts' records are the tool hosts' alone.
const SubAgentCallPrefix = "a2a."

// SubAgentCallKey is the key of the record of sub-agent call id.
func SubAgentCallKey(id string) string { return SubAgentCallPrefix + id }
