package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
)

// Environment of the terminal commands.
const (
	envURL   = "MESH_URL"
	envToken = "MESH_TOKEN"
)

// clientOptions are the flags the terminal commands share, and what they
// connect with: the bridge's HTTP API with a token (chat, approve), or NATS
// with the admin's credentials (tail, sessions, tools).
type clientOptions struct {
	url       string
	tokenFile string
	json      bool

	cfg    *config.Config
	cfgErr error
	loaded bool
	// ctxURL is the bridge's URL of the mesh context (context.go).
	ctxURL string
}

// httpFlags adds the flags of a command that talks to the bridge.
func (o *clientOptions) httpFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.url, "url", "", "the bridge's URL (default $"+envURL+", else http://<MESH_HTTP_ADDR or host:port of agent.yaml>)")
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "a file holding the bearer token (default: $"+envToken+")")
}

// jsonFlag adds --json.
func (o *clientOptions) jsonFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON for scripts instead of text for people")
}

// config reads agent.yaml and the environment once.
func (o *clientOptions) config() (*config.Config, error) {
	if !o.loaded {
		o.cfg, o.cfgErr = config.FromEnvironment()
		if o.cfgErr == nil {
			o.ctxURL, o.cfgErr = applyContext(o.cfg)
		}
		o.loaded = true
	}
	return o.cfg, o.cfgErr
}

// bridge returns a client of the bridge: --url, $MESH_URL, the mesh
// context's (context.go) unless MESH_HTTP_ADDR is set, else the address the
// configuration gives the bridge (loopback for 0.0.0.0).
func (o *clientOptions) bridge() (*bridgeClient, error) {
	base := o.url
	if base == "" {
		base = os.Getenv(envURL)
	}
	if base == "" {
		if _, err := o.config(); err != nil {
			return nil, fmt.Errorf("%w (or set %s to the bridge's URL)", err, envURL)
		}
		if os.Getenv(config.EnvHTTPAddr) == "" {
			base = o.ctxURL
		}
	}
	if base == "" {
		host, port, err := net.SplitHostPort(o.cfg.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("%w: http address %q: %w", errConfig, o.cfg.HTTPAddr, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		base = "http://" + net.JoinHostPort(host, port)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("--url %q: want http(s)://host:port", base)
	}
	token := os.Getenv(envToken)
	if o.tokenFile != "" {
		data, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, usageErr("--token-file: %v", err)
		}
		token = strings.TrimSpace(string(data))
	}
	return &bridgeClient{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{}, by: localUser()}, nil
}

// localUser names the person at the terminal, for the decisions a bridge
// without authentication records ("by"); with authentication the bridge
// records the token's principal whatever the body says.
func localUser() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if name == "" {
		name = "unknown"
	}
	return "cli:" + name + "@" + host
}

// admin connects to NATS with the admin's credentials, failing after a
// few seconds rather than waiting for a server that is not there.
func (o *clientOptions) admin(ctx context.Context) (*nats.Conn, jetstream.JetStream, mesh.Namespace, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, nil, mesh.Namespace{}, err
	}
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return nil, nil, mesh.Namespace{}, fmt.Errorf("%w: %w", errConfig, err)
	}
	nc, id, err := connectAs(cfg, ns, identity.RoleAdmin, "mesh-cli", zerolog.Nop())
	if err != nil {
		return nil, nil, ns, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for !nc.IsConnected() {
		last := nc.LastError()
		// A refusal does not go away by waiting: say so at once.
		refused := errors.Is(last, nats.ErrAuthorization) || last != nil && strings.Contains(strings.ToLower(last.Error()), "authorization violation")
		if refused || time.Now().After(deadline) || ctx.Err() != nil {
			nc.Close()
			switch {
			case refused:
				// nats.go words a refusal during the handshake as the server
				// sent it and one after it as its own error: say one thing.
				return nil, nil, ns, fmt.Errorf("%w: %s", nats.ErrAuthorization, refusedIdentity(cfg, id))
			case last != nil:
				return nil, nil, ns, fmt.Errorf("no mesh at %s: %w (%s)", natsURL(cfg), last, whereHint)
			}
			return nil, nil, ns, fmt.Errorf("no mesh at %s (%s)", natsURL(cfg), whereHint)
		}
		time.Sleep(50 * time.Millisecond)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, ns, err
	}
	return nc, js, ns, nil
}

// whereHint says how to point a terminal command at a mesh.
const whereHint = "is it running? For a mesh elsewhere, point MESH_DATA_DIR at its data directory, or MESH_CONTEXT at a context file (url, nats_url, nkey or creds)"

// bridgeClient calls the bridge's REST and SSE routes as the token's
// principal.
type bridgeClient struct {
	base  string
	token string
	hc    *http.Client
	// by is who decides when the bridge runs without authentication.
	by string
}

// apiError is an answer of the bridge that is not a success.
type apiError struct {
	Status  int
	Code    string
	Message string
	// Body is the whole answer: a refused decision carries the approval.
	Body json.RawMessage
}

func (e *apiError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		return msg + " (set " + envToken + " or --token-file to a token of the bridge's auth.tokens)"
	case http.StatusForbidden:
		return msg + " (your token's roles may not do this)"
	}
	return msg
}

// requestTimeout bounds a call that is not a stream; a POST that starts a
// turn answers within the bridge's http.wait_timeout (30 s by default).
const requestTimeout = 2 * time.Minute

func (c *bridgeClient) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if method != http.MethodGet {
		if body == nil {
			body = map[string]any{}
		}
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		// The bridge refuses a state-changing request without it.
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (c *bridgeClient) do(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("bridge at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("bridge at %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		return decodeAPIError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("bridge answer: %w", err)
	}
	return nil
}

func decodeAPIError(status int, data []byte) *apiError {
	e := &apiError{Status: status, Body: data}
	var body struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(data, &body) == nil {
		e.Message, e.Code = body.Error, body.Code
	}
	return e
}

// sseEvent is one Server-Sent Event: its id (the stream sequence) and data.
type sseEvent struct {
	ID   string
	Data []byte
}

// sseStream reads the events of one SSE answer.
type sseStream struct {
	body io.ReadCloser
	rd   *bufio.Reader
}

// events opens GET /conversations/{id}/events after sequence after ("" for
// the start, "now" for only the events published from now on).
func (c *bridgeClient) events(ctx context.Context, conv, after string) (*sseStream, error) {
	path := "/conversations/" + url.PathEscape(conv) + "/events"
	switch after {
	case "":
	case "now":
		// Any sequence at or past the stream's last means "from now on".
		path += "?after=" + fmt.Sprint(^uint64(0))
	default:
		path += "?after=" + url.QueryEscape(after)
	}
	req, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bridge at %s: %w", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		return nil, decodeAPIError(resp.StatusCode, data)
	}
	return &sseStream{body: resp.Body, rd: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
}

// Next returns the next event; comments and retry lines are skipped.
func (s *sseStream) Next() (sseEvent, error) {
	var ev sseEvent
	var data [][]byte
	for {
		line, err := s.rd.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) == 0 {
				return ev, io.EOF
			}
			if len(line) == 0 {
				return ev, err
			}
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if data != nil {
				ev.Data = bytes.Join(data, []byte("\n"))
				return ev, nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "id":
			ev.ID = string(value)
		case "data":
			data = append(data, append([]byte(nil), value...))
		}
		if err != nil {
			return ev, err
		}
	}
}

// Close ends the stream.
func (s *sseStream) Close() { _ = s.body.Close() }
