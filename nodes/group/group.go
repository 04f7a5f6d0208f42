// Package group is the group role: it runs group chats, conversations that
// several agents answer in turn (seed 003 user story 4). It keeps nothing
// in memory that another instance would need.
//
// Each group has a durable pull consumer on the work stream, filtered on
// mesh.work.group.<group>; every instance of the role pulls from it. The
// work items are:
//
//   - turn: a user's message. The group appends it to the conversation,
//     starts a round (the chat that answers it) and hands the first
//     speaker its turn;
//   - group_next: a member's turn ended; its agent wrote the outcome on the
//     round's pending turn. The group records it, checks the termination
//     rules, and hands the next speaker its turn, or ends the round;
//   - group_check: is the pending turn's member still served by a live
//     process? Redelivered every check interval until the turn ends; a
//     member whose processes are all gone (mesh_nodes) is skipped.
//
// A member's turn is a work item on mesh.work.agent.<member> (WorkItem.Group
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
package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// Config configures the group role.
type Config struct {
	NC        *nats.Conn
	JS        jetstream.JetStream
	Resources *mesh.Resources
	// Groups are the groups to run, validated (config.Load sets defaults).
	Groups []config.Group
	// Providers makes the selector model of an llm strategy (the group's
	// model, else DefaultModel).
	Providers    func(model string) (llm.Provider, error)
	DefaultModel string
	// NodeID names this process in logs and in the conversation.
	NodeID string
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
	// Logger receives the role's logs. The zero value discards them.
	Logger zerolog.Logger
}

// Role is the group role.
type Role struct {
	cfg      Config
	ns       mesh.Namespace
	sessions *mesh.SessionStore
	events   *mesh.EventPublisher
	log      zerolog.Logger
	groups   map[string]*group
	live     *liveness

	consuming atomic.Int32 // consume loops alive
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
		ns:       cfg.Resources.NS,
		sessions: mesh.NewSessionStore(cfg.Resources.Sessions),
		events:   mesh.NewEventPublisher(cfg.JS, cfg.Resources.NS),
		log:      cfg.Logger,
		groups:   map[string]*group{},
		live:     newLiveness(cfg.Resources.Nodes),
	}
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
	return r, nil
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
	if int(r.consuming.Load()) < len(r.groups) {
		return errors.New("group: a work queue is not consumed")
	}
	return nil
}

// Run runs the groups' chats until ctx is cancelled; then it stops taking
// work, lets the items in hand finish, and returns nil.
func (r *Role) Run(ctx context.Context) error {
	if err := r.live.start(ctx); err != nil {
		if mesh.StoppedStarting(ctx, err) {
			return nil
		}
		return fmt.Errorf("group: watch nodes: %w", err)
	}
	cancelSub, err := r.cfg.NC.Subscribe(r.ns.SessionCancelAll(), func(m *nats.Msg) { r.onCancel(ctx, m) })
	if err != nil {
		return fmt.Errorf("group: subscribe %s: %w", r.ns.SessionCancelAll(), err)
	}
	defer func() { _ = cancelSub.Unsubscribe() }()

	// Items run on their own context: stopping the role lets them finish
	// instead of cutting a compare-and-set in half.
	workCtx := context.WithoutCancel(ctx)
	sem := make(chan struct{}, r.cfg.Workers)
	var wg sync.WaitGroup
	var mu sync.Mutex // orders wg.Add before the drain's wg.Wait
	stopping := false
	var ccs []jetstream.ConsumeContext
	// A start that fails half-way stops the consumers it started, like a stop.
	var startErr error
	for _, g := range r.groups {
		subject, err := r.ns.Work(mesh.RoleGroup, g.cfg.Name)
		if err != nil {
			startErr = fmt.Errorf("group: %w", err)
			break
		}
		cons, err := r.cfg.JS.CreateOrUpdateConsumer(ctx, r.ns.Stream(mesh.StreamWork), jetstream.ConsumerConfig{
			Durable:       ConsumerName(g.cfg.Name),
			Description:   "chats of group " + g.cfg.Name,
			FilterSubject: subject,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       r.cfg.AckWait,
			// group_check items come back until their turn ends; the other
			// items count their own deliveries (see handle).
			MaxDeliver:    -1,
			MaxAckPending: 4096,
		})
		if err != nil {
			startErr = fmt.Errorf("group: consumer on %s: %w", subject, err)
			break
		}
		g := g
		cc, err := cons.Consume(func(msg jetstream.Msg) {
			mu.Lock()
			if stopping {
				mu.Unlock()
				_ = msg.Nak()
				return
			}
			wg.Add(1)
			mu.Unlock()
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				r.handle(workCtx, g, msg)
			}()
		}, jetstream.PullMaxMessages(r.cfg.Workers), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
				r.log.Warn().Err(err).Str("group", g.cfg.Name).Msg("consume")
			}
		}))
		if err != nil {
			startErr = fmt.Errorf("group: consume %s: %w", subject, err)
			break
		}
		r.consuming.Add(1)
		go func() {
			<-cc.Closed()
			r.consuming.Add(-1)
		}()
		ccs = append(ccs, cc)
	}
	if startErr == nil {
		r.log.Info().Strs("groups", r.Names()).Int("workers", r.cfg.Workers).Msg("group ready")
		<-ctx.Done()
	}
	mu.Lock()
	stopping = true
	mu.Unlock()
	for _, cc := range ccs {
		cc.Stop()
	}
	wg.Wait()
	for _, cc := range ccs {
		<-cc.Closed()
	}
	if startErr != nil && !mesh.StoppedStarting(ctx, startErr) {
		return startErr
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

// handle runs one work item and settles it with the work queue.
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
	x := &exec{r: r, g: g, item: item, hdr: mesh.CopyCallerHeaders(msg.Headers()), log: log}

	// Keep the item ours while it is handled.
	defer mesh.KeepInProgress(msg, r.cfg.AckWait)()

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
	var wait speakerWait
	switch {
	case err == nil:
		_ = msg.Ack()
	case errors.As(err, &wait):
		// Not a failure: the redelivery finds the round without a pending
		// turn and picks again (see reopens).
		_ = msg.NakWithDelay(wait.d)
	case attempt >= r.cfg.MaxDeliver:
		log.Error().Err(err).Msg("work item failed on its last delivery")
		x.giveUp(context.WithoutCancel(ctx), err)
		_ = msg.Term()
	default:
		if !errors.Is(err, errRetry) {
			log.Warn().Err(err).Msg("work item failed; it will be redelivered")
		}
		_ = msg.NakWithDelay(time.Duration(attempt) * 250 * time.Millisecond)
	}
}

// exec is the handling of one work item.
type exec struct {
	r    *Role
	g    *group
	item mesh.WorkItem
	hdr  nats.Header
	log  zerolog.Logger
}

// Errors of a user's message that the run reports.
var (
	errNotGroup = errors.New("not a group chat")
	errBusy     = errors.New("busy")
	errWaiting  = errors.New("waiting")
)

// start handles a user's message: append it, start a round, drive it.
func (x *exec) start(ctx context.Context) error {
	id := x.item.TurnID
	c, err := x.load(ctx)
	if err != nil {
		return err
	}
	var refused error
	c, err = x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		refused = nil
		switch {
		case c.Group == nil || c.Group.Name != x.g.cfg.Name:
			refused = errNotGroup
		case c.HasTurn(id), c.Group.Round != nil && c.Group.Round.ID == id:
			return mesh.ErrNoChange // started by an earlier delivery
		case c.Group.Round != nil:
			refused = errBusy
		case c.Status == mesh.StatusWaitingApproval:
			refused = errWaiting
		}
		if refused != nil {
			return mesh.ErrNoChange
		}
		now := time.Now().UTC()
		if !c.HasMessage(id) {
			c.Messages = append(c.Messages, mesh.Message{ID: id, Role: mesh.RoleUser, Content: x.item.Message, TurnID: id, CreatedAt: now})
		}
		c.Group.Round = &mesh.GroupRound{ID: id, Runs: []string{id}, StartedAt: now}
		c.Group.Asked()
		c.Turn = &mesh.Turn{ID: id, Kind: mesh.WorkTurn, Node: x.r.cfg.NodeID, StartedAt: now}
		c.Status = mesh.StatusRunning
		return nil
	})
	if err != nil && !errors.Is(err, mesh.ErrNoChange) {
		return err
	}
	switch {
	case errors.Is(refused, errNotGroup):
		return x.refuse(ctx, id, mesh.CodeConflict, fmt.Sprintf("conversation %s is not a chat of group %s", c.ID, x.g.cfg.Name))
	case errors.Is(refused, errBusy):
		return x.refuse(ctx, id, mesh.CodeConflict, fmt.Sprintf("conversation %s is answering another message; send this one when it is done", c.ID))
	case errors.Is(refused, errWaiting):
		return x.refuse(ctx, id, mesh.CodeWaitingApprove, "the conversation is waiting for an approval; decide it before sending a message")
	}
	round := c.Group.Round
	if round == nil || round.ID != id {
		return nil // done already
	}
	if err := x.publishAll(ctx,
		x.event(c.ID, id, "start:"+id, mesh.RunStarted(c.ID, id)),
		x.event(c.ID, id, "snapshot:"+id, mesh.Event{Type: mesh.EventStateSnapshot, Snapshot: stateOf(c)}),
	); err != nil {
		return err
	}
	x.log.Info().Msg("round started")
	err = x.drive(ctx, c)
	var wait speakerWait
	if errors.As(err, &wait) {
		// The first speaker waits for its min_interval on an item of its
		// own (m0 names no turn): a redelivered start would publish
		// RUN_STARTED again once the duplicate window has passed.
		item := mesh.WorkItem{Kind: mesh.WorkGroupNext, Session: c.ID, TurnID: id + "-m0", RunID: id, Group: x.g.cfg.Name}
		return x.publishAll(ctx, x.work(mesh.RoleGroup, x.g.cfg.Name, item, x.headers(c)))
	}
	return err
}

// load reads the conversation of the item; a message for a conversation
// that does not exist yet (sent with the nats CLI) creates it as a chat of
// the group.
func (x *exec) load(ctx context.Context) (*mesh.Conversation, error) {
	c, err := x.r.sessions.Get(ctx, x.item.Session)
	if !errors.Is(err, mesh.ErrSessionNotFound) || x.item.Kind != mesh.WorkTurn {
		return c, err
	}
	sid := x.hdr.Get(mesh.HeaderSessionID)
	if !mesh.ValidTraceID(sid) {
		sid = mesh.NewTraceID()
	}
	c = &mesh.Conversation{ID: x.item.Session, SessionID: sid, Status: mesh.StatusActive, Group: &mesh.GroupRun{Name: x.g.cfg.Name}}
	if err := x.r.sessions.Create(ctx, c); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, err
	}
	return x.r.sessions.Get(ctx, x.item.Session)
}

// refuse ends the run of a message the chat cannot take.
func (x *exec) refuse(ctx context.Context, runID, code, text string) error {
	x.log.Warn().Str("code", code).Msg(text)
	return x.publish(ctx, x.item.Session, runID, "end:"+runID, mesh.RunError(code, text))
}

// drive moves the round on: hands the pending turn out (again), settles a
// pending turn whose result is in, or picks the next speaker.
func (x *exec) drive(ctx context.Context, c *mesh.Conversation) error {
	round := c.Group.Round
	switch {
	case round == nil, round.Waiting:
		return nil
	case round.Pending != nil && round.Pending.Result != nil:
		return x.settle(ctx, c, round.Pending)
	case round.Pending != nil && !mesh.MemberStarted(c, round.Pending):
		return x.handOut(ctx, c, round.Pending)
	case round.Pending != nil:
		return nil // its member and its group_check carry it on
	}
	return x.pick(ctx, c)
}

// pick selects the next speaker and makes its turn the pending one.
func (x *exec) pick(ctx context.Context, c *mesh.Conversation) error {
	roundID := c.Group.Round.ID
	choice, err := x.g.sel.Next(ctx, x.selection(ctx, c))
	if err != nil {
		return err
	}
	if choice.Speaker == "" {
		// Only while nothing is pending: a duplicate handler's pick may have
		// found a speaker meanwhile.
		return x.endIf(ctx, c, mesh.GroupEndNoSpeaker, choice.Reason, func(r *mesh.GroupRound) bool { return r.Pending == nil && !r.Waiting })
	}
	if choice.Wait > 0 {
		// min_interval: this speaker spoke too recently.
		x.log.Debug().Str("speaker", choice.Speaker).Dur("wait", choice.Wait).Msg("speaker waits for its min_interval")
		return speakerWait{choice.Wait}
	}
	var pending *mesh.GroupTurn
	c, err = x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		pending = nil
		g := c.Group
		if g == nil || g.Round == nil || g.Round.ID != roundID || g.Round.Pending != nil || g.Round.Waiting {
			return mesh.ErrNoChange // moved on meanwhile
		}
		g.Round.Seq++
		pending = &mesh.GroupTurn{
			ID: fmt.Sprintf("%s-m%d", roundID, g.Round.Seq), Speaker: choice.Speaker, Strategy: choice.Strategy, Reason: choice.Reason,
			RunID: g.Round.Run(), StartedAt: time.Now().UTC(),
		}
		g.Round.Pending = pending
		c.Turn = &mesh.Turn{ID: roundID, Kind: mesh.WorkTurn, Node: x.r.cfg.NodeID, StartedAt: pending.StartedAt}
		return nil
	})
	if err != nil && !errors.Is(err, mesh.ErrNoChange) {
		return err
	}
	if pending == nil {
		if c.Group != nil && c.Group.Round != nil && c.Group.Round.ID == roundID {
			return x.drive(ctx, c)
		}
		return nil
	}
	var skips []outMsg
	for i, s := range choice.Skipped {
		ev := mesh.Custom(mesh.CustomSpeakerSkipped, map[string]any{"member": s.Member, "reason": s.Reason, "turn": pending.ID})
		skips = append(skips, x.event(c.ID, pending.RunID, fmt.Sprintf("skip:%s:%d", pending.ID, i), ev))
	}
	if err := x.publishAll(ctx, skips...); err != nil {
		return err
	}
	x.log.Info().Str("speaker", pending.Speaker).Str("strategy", pending.Strategy).Str("reason", pending.Reason).Str("member_turn", pending.ID).Msg("speaker selected")
	return x.handOut(ctx, c, pending)
}

// handOut publishes the selection of the pending turn and gives its member
// the turn, with a check that follows it; all deduplicated, so that a
// redelivery hands it out again safely.
func (x *exec) handOut(ctx context.Context, c *mesh.Conversation, p *mesh.GroupTurn) error {
	sel := mesh.Custom(mesh.CustomSpeakerSelected, map[string]any{"speaker": p.Speaker, "strategy": p.Strategy, "reason": p.Reason, "turn": p.ID})
	// The events are stored before the member gets its turn, so that they
	// come before the member's own in the stream.
	if err := x.publishAll(ctx,
		x.event(c.ID, p.RunID, "selected:"+p.ID, sel),
		x.event(c.ID, p.RunID, "step:"+p.ID, mesh.Event{Type: mesh.EventStepStarted, StepName: p.Speaker}),
	); err != nil {
		return err
	}
	turn := mesh.WorkItem{Kind: mesh.WorkTurn, Session: c.ID, TurnID: p.ID, RunID: p.RunID, Group: x.g.cfg.Name}
	check := mesh.WorkItem{Kind: mesh.WorkGroupCheck, Session: c.ID, TurnID: p.ID, Group: x.g.cfg.Name}
	return x.publishAll(ctx,
		x.work(mesh.RoleAgent, p.Speaker, turn, x.headers(c)),
		x.work(mesh.RoleGroup, x.g.cfg.Name, check, x.headers(c)),
	)
}

// headers are the caller's credentials and the conversation's trace id, for
// the work the group hands out.
func (x *exec) headers(c *mesh.Conversation) nats.Header {
	h := mesh.CopyCallerHeaders(x.hdr)
	if h.Get(mesh.HeaderSessionID) == "" && c.SessionID != "" {
		h.Set(mesh.HeaderSessionID, c.SessionID)
	}
	return h
}

// next handles the end of a member's turn.
func (x *exec) next(ctx context.Context) error {
	c, err := x.r.sessions.Get(ctx, x.item.Session)
	if errors.Is(err, mesh.ErrSessionNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if x.reopens(c) {
		return x.drive(ctx, c)
	}
	if g := c.Group; g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != x.item.TurnID || g.Round.Pending.Result == nil {
		return nil // the round moved on without it (stopped, skipped)
	}
	return x.settle(ctx, c, c.Group.Round.Pending)
}

// reopens reports whether the item's round may be stalled: open with no
// pending turn, or with one its member has not taken up. The handler that
// settled or skipped the item's turn may have died (or been asked to wait)
// before the next pick was saved or handed out, and this redelivery must
// carry the round on. Duplicates are harmless: the pick is a
// compare-and-set, the hand-out's messages have deterministic ids, and an
// agent drops a first delivery of a member turn already under way.
func (x *exec) reopens(c *mesh.Conversation) bool {
	g := c.Group
	if g == nil || g.Round == nil || g.Round.Waiting || !strings.HasPrefix(x.item.TurnID, g.Round.ID+"-m") {
		return false
	}
	p := g.Round.Pending
	return p == nil || p.Result == nil && !mesh.MemberStarted(c, p)
}

// settle acts on the result of pending turn p: a pause for an approval
// ends the round's runs as interrupted until the decision's resume; any
// other outcome is recorded, then the round ends on a termination rule or
// goes on with the next speaker.
func (x *exec) settle(ctx context.Context, c *mesh.Conversation, p *mesh.GroupTurn) error {
	res := p.Result
	if res.Outcome == mesh.OutcomeInterrupt {
		return x.pause(ctx, c, p)
	}
	roundID := c.Group.Round.ID
	var ending, detail string
	var applied bool
	var ended *mesh.GroupRound
	c, err := x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		ending, detail, applied, ended = "", "", false, nil
		g := c.Group
		if g == nil || g.Round == nil || g.Round.ID != roundID || g.Round.Pending == nil || g.Round.Pending.ID != p.ID || g.Round.Pending.Result == nil {
			return mesh.ErrNoChange
		}
		round, pt := g.Round, g.Round.Pending
		now := time.Now().UTC()
		g.Spoke(pt.Speaker, now)
		round.Turns++
		round.Pending = nil
		round.Waiting = false
		for _, run := range pt.Result.Runs {
			// The resumes that carried the turn on are the round's runs now.
			if !slices.Contains(round.Runs, run) {
				round.Runs = append(round.Runs, run)
			}
		}
		switch pt.Result.Outcome {
		case mesh.OutcomeSuccess:
			round.Response = pt.Result.Response
			switch {
			case strings.Contains(pt.Result.Response, x.g.cfg.TerminationPhrase):
				ending, detail = mesh.GroupEndPhrase, fmt.Sprintf("%s said %s", pt.Speaker, x.g.cfg.TerminationPhrase)
			case pt.EndChat:
				ending, detail = mesh.GroupEndDone, pt.Speaker+" ended the chat"
			}
		case mesh.OutcomeCancelled:
			ending, detail = mesh.GroupEndStopped, pt.Speaker+"'s turn was cancelled"
		}
		if ending == "" && round.Turns >= x.g.cfg.MaxTurns {
			ending, detail = mesh.GroupEndMaxTurns, fmt.Sprintf("%d turns", round.Turns)
		}
		if ending != "" {
			// The round ends in the same save.
			ended = endRound(c, ending, detail)
		}
		applied = true
		return nil
	})
	if err != nil && !errors.Is(err, mesh.ErrNoChange) {
		return err
	}
	if !applied {
		return x.drive(ctx, c)
	}
	x.log.Info().Str("speaker", p.Speaker).Str("outcome", res.Outcome).Str("member_turn", p.ID).Msg("member turn done")
	stepEnd := x.event(c.ID, p.RunID, "stepend:"+p.ID, mesh.Event{Type: mesh.EventStepFinished, StepName: p.Speaker})
	if ended != nil {
		return x.ended(ctx, c, ended, ending, detail, stepEnd)
	}
	if err := x.publishAll(ctx, stepEnd); err != nil {
		return err
	}
	return x.pick(ctx, c)
}

// pause ends the round's runs as interrupted: the pending turn waits for
// an approval, whose resume carries the round on.
func (x *exec) pause(ctx context.Context, c *mesh.Conversation, p *mesh.GroupTurn) error {
	var runs []string
	c, err := x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		runs = nil
		g := c.Group
		if g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != p.ID || g.Round.Pending.Result == nil ||
			g.Round.Pending.Result.Outcome != mesh.OutcomeInterrupt || len(g.Round.Runs) == 0 {
			return mesh.ErrNoChange
		}
		runs = g.Round.Runs
		g.Round.Runs = nil
		for _, id := range runs {
			c.MarkTurn(id)
		}
		c.LastRun = &mesh.RunSummary{ID: g.Round.ID, Runs: runs, Outcome: mesh.OutcomeInterrupt, Response: g.Round.Pending.Result.Response, FinishedAt: time.Now().UTC()}
		return nil
	})
	if err != nil && !errors.Is(err, mesh.ErrNoChange) {
		return err
	}
	var interrupts []mesh.Interrupt
	for _, pa := range c.PendingApprovals {
		interrupts = append(interrupts, mesh.Interrupt{ID: pa.UUID, Reason: mesh.InterruptReasonToolApproval, ToolCallID: pa.ToolCallID, Message: pa.Description})
	}
	for _, id := range runs {
		ev := mesh.RunFinished(c.ID, id, mesh.Outcome{Type: mesh.OutcomeInterrupt, Interrupts: interrupts}, map[string]any{"response": p.Result.Response})
		if err := x.publish(ctx, c.ID, id, "end:"+id, ev); err != nil {
			return err
		}
	}
	if len(runs) > 0 {
		x.log.Info().Str("speaker", p.Speaker).Strs("runs", runs).Msg("round waits for an approval")
	}
	return nil
}

// end ends the round: the conversation takes messages again, and its runs
// finish.
func (x *exec) end(ctx context.Context, c *mesh.Conversation, reason, detail string) error {
	return x.endIf(ctx, c, reason, detail, nil)
}

// endIf is end, unless still says the round no longer ends.
func (x *exec) endIf(ctx context.Context, c *mesh.Conversation, reason, detail string, still func(*mesh.GroupRound) bool) error {
	roundID := c.Group.Round.ID
	var round *mesh.GroupRound
	c, err := x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		round = nil
		if g := c.Group; g == nil || g.Round == nil || g.Round.ID != roundID || still != nil && !still(g.Round) {
			return mesh.ErrNoChange
		}
		round = endRound(c, reason, detail)
		return nil
	})
	if err != nil && !errors.Is(err, mesh.ErrNoChange) {
		return err
	}
	if round == nil {
		return nil
	}
	return x.ended(ctx, c, round, reason, detail)
}

// endRound ends c's round in a change of the conversation: it takes
// messages again, and the round's runs are recorded as done.
func endRound(c *mesh.Conversation, reason, detail string) *mesh.GroupRound {
	g := c.Group
	round := g.Round
	g.Round, g.Ended = nil, reason
	for _, id := range append([]string{round.ID}, round.Runs...) {
		c.MarkTurn(id)
	}
	// A stopped round may leave a member's paused turn: nobody will carry
	// it on.
	c.Tree, c.PendingApproval, c.PendingApprovals, c.PipelineState = nil, nil, nil, nil
	c.Turn, c.Status = nil, mesh.StatusActive
	c.LastRun = &mesh.RunSummary{ID: round.ID, Runs: round.Runs, Outcome: roundOutcome(reason, round), Response: round.Response, FinishedAt: time.Now().UTC()}
	if c.LastRun.Outcome == mesh.OutcomeError {
		c.LastRun.ErrorCode, c.LastRun.Error = mesh.CodeNoSpeaker, detail
	}
	return round
}

// ended publishes the end of round, after more (events that come first).
func (x *exec) ended(ctx context.Context, c *mesh.Conversation, round *mesh.GroupRound, reason, detail string, more ...outMsg) error {
	outcome := roundOutcome(reason, round)
	ev := mesh.Custom(mesh.CustomGroupEnded, map[string]any{"reason": reason, "detail": detail, "turns": round.Turns})
	msgs := append(more, x.event(c.ID, round.Run(), "ended:"+round.ID, ev))
	for _, id := range round.Runs {
		ev := mesh.RunFinished(c.ID, id, mesh.Outcome{Type: outcome}, map[string]any{"response": round.Response, "ended": reason})
		if outcome == mesh.OutcomeError {
			ev = mesh.RunError(mesh.CodeNoSpeaker, "the group chat could not go on: "+detail)
		}
		msgs = append(msgs, x.event(c.ID, id, "end:"+id, ev))
	}
	if err := x.publishAll(ctx, msgs...); err != nil {
		return err
	}
	x.log.Info().Str("reason", reason).Str("detail", detail).Int("turns", round.Turns).Msg("round ended")
	return nil
}

// roundOutcome is the AG-UI outcome of a round that ended for reason.
func roundOutcome(reason string, round *mesh.GroupRound) string {
	switch {
	case reason == mesh.GroupEndStopped:
		return mesh.OutcomeCancelled
	case reason == mesh.GroupEndNoSpeaker && round.Turns == 0, reason == mesh.GroupEndMemberError:
		return mesh.OutcomeError
	}
	return mesh.OutcomeSuccess
}

// check reports whether the pending turn it follows still needs checking;
// a turn whose member no live process serves is skipped, and the round
// goes on without it.
func (x *exec) check(ctx context.Context) (again bool, err error) {
	c, err := x.r.sessions.Get(ctx, x.item.Session)
	if errors.Is(err, mesh.ErrSessionNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// A check of the pending turn itself proves its hand-out happened.
	if x.reopens(c) && (c.Group.Round.Pending == nil || c.Group.Round.Pending.ID != x.item.TurnID) {
		return false, x.drive(ctx, c)
	}
	g := c.Group
	if g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != x.item.TurnID {
		return false, nil
	}
	p := g.Round.Pending
	if p.Result != nil {
		// The result is in; make sure it is acted on (its group_next may
		// have been lost with an agent).
		return false, x.settle(ctx, c, p)
	}
	if g.Round.Waiting || x.r.live.serves(p.Speaker) {
		return !g.Round.Waiting, nil
	}
	reason := "no live process serves it"
	var skipped bool
	c, err = x.r.sessions.UpdateLoaded(ctx, c, func(c *mesh.Conversation) error {
		skipped = false
		g := c.Group
		if g == nil || g.Round == nil || g.Round.Pending == nil || g.Round.Pending.ID != p.ID || g.Round.Pending.Result != nil {
			return mesh.ErrNoChange
		}
		g.Round.Pending = nil
		c.Tree = nil // the member's unfinished turn, if it had begun
		skipped = true
		return nil
	})
	if err != nil && !errors.Is(err, mesh.ErrNoChange) {
		return false, err
	}
	if !skipped {
		return false, nil
	}
	x.log.Warn().Str("member", p.Speaker).Str("member_turn", p.ID).Msg("member down: its turn is skipped")
	ev := mesh.Custom(mesh.CustomSpeakerSkipped, map[string]any{"member": p.Speaker, "reason": reason, "turn": p.ID})
	if err := x.publish(ctx, c.ID, p.RunID, "skip:"+p.ID, ev); err != nil {
		return false, err
	}
	if err := x.publish(ctx, c.ID, p.RunID, "stepend:"+p.ID, mesh.Event{Type: mesh.EventStepFinished, StepName: p.Speaker}); err != nil {
		return false, err
	}
	return false, x.drive(ctx, c)
}

// giveUp ends the round of an item that failed on every delivery.
func (x *exec) giveUp(ctx context.Context, cause error) {
	c, err := x.r.sessions.Get(ctx, x.item.Session)
	if err != nil || c.Group == nil || c.Group.Round == nil {
		return
	}
	if err := x.end(ctx, c, mesh.GroupEndMemberError, cause.Error()); err != nil {
		x.log.Error().Err(err).Msg("end the round")
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
	go func() {
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

// publish publishes one event of the round with a deterministic id.
func (x *exec) publish(ctx context.Context, session, runID, msgID string, ev mesh.Event) error {
	_, err := x.r.events.Publish(ctx, session, runID, msgID, ev)
	return err
}

// outMsg is a message to publish, or the error of building it.
type outMsg struct {
	m   *nats.Msg
	err error
}

func (x *exec) event(session, runID, msgID string, ev mesh.Event) outMsg {
	m, err := x.r.events.Msg(session, runID, msgID, ev)
	return outMsg{m, err}
}

func (x *exec) work(role, name string, item mesh.WorkItem, hdr nats.Header) outMsg {
	m, err := mesh.WorkMsg(x.r.ns, role, name, item, hdr)
	return outMsg{m, err}
}

// publishAll publishes msgs at once, in order, and waits until the streams
// have stored them all: one round trip instead of one each.
func (x *exec) publishAll(ctx context.Context, msgs ...outMsg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, o := range msgs {
		if o.err != nil {
			return o.err
		}
		f, err := x.r.cfg.JS.PublishMsgAsync(o.m)
		if err != nil {
			return fmt.Errorf("publish %s: %w", o.m.Subject, err)
		}
		futures = append(futures, f)
	}
	return mesh.AwaitAcks(ctx, futures)
}

// selection is what the selector reads of the chat.
func (x *exec) selection(ctx context.Context, c *mesh.Conversation) Turn {
	g := c.Group
	t := Turn{Recent: g.Recent, LastSpoke: g.LastSpoke, Now: time.Now().UTC()}
	down := func() map[string]string {
		out := map[string]string{}
		for _, p := range x.g.cfg.Participants {
			if !x.r.live.serves(p.Agent) {
				out[p.Agent] = "no live process serves it"
			}
		}
		return out
	}
	if t.Down = down(); len(t.Down) == len(x.g.cfg.Participants) {
		if err := x.r.live.reload(ctx); err != nil {
			x.log.Warn().Err(err).Msg("rereading the nodes bucket")
		}
		t.Down = down()
	}
	for _, m := range c.Messages {
		if m.Notice || m.Content == "" || len(m.ToolCalls) > 0 {
			continue
		}
		switch m.Role {
		case mesh.RoleUser:
			t.History = append(t.History, Message{Role: "user", Content: m.Content})
		case mesh.RoleAssistant:
			t.History = append(t.History, Message{Role: "assistant", Name: m.Name, Content: m.Content})
		}
	}
	if n := len(t.History); n > 20 {
		t.History = t.History[n-20:]
	}
	if n := len(t.History); n > 0 {
		t.Message = t.History[n-1].Content
	}
	return t
}

// stateOf is the session state clients see.
func stateOf(c *mesh.Conversation) map[string]any {
	if c.State == nil {
		return map[string]any{}
	}
	return c.State
}
