// Package group is the group role: it runs group chats, conversations that
// several agents answer in turn. It keeps nothing in memory that another
// instance would need.
//
// Each group has a durable pull consumer on the work stream, filtered on
// mesh.work.group.<group>.* (the last token names the conversation); every
// instance of the role pulls from it. The work items are:
//
//   - turn: a user's message. The group appends it to the conversation,
//     starts a round (the chat that answers it; the same save takes the
//     message off the conversation's queue) and hands the first speaker
//     its turn;
//   - group_next: a member's turn ended; its agent wrote the outcome on the
//     round's pending turn. The group records it, checks the termination
//     rules, and hands the next speaker its turn, or ends the round;
//   - group_check: is the pending turn's member still served by a live
//     process? Redelivered every check interval until the turn ends; a
//     member whose processes are all gone (mesh_nodes) is skipped.
//
// A member's turn is a work item on mesh.work.agent.<member>.<session> (WorkItem.Group
// set), so members are separate processes. The position of the chat lives
// in the conversation (mesh.GroupRun) and every change is a
// compare-and-set; member turn ids are <round>-m<n>, and work items and
// events carry deterministic ids, so an instance killed mid-chat loses and
// doubles nothing: its work items are redelivered to another.
//
// Events of a round go to the AG-UI run of the user's message (and of the
// approval resumes that carried it on): RUN_STARTED, CUSTOM
// speaker_selected (and speaker_skipped), STEP_STARTED/STEP_FINISHED named
// after each speaker around its turn's own events, CUSTOM group_ended, and
// RUN_FINISHED when the round ends.
//
// The role (group.go: [Config], [New], [Role.Run], the handling of each
// work item, cancel requests, health) is apart from one round of a chat,
// the exec type: its start, next and check (round.go), the choice and
// hand-out of the next speaker (speaker.go), its end (round_end.go) and the
// publishing of its events and work (publish.go). Speaker selection is the
// [Selector] (select.go); member liveness is read from mesh_nodes
// (liveness.go).
//
// [Role.Run] takes the work items through a [workloop.Loop]. When its
// context is cancelled it stops taking work, lets the items in hand finish within DrainTimeout, hands the others
// back for redelivery, and returns nil.
package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
	"github.com/agentmesh/agentmesh/mesh/workloop"
)

// Config configures the group role.
type Config struct {
	// Node is the process's connections, names and logger: NC and JS are
	// required; NodeID names this process in logs and in the conversation;
	// NS, when set, must be Resources'.
	role.Node
	Resources *store.Resources
	// Groups are the groups to run, validated (config.Load sets defaults).
	Groups []config.Group
	// HistoryBytes bounds the messages a read of a conversation loads
	// (sessions.max_bytes). Zero means mesh.DefaultHistoryBytes.
	HistoryBytes int
	// Providers makes the selector model of an llm strategy (the group's
	// model, else DefaultModel).
	Providers    func(model string) (llm.Provider, error)
	DefaultModel string
	// Workers bounds the work items handled at once. Zero means 32.
	Workers int
	// AckWait is the work items' ack wait; MaxDeliver how often a turn or a
	// group_next is tried before the round ends with an error. Zero means
	// 10s and 5.
	AckWait    time.Duration
	MaxDeliver int
	// CheckInterval is how often a pending turn's member is checked for a
	// live process. Zero means 1s.
	CheckInterval time.Duration
	// DrainTimeout is how long the items in hand may take to finish when
	// the role stops; those still running then are handed back for
	// redelivery. Zero means 30s.
	DrainTimeout time.Duration
}

// Role is the group role.
type Role struct {
	cfg      Config
	ns       mesh.Namespace
	sessions *store.SessionStore
	events   *bus.Publisher
	log      zerolog.Logger
	groups   map[string]*group
	live     *liveness
	loop     *workloop.Loop // takes the groups' work items
	// stopping counts the rounds being stopped on request (onCancel), which
	// Run waits for before it returns; once done is set no more start.
	stopping sync.WaitGroup
	stopMu   sync.Mutex
	done     bool
}

// group is a configured group and its selector.
type group struct {
	cfg config.Group
	sel *Selector
}

// ConsumerName is the durable consumer of a group's work queue.
func ConsumerName(group string) string { return "group_" + group }

// New validates cfg and returns the role.
func New(cfg Config) (*Role, error) {
	if cfg.NC == nil || cfg.JS == nil || cfg.Resources == nil {
		return nil, errors.New("group: NC, JS and Resources are required")
	}
	if cfg.NS.Prefix() == "" {
		cfg.NS = cfg.Resources.NS
	} else if cfg.NS != cfg.Resources.NS {
		return nil, fmt.Errorf("group: NS %q is not the Resources' %q", cfg.NS.Prefix(), cfg.Resources.NS.Prefix())
	}
	if cfg.Workers <= 0 {
		cfg.Workers = config.DefaultWorkers
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = config.DefaultAckWait
	}
	if cfg.MaxDeliver <= 0 {
		cfg.MaxDeliver = config.DefaultMaxDeliver
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	r := &Role{
		cfg:      cfg,
		ns:       cfg.NS,
		sessions: store.NewSessionStore(cfg.Resources.Sessions, cfg.Resources.Messages).WithLogger(cfg.Logger),
		events:   bus.NewPublisher(cfg.JS, cfg.NS),
		log:      cfg.Logger,
		groups:   map[string]*group{},
		live:     newLiveness(cfg.Resources.Nodes),
	}
	r.sessions.HistoryBytes = cfg.HistoryBytes
	for _, g := range cfg.Groups {
		var selector llm.Provider
		if g.Strategy == config.StrategyLLM {
			model := g.Model
			if model == "" {
				model = cfg.DefaultModel
			}
			if cfg.Providers == nil {
				return nil, fmt.Errorf("group %q: the llm strategy needs a model provider", g.Name)
			}
			p, err := cfg.Providers(model)
			if err != nil {
				return nil, fmt.Errorf("group %q: selector model %s: %w", g.Name, model, err)
			}
			selector = p
		}
		sel, err := NewSelector(g, selector)
		if err != nil {
			return nil, fmt.Errorf("group %q: %w", g.Name, err)
		}
		r.groups[g.Name] = &group{cfg: g, sel: sel}
	}
	if err := r.newLoop(); err != nil {
		return nil, err
	}
	return r, nil
}

// errShutdown is the cause of the work items cut off at the drain deadline.
var errShutdown = errors.New("group: role shutting down")

// newLoop makes the work loop of the groups' items: a durable consumer on
// mesh.work.group.<group>.* for each group, all served by the role's workers.
func (r *Role) newLoop() error {
	var queues []workloop.Queue
	seen := map[string]bool{}
	for _, gc := range r.cfg.Groups {
		g := r.groups[gc.Name]
		if seen[gc.Name] {
			continue // a group named twice runs once, as the last one
		}
		seen[gc.Name] = true
		filter, err := r.ns.WorkFilter(mesh.RoleGroup, g.cfg.Name)
		if err != nil {
			return fmt.Errorf("group: %w", err)
		}
		queues = append(queues, workloop.Queue{
			Consumer: jetstream.ConsumerConfig{
				Durable:       ConsumerName(g.cfg.Name),
				Description:   "chats of group " + g.cfg.Name,
				FilterSubject: filter,
				AckPolicy:     jetstream.AckExplicitPolicy,
				AckWait:       r.cfg.AckWait,
				// group_check items come back until their turn ends; the other
				// items count their own deliveries (see handle).
				MaxDeliver:    -1,
				MaxAckPending: max(4096, r.cfg.Workers),
			},
			Handle: func(ctx context.Context, msg jetstream.Msg) { r.handle(ctx, g, msg) },
			Logger: r.log.With().Str("group", g.cfg.Name).Logger(),
		})
	}
	loop, err := workloop.New(workloop.Config{
		JS:           r.cfg.JS,
		Stream:       r.ns.Stream(mesh.StreamWork),
		Queues:       queues,
		Workers:      r.cfg.Workers,
		DrainTimeout: r.cfg.DrainTimeout,
		StopCause:    errShutdown,
		Ready: func() {
			r.log.Info().Strs("groups", r.Names()).Int("workers", r.cfg.Workers).Msg("group ready")
		},
		Logger: r.log,
	})
	if err != nil {
		return fmt.Errorf("group: %w", err)
	}
	r.loop = loop
	return nil
}

// Names are the groups the role runs.
func (r *Role) Names() []string {
	out := make([]string, 0, len(r.groups))
	for _, g := range r.cfg.Groups {
		out = append(out, g.Name)
	}
	return out
}

// Health fails when a group's work queue is no longer consumed.
func (r *Role) Health(context.Context) error {
	if !r.loop.Consuming() {
		return errors.New("group: a work queue is not consumed")
	}
	return nil
}

// Run runs the groups' chats until ctx is cancelled; then it stops taking
// work, lets the items in hand finish within DrainTimeout, hands the others
// back, and returns nil.
func (r *Role) Run(ctx context.Context) error {
	for name, g := range r.groups {
		telemetry.WorkQueue(mesh.RoleGroup, name)
		telemetry.Group(name, []string{mesh.GroupEndMaxTurns, mesh.GroupEndPhrase, mesh.GroupEndDone, mesh.GroupEndStopped, mesh.GroupEndNoSpeaker, mesh.GroupEndMemberError},
			[]string{g.cfg.Strategy})
	}
	if r.cfg.Resources.Sessions != nil {
		telemetry.Conversations(r.cfg.Resources.Sessions.Bucket())
	}
	if err := r.live.start(ctx); err != nil {
		if workloop.StoppedStarting(ctx, err) {
			return nil
		}
		return fmt.Errorf("group: watch nodes: %w", err)
	}
	cancelSub, err := r.cfg.NC.Subscribe(r.ns.SessionCancelAll(), func(m *nats.Msg) { r.onCancel(ctx, m) })
	if err != nil {
		return fmt.Errorf("group: subscribe %s: %w", r.ns.SessionCancelAll(), err)
	}
	defer func() {
		_ = cancelSub.Unsubscribe()
		r.stopMu.Lock()
		r.done = true
		r.stopMu.Unlock()
		r.stopping.Wait()
	}()

	// Items run on the loop's own context: stopping the role lets them
	// finish instead of cutting a compare-and-set in half.
	if err := r.loop.Run(ctx); err != nil {
		return fmt.Errorf("group: %w", err)
	}
	r.log.Info().Msg("group stopped")
	return nil
}

// errRetry asks for a redelivery: the conversation is busy with another
// round, or the mesh could not be reached.
var errRetry = errors.New("group: try again later")

// speakerWait asks for the item back once the chosen speaker's
// min_interval has passed: the queue holds the wait, not a worker.
type speakerWait struct{ d time.Duration }

func (w speakerWait) Error() string { return fmt.Sprintf("the speaker waits %v (min_interval)", w.d) }

// handle runs one work item and settles it with the work queue; the loop
// keeps the item in progress meanwhile.
func (r *Role) handle(ctx context.Context, g *group, msg jetstream.Msg) {
	attempt := 1
	if md, err := msg.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	var item mesh.WorkItem
	if err := json.Unmarshal(msg.Data(), &item); err != nil || item.Session == "" || item.TurnID == "" {
		r.log.Error().Err(err).Str("subject", msg.Subject()).Msg("dropping malformed work item")
		_ = msg.Term()
		return
	}
	log := r.log.With().Str("group", g.cfg.Name).Str("session", item.Session).Str("turn", item.TurnID).Str("kind", string(item.Kind)).Int("attempt", attempt).Logger()
	if sid := msg.Headers().Get(mesh.HeaderSessionID); sid != "" {
		log = log.With().Str("sid", sid).Logger()
	}
	ctx, log, end := observe(ctx, msg.Subject(), msg.Headers(), g.cfg.Name, item, attempt, log)
	defer end(nil) // work items that end below without an error to report
	x := &exec{r: r, g: g, item: item, attempt: attempt, hdr: workloop.CopyCallerHeaders(msg.Headers()), log: log}

	var err error
	switch item.Kind {
	case mesh.WorkTurn:
		err = x.start(ctx)
	case mesh.WorkGroupNext:
		err = x.next(ctx)
	case mesh.WorkGroupCheck:
		again, cerr := x.check(ctx)
		var wait speakerWait
		switch {
		case errors.As(cerr, &wait):
			_ = msg.NakWithDelay(wait.d)
		case cerr != nil && errors.Is(context.Cause(ctx), errShutdown):
			log.Info().Msg("work item handed back for redelivery")
			_ = msg.Nak()
		case cerr != nil:
			log.Warn().Err(cerr).Msg("check failed; checking again")
			_ = msg.NakWithDelay(r.cfg.CheckInterval)
		case again:
			_ = msg.NakWithDelay(r.cfg.CheckInterval)
		default:
			_ = msg.Ack()
		}
		return
	default:
		log.Error().Msg("dropping a work item of unknown kind")
		_ = msg.Term()
		return
	}
	end(err)
	var wait speakerWait
	switch {
	case err == nil:
		_ = msg.Ack()
	case errors.As(err, &wait):
		// Not a failure: the redelivery finds the round without a pending
		// turn and picks again (see reopens).
		_ = msg.NakWithDelay(wait.d)
	case errors.Is(context.Cause(ctx), errShutdown):
		// Cut off at the drain deadline: not a failure of the item.
		log.Info().Msg("work item handed back for redelivery")
		_ = msg.Nak()
	case attempt >= r.cfg.MaxDeliver:
		log.Error().Err(err).Msg("work item failed on its last delivery")
		telemetry.WorkGivenUp(mesh.RoleGroup, g.cfg.Name)
		x.giveUp(context.WithoutCancel(ctx), err)
		_ = msg.Term()
	case mesh.IsUnavailable(err):
		// A stream lost its leader: try again once the stores answer.
		log.Warn().Err(err).Msg("work item failed while NATS was unavailable; it will be redelivered once the streams answer")
		_ = r.cfg.Resources.AwaitLeaders(ctx)
		_ = msg.Nak()
	default:
		if !errors.Is(err, errRetry) {
			log.Warn().Err(err).Msg("work item failed; it will be redelivered")
		}
		_ = msg.NakWithDelay(time.Duration(attempt) * 250 * time.Millisecond)
	}
}

// onCancel stops the round a cancel request names (or any, without a
// run id); the agents cancel the member's turn on their side.
func (r *Role) onCancel(ctx context.Context, m *nats.Msg) {
	parts := strings.Split(m.Subject, ".")
	if len(parts) < 3 {
		return
	}
	session := parts[len(parts)-2]
	var req mesh.CancelRequest
	_ = json.Unmarshal(m.Data, &req)
	// Not on the subscription's goroutine: the end of a round is a few
	// round trips, and cancels for other conversations must not queue.
	r.stopMu.Lock()
	defer r.stopMu.Unlock()
	if r.done {
		return
	}
	r.stopping.Add(1)
	go func() {
		defer r.stopping.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		c, err := r.sessions.Get(ctx, session)
		if err != nil || c.Group == nil || c.Group.Round == nil {
			return
		}
		g := r.groups[c.Group.Name]
		round := c.Group.Round
		if g == nil || req.RunID != "" && req.RunID != round.ID && !slices.Contains(round.Runs, req.RunID) {
			return
		}
		x := &exec{r: r, g: g, item: mesh.WorkItem{Session: session, TurnID: round.ID}, hdr: nats.Header{}, log: r.log.With().Str("group", g.cfg.Name).Str("session", session).Logger()}
		if err := x.end(ctx, c, mesh.GroupEndStopped, "stopped by request"); err != nil {
			x.log.Warn().Err(err).Msg("stop the round")
		}
	}()
}
