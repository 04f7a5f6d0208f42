// Package toolhost hosts MCP tool servers on the mesh: it runs each configured
// server (a command spoken to over stdio, or a URL spoken to over streamable
// HTTP), publishes its tools to the catalog and serves every tool as a NATS
// request endpoint, so that any agent replica can call any tool.
//
//	agent ── mesh.tool.<server>.<tool> ──▶ toolhost ── tools/call ──▶ MCP server
//	      ◀──────── mesh.ToolResult ─────           ◀─── result ───    (stdio child or HTTP)
//	                                        │    │
//	          mesh_tools <server>.<tool> ◀──┘    └──▶ mesh_calls <call id>
//
// [Example] shows the wiring.
//
// # What it reads and writes
//
//   - Subjects: one endpoint per tool on mesh.tool.<server>.<tool token>
//     ([mesh.Namespace.Tool]), grouped in one NATS micro service named
//     [mesh.ToolServiceName] per connected server, in queue group "mesh-tools",
//     so replicas share the load and `nats micro ls` lists them. A request is
//     a [mesh.ToolRequest]; the reply is a [mesh.ToolResult], or an error
//     reply whose headers [mesh.ErrorFromMsg] maps back to a mesh sentinel.
//   - Bucket mesh_tools: one [mesh.ToolEntry] per tool under
//     <server>.<tool token>, written only when it changed (apart from its
//     host and time), and deleted when the server no longer lists the tool.
//     Entries stay while a server is down: a call then finds no responder
//     and fails with [mesh.ErrToolUnavailable].
//   - Approvals (approval.go): a tool that is not read-only (by the host's
//     own reading of the server's annotations) runs only for a request
//     whose [mesh.ToolRequest.Approval] is the approver's signed approval of
//     that exact call (call id, server, tool, hash of the arguments), by a
//     trusted key: Config.ApproverKeys, or else the keys published under
//     _keys.<key> in mesh_approvals, watched as they change. Anything else
//     is refused with mesh.ErrApprovalRequired or mesh.ErrApprovalInvalid
//     (403). Read-only tools answer plain requests.
//   - Bucket mesh_calls: one [mesh.CallRecord] per call of a tool that is not
//     read-only, so that a repeated call id gets the first result instead of
//     running the tool again. A record still "started" with a finished_at time
//     is an attempt that ended without a result (the server died, the call
//     timed out): its outcome is unknown, so it is not run again unless the
//     server deduplicates call ids itself (config.MCPServer.DedupeCallIDs).
//
// Every tools/call carries the call id in _meta as "agentmesh/call_id". A
// result's _meta "agentmesh/state" (mesh.StateMetaKey), a merge patch of
// the conversation's state, goes back to the agent as ToolResult.State:
// a JSON object of at most mesh.MaxStatePatch bytes, else the result is a
// tool error saying why. The
// caller's Authorization header (a NATS header of the request) is sent to
// HTTP servers as the Authorization header of that call; tokens are never
// logged or stored.
//
// # Goroutines and shutdown
//
// [Role.Run] owns every goroutine: one supervisor per server, and one
// goroutine per tool call in flight. A supervisor starts its server,
// restarts it with exponential backoff and jitter when it dies (stopping its
// micro service at once, so requests go to healthy replicas or fail with
// [mesh.ErrToolUnavailable]), and refreshes the tools on
// notifications/tools/list_changed. When the context of Run ends, every
// supervisor stops its service, lets calls in flight finish for a few
// seconds, closes its MCP session (which closes a child's stdin, then sends
// SIGTERM and SIGKILL if it does not exit), and Run returns nil. On Linux a
// child also gets SIGKILL when the toolhost itself dies.
package toolhost

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// Defaults of [Config] and of config.MCPServer.
const (
	DefaultMinBackoff   = 250 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
	DefaultCallTimeout  = 30 * time.Second
	DefaultDrainTimeout = 5 * time.Second
	DefaultVersion      = bus.DevVersion
)

// QueueGroup is the queue group of every tool endpoint.
const QueueGroup = "mesh-tools"

// ClientName is the name the toolhost gives itself in the MCP handshake.
const ClientName = "agentmesh-toolhost"

// Config configures a [Role].
type Config struct {
	// Node is the process's connections, names and logger. NC is
	// required; the endpoints are served on and answered from Responder
	// (NC when nil). JS opens the buckets that Tools, Calls and Approvals
	// do not give: required when one of them is needed and nil. NodeID,
	// required, is the Host of catalog entries and call records, the
	// "node" of service metadata and logs.
	role.Node
	// Tools is the mesh_tools bucket (mesh.Resources.Tools). Nil means open
	// it through JS.
	Tools jetstream.KeyValue
	// Calls is the mesh_calls bucket (mesh.Resources.Calls). Nil means open
	// it through JS.
	Calls jetstream.KeyValue
	// ApproverKeys are the approver public keys (nkeys) whose signed
	// approvals it honours; a tool that is not read-only runs only with one
	// (approval.go). Empty means the keys the approvers publish in the
	// approvals bucket, followed as they come and go.
	ApproverKeys []string
	// Approvals is the approvals bucket, watched for the published approver
	// keys when ApproverKeys is empty. Nil means open it through JS.
	Approvals jetstream.KeyValue
	// Nodes is the mesh_nodes bucket. When set, a call record started by a
	// toolhost that is no longer alive (its key gone, or marked down) is
	// taken for interrupted at once, instead of after the call timeout.
	Nodes jetstream.KeyValue
	// Servers are the MCP servers to host. Names must be subject tokens and
	// unique; each has a Command or a URL. None is allowed: Run then only
	// waits for its context to end.
	Servers []config.MCPServer
	// Version is the micro service version. Zero means "0.0.0-dev"; a
	// leading "v" is dropped, and a version that is not semver (a git
	// hash) is kept in the service metadata under "version" while the
	// service says "0.0.0-dev+<hash>".
	Version string
	// Environ is the environment (key=value) an MCP server's is drawn
	// from: what any program needs to run (config.ProgramEnv), then the
	// server's own env section. cmd gives the process's; nil gives a
	// server its env section alone.
	Environ []string
	// SearchDirs are where a Command that is not on PATH is looked for
	// (cmd passes the directory of the mesh binary).
	SearchDirs []string
	// MinBackoff and MaxBackoff bound the delay before a server that died
	// or failed to start is started again. The delay doubles after each
	// failure, with jitter, and starts over once a server stayed up for
	// StableAfter. Zero means 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// StableAfter is how long a server must stay up for the backoff to
	// start over. Zero means 30s.
	StableAfter time.Duration
	// DrainTimeout is how long calls in flight may still run when Run's
	// context ends, before they are cancelled. Zero means 5s.
	DrainTimeout time.Duration
}

// Role is the tool host role: it runs the configured MCP servers and
// serves their tools.
type Role struct {
	cfg     Config
	version string
	meta    map[string]string
	log     zerolog.Logger
	now     func() time.Time
	keys    *mesh.KeySet // trusted approver keys

	mu      sync.Mutex
	running bool
}

// New checks cfg and returns a host ready to [Role.Run].
func New(cfg Config) (*Role, error) {
	cfg.Servers = append([]config.MCPServer(nil), cfg.Servers...)
	cfg.SearchDirs = append([]string(nil), cfg.SearchDirs...)
	cfg.Environ = append([]string(nil), cfg.Environ...)
	cfg.ApproverKeys = append([]string(nil), cfg.ApproverKeys...)
	if cfg.NC == nil {
		return nil, fmt.Errorf("%w: NC is required", ErrInvalidConfig)
	}
	if (cfg.Tools == nil || cfg.Calls == nil || cfg.Approvals == nil && len(cfg.ApproverKeys) == 0) && cfg.JS == nil {
		return nil, fmt.Errorf("%w: JS is required when Tools, Calls or (without ApproverKeys) Approvals is nil", ErrInvalidConfig)
	}
	keys, err := mesh.NewKeySet(cfg.ApproverKeys...)
	if err != nil {
		return nil, fmt.Errorf("%w: ApproverKeys: %v", ErrInvalidConfig, err)
	}
	if cfg.NodeID == "" {
		return nil, fmt.Errorf("%w: NodeID is required", ErrInvalidConfig)
	}
	if cfg.NS.Prefix() == "" {
		cfg.NS = mesh.DefaultNamespace()
	}
	if cfg.Responder == nil {
		cfg.Responder = cfg.NC
	}
	if cfg.MinBackoff < 0 || cfg.MaxBackoff < 0 || cfg.StableAfter < 0 || cfg.DrainTimeout < 0 {
		return nil, fmt.Errorf("%w: durations must not be negative", ErrInvalidConfig)
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.MinBackoff > cfg.MaxBackoff {
		return nil, fmt.Errorf("%w: MinBackoff %v is above MaxBackoff %v", ErrInvalidConfig, cfg.MinBackoff, cfg.MaxBackoff)
	}
	if cfg.StableAfter == 0 {
		cfg.StableAfter = 30 * time.Second
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	seen := map[string]bool{}
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		if err := checkServer(*s); err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%w: server %q is configured twice", ErrInvalidConfig, s.Name)
		}
		seen[s.Name] = true
		s.Args = append([]string(nil), s.Args...)
		s.Env = cloneMap(s.Env)
		s.Headers = cloneMap(s.Headers)
	}
	h := &Role{
		cfg:     cfg,
		version: DefaultVersion,
		meta:    map[string]string{"node": cfg.NodeID},
		log:     cfg.Logger,
		now:     time.Now,
		keys:    keys,
	}
	if cfg.Version != "" {
		var semver bool
		if h.version, semver = bus.ServiceVersion(cfg.Version); !semver {
			h.meta["version"] = cfg.Version
		}
	}
	return h, nil
}

func checkServer(s config.MCPServer) error {
	if err := mesh.CheckToken(s.Name); err != nil {
		return fmt.Errorf("%w: server name %q: %v", ErrInvalidConfig, s.Name, err)
	}
	switch {
	case s.Command == "" && s.URL == "":
		return fmt.Errorf("%w: server %q needs a command or a url", ErrInvalidConfig, s.Name)
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("%w: server %q has both a command and a url", ErrInvalidConfig, s.Name)
	case s.Timeout < 0:
		return fmt.Errorf("%w: server %q: timeout must not be negative", ErrInvalidConfig, s.Name)
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: server %q: url %q is not an http(s) URL", ErrInvalidConfig, s.Name, s.URL)
		}
	}
	return nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Run hosts the servers until ctx ends, then drains and returns nil. It
// returns an error at once when the buckets cannot be opened or Run is
// already running; a server that fails to start is logged and retried, not
// fatal.
func (h *Role) Run(ctx context.Context) error {
	for _, s := range h.cfg.Servers {
		telemetry.ToolServer(s.Name)
	}
	h.mu.Lock()
	if h.running {
		h.mu.Unlock()
		return ErrRunning
	}
	h.running = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running = false
		h.mu.Unlock()
	}()

	tools, calls := h.cfg.Tools, h.cfg.Calls
	var err error
	if tools == nil {
		if tools, err = h.cfg.JS.KeyValue(ctx, h.cfg.NS.Bucket(mesh.BucketTools)); err != nil {
			return h.openErr(ctx, mesh.BucketTools, err)
		}
	}
	if calls == nil {
		if calls, err = h.cfg.JS.KeyValue(ctx, h.cfg.NS.Bucket(mesh.BucketCalls)); err != nil {
			return h.openErr(ctx, mesh.BucketCalls, err)
		}
	}

	if len(h.cfg.Servers) == 0 {
		h.log.Warn().Msg("toolhost has no MCP servers to host")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if len(h.cfg.ApproverKeys) == 0 {
		approvals := h.cfg.Approvals
		if approvals == nil {
			if approvals, err = h.cfg.JS.KeyValue(ctx, h.cfg.NS.Bucket(mesh.BucketApprovals)); err != nil {
				return h.openErr(ctx, mesh.BucketApprovals, err)
			}
		}
		kw := &keyWatch{h: h, kv: approvals}
		if err := kw.start(ctx, &wg); err != nil {
			if workloop.StoppedStarting(ctx, err) {
				return nil
			}
			return err
		}
		if len(h.keys.List()) == 0 {
			h.log.Warn().Msg("no approver key is published yet: tools that are not read-only are refused until one is")
		}
	}
	for _, sc := range h.cfg.Servers {
		s := newServer(h, sc, tools, calls)
		wg.Go(func() { s.supervise(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	h.log.Info().Msg("toolhost stopped")
	return nil
}

func (h *Role) openErr(ctx context.Context, base string, err error) error {
	if workloop.StoppedStarting(ctx, err) {
		return nil
	}
	return fmt.Errorf("open bucket %s: %w", h.cfg.NS.Bucket(base), err)
}
