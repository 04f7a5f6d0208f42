package toolhost

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

const (
	// connectTimeout bounds the start of a server and its handshake (npx
	// may download a package first).
	connectTimeout = 60 * time.Second
	// keepAlive is how often a connected server is pinged; a server that
	// stops answering is taken for dead and restarted.
	keepAlive = 15 * time.Second
	// maxInFlight bounds the calls one connected server runs at once; more
	// wait in NATS.
	maxInFlight = 64
)

// server supervises one configured MCP server.
type server struct {
	h       *Role
	cfg     config.MCPServer
	tools   jetstream.KeyValue
	calls   jetstream.KeyValue
	log     zerolog.Logger
	timeout time.Duration
}

func newServer(h *Role, cfg config.MCPServer, tools, calls jetstream.KeyValue) *server {
	return &server{
		h:       h,
		cfg:     cfg,
		tools:   tools,
		calls:   calls,
		log:     h.log.With().Str("server", cfg.Name).Logger(),
		timeout: cfg.Timeout.Or(DefaultCallTimeout),
	}
}

// supervise runs the server until ctx ends, starting it again with
// exponential backoff and jitter whenever it dies or fails to start.
func (s *server) supervise(ctx context.Context) {
	backoff := s.h.cfg.MinBackoff
	for {
		started := time.Now()
		up, err := s.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if up && time.Since(started) >= s.h.cfg.StableAfter {
			backoff = s.h.cfg.MinBackoff
		}
		wait := jitter(backoff)
		s.log.Warn().Err(err).Dur("retry_in", wait).Msg("mcp server is down; starting it again")
		telemetry.MCPRestart(s.cfg.Name)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, s.h.cfg.MaxBackoff)
	}
}

// jitter returns a delay between d/2 and d.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// runOnce starts the server, serves its tools until it dies or ctx ends,
// and cleans up. up reports whether it got as far as serving.
func (s *server) runOnce(ctx context.Context) (up bool, err error) {
	tr, cmd, flush, err := s.transport()
	if err != nil {
		return false, err
	}
	refresh := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: ClientName, Version: s.h.version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case refresh <- struct{}{}:
			default: // a refresh is already pending
			}
		},
		KeepAlive: keepAlive,
	})
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	session, err := client.Connect(cctx, tr, nil)
	cancel()
	if err != nil {
		reap(cmd)
		flush()
		return false, fmt.Errorf("connect: %w", err)
	}
	c := newConn(s, session, flush)

	tools, err := c.list(ctx)
	if err != nil {
		c.shutdown(false)
		return false, err
	}
	retry := time.NewTimer(time.Hour) // armed when publishing or refreshing fails
	retry.Stop()
	defer retry.Stop()
	// The catalog is complete before the tools are served, so whoever sees a
	// toolhost answer also sees all its tools.
	if err := c.publish(ctx, tools); err != nil {
		s.log.Warn().Err(err).Msg("publish tool catalog; retrying")
		retry.Reset(time.Second)
	}
	if err := c.register(tools); err != nil {
		c.shutdown(false)
		return false, err
	}
	s.log.Info().Int("tools", len(tools)).Msg("mcp server ready")
	for {
		select {
		case <-ctx.Done():
			c.shutdown(true)
			return true, nil
		case <-c.dead:
			exit := c.shutdown(false)
			return true, fmt.Errorf("mcp server stopped: %s", exit)
		case <-refresh:
			s.log.Info().Msg("tool list changed")
			if err := c.refresh(ctx); err != nil {
				s.log.Warn().Err(err).Msg("refresh tools; retrying")
				retry.Reset(time.Second)
			}
		case <-retry.C:
			if err := c.refresh(ctx); err != nil {
				s.log.Warn().Err(err).Msg("refresh tools; retrying")
				retry.Reset(5 * time.Second)
			}
		}
	}
}

// reap kills and waits for a child whose session never started.
func reap(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// conn is one connected lifetime of a server: its session, its tools and
// the micro service that serves them. Its fields other than the session,
// tools and call tracking belong to the supervisor goroutine.
type conn struct {
	s       *server
	session *mcp.ClientSession
	flush   func()
	dead    chan struct{} // closed when the session ends
	tools   atomic.Pointer[toolSet]

	// ctx is the context of calls; it is cancelled when the connection is
	// torn down, after the drain when the toolhost stops.
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}

	mu      sync.Mutex
	closing bool
	active  int
	idle    chan struct{}
	wg      sync.WaitGroup

	svc       micro.Service
	endpoints map[string]bool // subjects served by svc
	names     map[string]bool // endpoint names taken in svc
}

func newConn(s *server, session *mcp.ClientSession, flush func()) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s:       s,
		session: session,
		flush:   flush,
		dead:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
		slots:   make(chan struct{}, maxInFlight),
	}
	empty := toolSet{}
	c.tools.Store(&empty)
	c.wg.Go(func() {
		_ = session.Wait()
		close(c.dead)
	})
	return c
}

// list lists every tool of the server, page by page.
func (c *conn) list(ctx context.Context) (toolSet, error) {
	lctx, cancel := context.WithTimeout(ctx, c.s.timeout)
	defer cancel()
	now := c.s.h.now()
	set := toolSet{}
	for t, err := range c.session.Tools(lctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		ti, err := newTool(c.s.h.cfg.NS, c.s.cfg.Name, c.s.h.cfg.NodeID, t, c.s.cfg.URL != "", now)
		if err != nil {
			c.s.log.Warn().Err(err).Str("tool", t.Name).Msg("tool skipped")
			continue
		}
		set[t.Name] = ti
	}
	return set, nil
}

// refresh lists the tools again, then serves and publishes them.
func (c *conn) refresh(ctx context.Context) error {
	tools, err := c.list(ctx)
	if err != nil {
		return err
	}
	if err := c.register(tools); err != nil {
		return err
	}
	return c.publish(ctx, tools)
}

func (c *conn) publish(ctx context.Context, tools toolSet) error {
	pctx, cancel := context.WithTimeout(ctx, c.s.timeout)
	defer cancel()
	return publishCatalog(pctx, c.s.tools, c.s.cfg.Name, tools)
}

// register serves tools. New tools get endpoints on the current service;
// when tools were removed, a new service replaces the old one (a micro
// service cannot drop an endpoint), registered before the old one stops so
// that no request finds nobody.
func (c *conn) register(tools toolSet) error {
	old := *c.tools.Load()
	c.tools.Store(&tools)
	removed := false
	for name := range old {
		if _, ok := tools[name]; !ok {
			removed = true
		}
	}
	if c.svc != nil && !removed {
		return c.addEndpoints(c.svc, tools)
	}
	meta := map[string]string{"server": c.s.cfg.Name}
	for k, v := range c.s.h.meta {
		meta[k] = v
	}
	svc, err := micro.AddService(c.s.h.cfg.Responder, micro.Config{
		Name:        mesh.ToolServiceName,
		Version:     c.s.h.version,
		Description: "Agent Mesh tools of MCP server " + c.s.cfg.Name,
		QueueGroup:  QueueGroup,
		Metadata:    meta,
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			c.s.log.Warn().Str("subject", err.Subject).Str("err", err.Description).Msg("tool service error")
		},
	})
	if err != nil {
		return fmt.Errorf("add micro service: %w", err)
	}
	prev, prevEndpoints, prevNames := c.svc, c.endpoints, c.names
	c.svc, c.endpoints, c.names = svc, map[string]bool{}, map[string]bool{}
	if err := c.addEndpoints(svc, tools); err != nil {
		_ = svc.Stop()
		c.svc, c.endpoints, c.names = prev, prevEndpoints, prevNames
		return err
	}
	if prev != nil {
		if err := prev.Stop(); err != nil {
			c.s.log.Warn().Err(err).Msg("stop replaced tool service")
		}
	}
	return nil
}

func (c *conn) addEndpoints(svc micro.Service, tools toolSet) error {
	names := make([]string, 0, len(tools))
	for name := range tools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t := tools[name]
		if c.endpoints[t.subject] {
			continue
		}
		handler := micro.HandlerFunc(func(req micro.Request) { c.dispatch(req, name) })
		err := svc.AddEndpoint(endpointName(mesh.ToolToken(name), c.names), handler,
			micro.WithEndpointSubject(t.subject),
			micro.WithEndpointMetadata(map[string]string{"tool": name}))
		if err != nil {
			return fmt.Errorf("add endpoint %s: %w", t.subject, err)
		}
		c.endpoints[t.subject] = true
		telemetry.HostedTool(c.s.cfg.Name, name)
		c.s.log.Debug().Str("subject", t.subject).Msg("serving tool")
	}
	return nil
}

// tool returns the current definition of a tool, or nil.
func (c *conn) tool(name string) *tool {
	return (*c.tools.Load())[name]
}

// dispatch runs a request on its own goroutine, so that a slow tool does
// not hold the others up.
func (c *conn) dispatch(mr micro.Request, name string) {
	req := newRequest(mr)
	select {
	case c.slots <- struct{}{}:
	case <-c.ctx.Done():
		c.replyErr(req, c.unavailable("is stopping or restarting"))
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.slots
		c.replyErr(req, c.unavailable("is stopping or restarting"))
		return
	}
	c.active++
	c.wg.Add(1)
	c.mu.Unlock()
	// Tell a caller that asks which toolhost took the call: should this
	// process die before it answers, the caller sees it gone and sends the
	// call again. Plain requests (nats req) get the result only.
	if req.reply != "" && req.header.Get(mesh.HeaderCallAck) != "" {
		ack := nats.NewMsg(req.reply)
		ack.Header.Set(mesh.HeaderCallHost, c.s.h.cfg.NodeID)
		_ = c.s.h.cfg.Responder.PublishMsg(ack)
	}
	go func() {
		defer c.wg.Done()
		defer c.done()
		c.handle(req, name)
	}()
}

func (c *conn) done() {
	<-c.slots
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active--
	if c.active == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// stopCalls refuses new calls and returns a channel closed once no call is
// in flight.
func (c *conn) stopCalls() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing = true
	ch := make(chan struct{})
	if c.active == 0 {
		close(ch)
	} else {
		c.idle = ch
	}
	return ch
}

// shutdown stops serving and ends the session. With drain, calls in flight
// get the drain timeout to finish first. It returns how the session ended,
// for logs.
func (c *conn) shutdown(drain bool) string {
	if c.svc != nil {
		if err := c.svc.Stop(); err != nil {
			c.s.log.Warn().Err(err).Msg("stop tool service")
		}
	}
	idle := c.stopCalls()
	if drain {
		t := time.NewTimer(c.s.h.cfg.DrainTimeout)
		select {
		case <-idle:
		case <-t.C:
			c.s.log.Warn().Dur("drain_timeout", c.s.h.cfg.DrainTimeout).Msg("tool calls still running; cancelling them")
		}
		t.Stop()
	}
	c.cancel()
	exit := "the session ended"
	if err := c.session.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		exit = err.Error()
	}
	c.wg.Wait()
	c.flush()
	return exit
}

func (c *conn) unavailable(what string) error {
	return mesh.ErrToolUnavailable.With(fmt.Sprintf("tool server %q %s", c.s.cfg.Name, what))
}
