package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// call is one JSON-RPC request being answered.
type call struct {
	h      *handler
	w      http.ResponseWriter
	r      *http.Request
	id     json.RawMessage
	method string
	params json.RawMessage
	d      dialect
	caller core.Caller
	// t is the agent the endpoint serves.
	t target
	// decider is set when the caller reaches a task it does not own only
	// to decide the approval it waits for (see [call.reaches]).
	decider bool
}

// method serves one JSON-RPC method; it writes the answer itself (a result,
// an error or a stream).
type method func(ctx context.Context, c *call)

// rpc serves POST /a2a and POST /groups/{name}/a2a.
func (h *handler) rpc(w http.ResponseWriter, r *http.Request, t target) {
	c := &call{h: h, w: w, r: r, caller: core.CallerOf(r), d: v03{}, t: t}
	activateExtensions(w, r)
	body, err := core.ReadBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		if errors.Is(err, core.ErrBodyTooLarge) {
			c.fail(&rpcError{Code: wire.CodeInvalidRequest, Message: err.Error(), Status: http.StatusRequestEntityTooLarge})
			return
		}
		c.fail(errParse(err.Error()))
		return
	}
	version, ok := wire.NegotiateVersion(r.Header.Get(wire.HeaderVersion))
	if !ok {
		c.d = v10{} // a client that asks for a version newer than 0.3 reads 1.0 errors
		c.id = bestEffortID(body)
		c.fail(&rpcError{
			Code:    wire.CodeVersionNotSupported,
			Message: fmt.Sprintf("A2A-Version %q is not supported; this agent speaks %s (no header means 0.3)", clip(r.Header.Get(wire.HeaderVersion)), strings.Join(wire.SupportedVersions(), " and ")),
			Meta:    map[string]string{"requestedVersion": clip(r.Header.Get(wire.HeaderVersion)), "supportedVersions": strings.Join(wire.SupportedVersions(), ",")},
		})
		return
	}
	if version == wire.Version10 {
		c.d = v10{}
	}
	if err := c.parse(body); err != nil {
		c.fail(err)
		return
	}
	m, ok := c.d.methods()[c.method]
	if !ok {
		c.fail(c.unknownMethod())
		return
	}
	m(r.Context(), c)
}

// parse reads the JSON-RPC envelope: one request object with "jsonrpc":
// "2.0", a method and an id that is a string, a number or null (or absent).
func (c *call) parse(body []byte) *rpcError {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return errInvalidRequest("empty body: send a JSON-RPC 2.0 request object")
	}
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		return errParse("invalid JSON: " + clip(errText(err)))
	}
	switch body[0] {
	case '[':
		return errInvalidRequest("batch requests are not supported: send one request object")
	case '{':
	default:
		return errInvalidRequest("a JSON-RPC request must be a JSON object")
	}
	var env struct {
		JSONRPC json.RawMessage `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return errInvalidRequest("invalid request: " + clip(errText(err)))
	}
	if validID(env.ID) {
		c.id = env.ID
	} else {
		return errInvalidRequest(`"id" must be a string, a number or null`)
	}
	if string(env.JSONRPC) != `"2.0"` {
		return errInvalidRequest(`"jsonrpc" must be "2.0"`)
	}
	if err := json.Unmarshal(env.Method, &c.method); err != nil || c.method == "" {
		return errInvalidRequest(`"method" must be a non-empty string`)
	}
	c.params = env.Params
	return nil
}

// validID accepts what JSON-RPC 2.0 allows as an id.
func validID(id json.RawMessage) bool {
	if len(id) == 0 || string(id) == "null" {
		return true
	}
	switch id[0] {
	case '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number
		return json.Unmarshal(id, &n) == nil
	}
	return false
}

// bestEffortID is the id of a request that is answered before it is
// parsed, when it has a valid one.
func bestEffortID(body []byte) json.RawMessage {
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &env) == nil && validID(env.ID) {
		return env.ID
	}
	return nil
}

func (c *call) unknownMethod() *rpcError {
	msg := fmt.Sprintf("method %q not found", clip(c.method))
	other := dialect(v10{})
	if c.d.version() == wire.Version10 {
		other = v03{}
	}
	if _, ok := other.methods()[c.method]; ok {
		hdr := "without the A2A-Version header (0.3)"
		if other.version() == wire.Version10 {
			hdr = "with the header A2A-Version: 1.0"
		}
		msg += fmt.Sprintf(" in A2A %s; it is an A2A %s method: send it %s", c.d.version(), other.version(), hdr)
	}
	return errMethod(msg)
}

// decodeParams reads the params object into v.
func (c *call) decodeParams(v any) *rpcError {
	p := bytes.TrimSpace(c.params)
	if len(p) == 0 || string(p) == "null" {
		return errParams("params", `"params" is required`)
	}
	if p[0] != '{' {
		return errParams("params", `"params" must be an object`)
	}
	if err := json.Unmarshal(p, v); err != nil {
		return errParams(fieldOf(err), "invalid params: "+clip(errText(err)))
	}
	return nil
}

// fieldOf names the field a decoding error is about, if any.
func fieldOf(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	return "params"
}

func errText(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("expected %s, got %s", te.Type, te.Value)
		}
		return fmt.Sprintf("field %q: expected %s, got %s", te.Field, te.Type, te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("%s at offset %d", se.Error(), se.Offset)
	case err != nil:
		return err.Error()
	}
	return ""
}

// response is a JSON-RPC 2.0 response.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *wire.Error     `json:"error,omitempty"`
}

func (c *call) envelope(result any, e *rpcError) response {
	id := c.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := response{JSONRPC: "2.0", ID: id, Result: result}
	if e != nil {
		resp.Error = e.object(c.d.version())
	}
	return resp
}

// reply writes a result.
func (c *call) reply(result any) {
	core.WriteJSON(c.w, http.StatusOK, c.envelope(result, nil))
}

// fail writes an error; errors that are not JSON-RPC ones are mapped by
// [toRPC] and internal ones are logged.
func (c *call) fail(err error) {
	e := toRPC(err, "")
	if e.Code == wire.CodeInternalError {
		c.h.log.Error().Err(err).Str("method", c.method).Str("sid", c.caller.SessionID).Msg("a2a request failed")
	}
	if e.Status == http.StatusRequestEntityTooLarge {
		c.w.Header().Set("Connection", "close")
	}
	if e.RetryAfter > 0 {
		c.w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	core.WriteJSON(c.w, e.status(), c.envelope(nil, e))
}

// failStream answers an error to a streaming method before its stream
// starts: 0.3 clients (a2a-go) read the answer of a streaming method as an
// event stream whatever its type, so they get one SSE event holding the
// error; 1.0 clients get a JSON answer, as the reference server sends.
func (c *call) failStream(err error) {
	e := toRPC(err, "")
	if c.d.version() == wire.Version10 || e.Status == http.StatusForbidden {
		c.fail(err) // a refusal keeps its HTTP status, as the other methods'
		return
	}
	if e.Code == wire.CodeInternalError {
		c.h.log.Error().Err(err).Str("method", c.method).Str("sid", c.caller.SessionID).Msg("a2a stream failed")
	}
	out := sse.New(c.w).Observe(c.r, "a2a")
	if out.Start(nil) != nil {
		return
	}
	_ = writeData(out, c.envelope(nil, e))
}

// pushUnsupported answers the push notification methods: the card says
// pushNotifications: false.
func pushUnsupported(_ context.Context, c *call) {
	c.fail(&rpcError{Code: wire.CodePushNotificationUnsupported, Message: "push notifications are not supported; poll the task or stream it"})
}

// extendedCardUnsupported answers the authenticated extended card methods.
func extendedCardUnsupported(_ context.Context, c *call) {
	c.fail(errUnsupported("this agent has no authenticated extended agent card; read " + c.t.cardPath()))
}

// checkHistory validates a historyLength.
func checkHistory(field string, n *int) *rpcError {
	if n != nil && *n < 0 {
		return errParams(field, fmt.Sprintf("%s must not be negative, got %d", field, *n))
	}
	return nil
}
