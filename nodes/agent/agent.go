package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// Config configures an agent role.
type Config struct {
	// Node is the process's connections, names and logger: NC and JS are
	// required; NodeID names this process in logs and in claimed turns; NS,
	// when set, must be Resources'.
	role.Node
	// Resources are the provisioned streams and buckets.
	Resources *store.Resources
	// Agent is the agent's configuration (one of config.Config.Agents): its
	// Definition (name, description, prompt, model, tree) and the Process
	// settings it runs with (mesh tuning, sessions, breakers, files).
	Agent *config.Config
	// Provider answers for the agent's model.
	Provider llm.Provider
	// Providers makes the provider of a tree step whose model differs from
	// the agent's. Nil means such trees are refused.
	Providers func(model string) (llm.Provider, error)
	// DrainTimeout is how long running turns may take to finish when the role
	// stops. Zero means 30s.
	DrainTimeout time.Duration
	// StaleTurn is how old a claimed turn must be before another turn may take
	// the conversation over. Zero means 10 minutes.
	StaleTurn time.Duration
	// ClaimAfter is how long a turn taken up from the conversation's queue
	// may run before its claim (status running) is recorded; a turn that
	// ends sooner is claimed and settled in one save. Zero means 1 s;
	// negative records every claim at once. A work item whose caller waits
	// for the claim (WorkItem.ClaimAtOnce) is claimed at once all the same.
	ClaimAfter time.Duration
	// A2A are the sub-agents offered to the model as tools beside the MCP
	// tools. Nil means the a2a list of Agent's tree root when it is an
	// llm step (the top-level a2a list of agent.yaml).
	A2A []config.A2AAgent
	// Remote tunes the calls to sub-agents; its zero value is the defaults,
	// with the breaker of agent.yaml's breakers.a2a.
	Remote RemoteConfig
	// StuckAfter: when every worker is busy and no turn made progress (an
	// event, a model answer, a tool result) for that long, [Role.Health]
	// fails, so liveness probes catch a process that beats but no longer
	// works. Zero means 5 minutes.
	StuckAfter time.Duration
	// SaveRetry are the pauses before each new try of a save of a run's
	// outcome that failed (save.go). Nil means Agent's sessions.save_retry.
	SaveRetry []time.Duration
	// Replay, when set, makes the role a replay's agent: its work queue is
	// mesh.work.replay.<name>.*, which no live agent consumes, and it runs
	// only tools the catalog says are read-only. Every other call (a tool
	// that is not read-only, a sub-agent) is never run and never sent for
	// approval: the model gets Replay.StandIn as its result, and the
	// result's message is marked [mesh.Message.StandIn].
	Replay *Replay
	// saveFault, when set (tests), fails the save's try n (from 1) with
	// the error it returns, after the change applied (as a write that
	// fails does: the claimed conversation is already changed).
	saveFault func(n int) error
}

// Replay is what a replay's agent does differently (Config.Replay).
type Replay struct {
	// StandIn is the result the model gets for a call that is not run.
	// Empty means [DefaultStandIn].
	StandIn string
	// QueueExpiry is how long the work queue's consumer outlives the
	// role: the server removes it once idle that long. Zero means 5 minutes.
	QueueExpiry time.Duration
	// Settled, when set, is called once a work item is settled for good
	// (acknowledged or given up), after its run's last save.
	Settled func(item mesh.WorkItem)
}

// DefaultStandIn is the result a replay's model gets for a call that is
// not run.
const DefaultStandIn = `{"not_run":"replay","note":"this call was not run: it is a replay, and only read-only tools run in a replay"}`

// Role is the agent role.
type Role struct {
	cfg  Config
	name string
	// workRole is the role token of the agent's work subjects: agent, or
	// replay for a replay's agent.
	workRole  string
	ns        mesh.Namespace
	sessions  *store.SessionStore
	approvals *store.ApprovalStore
	events    *bus.Publisher
	log       zerolog.Logger

	maxIter    int
	toolWait   time.Duration
	workers    int
	ackWait    time.Duration
	maxDeliver int

	loop         *workloop.Loop // takes the turns; its Busy and Consuming feed Health
	lastProgress atomic.Int64   // unix nanoseconds of the last sign of progress
	modelWaiting atomic.Int32   // turns whose model calls wait for their provider
	servers      *breakers      // of the MCP servers, as this agent calls them
	spend        spending       // prices, budgets, the daily spend (budget.go)

	tools   atomic.Pointer[toolSet]
	pool    *remotePool
	remotes *remoteSet // the sub-agents of the tree's root

	// The agent tree, by step key; simple says it is a single llm step
	// (no agent: tree), whose runs publish no STEP events.
	steps  map[string]*step
	root   *step
	simple bool

	mu sync.Mutex
	// running are the work items running here; several may belong to one
	// session (the branches of a parallel step).
	running   map[*runningTurn]struct{}
	cancelled map[string]time.Time // runs cancelled before they started here
}

// runningTurn is a work item running here, as a cancel request finds it.
type runningTurn struct {
	session string
	// runs are the AG-UI runs a cancel request may name to stop it: its
	// own, its tree's, and the other runs of the tree under way.
	runs   []string
	cancel context.CancelCauseFunc
}

func (rt *runningTurn) matches(session, runID string) bool {
	if rt.session != session {
		return false
	}
	if runID == "" {
		return true
	}
	for _, r := range rt.runs {
		if r == runID {
			return true
		}
	}
	return false
}

// errUserCancel is the cause of a turn cancelled by a request on
// mesh.session.<id>.cancel; errShutdown of one stopped by the role's drain.
var (
	errUserCancel = errors.New("agent: turn cancelled by request")
	errShutdown   = errors.New("agent: role shutting down")
)

// New validates cfg and returns the agent role.
func New(cfg Config) (*Role, error) {
	if cfg.NC == nil || cfg.JS == nil || cfg.Resources == nil || cfg.Agent == nil || cfg.Provider == nil {
		return nil, errors.New("agent: NC, JS, Resources, Agent and Provider are required")
	}
	if cfg.NS.Prefix() == "" {
		cfg.NS = cfg.Resources.NS
	} else if cfg.NS != cfg.Resources.NS {
		return nil, fmt.Errorf("agent: NS %q is not the Resources' %q", cfg.NS.Prefix(), cfg.Resources.NS.Prefix())
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.StaleTurn == 0 {
		cfg.StaleTurn = 10 * time.Minute
	}
	if cfg.ClaimAfter == 0 {
		cfg.ClaimAfter = time.Second
	}
	if cfg.StuckAfter == 0 {
		cfg.StuckAfter = 5 * time.Minute
	}
	if cfg.SaveRetry == nil {
		cfg.SaveRetry = cfg.Agent.Sessions.SaveRetryPauses()
	}
	a := &Role{
		cfg:        cfg,
		name:       cfg.Agent.Name,
		ns:         cfg.NS,
		sessions:   store.NewSessionStore(cfg.Resources.Sessions, cfg.Resources.Messages).WithLogger(cfg.Logger),
		approvals:  store.NewApprovalStore(cfg.Resources.Approvals),
		events:     bus.NewPublisher(cfg.JS, cfg.NS),
		maxIter:    cfg.Agent.Mesh.MaxToolIterations,
		toolWait:   cfg.Agent.Mesh.ToolWait.Or(config.DefaultToolWait),
		workers:    cfg.Agent.Mesh.Workers,
		ackWait:    cfg.Agent.Mesh.AckWait.Std(),
		maxDeliver: cfg.Agent.Mesh.MaxDeliver,
		running:    map[*runningTurn]struct{}{},
		cancelled:  map[string]time.Time{},
	}
	// The history the model gets: the newest messages within
	// sessions.max_bytes (store.SessionStore.Get).
	a.sessions.HistoryBytes = int(cfg.Agent.Sessions.MaxBytes)
	if a.maxIter <= 0 {
		a.maxIter = config.DefaultMaxToolIterations
	}
	if a.workers <= 0 {
		a.workers = config.DefaultWorkers
	}
	if a.ackWait <= 0 {
		a.ackWait = config.DefaultAckWait
	}
	if a.maxDeliver <= 0 {
		a.maxDeliver = config.DefaultMaxDeliver
	}
	a.workRole = mesh.RoleAgent
	if cfg.Replay != nil {
		r := *cfg.Replay
		if r.StandIn == "" {
			r.StandIn = DefaultStandIn
		}
		if r.QueueExpiry == 0 {
			r.QueueExpiry = 5 * time.Minute
		}
		a.cfg.Replay, a.workRole = &r, mesh.RoleReplay
	}
	a.log = cfg.Logger.With().Str("agent", a.name).Logger()
	a.spend = spending{prices: cfg.Agent.PriceTable(), budgets: mesh.Budgets(cfg.Agent.Budgets)}
	if a.cfg.Replay != nil {
		// A replay's conversations belong to no principal, and its identity
		// may not touch the principals' daily spend: only the per-conversation
		// budget holds there.
		a.spend.budgets.PrincipalDailyTokens, a.spend.budgets.PrincipalDailyCost = 0, 0
	}
	if a.spend.budgets.Daily() {
		if cfg.Resources.Usage == nil {
			return nil, errors.New("agent: a daily budget needs the usage bucket (Resources.Usage)")
		}
		a.spend.daily = limits.NewSpend(cfg.JS, cfg.Resources.Usage)
	}
	a.tools.Store(newToolSet(nil))
	a.servers = newBreakers(cfg.Agent.Breakers.Tools)
	if cfg.Remote.BreakerFailures == 0 {
		cfg.Remote.BreakerFailures = cfg.Agent.Breakers.A2A.Failures
	}
	if cfg.Remote.BreakerCooldown == 0 {
		cfg.Remote.BreakerCooldown = cfg.Agent.Breakers.A2A.Cooldown.Std()
	}
	a.pool = newRemotePool(cfg.Remote, a.log)
	if err := a.buildTree(cfg.Agent.Tree(), cfg.Providers); err != nil {
		return nil, err
	}
	if a.cfg.Replay != nil {
		for key, s := range a.steps {
			if s.cfg.Type == config.NodeA2A {
				return nil, fmt.Errorf("agent: a replay runs no sub-agent, and step %s of the tree is one (type a2a)", key)
			}
		}
	}
	if err := a.newLoop(); err != nil {
		return nil, err
	}
	return a, nil
}

// newLoop makes the work loop of the agent's turns: its durable consumer on
// mesh.work.agent.<name>.* (every conversation's items; a replay's on
// mesh.work.replay.<name>.*), with the agent's workers and drain.
func (a *Role) newLoop() error {
	subject, err := a.ns.WorkFilter(a.workRole, a.name)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	consumer, description, expiry := ConsumerName(a.name), "turns of agent "+a.name, time.Duration(0)
	if a.cfg.Replay != nil {
		consumer, description, expiry = ReplayConsumerName(a.name), "turns of replay "+a.name, a.cfg.Replay.QueueExpiry
	}
	a.loop, err = workloop.New(workloop.Config{
		JS:     a.cfg.JS,
		Stream: a.ns.Stream(mesh.StreamWork),
		Queues: []workloop.Queue{{
			Consumer: jetstream.ConsumerConfig{
				Durable:           consumer,
				Description:       description,
				FilterSubject:     subject,
				InactiveThreshold: expiry,
				AckPolicy:         jetstream.AckExplicitPolicy,
				AckWait:           a.ackWait,
				// Unlimited: handle counts the deliveries, so that one cut
				// off on its last (a killed process) still gives the turn up.
				MaxDeliver:    -1,
				MaxAckPending: max(4096, a.workers),
			},
			Handle: func(ctx context.Context, msg jetstream.Msg) {
				a.touch()
				a.handle(ctx, msg)
			},
			Logger: a.log,
		}},
		Workers:      a.workers,
		DrainTimeout: a.cfg.DrainTimeout,
		// A turn cut off at the drain deadline is handed back (see handle).
		StopCause: errShutdown,
		Ready: func() {
			a.touch()
			a.log.Info().Str("subject", subject).Int("workers", a.workers).Int("sub_agents", len(a.remotes.list)).Str("model", a.cfg.Provider.Model()).Msg("agent ready")
		},
		Logger: a.log,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// ConsumerName is the durable consumer of an agent's work queue.
func ConsumerName(agent string) string { return "agent_" + agent }

// ReplayConsumerName is the durable consumer of a replay agent's queue.
func ReplayConsumerName(agent string) string { return "replay_" + agent }

// Run takes turns until ctx is cancelled; then it stops taking them, lets
// running turns finish within DrainTimeout, hands the others back, and
// returns nil.
func (a *Role) Run(ctx context.Context) error {
	telemetry.AgentQueue(mesh.RoleAgent, a.name, []string{string(mesh.WorkTurn), string(mesh.WorkResume), string(mesh.WorkStep)},
		[]string{mesh.OutcomeSuccess, mesh.OutcomeInterrupt, mesh.OutcomeCancelled, mesh.OutcomeError})
	if a.cfg.Resources.Sessions != nil {
		telemetry.Conversations(a.cfg.Resources.Sessions.Bucket())
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := store.NewCatalog(a.cfg.Resources.Tools).Watch(watchCtx, func(ts []mesh.ToolEntry) {
		a.tools.Store(newToolSet(ts))
		for _, e := range ts {
			a.servers.get(e.Server) // its breaker, closed, shows in mesh_breaker_state from now on
		}
	}); err != nil {
		if workloop.StoppedStarting(ctx, err) {
			return nil
		}
		return fmt.Errorf("agent: %w", err)
	}

	var cardsDone sync.WaitGroup
	defer func() { stopWatch(); cardsDone.Wait() }()
	cardsDone.Add(1)
	go func() {
		defer cardsDone.Done()
		a.pool.refresh(watchCtx)
	}()

	cancelSub, err := a.cfg.NC.Subscribe(a.ns.SessionCancelAll(), a.onCancel)
	if err != nil {
		return fmt.Errorf("agent: subscribe %s: %w", a.ns.SessionCancelAll(), err)
	}
	defer func() { _ = cancelSub.Unsubscribe() }()

	if err := a.loop.Run(ctx); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.log.Info().Msg("agent stopped")
	return nil
}

// onCancel aborts the running work of a session: every work item of the
// run named (or of the tree it belongs to), or all of them without a name.
func (a *Role) onCancel(m *nats.Msg) {
	parts := strings.Split(m.Subject, ".")
	if len(parts) < 3 {
		return
	}
	session := parts[len(parts)-2]
	var req mesh.CancelRequest
	_ = json.Unmarshal(m.Data, &req)
	var hit []*runningTurn
	a.mu.Lock()
	for rt := range a.running {
		if rt.matches(session, req.RunID) {
			hit = append(hit, rt)
		}
	}
	if len(hit) == 0 && req.RunID != "" {
		// Not running here (yet): remember it, in case this replica claims
		// the run later.
		a.cancelled[req.RunID] = time.Now()
	}
	a.mu.Unlock()
	for _, rt := range hit {
		a.log.Info().Str("session", session).Strs("runs", rt.runs).Msg("cancelling turn")
		rt.cancel(errUserCancel)
	}
}

// cancelledEarly reports whether one of runs was cancelled before it
// started here; it also forgets cancellations older than a minute.
func (a *Role) cancelledEarly(runs []string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, at := range a.cancelled {
		if time.Since(at) > time.Minute {
			delete(a.cancelled, id)
		}
	}
	for _, id := range runs {
		if _, ok := a.cancelled[id]; ok {
			return true
		}
	}
	return false
}

// register makes a claimed work item one that cancel requests for its
// session stop; a turn still waiting for the conversation is not one yet.
// The returned func unregisters it.
func (a *Role) register(session string, runs []string, cancel context.CancelCauseFunc) func() {
	rt := &runningTurn{session: session, runs: runs, cancel: cancel}
	a.mu.Lock()
	a.running[rt] = struct{}{}
	a.mu.Unlock()
	if a.cancelledEarly(runs) {
		cancel(errUserCancel)
	}
	return func() {
		a.mu.Lock()
		delete(a.running, rt)
		a.mu.Unlock()
	}
}

// handle runs one work item and settles it with the work queue; the loop
// keeps the item in progress meanwhile.
func (a *Role) handle(ctx context.Context, msg jetstream.Msg) {
	attempt, seq := 1, uint64(0)
	if md, err := msg.Metadata(); err == nil {
		attempt, seq = int(md.NumDelivered), md.Sequence.Stream
	}
	var item mesh.WorkItem
	if err := json.Unmarshal(msg.Data(), &item); err != nil || item.Session == "" || item.TurnID == "" {
		a.log.Error().Err(err).Str("subject", msg.Subject()).Msg("dropping malformed work item")
		_ = msg.Term()
		return
	}
	base := a.log.With().Str("session", item.Session).Str("turn", item.TurnID).Str("kind", string(item.Kind)).Int("attempt", attempt).Logger()
	ctx, base, end := a.observe(ctx, msg.Headers(), item, attempt, base)
	log := base
	if sid := msg.Headers().Get(mesh.HeaderSessionID); sid != "" {
		log = log.With().Str("sid", sid).Logger()
	}

	turnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	t := &turn{a: a, work: work{item: item, hdr: msg.Headers(), attempt: attempt, seq: seq}, log: log, baseLog: base, cancel: cancel}
	t.queue.a = a
	if attempt > a.maxDeliver {
		// Its last delivery never settled (the process running it died):
		// given up here rather than left running.
		err := errors.New("its last delivery did not finish")
		defer end(err)
		a.giveUp(ctx, t, msg, fmt.Sprintf("this turn was tried %d times without finishing and was given up", a.maxDeliver), err)
		return
	}
	err := t.run(turnCtx)
	defer end(err)
	log = t.log // with the conversation's sid once claimed
	switch {
	case err == nil:
		_ = msg.Ack()
		a.settled(item)
	case errors.Is(context.Cause(turnCtx), errShutdown):
		log.Info().Msg("turn handed back for redelivery")
		_ = msg.Nak()
	case attempt >= a.maxDeliver:
		a.giveUp(ctx, t, msg, fmt.Sprintf("this turn failed %d times and was given up: %v", attempt, err), err)
	case mesh.IsUnavailable(err):
		// A stream lost its leader (a NATS node went down): try again once
		// the stores answer, not at once, lest the election use up the
		// turn's deliveries.
		log.Warn().Err(err).Msg("turn failed while NATS was unavailable; it will be redelivered once the streams answer")
		_ = a.cfg.Resources.AwaitLeaders(ctx)
		_ = msg.Nak()
	default:
		log.Warn().Err(err).Msg("turn failed; it will be redelivered")
		_ = msg.NakWithDelay(time.Duration(attempt) * 500 * time.Millisecond)
	}
}

// giveUp records turn t's failure after its last delivery and ends its work
// item; one whose failure could not be recorded comes back to try again.
func (a *Role) giveUp(ctx context.Context, t *turn, msg jetstream.Msg, text string, cause error) {
	t.log.Error().Err(cause).Msg("turn given up after its last delivery")
	if err := t.fail(context.WithoutCancel(ctx), mesh.CodeMaxDeliveries, text); err != nil {
		_ = msg.NakWithDelay(time.Second)
		return
	}
	telemetry.WorkGivenUp(mesh.RoleAgent, a.name)
	_ = msg.Term()
	a.settled(t.item)
}

// settled tells a replay that a work item is settled for good.
func (a *Role) settled(item mesh.WorkItem) {
	if a.cfg.Replay != nil && a.cfg.Replay.Settled != nil {
		a.cfg.Replay.Settled(item)
	}
}
