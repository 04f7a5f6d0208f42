// Package core is what every protocol of the bridge shares: it creates
// conversations, submits turns and decisions to the mesh, and waits for the
// runs they start to finish or pause.
//
// A user's message is first recorded in its conversation as queued
// (queue.go), then published to mesh.work.agent.<agent>.<session> (or
// mesh.work.group.<group>.<session>) with the caller's Authorization and
// X-Session-ID in NATS headers; a decision is a request on
// mesh.approval.<uuid>.decide. A [Run] learns that it ended from its
// RUN_FINISHED or RUN_ERROR event, which the hub's run consumer reads (an
// ordered consumer of the run starts and ends and the mesh's own events
// only), and falls back to reading the conversation every second, so a
// lost event costs a second, not the answer.
//
// [Core.Follow] streams a session's events to one client: the stored ones,
// then live ones, through the hub's all consumer (one ordered consumer of
// every event, run while a client follows and 10 s after) that fans the
// events stream out to bounded per-client queues.
//
// Every surface reads requests and answers with the HTTP helpers of
// http.go ([CallerOf], [ReadBody], [DecodeBody], [WriteJSON], [WriteError]:
// errors as JSON {"error", "code"} with their status), so that no protocol
// package imports another.
//
// [Core.Start] follows the events stream and watches the buckets; [Core.Stop]
// stops them and ends the followers. Besides its NATS subscriptions, the
// core runs the listing's index loading and its sweep of expired entries.
package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/memory"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// Config configures the core.
type Config struct {
	// Node is the bridge process's connections, names and logger: NC and
	// JS are required; NS, when set, must be Resources'. NodeID is the
	// process's node id (its key in mesh_nodes is bridge.<NodeID>): it
	// signs the turns it queues, so that another bridge can tell when
	// their writer is gone. An empty NodeID signs nothing.
	role.Node
	Resources *store.Resources
	// Agent is the agent that serves new conversations.
	Agent string
	// Prompt is the system prompt, the first message of every conversation.
	Prompt string
	// Agents are the agents the configuration defines, the default one
	// first (config.Config.Agents); empty means Agent and Prompt only.
	Agents []AgentDef
	// Groups are the group chats conversations may be created for.
	Groups []config.Group
	// NoToolServers says the mesh has no MCP servers: readiness then needs
	// no toolhost.
	NoToolServers bool
	// FollowerBuffer bounds the bytes buffered for one streaming client
	// before it is cut off as too slow. Zero means 768 KiB.
	FollowerBuffer int
	// MaxStreams bounds the concurrent streams of the whole bridge, every
	// streaming surface (AG-UI and its dialects, A2A) together. Zero means
	// 10000.
	MaxStreams int
	// Auth says HTTP authentication is on: every conversation is then
	// reached by its owner and admins only (see owner.go), and decisions
	// need the approver role.
	Auth bool
	// PollInterval is how often a waiting run reads its conversation in case
	// its end event was missed. Zero means 1s.
	PollInterval time.Duration
	// QueueCheckAfter is how long a queued turn waits before a read or write
	// of its conversation checks that its work item is still in the work
	// stream ([Core.CheckQueued]). Zero means [DefaultQueueCheckAfter].
	QueueCheckAfter time.Duration
	// HistoryBytes bounds the messages a read of a conversation loads, a
	// page too (sessions.max_bytes). Zero means mesh.DefaultHistoryBytes.
	HistoryBytes int
	// SessionTTL is sessions.ttl (zero: conversations never expire): the
	// listing keeps conversations that wait for an approval from expiring.
	SessionTTL time.Duration
	// ExpiredKept is sessions.expired_kept: how long the listing shows an
	// expired conversation. Zero means 24h.
	ExpiredKept time.Duration
	// Admit, when set, is asked before a message is queued: an error
	// (a [LimitError]) refuses the message (limit.go).
	Admit func(ctx context.Context, conversation string) error
	// StreamLimit, when set, takes a stream slot of ctx's caller, or
	// refuses it ([Core.OpenStream]).
	StreamLimit func(ctx context.Context) (release func(), err error)
	// Take, when set, spends one request of ctx's caller's budgets
	// ([Core.Take]).
	Take func(ctx context.Context) error
	// MaxActiveSessions is limits.max_active_sessions when limits are on
	// (0 otherwise): past 80 % of it, /health says degraded.
	MaxActiveSessions int
	// Files limits the files of messages (files.go). Its zero value is
	// the files section's defaults.
	Files config.Files
	// Screen, when set, is asked about the text of every message a user
	// sends before it is queued: an error refuses it (the safety section,
	// bridge/screen.go).
	Screen func(ctx context.Context, text string) error
	// Budgets are the models' budgets, checked before a message is queued
	// (budget.go). Their zero value is none.
	Budgets mesh.Budgets
	// Spend is the principals' daily spend (mesh_usage); a daily budget
	// is checked only with it.
	Spend *limits.Spend
}

// Core submits work to the mesh and waits for it.
type Core struct {
	cfg       Config
	ns        mesh.Namespace
	Sessions  *store.SessionStore
	Approvals *store.ApprovalStore
	Catalog   *store.Catalog
	files     *store.FileStore // nil when the mesh has none
	events    *bus.Publisher   // the queue's own events
	log       zerolog.Logger
	now       func() time.Time // the queue's clock, a test's to set
	started   time.Time        // when this process's core was made

	hub     *hub
	streams chan struct{} // the stream slots: one token a running stream

	degraded     atomic.Pointer[mesh.Degradation]
	draining     atomic.Bool
	stopping     chan struct{} // closed by SetDraining
	stopOnce     sync.Once
	held         atomic.Int64 // connections the HTTP server does not own (Hold)
	sessionCount atomic.Pointer[counted]
	stopWatch    context.CancelFunc
	stopMessages func()    // the message log's follow (Start)
	lists        *listings // the listing indexes (listing.go), from Start

	mu      sync.Mutex
	waiters map[string]*Run // by run id
	// watched are the runs waiting in a conversation, by conversation:
	// the watch of the sessions bucket hands them its saves (watch.go).
	watched map[string]*Run
	heads   heads // the heads answers decoded (watch.go)
}

// New validates cfg and returns a core.
func New(cfg Config) (*Core, error) {
	if cfg.NC == nil || cfg.JS == nil || cfg.Resources == nil || cfg.Agent == "" {
		return nil, errors.New("core: NC, JS, Resources and Agent are required")
	}
	if cfg.NS.Prefix() == "" {
		cfg.NS = cfg.Resources.NS
	} else if cfg.NS != cfg.Resources.NS {
		return nil, fmt.Errorf("core: NS %q is not the Resources' %q", cfg.NS.Prefix(), cfg.Resources.NS.Prefix())
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = 10000
	}
	if cfg.QueueCheckAfter == 0 {
		// Past the three waits of a turn's publish, each of which may
		// wait out a leader election.
		cfg.QueueCheckAfter = DefaultQueueCheckAfter + 3*store.ElectionWait(cfg.JS)
	}
	cfg.Files = cfg.Files.WithDefaults()
	if cfg.ExpiredKept == 0 {
		cfg.ExpiredKept = 24 * time.Hour
	}
	sessions := store.NewSessionStore(cfg.Resources.Sessions, cfg.Resources.Messages).WithConn(cfg.NC).WithLogger(cfg.Logger)
	sessions.HistoryBytes = cfg.HistoryBytes
	c := &Core{
		cfg:       cfg,
		ns:        cfg.NS,
		Sessions:  sessions,
		Approvals: store.NewApprovalStore(cfg.Resources.Approvals),
		Catalog:   store.NewCatalog(cfg.Resources.Tools),
		files:     cfg.Resources.Files,
		events:    bus.NewPublisher(cfg.JS, cfg.NS),
		log:       cfg.Logger,
		now:       time.Now,
		started:   time.Now(),
		stopping:  make(chan struct{}),
		waiters:   map[string]*Run{},
		watched:   map[string]*Run{},
		hub:       newHub(cfg.JS, cfg.NS, cfg.FollowerBuffer, cfg.Logger),
		streams:   make(chan struct{}, cfg.MaxStreams),
	}
	c.hub.ends = c.onRunEnd
	memory.OnRelease(&c.heads, (*heads).reset)
	return c, nil
}

// AcquireStream takes one of the bridge's MaxStreams stream slots; false
// when every slot is taken. A stream that got one gives it back with
// [Core.ReleaseStream] when it ends.
func (c *Core) AcquireStream() bool {
	select {
	case c.streams <- struct{}{}:
		return true
	default:
		return false
	}
}

// ReleaseStream gives back a slot [Core.AcquireStream] took.
func (c *Core) ReleaseStream() { <-c.streams }

// Namespace is the mesh's namespace.
func (c *Core) Namespace() mesh.Namespace { return c.ns }

// Start follows the events stream (the run starts and ends, and the mesh's
// own events) and watches the buckets.
func (c *Core) Start(ctx context.Context) error {
	if err := c.hub.start(ctx); err != nil {
		return err
	}
	// Following the log only spares reads: a bridge that may not follow it
	// (its identity on a server set up by an earlier version) reads them.
	if stop, err := c.Sessions.FollowMessages(ctx); err != nil {
		c.log.Warn().Err(err).Msg("the message log is not followed: each answer reads the newest records of its conversation")
	} else {
		c.stopMessages = stop
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stopWatch = cancel
	if err := c.watchDegradation(wctx); err != nil {
		return fmt.Errorf("core: watch degradation: %w", err)
	}
	if err := c.startListings(wctx); err != nil {
		return err
	}
	telemetry.WatchHealth(func() float64 {
		hctx, cancel := context.WithTimeout(wctx, 2*time.Second)
		defer cancel()
		return HealthCode(c.Health(hctx, "", 0).Status)
	}, c.statusCounts)
	return nil
}

// Stop stops following and watching, and ends every follower. It is
// idempotent.
func (c *Core) Stop() {
	c.hub.stop()
	if c.stopMessages != nil {
		c.stopMessages()
	}
	if c.stopWatch != nil {
		c.stopWatch()
	}
}

// onRunEnd ends the wait of the run whose RUN_FINISHED or RUN_ERROR the
// hub's run consumer read.
func (c *Core) onRunEnd(se StreamEvent) {
	if se.Run == "" {
		return
	}
	c.mu.Lock()
	r := c.waiters[se.Run]
	c.mu.Unlock()
	if r == nil {
		return
	}
	var ev endEvent
	if json.Unmarshal(se.Data, &ev) == nil {
		r.end(&mesh.Event{Type: ev.Type, Timestamp: ev.Timestamp, ThreadID: ev.ThreadID, RunID: ev.RunID, ParentRunID: ev.ParentRunID,
			Outcome: ev.Outcome, Message: ev.Message, Code: ev.Code})
	}
}

// endEvent is what a run's waiter decodes of its end event: how it ended,
// not the result (the conversation's last_run holds it), whose values
// encoding/json would build for nothing.
type endEvent struct {
	Type        mesh.EventType `json:"type"`
	Timestamp   int64          `json:"timestamp"`
	ThreadID    string         `json:"threadId"`
	RunID       string         `json:"runId"`
	ParentRunID string         `json:"parentRunId"`
	Outcome     *mesh.Outcome  `json:"outcome"`
	Message     string         `json:"message"`
	Code        string         `json:"code"`
}

// Caller is who asks: the credentials and trace id to forward.
type Caller struct {
	// Authorization is the caller's Authorization header, forwarded as is.
	Authorization string
	// SessionID is the caller's X-Session-ID, kept when it is well formed.
	SessionID string
	// Principal is who the bridge authenticated; nil when no one was.
	Principal *auth.Principal
}

func (c Caller) headers(sessionID string) nats.Header {
	h := nats.Header{}
	if c.Authorization != "" {
		h.Set(mesh.HeaderAuthorization, c.Authorization)
	}
	if sessionID != "" {
		h.Set(mesh.HeaderSessionID, sessionID)
	}
	return h
}

// NewConversation creates a conversation whose first message is the system
// prompt; its trace id is the caller's X-Session-ID or a new one, so that a
// caller can trace the conversation under an id of its own.
func (c *Core) NewConversation(ctx context.Context, caller Caller) (*mesh.Conversation, error) {
	return c.CreateConversation(ctx, mesh.NewID(), caller)
}

// CreateConversation is [Core.NewConversation] with the id chosen by the
// client (an AG-UI thread id); it fails if the id is taken.
func (c *Core) CreateConversation(ctx context.Context, id string, caller Caller) (*mesh.Conversation, error) {
	return c.CreateChat(ctx, id, "", caller)
}

// Group finds a group chat by name.
func (c *Core) Group(name string) (*config.Group, error) {
	for i := range c.cfg.Groups {
		if c.cfg.Groups[i].Name == name {
			return &c.cfg.Groups[i], nil
		}
	}
	return nil, mesh.ErrGroupNotFound.With(fmt.Sprintf("group %s not found; GET /groups lists them", mesh.Clip(name)))
}

// Groups are the group chats of the mesh.
func (c *Core) Groups() []config.Group { return c.cfg.Groups }

// CreateChat is [Core.CreateConversation] for a chat of group (several
// agents answer in turn); an empty group means the agent's conversation.
func (c *Core) CreateChat(ctx context.Context, id, group string, caller Caller) (*mesh.Conversation, error) {
	return c.create(ctx, id, group, c.cfg.Agent, caller)
}

// CreateDirect creates a conversation of direct tool calls
// ([mesh.Conversation.Direct]) with the default agent: its messages are
// [mesh.DirectCall]s, run through the agent's catalog and approvals
// without a model.
func (c *Core) CreateDirect(ctx context.Context, id string, caller Caller) (*mesh.Conversation, error) {
	return c.createWith(ctx, id, "", c.cfg.Agent, caller, func(conv *mesh.Conversation) {
		conv.Direct, conv.Messages = true, nil
	})
}

// Await waits for run runID of conversation session, one the caller did
// not start (the resume of an approval decided elsewhere): its end, or
// the poll of its conversation should the end be missed. Wait on it, or
// Close it.
func (c *Core) Await(session, runID string) *Run { return c.register(runID, session) }

// create makes a conversation for agent, or a chat of group.
func (c *Core) create(ctx context.Context, id, group, agent string, caller Caller) (*mesh.Conversation, error) {
	return c.createWith(ctx, id, group, agent, caller, nil)
}

// createWith is create, with edit applied to the conversation before it is
// stored.
func (c *Core) createWith(ctx context.Context, id, group, agent string, caller Caller, edit func(*mesh.Conversation)) (*mesh.Conversation, error) {
	if err := c.Writes(caller); err != nil {
		return nil, err
	}
	if err := CheckID("conversation id", id); err != nil {
		return nil, err
	}
	if group == "" && c.disabled(agent) {
		return nil, mesh.ErrAgentNotFound.With(fmt.Sprintf("agent %s is disabled: its configuration says enabled: false; name another agent or a group", mesh.Clip(agent)))
	}
	if d := c.Degradation(); d != nil {
		return nil, mesh.ErrDegraded.With(fmt.Sprintf("the mesh is degraded since %s (%s): new conversations are paused, existing ones go on", d.Since.Format(time.RFC3339), d.Reason))
	}
	sid := caller.SessionID
	if !mesh.ValidTraceID(sid) {
		sid = mesh.NewTraceID()
	}
	now := time.Now().UTC()
	conv := &mesh.Conversation{ID: id, SessionID: sid, Agent: agent, Owner: c.owner(caller), Status: mesh.StatusActive}
	// The system prompt heads the conversation when this bridge knows it
	// (an agent its configuration defines); the agent sends its own.
	for _, d := range c.agentDefs() {
		if d.Name == agent && (d.Prompt != "" || agent == c.cfg.Agent) {
			conv.Messages = []mesh.Message{{ID: id + "-system", Role: mesh.RoleSystem, Content: d.Prompt, CreatedAt: now}}
		}
	}
	if group != "" {
		g, err := c.Group(group)
		if err != nil {
			return nil, err
		}
		// Each member has its own system prompt: the chat has none.
		conv.Agent, conv.Messages, conv.Group = "", nil, &mesh.GroupRun{Name: g.Name}
	}
	if edit != nil {
		edit(conv)
	}
	if err := c.Sessions.Create(ctx, conv); err != nil {
		return nil, err
	}
	c.indexConversation(conv)
	c.keepHead(conv)
	noteConversation(ctx, conv.ID, conv.SessionID)
	return conv, nil
}

// ErrForbidden refuses what the caller's roles do not allow.
var ErrForbidden = mesh.NewError("forbidden", http.StatusForbidden, "forbidden")

// ErrRunIDUsed refuses a run id that names an earlier run.
var ErrRunIDUsed = mesh.NewError("run_id_used", http.StatusConflict, "run id already used")

// PendingError is a refusal because the conversation waits for an approval;
// it carries that approval, so that a client can show it and decide it.
type PendingError struct {
	Err      *mesh.Error
	Approval *mesh.PendingApproval
}

func (e *PendingError) Error() string { return e.Err.Error() }
func (e *PendingError) Unwrap() error { return e.Err }

// Send submits a user message as a turn of conversation id, with the
// files [Core.StoreFiles] stored for it.
func (c *Core) Send(ctx context.Context, id, text string, caller Caller, files ...mesh.File) (*Run, error) {
	return c.SendMessage(ctx, id, Input{Text: text, Files: files}, caller)
}

// Input is a user message as a client sends it: its text, its stored
// files and the metadata it attaches (checked by [CheckMetadata]).
type Input struct {
	Text     string
	Files    []mesh.File
	Metadata map[string]any
}

// SendMessage is [Core.Send] of a whole input, its metadata included.
func (c *Core) SendMessage(ctx context.Context, id string, in Input, caller Caller) (*Run, error) {
	if err := CheckConversationID(id); err != nil {
		return nil, err
	}
	if err := CheckMetadata(in.Metadata); err != nil {
		return nil, err
	}
	return c.sendTurn(ctx, id, turnQ{text: in.Text, files: in.Files, metadata: in.Metadata}, caller)
}

// MaxMetadataBytes bounds a message's metadata, encoded as JSON.
const MaxMetadataBytes = 4096

// CheckMetadata refuses metadata larger than [MaxMetadataBytes] as JSON.
func CheckMetadata(md map[string]any) error {
	if len(md) == 0 {
		return nil
	}
	data, err := json.Marshal(md)
	switch {
	case err != nil:
		return mesh.ErrBadRequest.With(`"metadata": ` + err.Error())
	case len(data) > MaxMetadataBytes:
		return mesh.ErrBadRequest.With(fmt.Sprintf(`"metadata" is %d bytes as JSON; at most %d`, len(data), MaxMetadataBytes))
	}
	return nil
}

// SendNonBlocking is [Core.Send] for a caller that answers as soon as an
// agent has taken the turn up ([Run.Started]) rather than when it ends (an
// A2A non-blocking send): the work item asks the agent to record its claim
// at once, where a short run would otherwise record it with its own save.
func (c *Core) SendNonBlocking(ctx context.Context, id, text string, caller Caller, files ...mesh.File) (*Run, error) {
	if err := CheckConversationID(id); err != nil {
		return nil, err
	}
	return c.sendTurn(ctx, id, turnQ{text: text, files: files, claimAtOnce: true}, caller)
}

// SendTurn is [Core.Send] with the turn id chosen by the caller (an AG-UI
// run id); empty means a new one. A run id names one run of one
// conversation across the mesh (the ids of everything the run makes
// derive from it): one that another conversation holds is refused with
// [ErrRunIDUsed], at once, rather than dropped as a duplicate further on.
func (c *Core) SendTurn(ctx context.Context, id, turnID, text string, caller Caller, files ...mesh.File) (*Run, error) {
	turnID, err := c.runIDFor(ctx, id, turnID, caller)
	if err != nil {
		return nil, err
	}
	return c.sendTurn(ctx, id, turnQ{id: turnID, text: text, files: files}, caller)
}

// runIDFor checks conversation id and reserves the run id a caller chose
// for it, or makes a new one when it chose none.
func (c *Core) runIDFor(ctx context.Context, id, turnID string, caller Caller) (string, error) {
	if err := c.Writes(caller); err != nil {
		return "", err
	}
	if err := CheckConversationID(id); err != nil {
		return "", err
	}
	if turnID == "" {
		return mesh.NewID(), nil
	}
	if err := CheckID("run id", turnID); err != nil {
		return "", err
	}
	if err := c.reserveRun(ctx, id, turnID, caller); err != nil {
		return "", err
	}
	return turnID, nil
}

// reserveRun reserves run id turnID for conversation id (the caller's:
// a stranger's conversation is not found before any reservation).
func (c *Core) reserveRun(ctx context.Context, id, turnID string, caller Caller) error {
	if _, err := c.HeadFor(ctx, id, caller); err != nil {
		return err
	}
	holder, err := c.Sessions.ReserveRun(ctx, turnID, id)
	if err != nil {
		return err
	}
	if holder != id {
		return ErrRunIDUsed.With(fmt.Sprintf("run id %s belongs to another conversation: a run id names one run of one thread; use a new one", mesh.Clip(turnID)))
	}
	return nil
}

// sendTurn queues turn tq of conversation id, under a new turn id when tq
// names none; it must carry a message or a file.
func (c *Core) sendTurn(ctx context.Context, id string, tq turnQ, caller Caller) (*Run, error) {
	if tq.id == "" {
		tq.id = mesh.NewID()
	}
	if strings.TrimSpace(tq.text) == "" && len(tq.files) == 0 {
		return nil, mesh.ErrBadRequest.With(`"message" must not be empty`)
	}
	if c.cfg.Screen != nil && tq.text != "" {
		if err := c.cfg.Screen(ctx, tq.text); err != nil {
			return nil, err
		}
	}
	return c.queueTurn(ctx, id, tq, caller)
}

// queueTurn admits, registers and enqueues turn tq of conversation id.
func (c *Core) queueTurn(ctx context.Context, id string, tq turnQ, caller Caller) (*Run, error) {
	if err := c.Writes(caller); err != nil {
		return nil, err
	}
	if err := c.admit(ctx, id); err != nil {
		return nil, err
	}
	r := c.register(tq.id, id)
	r.caller = caller
	seq, err := c.enqueue(ctx, id, tq, caller)
	if errors.Is(err, mesh.ErrTurnInProgress) && c.CheckQueued(ctx, id, caller) {
		// The turn queued before this one had lost its work item: repaired
		// (failed, at worst), it may no longer stand in the way.
		seq, err = c.enqueue(ctx, id, tq, caller)
	}
	if pe := (*PendingError)(nil); errors.As(err, &pe) && c.decided(ctx, pe.Approval) {
		// Decided already: what holds the conversation is the decision's
		// resume, queued for an agent, not a human.
		err = mesh.ErrTurnInProgress.With(fmt.Sprintf("conversation %s resumes after approval %s was decided; send the next message when the resume ends", id, pe.Approval.UUID))
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	r.queuedSeq = seq
	return r, nil
}

// idempotencyNamespace derives turn ids from clients' idempotency keys.
var idempotencyNamespace = uuid.MustParse("5c1d3a2e-0b7f-4f6e-8a41-9d2c6b7e3f10")

// SendOnce is [Core.Send] made idempotent by a client's key (HTTP
// Idempotency-Key): the key names the turn, so sending again with the same
// key, after a lost answer, waits for or reports the first turn instead of
// starting a second one.
func (c *Core) SendOnce(ctx context.Context, id, key, text string, caller Caller, files ...mesh.File) (*Run, error) {
	return c.SendMessageOnce(ctx, id, key, Input{Text: text, Files: files}, caller)
}

// SendMessageOnce is [Core.SendOnce] of a whole input, its metadata
// included.
func (c *Core) SendMessageOnce(ctx context.Context, id, key string, in Input, caller Caller) (*Run, error) {
	if err := CheckIdempotencyKey(key); err != nil {
		return nil, err
	}
	if err := CheckMetadata(in.Metadata); err != nil {
		return nil, err
	}
	turnID := keyedTurn(id, key)
	conv, err := c.Sessions.Head(ctx, id)
	if err != nil {
		return nil, c.hideGone(caller, id, err)
	}
	if err := c.check(caller, conv); err != nil {
		return nil, err
	}
	noteConversation(ctx, conv.ID, conv.SessionID)
	switch {
	case conv.Turn != nil && conv.Turn.ID == turnID:
		return c.register(turnID, id), nil // running: wait for it
	case conv.Queued != nil && conv.Queued.ID == turnID:
		// Queued: wait for it, repaired if its work item was lost.
		c.checkQueued(ctx, refOfHead(conv), caller)
		r := c.register(turnID, id)
		r.caller = caller
		return r, nil
	case slices.Contains(conv.RecentTurns, turnID),
		conv.PendingApproval != nil && conv.Status == mesh.StatusWaitingApproval && c.pausedBy(ctx, conv.PendingApproval.UUID, turnID):
		r := c.register(turnID, id) // done, or paused: report it
		r.end(nil)
		return r, nil
	}
	return c.sendTurn(ctx, id, turnQ{id: turnID, text: in.Text, files: in.Files, metadata: in.Metadata}, caller)
}

// keyedTurn is the turn id the idempotency key names in conversation id.
func keyedTurn(id, key string) string {
	return uuid.NewSHA1(idempotencyNamespace, []byte(id+"\x00"+key)).String()
}

// decided reports whether the approval p is decided: the conversation
// still shows it until an agent claims its resume.
func (c *Core) decided(ctx context.Context, p *mesh.PendingApproval) bool {
	if p == nil {
		return false
	}
	ap, err := c.Approvals.Get(ctx, p.UUID)
	return err == nil && ap.Status != mesh.ApprovalPending
}

// pausedBy reports whether approval was requested by run runID.
func (c *Core) pausedBy(ctx context.Context, approval, runID string) bool {
	ap, err := c.Approvals.Get(ctx, approval)
	return err == nil && ap.RunID == runID
}

// Decide sends a decision (in any of its formats, as sent by the client) to
// the approvers. On success the approval is decided and the returned run is
// its resume; a second decision fails with an error matching
// [mesh.ErrApprovalDecided] and returns the approval as first decided.
func (c *Core) Decide(ctx context.Context, approvalID string, body []byte, caller Caller) (*mesh.Approval, *Run, error) {
	if err := c.Writes(caller); err != nil {
		return nil, nil, err
	}
	if !c.May(caller, auth.Decide) {
		return nil, nil, ErrForbidden.With("deciding an approval needs the approver or admin role")
	}
	if err := CheckApprovalID(approvalID); err != nil {
		return nil, nil, err
	}
	d, err := mesh.ParseDecision(body)
	if err != nil {
		return nil, nil, err
	}
	subj, err := c.ns.ApprovalDecide(approvalID)
	if err != nil {
		return nil, nil, CheckApprovalID("")
	}
	// The resume's run id is the approval id: wait for it before it can end.
	r := c.register(approvalID, "")
	m := nats.NewMsg(subj)
	m.Data = body
	m.Header = caller.headers(caller.SessionID)
	// Sent again when its answer is lost; the id makes the approver answer
	// the repeat as the first, not refuse it as a second decision.
	m.Header.Set(mesh.HeaderDecisionID, uuid.NewString())
	telemetry.Inject(ctx, m.Header)
	switch {
	case c.cfg.Auth && caller.Principal != nil:
		// Who decided is who authenticated, whatever the body says.
		m.Header.Set(mesh.HeaderPrincipal, caller.Principal.Name)
	case d.By == "":
		// Without authentication the decider is the anonymous principal,
		// as every other record of the bridge names it, unless the body
		// says who.
		m.Header.Set(mesh.HeaderPrincipal, c.principalName(caller))
	}
	reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// An approver restarting is waited for (see approverWait), and a lost
	// answer asked for again.
	reply, err := bus.RequestServed(reqCtx, c.cfg.NC, m, approverWait, decideAttempt)
	if err != nil {
		r.Close()
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, nil, mesh.ErrUnavailable.With("no approver is running")
		}
		return nil, nil, mesh.ErrUnavailable.With("the approvers did not answer: " + err.Error())
	}
	var ap mesh.Approval
	if err := mesh.ErrorFromMsg(reply); err != nil {
		r.Close()
		if len(reply.Data) > 0 && json.Unmarshal(reply.Data, &ap) == nil {
			return &ap, nil, err
		}
		return nil, nil, err
	}
	if err := json.Unmarshal(reply.Data, &ap); err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("decode approver reply: %w", err)
	}
	r.session = ap.ConversationID
	noteConversation(ctx, ap.ConversationID, ap.SessionID)
	return &ap, r, nil
}

// approverWait is how long a decision waits for an approver when none
// answers: one restarting (a rolling upgrade) is back within seconds, and
// the decision never reached the one that left, so asking again is safe.
const approverWait = 10 * time.Second

// decideAttempt is how long one decision request waits for its answer
// before it is sent again: an approver decides within milliseconds unless
// its store is between leaders, and a request lost with a NATS server is
// never answered at all.
const decideAttempt = 5 * time.Second

// Cancel asks the agents to stop run runID of conversation id, or, with an
// empty runID, whatever turn it runs. A turn still queued is cancelled here:
// no agent will settle it.
func (c *Core) Cancel(ctx context.Context, id, runID string) error {
	if err := CheckConversationID(id); err != nil {
		return err
	}
	if runID != "" {
		if err := CheckID("run id", runID); err != nil {
			return err
		}
	}
	subj, err := c.ns.SessionCancel(id)
	if err != nil {
		return CheckConversationID("")
	}
	// A turn cancelled while queued is told to stop all the same: an agent
	// may run it before it records its claim (the agent's ClaimAfter).
	if _, err := c.cancelQueued(ctx, id, runID); err != nil {
		return err
	}
	var body []byte
	if runID != "" {
		body, _ = json.Marshal(mesh.CancelRequest{RunID: runID})
	}
	return c.cfg.NC.Publish(subj, body)
}
