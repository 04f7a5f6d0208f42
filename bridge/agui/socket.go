package agui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/mesh"
)

// AG-UI over a WebSocket: GET /agui/ws.
//
// A socket carries JSON text frames both ways. The client sends:
//
//	RunAgentInput                         start a run, as POST /agui (with
//	                                      "resume" it answers interrupts); an
//	                                      optional "type":"run" is allowed
//	{"type":"reattach","threadId","runId","cursor"}
//	                                      after a reconnect: the rest of a run,
//	                                      after the frame whose cursor this is
//	{"type":"follow","threadId","after"?} every event of a thread, as GET
//	                                      /conversations/{id}/events from after
//	{"type":"unfollow","threadId"}        stop sending a thread's events
//	{"type":"cancel","threadId","runId"?} stop the thread's run
//	{"type":"feedback","threadId","messageId","rating","comment"?}
//	                                      rate a message (actions.go)
//
// The server sends one frame per event of the events stream, in order:
//
//	{"type":"connection_open","connectionId","heartbeatMs","maxThreads","timestamp"}
//	                                      first, once: the socket's id (in the
//	                                      bridge's logs too) and its limits
//	{"type":"events","threadId","runId","seq","cursor","events":[…]}
//	{"type":"error","code","message","status","threadId"?,"runId"?}
//	{"type":"connection_close","connectionId","reason","timestamp"}
//	                                      last, when the server closes the
//	                                      socket on purpose: its credential
//	                                      expired, or the bridge is stopping
//
// events holds the AG-UI events that stream event became, exactly those
// POST /agui sends for it (none is never sent); a follow's frames hold the
// stored event as is, and no runId or cursor. seq is the stream sequence;
// a run's first frame is its RUN_STARTED, with the sequence the run
// started after. One frame is delivered whole or not at all, so a client
// that reconnects and sends the last cursor it got (or a follow's last
// seq as after) gets every later event once: none missing, none twice.
//
// A socket opened with a stream token (?access_token=, for a browser's
// WebSocket, which cannot send headers) only reads: follow, unfollow and
// reattach work; run, cancel and feedback frames get an error frame
// (code read_only, status 403) and the socket stays up. A socket lasts no
// longer than the credential it was opened with: when a stream token or a
// JWT expires, the server closes the socket with status 1008 (policy
// violation) and the reason "token expired"; the client opens a new one
// with a fresh token and reattaches. The runs go on.
//
// A socket follows any number of threads up to SocketConfig.MaxThreads,
// one run or follow each; the socket and each of them take a stream slot
// (core.AcquireStream). A run does not end with its socket: the client
// reattaches, or cancels. A frame that cannot be read or done gets an
// error frame and the socket stays up; one larger than MaxBodyBytes closes
// it (status 1009), as the WebSocket protocol has it. The server pings
// every Heartbeat and closes a socket whose pong does not come within it.
// A bridge that stops closes its sockets with status 1001 (going away)
// after a connection_close frame; the client reconnects to another bridge
// and reattaches.

// SocketPath is the route of AG-UI over a WebSocket.
const SocketPath = "/agui/ws"

// SocketConfig configures GET /agui/ws.
type SocketConfig struct {
	// OriginAllowed admits a browser's Origin that is not the bridge's own
	// host (http.cors.origins, the host of http.public_url). Nil admits the
	// same host only.
	OriginAllowed func(origin string) bool
	// MaxThreads bounds the runs and follows one socket has open at once.
	// Zero means 16.
	MaxThreads int
	// Heartbeat is the interval of the server's pings and the time a pong
	// has to come back. Zero means 15s.
	Heartbeat time.Duration
	// FrameTimeout bounds writing one frame: a client that stops reading
	// for longer is cut off. Zero means 15s, as an SSE write.
	FrameTimeout time.Duration
}

// ErrOriginNotAllowed refuses a browser's socket from a page of another
// site: browsers do not apply CORS to WebSockets, so the bridge checks.
var ErrOriginNotAllowed = mesh.NewError("origin_not_allowed", http.StatusForbidden, "origin not allowed")

// RegisterSocket mounts GET /agui/ws on mux.
func RegisterSocket(mux core.Mux, cfg Config, sc SocketConfig) {
	if sc.MaxThreads == 0 {
		sc.MaxThreads = 16
	}
	if sc.Heartbeat == 0 {
		sc.Heartbeat = sse.DefaultKeepAlive
	}
	if sc.FrameTimeout == 0 {
		sc.FrameTimeout = sse.WriteTimeout
	}
	s := &sockets{h: newHandler(cfg), cfg: sc}
	mux.HandleFunc("GET "+SocketPath, s.serve)
}

type sockets struct {
	h   *handler
	cfg SocketConfig
}

// serve upgrades the request after the checks a WebSocket needs beyond the
// edge's (its Origin) and serves the socket until either side closes it.
func (s *sockets) serve(w http.ResponseWriter, r *http.Request) {
	if !s.originAllowed(r) {
		writeError(w, ErrOriginNotAllowed.With("origin "+mesh.Clip(r.Header.Get("Origin"))+" may not open a socket here: add it to http.cors.origins"))
		return
	}
	closeStream, opened := s.h.acquire(w, r)
	if !opened {
		return
	}
	defer closeStream()
	// The server's read and write timeouts would end the socket; frames get
	// deadlines of their own (FrameTimeout, Heartbeat).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	caller := core.CallerOf(r)
	release := s.h.core.Hold()
	defer release()
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // Origin checked above
	if err != nil {
		return // Accept answered the request
	}
	conn.SetReadLimit(s.h.cfg.MaxBodyBytes)
	ctx, cancel := context.WithCancel(r.Context())
	id := mesh.NewID()
	sock := &socket{s: s, h: s.h, conn: conn, caller: caller, ctx: ctx, cancel: cancel, subs: map[string]*subscription{}, id: id,
		log: s.h.log.With().Str("surface", "agui-ws").Str("connection", id).Logger()}
	sock.run()
}

// originAllowed admits a request without Origin (not a browser), one from
// the bridge's own host, and those OriginAllowed admits (http.cors.origins,
// the host of http.public_url).
func (s *sockets) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return s.cfg.OriginAllowed != nil && s.cfg.OriginAllowed(origin)
}

// socket is one client's connection; it owns the goroutines of its
// subscriptions and its heartbeat, and waits for them before it returns.
type socket struct {
	s      *sockets
	h      *handler
	conn   *websocket.Conn
	caller core.Caller
	ctx    context.Context
	cancel context.CancelFunc
	log    zerolog.Logger
	wg     sync.WaitGroup
	id     string // the connection id its frames and log lines carry

	mu   sync.Mutex
	subs map[string]*subscription // by thread
}

// subscription is a run or a follow of one thread on a socket.
type subscription struct {
	thread string
	ctx    context.Context
	cancel context.CancelFunc
}

// clientFrame is the part of a client's frame that says what it is.
type clientFrame struct {
	Type     string  `json:"type"`
	ThreadID string  `json:"threadId"`
	RunID    string  `json:"runId"`
	Cursor   string  `json:"cursor"`
	After    *uint64 `json:"after"`
	// A feedback frame's (actions.go).
	MessageID string `json:"messageId"`
	Rating    string `json:"rating"`
	Comment   string `json:"comment"`
}

// serverFrame is a frame the server sends.
type serverFrame struct {
	Type     string            `json:"type"`
	ThreadID string            `json:"threadId,omitempty"`
	RunID    string            `json:"runId,omitempty"`
	Seq      uint64            `json:"seq,omitempty"`
	Cursor   string            `json:"cursor,omitempty"`
	Events   []json.RawMessage `json:"events,omitempty"`
	Code     string            `json:"code,omitempty"`
	Message  string            `json:"message,omitempty"`
	Status   int               `json:"status,omitempty"`
	// ResetAt is when a limit's refusal may be tried again (RFC 3339).
	ResetAt string `json:"resetAt,omitempty"`
	// The connection frames'.
	ConnectionID string `json:"connectionId,omitempty"`
	HeartbeatMs  int64  `json:"heartbeatMs,omitempty"`
	MaxThreads   int    `json:"maxThreads,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Timestamp    string `json:"timestamp,omitempty"`
}

// The types of the frames that open and close a connection.
const (
	FrameConnectionOpen  = "connection_open"
	FrameConnectionClose = "connection_close"
)

// run reads frames until the socket closes, then stops its subscriptions
// (not their runs) and waits for them.
func (c *socket) run() {
	defer func() {
		c.cancel()
		c.wg.Wait()
		_ = c.conn.CloseNow()
	}()
	if !c.send(serverFrame{Type: FrameConnectionOpen, ConnectionID: c.id, HeartbeatMs: c.s.cfg.Heartbeat.Milliseconds(),
		MaxThreads: c.s.cfg.MaxThreads, Timestamp: frameTime()}) {
		return
	}
	c.wg.Add(2)
	go c.heartbeat()
	go c.closeWhenStopping()
	if p := c.caller.Principal; p != nil && !p.Expires.IsZero() {
		c.wg.Add(1)
		go c.expire(p.Expires)
	}
	for {
		typ, data, err := c.conn.Read(c.ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			c.fail("", "", mesh.ErrBadRequest.With("frames are JSON text, not binary"))
			continue
		}
		c.handle(data)
	}
}

// heartbeat pings every Heartbeat; a pong that does not come in time
// closes the socket.
func (c *socket) heartbeat() {
	defer c.wg.Done()
	t := time.NewTicker(c.s.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.Heartbeat)
		err := c.conn.Ping(ctx)
		cancel()
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Info().Err(err).Msg("no pong: socket closed")
			}
			c.cancel()
			_ = c.conn.CloseNow()
			return
		}
	}
}

// CloseTokenExpired is the reason of the close frame of a socket whose
// credential expired (status 1008, [websocket.StatusPolicyViolation]).
const CloseTokenExpired = "token expired: open a new socket with a fresh token and reattach"

// expire closes the socket, with a close frame that says why, when the
// credential it was opened with expires.
func (c *socket) expire(at time.Time) {
	defer c.wg.Done()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return
	case <-t.C:
	}
	c.log.Info().Msg("the token of the socket expired: socket closed")
	c.goodbye(websocket.StatusPolicyViolation, CloseTokenExpired)
}

// CloseStopping is the reason of the close frame of a socket whose bridge
// is stopping (status 1001, [websocket.StatusGoingAway]).
const CloseStopping = "bridge stopping: reconnect and reattach"

// closeWhenStopping closes the socket when the bridge begins to stop.
func (c *socket) closeWhenStopping() {
	defer c.wg.Done()
	select {
	case <-c.ctx.Done():
	case <-c.h.core.Stopping():
		c.goodbye(websocket.StatusGoingAway, CloseStopping)
	}
}

// goodbye sends a connection_close frame and closes the socket with code
// and reason.
func (c *socket) goodbye(code websocket.StatusCode, reason string) {
	c.send(serverFrame{Type: FrameConnectionClose, ConnectionID: c.id, Reason: reason, Timestamp: frameTime()})
	// Close first: cancelling the socket's context first would make its
	// reader close the connection without a close frame.
	_ = c.conn.Close(code, reason)
	c.cancel()
}

// frameTime is a frame's timestamp: RFC 3339 with milliseconds, UTC.
func frameTime() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// handle does what one frame asks, or answers it with an error frame.
func (c *socket) handle(data []byte) {
	var f clientFrame
	if err := json.Unmarshal(data, &f); err != nil {
		c.fail("", "", mesh.ErrBadRequest.With("invalid frame: "+mesh.JSONErrorText(err)))
		return
	}
	var err error
	switch f.Type {
	case "", "run", "cancel", "feedback":
		// What changes something: not on a socket of a stream token.
		if err := c.h.core.Writes(c.caller); err != nil {
			c.fail(f.ThreadID, f.RunID, err)
			return
		}
	}
	switch f.Type {
	case "", "run":
		var in runAgentInput
		if err := json.Unmarshal(data, &in); err != nil {
			c.fail(f.ThreadID, f.RunID, mesh.ErrBadRequest.With("invalid RunAgentInput: "+mesh.JSONErrorText(err)))
			return
		}
		// A run is a request: it spends its caller's budgets as a POST
		// /agui would.
		if err = c.h.core.Take(c.ctx); err == nil {
			err = c.startRun(&in)
		}
	case "reattach":
		err = c.reattach(f)
	case "follow":
		err = c.follow(f)
	case "unfollow":
		if err = core.CheckID(`"threadId"`, f.ThreadID); err == nil {
			c.unsubscribe(f.ThreadID)
		}
	case "cancel":
		err = c.cancelRun(f)
	case "feedback":
		if err = c.h.core.Take(c.ctx); err == nil {
			err = c.feedbackFrame(f)
		}
	default:
		err = mesh.ErrBadRequest.With(fmt.Sprintf("frame type %s is not run, reattach, follow, unfollow, cancel or feedback", mesh.Clip(f.Type)))
	}
	if err != nil {
		c.fail(f.ThreadID, f.RunID, err)
	}
}

// fail sends an error frame.
func (c *socket) fail(thread, run string, err error) {
	if mesh.CheckID(thread) != nil {
		thread = ""
	}
	if mesh.CheckID(run) != nil {
		run = ""
	}
	msg := err.Error()
	status := mesh.HTTPStatus(err)
	if status >= 500 && !mesh.IsUnavailable(err) && core.LimitOf(err) == nil {
		msg = "internal error: " + msg
	}
	f := serverFrame{Type: "error", ThreadID: thread, RunID: run, Code: mesh.ErrorKind(err), Message: msg, Status: status}
	if le := core.LimitOf(err); le != nil {
		f.Message, f.ResetAt = le.Error(), le.ResetAt.Format(time.RFC3339)
	}
	c.send(f)
}

// send writes a frame within SocketConfig.FrameTimeout; a failed write
// closes the socket.
func (c *socket) send(f serverFrame) bool {
	data, err := json.Marshal(f)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.FrameTimeout)
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageText, data); err != nil {
		c.cancel()
		return false
	}
	return true
}

// ErrTooManyThreads refuses a run or follow past SocketConfig.MaxThreads.
var ErrTooManyThreads = mesh.NewError("too_many_threads", http.StatusTooManyRequests, "too many threads on this socket")

// ErrThreadBusy refuses a second run or follow of a thread on one socket.
var ErrThreadBusy = mesh.NewError("thread_busy", http.StatusConflict, "thread already followed on this socket")

// subscribe takes a place for thread on the socket and a stream slot.
func (c *socket) subscribe(thread string) (*subscription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.subs[thread] != nil:
		return nil, ErrThreadBusy.With("thread " + thread + " already has a run or follow on this socket: unfollow it first")
	case len(c.subs) >= c.s.cfg.MaxThreads:
		return nil, ErrTooManyThreads.With(fmt.Sprintf("a socket follows at most %d threads at once", c.s.cfg.MaxThreads))
	case !c.h.core.AcquireStream():
		return nil, core.RefusalFor(ErrTooManyStreams, time.Second, "too many concurrent streams on this bridge (http.max_streams); retry shortly")
	}
	ctx, cancel := context.WithCancel(c.ctx)
	sub := &subscription{thread: thread, ctx: ctx, cancel: cancel}
	c.subs[thread] = sub
	return sub, nil
}

// drop ends sub and gives its slot back; dropping twice does nothing.
func (c *socket) drop(sub *subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[sub.thread] != sub {
		return
	}
	delete(c.subs, sub.thread)
	sub.cancel()
	c.h.core.ReleaseStream()
}

func (c *socket) unsubscribe(thread string) {
	c.mu.Lock()
	sub := c.subs[thread]
	c.mu.Unlock()
	if sub != nil {
		c.drop(sub)
	}
}
