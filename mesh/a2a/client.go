package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// Client calls remote agents over JSON-RPC 2.0, speaking version 0.3: it
// sends no A2A-Version header, which both 0.3 and 1.0 servers read as 0.3.
// It keeps no state besides its HTTP client: credentials and trace ids come
// with each call, so one Client serves every caller.
//
// Failures come back as one of three kinds: a *StatusError for an HTTP
// answer other than 200, an *Error for a JSON-RPC error object, and any
// other error for a request that got no usable answer (refused connection,
// timeout, malformed body). [Transient] tells the first and last kinds that
// are worth retrying.
type Client struct {
	// HTTP sends the requests. Nil means http.DefaultClient.
	HTTP *http.Client
	// MaxResponseBytes bounds an answer's body. Zero means 8 MiB.
	MaxResponseBytes int64

	ids atomic.Int64
}

// StatusError is an HTTP answer other than 200 OK.
type StatusError struct {
	StatusCode int
	// Body is the start of the answer's body, for people.
	Body string
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Body)
}

// Transient reports whether err is a failure of the remote agent or of the
// way to it that a later attempt may not meet: no answer at all (refused
// connection, reset, timeout of the attempt) or an HTTP 5xx, 408 or 429. A
// JSON-RPC error, another HTTP status and the end of ctx are not.
func Transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode >= 500 || se.StatusCode == http.StatusRequestTimeout || se.StatusCode == http.StatusTooManyRequests
	}
	var re *Error
	if errors.As(err, &re) {
		return false
	}
	var de *decodeError
	return !errors.As(err, &de)
}

// decodeError is an answer that arrived but could not be read.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) maxBody() int64 {
	if c.MaxResponseBytes > 0 {
		return c.MaxResponseBytes
	}
	return 8 << 20
}

// FetchCard reads the agent card of the agent at base: base +
// [CardPath], else base + [LegacyCardPath]; when base has a path
// (http://host/a2a), the same two paths at its root are tried next. The
// card's URL, when relative, is resolved against the address it was read
// from.
func (c *Client) FetchCard(ctx context.Context, base string) (*AgentCard, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent card: %q is not an http(s) URL", base)
	}
	prefixes := []string{strings.TrimSuffix(u.Path, "/")}
	if prefixes[0] != "" {
		prefixes = append(prefixes, "")
	}
	var first error
	for _, p := range prefixes {
		for _, path := range []string{CardPath, LegacyCardPath} {
			at := *u
			at.Path, at.RawQuery, at.Fragment = p+path, "", ""
			card, err := c.getCard(ctx, at.String())
			if err == nil {
				if card.URL != "" {
					if ref, perr := url.Parse(card.URL); perr == nil {
						card.URL = at.ResolveReference(ref).String()
					}
				}
				return card, nil
			}
			if first == nil {
				first = err
			}
			if ctx.Err() != nil {
				return nil, first
			}
			var se *StatusError
			var de *decodeError
			if !errors.As(err, &se) && !errors.As(err, &de) {
				// No answer at all: the other paths of the same host will
				// not answer either.
				return nil, first
			}
		}
	}
	return nil, first
}

func (c *Client) getCard(ctx context.Context, at string) (*AgentCard, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, at, nil)
	if err != nil {
		return nil, fmt.Errorf("agent card %s: %w", at, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent card %s: %w", at, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody()))
	if err != nil {
		return nil, fmt.Errorf("agent card %s: %w", at, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent card %s: %w", at, &StatusError{StatusCode: resp.StatusCode, Body: snippet(body)})
	}
	var card AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		return nil, fmt.Errorf("agent card %s: %w", at, &decodeError{err})
	}
	if card.Name == "" && card.URL == "" && len(card.SupportedInterfaces) == 0 {
		return nil, fmt.Errorf("agent card %s: %w", at, &decodeError{errors.New("not an agent card: no name, url or supportedInterfaces")})
	}
	return &card, nil
}

// CardEndpoint is the JSON-RPC address of the agent card describes: a
// supportedInterfaces entry with the JSONRPC binding and protocol version
// 0.3, else the card's url when its preferred transport is JSON-RPC (or not
// said), else any JSONRPC entry, else fallback.
func CardEndpoint(card *AgentCard, fallback string) string {
	if card == nil {
		return fallback
	}
	var any10 string
	for _, in := range card.SupportedInterfaces {
		if !strings.EqualFold(in.ProtocolBinding, "JSONRPC") || in.URL == "" {
			continue
		}
		if strings.HasPrefix(in.ProtocolVersion, Version03) {
			return in.URL
		}
		if any10 == "" {
			any10 = in.URL
		}
	}
	if card.URL != "" && (card.PreferredTransport == "" || strings.EqualFold(card.PreferredTransport, "JSONRPC")) {
		return card.URL
	}
	if any10 != "" {
		return any10
	}
	if card.URL != "" {
		return card.URL
	}
	return fallback
}

// Call makes one JSON-RPC call of method with params at endpoint and decodes
// its result into result. hdr is added to the request (Authorization,
// X-Session-ID …).
func (c *Client) Call(ctx context.Context, endpoint, method string, params any, hdr http.Header, result any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s params: %w", method, err)
	}
	id := json.RawMessage(strconv.FormatInt(c.ids.Add(1), 10))
	body, err := json.Marshal(Request{JSONRPC: "2.0", ID: id, Method: method, Params: p})
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, endpoint, err)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	ctx, span := telemetry.StartKind(ctx, "a2a "+method, trace.SpanKindClient, attribute.String("rpc.system", "jsonrpc"), attribute.String("rpc.method", method))
	defer span.End()
	telemetry.HTTPInject(ctx, req.Header) // the sub-agent continues this trace
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody()))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, endpoint, err)
	}
	var rpc Response
	jsonErr := json.Unmarshal(data, &rpc)
	if resp.StatusCode != http.StatusOK {
		// Some servers send JSON-RPC errors with a 4xx status: the error
		// object says more than the status.
		if jsonErr == nil && rpc.Error != nil && resp.StatusCode < 500 {
			return rpc.Error
		}
		return fmt.Errorf("%s %s: %w", method, endpoint, &StatusError{StatusCode: resp.StatusCode, Body: snippet(data)})
	}
	if jsonErr != nil {
		return fmt.Errorf("%s %s: %w", method, endpoint, &decodeError{fmt.Errorf("malformed JSON-RPC answer: %w", jsonErr)})
	}
	if rpc.Error != nil {
		return rpc.Error
	}
	if len(rpc.Result) == 0 || string(rpc.Result) == "null" {
		return fmt.Errorf("%s %s: %w", method, endpoint, &decodeError{errors.New("answer without result or error")})
	}
	if err := json.Unmarshal(rpc.Result, result); err != nil {
		return fmt.Errorf("%s %s: %w", method, endpoint, &decodeError{fmt.Errorf("decode result: %w", err)})
	}
	return nil
}

// SendMessage calls message/send: the answer is a task or a message.
func (c *Client) SendMessage(ctx context.Context, endpoint string, params SendParams, hdr http.Header) (*SendResult, error) {
	if params.Message.Kind == "" {
		params.Message.Kind = KindMessage
	}
	if params.Message.Role == "" {
		params.Message.Role = RoleUser
	}
	var raw json.RawMessage
	if err := c.Call(ctx, endpoint, MethodSend, params, hdr, &raw); err != nil {
		return nil, err
	}
	res, err := decodeSendResult(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", MethodSend, endpoint, &decodeError{err})
	}
	return res, nil
}

// GetTask calls tasks/get.
func (c *Client) GetTask(ctx context.Context, endpoint string, params TaskQueryParams, hdr http.Header) (*Task, error) {
	var t Task
	if err := c.Call(ctx, endpoint, MethodGet, params, hdr, &t); err != nil {
		return nil, err
	}
	if t.ID == "" {
		return nil, fmt.Errorf("%s %s: %w", MethodGet, endpoint, &decodeError{errors.New("task without id")})
	}
	return &t, nil
}

// decodeSendResult reads a task or a message, also from servers that leave
// out the kind.
func decodeSendResult(raw json.RawMessage) (*SendResult, error) {
	var res SendResult
	err := json.Unmarshal(raw, &res)
	if err == nil {
		return &res, nil
	}
	var probe struct {
		Kind   string          `json:"kind"`
		ID     string          `json:"id"`
		Status json.RawMessage `json:"status"`
		Parts  json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(raw, &probe) != nil || probe.Kind != "" {
		return nil, err
	}
	switch {
	case probe.ID != "" && len(probe.Status) > 0:
		res.Task = new(Task)
		return &res, json.Unmarshal(raw, res.Task)
	case len(probe.Parts) > 0:
		res.Message = new(Message)
		return &res, json.Unmarshal(raw, res.Message)
	}
	return nil, err
}

// snippet is the start of a body, on one line, for error texts.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
