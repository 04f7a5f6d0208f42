package toolhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

const (
	// recordGrace is added to the call timeout before a started record of
	// another attempt is taken for interrupted: room for clock skew and for
	// that attempt to write its outcome.
	recordGrace = 2 * time.Second
	// recordTimeout bounds writing the outcome of a call, which happens even
	// when the call's own time is up.
	recordTimeout = 5 * time.Second
	// recordAttempts bounds how often a call id is looked at again after it
	// changed under us.
	recordAttempts = 5
	// recordOverhead is room in a NATS message for what a call record holds
	// besides its result.
	recordOverhead = 4 << 10
)

// JSON-RPC codes the SDK's jsonrpc2 gives local failures: a connection
// that is closing, and a request its transport could not deliver (HTTP).
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// errAgain says that the record of a call id changed and must be read again.
var errAgain = errors.New("toolhost: call record changed")

// handle serves one request for the tool called name.
func (c *conn) handle(req request, name string) {
	t := c.tool(name)
	if t == nil {
		c.replyErr(req, mesh.ErrToolNotFound.With(fmt.Sprintf("tool server %q has no tool %q", c.s.cfg.Name, name)))
		return
	}
	sctx, observed := c.observe(req, t)
	outcome := telemetry.ToolError
	var err error
	defer func() { observed(outcome, err) }()
	tr, err := decodeRequest(req.data)
	if err != nil {
		c.replyErr(req, mesh.ErrBadRequest.With(fmt.Sprintf("tool request for %s.%s: %v", c.s.cfg.Name, name, err)))
		return
	}
	if t.readOnly && tr.CallID == "" {
		tr.CallID = mesh.NewID()
	}
	if !t.readOnly {
		if err := c.checkApproval(t, tr); err != nil {
			c.s.log.Info().Err(err).Str("subject", req.subject).Str("call_id", tr.CallID).Str("error_kind", mesh.ErrorKind(err)).Msg("tool call refused")
			outcome = telemetry.ToolRefused
			c.replyErr(req, err)
			return
		}
	}
	// The call's logger is made only for a line to write: most calls write
	// none, and making it was an allocation and a copy per call.
	callLog := func() zerolog.Logger {
		return c.s.log.With().Str("subject", req.subject).Str("call_id", tr.CallID).Str("session", tr.Session).Logger()
	}
	ctx, cancel := context.WithTimeout(sctx, c.s.timeout)
	defer cancel()
	if c.s.cfg.URL != "" {
		ctx = withCall(ctx, req.header.Get("Authorization"))
	}
	var res *mesh.ToolResult
	var data []byte // res encoded, when the call gave it so
	if t.readOnly {
		res, data, _, err = c.call(ctx, t, tr)
	} else {
		res, err = c.callOnce(ctx, callLog(), t, tr)
	}
	if err != nil {
		log := callLog()
		log.Info().Err(err).Msg("tool call failed")
		c.replyErr(req, err)
		return
	}
	if c.s.log.Debug().Enabled() {
		log := callLog()
		log.Debug().Bool("is_error", res.IsError).Msg("tool called")
	}
	if !res.IsError {
		outcome = telemetry.ToolOK
	}
	if data == nil {
		data = mustJSON(res)
	}
	if err := c.respond(req, data, nil); err != nil {
		log := callLog()
		log.Warn().Err(err).Msg("reply to tool call")
	}
}

func decodeRequest(data []byte) (mesh.ToolRequest, error) {
	var tr mesh.ToolRequest
	if len(bytes.TrimSpace(data)) == 0 {
		return tr, nil
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		return tr, fmt.Errorf("body is not a JSON object with call_id and arguments: %v", err)
	}
	return tr, nil
}

// request is what a call needs of a micro request. micro.Request itself
// must not be answered from another goroutine than its handler's (micro
// reads what the answer was when the handler returns), so calls answer
// through the connection.
type request struct {
	subject string
	reply   string
	data    []byte
	header  nats.Header
}

func newRequest(r micro.Request) request {
	return request{subject: r.Subject(), reply: r.Reply(), data: r.Data(), header: nats.Header(r.Headers())}
}

func (c *conn) respond(req request, data []byte, hdr nats.Header) error {
	if req.reply == "" {
		return nil // a publish, not a request: nobody waits
	}
	return c.s.h.cfg.Responder.PublishMsg(&nats.Msg{Subject: req.reply, Data: data, Header: hdr})
}

// replyErr answers with an error in the headers of micro services
// (Nats-Service-Error, Nats-Service-Error-Code), plus the mesh error kind.
func (c *conn) replyErr(req request, err error) {
	if rerr := c.respond(req, nil, mesh.ErrorHeaders(err)); rerr != nil {
		c.s.log.Warn().Err(rerr).Str("subject", req.subject).Msg("reply to tool call")
	}
}

// call sends tools/call and returns its result and the result encoded.
// unknown reports, with an error, that the server may have run the tool:
// the outcome of the call is unknown.
func (c *conn) call(ctx context.Context, t *tool, tr mesh.ToolRequest) (res *mesh.ToolResult, data []byte, unknown bool, err error) {
	select {
	case <-c.dead:
		return nil, nil, false, c.unavailable("is not running")
	default:
	}
	args := tr.Arguments
	if args == nil {
		args = map[string]any{}
	}
	ctx, span, meta := c.observeMCP(ctx, t, mcp.Meta{mesh.MetaCallID: tr.CallID})
	defer func() { telemetry.End(span, err) }()
	r, err := c.session.CallTool(ctx, &mcp.CallToolParams{
		Meta:      meta,
		Name:      t.name,
		Arguments: args,
	})
	if err != nil {
		err, unknown := c.callErr(ctx, t, err)
		return nil, nil, unknown, err
	}
	res, err = toolResult(r)
	if err != nil {
		return nil, nil, true, mesh.ErrInternal.With(fmt.Sprintf("tool server %q: result of %s: %v", c.s.cfg.Name, t.name, err))
	}
	res, data = c.fitEncoded(t, withState(t.name, res, r.Meta))
	return res, data, false, nil
}

// withState passes on the state patch a result carries in
// _meta[mesh.StateMetaKey]. A patch that is not a JSON object, or is larger
// than mesh.MaxStatePatch, makes the result a tool error saying so, as an
// oversized result does: the tool did run, and the model can tell the user.
func withState(tool string, res *mesh.ToolResult, meta mcp.Meta) *mesh.ToolResult {
	v, ok := meta[mesh.StateMetaKey]
	if !ok || v == nil {
		return res
	}
	patch, err := json.Marshal(v)
	if err == nil {
		err = mesh.CheckStatePatch(patch)
	}
	if err != nil {
		msg := fmt.Sprintf("the state change of %s was refused (_meta %q): %v", tool, mesh.StateMetaKey, err)
		content, _ := json.Marshal([]map[string]string{{"type": "text", "text": msg}})
		return &mesh.ToolResult{Content: content, IsError: true, Text: msg}
	}
	res.State = patch
	return res
}

// fit replaces a result too large for a NATS message (the reply, and the
// call record that holds it) with a tool error saying so: the tool did run,
// and the model can ask for less.
func (c *conn) fit(t *tool, res *mesh.ToolResult) *mesh.ToolResult {
	res, _ = c.fitEncoded(t, res)
	return res
}

// fitEncoded is [conn.fit] that also returns the result it gives encoded
// (nil if it cannot be), so that the reply does not encode it again.
func (c *conn) fitEncoded(t *tool, res *mesh.ToolResult) (*mesh.ToolResult, []byte) {
	limit := c.s.h.cfg.Responder.MaxPayload() - recordOverhead
	data, err := json.Marshal(res)
	size := len(data)
	if limit <= 0 || err == nil && int64(size) <= limit {
		if err != nil {
			data = nil
		}
		return res, data
	}
	msg := fmt.Sprintf("the result of %s is %d bytes, more than the mesh carries (%d): ask for less", t.name, size, limit)
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": msg}})
	res = &mesh.ToolResult{Content: content, IsError: true, Text: msg}
	return res, mustJSON(res)
}

// callErr maps a failed tools/call to a mesh error.
func (c *conn) callErr(ctx context.Context, t *tool, err error) (_ error, unknown bool) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return c.unavailable(fmt.Sprintf("timed out after %v calling %s", c.s.timeout, t.name)), true
	case ctx.Err() != nil:
		return c.unavailable(fmt.Sprintf("stopped: the call of %s was cancelled", t.name)), true
	}
	var ae *authError
	if errors.As(err, &ae) {
		return mesh.ErrBadRequest.With(fmt.Sprintf("tool server %q refused the caller's credentials for %s: %v", c.s.cfg.Name, t.name, ae)), false
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return c.unavailable(fmt.Sprintf("is unreachable: %v", oe)), false
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		switch we.Code {
		case codeRejected:
			return c.unavailable(fmt.Sprintf("did not take the call of %s: %v", t.name, err)), true
		case jsonrpc.CodeInvalidParams:
			return mesh.ErrBadRequest.With(fmt.Sprintf("tool server %q rejected the call of %s: %s", c.s.cfg.Name, t.name, we.Message)), false
		case jsonrpc.CodeMethodNotFound:
			return mesh.ErrToolNotFound.With(fmt.Sprintf("tool server %q does not serve %s: %s", c.s.cfg.Name, t.name, we.Message)), false
		case codeClientClosing, codeServerClosing:
		default:
			return mesh.ErrInternal.With(fmt.Sprintf("tool server %q failed calling %s: %s", c.s.cfg.Name, t.name, we.Message)), true
		}
	}
	return c.unavailable(fmt.Sprintf("stopped during the call of %s", t.name)), true
}

// toolResult converts an MCP result to the mesh's.
func toolResult(r *mcp.CallToolResult) (*mesh.ToolResult, error) {
	content := json.RawMessage("[]")
	if len(r.Content) > 0 {
		var err error
		if content, err = json.Marshal(r.Content); err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
	}
	var structured json.RawMessage
	if r.StructuredContent != nil {
		var err error
		if structured, err = json.Marshal(r.StructuredContent); err != nil {
			return nil, fmt.Errorf("structured content: %w", err)
		}
	}
	return &mesh.ToolResult{
		Content:           content,
		StructuredContent: structured,
		IsError:           r.IsError,
		Text:              bus.ContentText(content),
	}, nil
}

// callOnce runs a tool that is not read-only at most once per call id,
// through a record in the calls bucket:
//
//   - no record: create it (started), call, record the result (done);
//   - done: reply the recorded result;
//   - started by an attempt still within its time: wait for its outcome;
//   - started by an attempt that ended without a result, or is too old:
//     call again with the same id if the server deduplicates call ids,
//     else reply mesh.ErrCallInterrupted.
func (c *conn) callOnce(ctx context.Context, log zerolog.Logger, t *tool, tr mesh.ToolRequest) (*mesh.ToolResult, error) {
	id := tr.CallID
	if id == "" {
		return nil, mesh.ErrBadRequest.With(fmt.Sprintf("call_id is required: %s.%s is not read-only, so it runs once per call id", c.s.cfg.Name, t.name))
	}
	if err := mesh.CheckToken(id); err != nil {
		return nil, mesh.ErrBadRequest.With(fmt.Sprintf("call_id %q: use letters, digits, '_', '-' and '='", id))
	}
	for range recordAttempts {
		rec := c.startedRecord(t, id)
		rev, err := c.createRecord(ctx, id, rec)
		if err == nil {
			return c.runRecorded(ctx, log, t, tr, rec, rev)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, c.storeErr(ctx, "record call "+id, err)
		}
		prev, rev, err := c.record(ctx, id)
		if errors.Is(err, errAgain) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if prev.Server != c.s.cfg.Name || prev.Tool != t.name {
			return nil, mesh.ErrBadRequest.With(fmt.Sprintf("call_id %s was already used for %s.%s", id, prev.Server, prev.Tool))
		}
		switch {
		case prev.State == mesh.CallDone:
			if prev.Result == nil {
				return nil, mesh.ErrInternal.With(fmt.Sprintf("call %s is recorded as done without a result", id))
			}
			log.Info().Msg("call id seen before: replying the recorded result")
			return prev.Result, nil
		case c.interrupted(prev):
			if !c.s.cfg.DedupeCallIDs {
				return nil, mesh.ErrCallInterrupted.With(fmt.Sprintf(
					"call %s of %s.%s started on %s at %s was interrupted: its outcome is unknown, so it is not run again",
					id, c.s.cfg.Name, t.name, prev.Host, prev.StartedAt.UTC().Format(time.RFC3339)))
			}
			rec := c.startedRecord(t, id)
			rev, err := c.s.calls.Update(ctx, id, mustJSON(rec), rev)
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
				continue // another attempt took it over first
			}
			if err != nil {
				return nil, c.storeErr(ctx, "record call "+id, err)
			}
			log.Info().Str("earlier_host", prev.Host).Msg("earlier attempt interrupted; calling again with the same call id, which the server deduplicates")
			return c.runRecorded(ctx, log, t, tr, rec, rev)
		default:
			log.Info().Str("earlier_host", prev.Host).Msg("call id in progress elsewhere: waiting for its outcome")
			res, err := c.waitDone(ctx, id, prev)
			if errors.Is(err, errAgain) {
				continue
			}
			return res, err
		}
	}
	return nil, c.unavailable(fmt.Sprintf("could not record call %s: its record kept changing", id))
}

func (c *conn) startedRecord(t *tool, id string) mesh.CallRecord {
	return mesh.CallRecord{
		CallID:    id,
		Server:    c.s.cfg.Name,
		Tool:      t.name,
		State:     mesh.CallStarted,
		Host:      c.s.h.cfg.NodeID,
		StartedAt: c.s.h.now().UTC(),
	}
}

// interrupted reports whether a started record belongs to an attempt that
// is over: it ended without a result, it is older than a call may take, or
// the toolhost that made it is dead.
func (c *conn) interrupted(r mesh.CallRecord) bool {
	return r.State == mesh.CallStarted &&
		(!r.FinishedAt.IsZero() || c.s.h.now().Sub(r.StartedAt) >= c.s.timeout+recordGrace || c.hostGone(r.Host))
}

// hostGone reports whether the toolhost that started a call is known to be
// dead: its key in the nodes bucket expired (it stopped beating) or a
// monitor marked it down. Without the nodes bucket nothing is known.
func (c *conn) hostGone(host string) bool {
	nodes := c.s.h.cfg.Nodes
	if nodes == nil || host == "" || host == c.s.h.cfg.NodeID {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e, err := nodes.Get(ctx, mesh.RoleToolhost+"."+host)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return true
	}
	if err != nil {
		return false
	}
	var info mesh.NodeInfo
	return json.Unmarshal(e.Value(), &info) == nil && info.State == mesh.NodeDown
}

// record reads the record of a call id; errAgain when it is gone.
func (c *conn) record(ctx context.Context, id string) (mesh.CallRecord, uint64, error) {
	var r mesh.CallRecord
	e, err := c.s.calls.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return r, 0, errAgain
	}
	if err != nil {
		return r, 0, c.storeErr(ctx, "read call "+id, err)
	}
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return r, 0, mesh.ErrInternal.With(fmt.Sprintf("call record %s: %v", id, err))
	}
	return r, e.Revision(), nil
}

// createRecord creates the started record rec of call id. A JetStream
// cluster that is electing the bucket's leader (a server died) answers
// nothing for a few seconds: the create is tried again meanwhile, for up
// to storeRetryFor, rather than failing a call a human approved. A create
// whose answer was lost may have been stored: a record found afterwards
// that is rec itself is this attempt's.
func (c *conn) createRecord(ctx context.Context, id string, rec mesh.CallRecord) (uint64, error) {
	deadline := time.Now().Add(storeRetryFor)
	retried := false
	for {
		// Each try has its own deadline: a request lost with a dying server
		// is not answered by the next one.
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		rev, err := c.s.calls.Create(tctx, id, mustJSON(rec))
		cancel()
		switch {
		case err == nil:
			return rev, nil
		case retried && errors.Is(err, jetstream.ErrKeyExists):
			if prev, rev, gerr := c.record(ctx, id); gerr == nil && prev.Host == rec.Host && prev.State == rec.State && prev.StartedAt.Equal(rec.StartedAt) {
				return rev, nil
			}
			return 0, err
		case !transientStoreErr(err) || ctx.Err() != nil || time.Now().After(deadline):
			return 0, err
		}
		retried = true
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// storeRetryFor is how long a store operation is tried again while the
// cluster answers nothing (see [conn.createRecord]).
const storeRetryFor = 15 * time.Second

// transientStoreErr reports whether err is JetStream not answering (no
// stream leader for now), as opposed to an answer that refuses.
func transientStoreErr(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// runRecorded calls the tool under a started record at rev, then records
// the outcome: the result (done); nothing, when the server surely did not
// run the tool (the record is deleted, so the call may be made again); or
// that the attempt ended with its outcome unknown.
func (c *conn) runRecorded(ctx context.Context, log zerolog.Logger, t *tool, tr mesh.ToolRequest, rec mesh.CallRecord, rev uint64) (*mesh.ToolResult, error) {
	res, _, unknown, err := c.call(ctx, t, tr)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout+store.ElectionWait(c.s.calls))
	defer cancel()
	rec.FinishedAt = c.s.h.now().UTC()
	switch {
	case err == nil:
		rec.State, rec.Result = mesh.CallDone, res
		if _, uerr := c.s.calls.Update(fctx, tr.CallID, mustJSON(rec), rev); uerr != nil {
			log.Warn().Err(uerr).Msg("record call result")
		}
		return res, nil
	case unknown:
		if _, uerr := c.s.calls.Update(fctx, tr.CallID, mustJSON(rec), rev); uerr != nil {
			log.Warn().Err(uerr).Msg("record interrupted call")
		}
		log.Warn().Err(err).Msg("call interrupted; its outcome is unknown")
		return nil, err
	default:
		if derr := c.s.calls.Delete(fctx, tr.CallID, jetstream.LastRevision(rev)); derr != nil {
			log.Warn().Err(derr).Msg("delete record of a call that did not run")
		}
		return nil, err
	}
}

// waitDone waits for the outcome of an earlier attempt of a call, until
// ctx ends or that attempt is over. errAgain means the record must be read
// again.
func (c *conn) waitDone(ctx context.Context, id string, prev mesh.CallRecord) (*mesh.ToolResult, error) {
	wctx, cancel := context.WithDeadline(ctx, prev.StartedAt.Add(c.s.timeout+recordGrace))
	defer cancel()
	timedOut := func() error {
		return c.unavailable(fmt.Sprintf("timed out after %v waiting for an earlier attempt of call %s (on %s)", c.s.timeout, id, prev.Host))
	}
	w, err := c.s.calls.Watch(wctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, timedOut()
		}
		if wctx.Err() != nil {
			return nil, errAgain
		}
		return nil, c.storeErr(ctx, "watch call "+id, err)
	}
	defer func() { _ = w.Stop() }()
	// A dead host never updates its record: look at it now and then.
	alive := time.NewTicker(time.Second)
	defer alive.Stop()
	for {
		select {
		case <-alive.C:
			if c.hostGone(prev.Host) {
				return nil, errAgain
			}
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, timedOut()
			}
			return nil, errAgain
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				if ctx.Err() != nil {
					return nil, timedOut()
				}
				return nil, errAgain
			case e == nil: // the current value has been delivered
				continue
			case e.Operation() != jetstream.KeyValuePut:
				return nil, errAgain
			}
			var r mesh.CallRecord
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				return nil, mesh.ErrInternal.With(fmt.Sprintf("call record %s: %v", id, err))
			}
			if r.State == mesh.CallDone && r.Result != nil {
				return r.Result, nil
			}
			if c.interrupted(r) {
				return nil, errAgain
			}
		}
	}
}

// storeErr maps a failure of the calls bucket.
func (c *conn) storeErr(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return c.unavailable(fmt.Sprintf("timed out after %v: %s", c.s.timeout, what))
	}
	if ctx.Err() != nil {
		return c.unavailable("stopped: " + what + " cancelled")
	}
	return mesh.ErrUnavailable.With(fmt.Sprintf("%s: %v", what, err))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("toolhost: encode %T: %v", v, err)) // records are plain data
	}
	return b
}
