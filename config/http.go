package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Defaults of the bridge's HTTP server ([HTTP]).
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	// DefaultWriteMargin is what [HTTP.WriteTimeout] gives an answer beyond
	// http.wait_timeout by default: a decision first waits up to 30s for
	// the approvers, then for its resume.
	DefaultWriteMargin = 60 * time.Second
)

// HTTP tunes the bridge.
type HTTP struct {
	// MaxBodyBytes is the largest request body. Zero means 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// WaitTimeout is how long a POST waits for its turn before answering 202.
	// Zero means 30s.
	WaitTimeout Duration `yaml:"wait_timeout"`
	// PublicURL is the base URL clients reach the bridge at, advertised by
	// the A2A agent card (PublicURL + "/a2a"). Empty means the scheme and
	// host each card request came to (http://<MESH_HTTP_ADDR> for a local
	// client). Its host is one of the names the Host header may carry.
	PublicURL string `yaml:"public_url"`
	// MaxStreams bounds the bridge's concurrent SSE streams, every surface
	// together (503 past it). Zero means 10000.
	MaxStreams int `yaml:"max_streams"`
	// StreamBuffer bounds the bytes held for one slow SSE client before it
	// is cut off (it can resume with Last-Event-ID). Zero means 768 KiB.
	StreamBuffer int `yaml:"stream_buffer"`
	// PingAfter and PingEvery: /api/chat sends {"type":"ping"} every
	// PingEvery once a turn has run for PingAfter. Zero means 10s and 5s.
	PingAfter Duration `yaml:"ping_after"`
	PingEvery Duration `yaml:"ping_every"`
	// DottedOneMessage makes /api/conversation send one message per turn:
	// message.start first, every model message and tool call inside it,
	// message.end last. False sends one message per model message.
	DottedOneMessage bool `yaml:"dotted_one_message"`
	// Insecure lets a bridge without auth listen beyond loopback, serving
	// every request as an admin: for a network that is itself the
	// boundary, on purpose, with a loud warning. Without it such a bridge
	// refuses to start.
	Insecure bool `yaml:"insecure"`
	// QueueCheckAfter is how long a queued turn waits before a bridge that
	// reads or writes its conversation checks that its work item is still in
	// the work stream (and publishes it again, or fails the turn, when it is
	// not); a turn whose bridge died is checked at once. Zero means 30s.
	QueueCheckAfter Duration `yaml:"queue_check_after"`
	// MCPTools chooses the hosted tools /mcp offers through its gateway:
	// "<server>" for all of a server's, "<server>.<tool>" for one. Unset
	// means every hosted tool; an empty list, none.
	MCPTools *[]string `yaml:"mcp_tools"`

	// ReadHeaderTimeout bounds reading a request's headers. Zero means 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a request's body, from its first byte:
	// a client that sends its body slowly is cut off. Zero means 30s.
	ReadTimeout Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing an answer, from the end of the request's
	// headers; it must outlast WaitTimeout, which an answer may wait for
	// its turn. Streams (SSE of AG-UI, the dialects, A2A) are not bound by
	// it but by each write's own deadline. Zero means WaitTimeout + 60s.
	WriteTimeout Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection that sends no request for
	// this long. Zero means 120s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// Hosts are the names the Host header of a request may carry, with or
	// without a port ("agents.example.com", "agents.example.com:8443"),
	// besides the host of PublicURL, IP addresses and localhost, which are
	// always accepted. A request for another name (a DNS rebinding, a page
	// of another site that resolves its own name to this bridge) is
	// refused with 421. "*" accepts any name.
	Hosts []string `yaml:"hosts"`
	// CORS says which web origins may call the bridge from a browser. Off
	// by default: no Access-Control-Allow-Origin, no preflight answered.
	CORS CORS `yaml:"cors"`
	// WebSocket tunes AG-UI over a WebSocket (GET /agui/ws).
	WebSocket WebSocket `yaml:"websocket"`
}

// WebSocket tunes the sockets of GET /agui/ws.
type WebSocket struct {
	// Heartbeat is the interval of the server's pings, and the time a
	// pong has to come back before the socket is closed. Zero means 15s.
	Heartbeat Duration `yaml:"heartbeat"`
	// MaxThreads bounds the runs and follows one socket has open at once
	// (too_many_threads past it). Zero means 16.
	MaxThreads int `yaml:"max_threads"`
	// FrameTimeout bounds writing one frame to a client: a client that
	// stops reading for longer is cut off. Zero means 15s.
	FrameTimeout Duration `yaml:"frame_timeout"`
}

// CORS configures cross-origin requests from browsers.
type CORS struct {
	// Origins are the origins allowed ("https://app.example.com", scheme,
	// host and port as the browser sends them), or "*" for any (the
	// bridge uses bearer tokens, not cookies: credentials are never
	// allowed). Empty means none.
	Origins []string `yaml:"origins"`
	// MaxAge is how long a browser may cache a preflight answer. Zero
	// means 10m.
	MaxAge Duration `yaml:"max_age"`
}

func (h *HTTP) applyDefaults() {
	if h.ReadHeaderTimeout == 0 {
		h.ReadHeaderTimeout = Duration(DefaultReadHeaderTimeout)
	}
	if h.ReadTimeout == 0 {
		h.ReadTimeout = Duration(DefaultReadTimeout)
	}
	if h.WriteTimeout == 0 {
		h.WriteTimeout = h.WaitTimeout + Duration(DefaultWriteMargin)
	}
	if h.IdleTimeout == 0 {
		h.IdleTimeout = Duration(DefaultIdleTimeout)
	}
	if h.CORS.MaxAge == 0 {
		h.CORS.MaxAge = Duration(10 * time.Minute)
	}
}

func (h *HTTP) validate() *fieldErr {
	for name, d := range map[string]Duration{"read_header_timeout": h.ReadHeaderTimeout, "read_timeout": h.ReadTimeout,
		"write_timeout": h.WriteTimeout, "idle_timeout": h.IdleTimeout, "cors.max_age": h.CORS.MaxAge,
		"websocket.heartbeat": h.WebSocket.Heartbeat, "websocket.frame_timeout": h.WebSocket.FrameTimeout} {
		if d < 0 {
			return &fieldErr{"http." + name, "must not be negative"}
		}
	}
	if h.WriteTimeout != 0 && h.WriteTimeout <= h.WaitTimeout {
		return &fieldErr{"http.write_timeout", fmt.Sprintf("%s must be longer than http.wait_timeout (%s): an answer waits that long for its turn",
			h.WriteTimeout.Std(), h.WaitTimeout.Std())}
	}
	if h.WebSocket.MaxThreads < 0 {
		return &fieldErr{"http.websocket.max_threads", "must not be negative"}
	}
	if h.MCPTools != nil {
		for _, t := range *h.MCPTools {
			if t == "" || strings.ContainsAny(t, " */>") || strings.Count(t, ".") > 1 {
				return &fieldErr{"http.mcp_tools", fmt.Sprintf("%q is not <server> or <server>.<tool>", t)}
			}
		}
	}
	for _, host := range h.Hosts {
		if host == "*" {
			continue
		}
		if host == "" || strings.ContainsAny(host, "/ @?#*") {
			return &fieldErr{"http.hosts", fmt.Sprintf("%q is not a host name with an optional port, such as agents.example.com or agents.example.com:8443", host)}
		}
	}
	for _, o := range h.CORS.Origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return &fieldErr{"http.cors.origins", fmt.Sprintf("%q is not an origin (scheme://host[:port]), such as https://app.example.com, or *", o)}
		}
	}
	return nil
}

// HostAllowed reports whether a request's Host header names this bridge:
// an IP address or localhost (a name no DNS rebinding can take), the
// host of http.public_url, or one of http.hosts. A Host with a port
// matches an entry without one.
func (h *HTTP) HostAllowed(host string) bool {
	if host == "" {
		return false
	}
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if net.ParseIP(name) != nil || name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	allowed := h.Hosts
	if u, err := url.Parse(h.PublicURL); h.PublicURL != "" && err == nil {
		allowed = append(allowed[:len(allowed):len(allowed)], u.Host)
	}
	for _, a := range allowed {
		a = strings.ToLower(a)
		if a == "*" || a == strings.ToLower(host) || a == name {
			return true
		}
	}
	return false
}

// OriginAllowed reports whether http.cors.origins admits a browser's
// Origin, and what Access-Control-Allow-Origin says to it ("*" or the
// origin itself).
func (c *CORS) OriginAllowed(origin string) (allow string, ok bool) {
	if origin == "" {
		return "", false
	}
	for _, o := range c.Origins {
		switch {
		case o == "*":
			return "*", true
		case strings.EqualFold(strings.TrimSuffix(o, "/"), origin):
			return origin, true
		}
	}
	return "", false
}
