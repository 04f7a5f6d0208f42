package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
)

// CallTool calls a tool through the mesh and waits for its result. A tool's
// own failure is a result with IsError; errors are for the mesh's failures,
// and match [ErrToolUnavailable] when no toolhost serves the tool (and
// nats.ErrNoResponders when the request reached no toolhost at all).
func CallTool(ctx context.Context, nc *nats.Conn, ns mesh.Namespace, server, tool string, req mesh.ToolRequest, hdr nats.Header) (*mesh.ToolResult, error) {
	return CallToolWatched(ctx, nc, ns, nil, server, tool, req, hdr)
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
func CallToolWatched(ctx context.Context, nc *nats.Conn, ns mesh.Namespace, nodes jetstream.KeyValue, server, tool string, req mesh.ToolRequest, hdr nats.Header) (*mesh.ToolResult, error) {
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
		m.Header.Set(mesh.HeaderCallAck, "1")
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
			if h := m.Header.Get(mesh.HeaderCallHost); h != "" && len(m.Data) == 0 && m.Header.Get(mesh.HeaderServiceError) == "" {
				host, taken = h, time.Now()
				continue
			}
			if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
				return nil, fmt.Errorf("%w (%w)", mesh.ErrToolUnavailable.With(fmt.Sprintf("tool server %q is unavailable: no toolhost serves %s", server, tool)), nats.ErrNoResponders)
			}
			if err := mesh.ErrorFromMsg(m); err != nil {
				return nil, err
			}
			var res mesh.ToolResult
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
				gone, moves := hostState(ctx, nodes, mesh.RoleToolhost+"."+host)
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
	var info mesh.NodeInfo
	if json.Unmarshal(e.Value(), &info) != nil {
		return false, -1
	}
	return info.State == mesh.NodeDown, int64(info.Reconnects)
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
