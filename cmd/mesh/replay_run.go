package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/models"
	"github.com/agentmesh/agentmesh/mesh/replay"
	"github.com/agentmesh/agentmesh/mesh/role"
	"github.com/agentmesh/agentmesh/mesh/store"
	"github.com/agentmesh/agentmesh/mesh/workloop"
	"github.com/agentmesh/agentmesh/nodes/agent"
)

// replayRun is one run of mesh replay: its connection as the replay
// identity, its agent (an agent role of this process on the replay's own
// queue) and the turns in flight.
type replayRun struct {
	id, name string
	o        *replayOptions
	alt      *config.Config
	ns       mesh.Namespace
	nc       *nats.Conn
	js       jetstream.JetStream
	res      *store.Resources
	sessions *store.SessionStore
	log      zerolog.Logger

	role      *agent.Role
	stopAgent context.CancelFunc
	agentDone chan error

	mu      sync.Mutex
	waiting map[string]chan struct{} // turn id → closed when settled
	pace    pacer
	made    []string // the replay's conversations, to remove
}

// newRunID names a run: its start time and a random suffix, a token.
func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
}

// newReplayRun connects as the replay identity, binds what it uses and
// starts its agent with the configuration alt.
func newReplayRun(ctx context.Context, cfg, alt *config.Config, o *replayOptions) (*replayRun, error) {
	name := alt.Name
	if o.agentName != "" {
		name = o.agentName
	}
	def := alt.AgentNamed(name)
	if def == nil {
		return nil, fmt.Errorf("%w: --agent-of-config: %q is not an agent of %s", errConfig, name, o.config)
	}
	if err := def.CheckModelKeys(def.AgentModels()); err != nil {
		return nil, err
	}
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	log, err := newLogger(cfg)
	if err != nil {
		return nil, err
	}
	id := newRunID()
	r := &replayRun{id: id, name: "replay-" + id, o: o, alt: def, ns: ns, waiting: map[string]chan struct{}{}, pace: newPacer(o.rate)}
	r.log = log.With().Str("role", mesh.RoleReplay).Str("node", r.name).Logger()
	if os.Getenv(config.EnvLogLevel) == "" {
		// A command at a terminal: its agent's warnings, not every turn.
		r.log = r.log.Level(zerolog.WarnLevel)
	}
	nc, ident, err := connectAs(cfg, ns, mesh.RoleReplay, "mesh-"+r.name, r.log)
	if err != nil {
		return nil, err
	}
	r.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	r.js = store.Failover(js, cfg.NATS.FailoverBound())
	// Bind what the replay identity uses; a mesh that is not there, or an
	// identity it refuses, fails within seconds rather than waiting.
	perms, _ := identity.PermissionsOf(ns, mesh.RoleReplay)
	bctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	r.res, err = store.Bind(bctx, r.js, ns, store.Uses{Buckets: perms.Buckets, Streams: perms.Streams, Objects: perms.Objects})
	cancel()
	if err != nil {
		if last := nc.LastError(); last != nil {
			err = fmt.Errorf("%w (%w; %s)", err, last, refusedIdentity(cfg, ident))
		}
		nc.Close()
		return nil, fmt.Errorf("no mesh at %s for the replay: %w", natsURL(cfg), err)
	}
	r.sessions = store.NewSessionStore(r.res.Sessions, r.res.Messages)

	a := *def
	a.Name = r.name
	a.Mesh.Workers = o.concurrency
	llmOpts := llm.Options{Log: r.log.With().Str("component", "llm").Logger()}
	provider, err := models.FromConfigWith(&a, a.LLM.Model, llmOpts)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: llm.model of %s: %w", errConfig, o.config, err)
	}
	r.role, err = agent.New(agent.Config{
		Node:      role.Node{NC: nc, Responder: nc, JS: r.js, NS: ns, NodeID: r.name, Logger: r.log},
		Resources: r.res, Agent: &a, Provider: provider,
		Providers: func(model string) (llm.Provider, error) { return models.FromConfigWith(&a, model, llmOpts) },
		Replay:    &agent.Replay{StandIn: o.standInResult(), Settled: r.settled},
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	actx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stopAgent, r.agentDone = stop, make(chan error, 1)
	go func() { r.agentDone <- r.role.Run(actx) }()
	return r, nil
}

// close stops the agent (its turns drain) and closes the connection.
func (r *replayRun) close() {
	if r.stopAgent != nil {
		r.stopAgent()
		<-r.agentDone
	}
	if err := r.nc.Drain(); err != nil {
		r.nc.Close()
	}
	for i := 0; i < 100 && !r.nc.IsClosed(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// settled is the agent's word that a work item is settled for good.
func (r *replayRun) settled(item mesh.WorkItem) {
	r.mu.Lock()
	ch := r.waiting[item.TurnID]
	delete(r.waiting, item.TurnID)
	r.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// run replays every source, --concurrency at a time, and returns the
// finished report.
func (r *replayRun) run(ctx context.Context, sources []replay.Source, selection string) (*replay.Report, error) {
	rep := &replay.Report{
		ID: r.id, StartedAt: time.Now().UTC(), Agent: r.name, Model: r.alt.LLM.Model, Config: filepath.Base(r.o.config),
		Selection: selection, StandIn: r.o.standInResult(), Prices: r.o.prices(), Thresholds: r.o.thresholds,
		Conversations: make([]replay.ConversationReport, len(sources)),
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range r.o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rep.Conversations[i] = r.conversation(ctx, i, sources[i])
			}
		}()
	}
feed:
	for i := range sources {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		r.removeConversations()
		return nil, fmt.Errorf("replay %s interrupted: %w", r.id, ctx.Err())
	}
	rep.FinishedAt = time.Now().UTC()
	rep.Finish()
	if !r.o.keep {
		r.removeConversations()
	}
	return rep, nil
}

// conversation replays source i in a conversation of its own: each user
// turn in order, each waited for, then the whole conversation compared.
func (r *replayRun) conversation(ctx context.Context, i int, src replay.Source) replay.ConversationReport {
	id := fmt.Sprintf("%s-c%d", r.name, i)
	cr := replay.ConversationReport{Source: src.ID, Conversation: id}
	now := time.Now().UTC()
	conv := &mesh.Conversation{ID: id, SessionID: mesh.NewTraceID(), Agent: r.name, Replay: r.id, Status: mesh.StatusActive,
		Title: mesh.Clip("replay of " + src.ID), CreatedAt: now}
	if r.alt.Prompt != "" {
		conv.Messages = []mesh.Message{{ID: id + "-system", Role: mesh.RoleSystem, Content: r.alt.Prompt, CreatedAt: now}}
	}
	if err := r.sessions.Create(ctx, conv); err != nil {
		cr.Error = "could not create the replay's conversation: " + err.Error()
		cr = r.compareConversation(cr, src, nil)
		cr.Finish(r.o.prices())
		return cr
	}
	r.mu.Lock()
	r.made = append(r.made, id)
	r.mu.Unlock()
	type turnRun struct {
		ms    float64
		usage *mesh.Usage
		err   string
	}
	runs := make([]turnRun, len(src.Turns))
	for t, turn := range src.Turns {
		ms, last, err := r.turn(ctx, conv, fmt.Sprintf("%s-t%d", id, t), turn.User)
		runs[t].ms = ms
		switch {
		case err != nil:
			runs[t].err = err.Error()
		case last != nil && last.Outcome == mesh.OutcomeError:
			runs[t].err = fmt.Sprintf("%s: %s", last.ErrorCode, last.Error)
		}
		if last != nil {
			runs[t].usage = last.Usage
		}
		if err != nil {
			break // the conversation cannot go on
		}
	}
	_, msgs, err := r.sessions.AllMessages(ctx, id)
	if err != nil {
		cr.Error = "could not read the replay's conversation: " + err.Error()
	}
	replayed := replay.TurnsOf(msgs)
	cr = r.compareConversation(cr, src, replayed)
	for t := range cr.Turns {
		if t < len(runs) {
			cr.Turns[t].LatencyMS, cr.Turns[t].Usage, cr.Turns[t].Error = runs[t].ms, runs[t].usage, runs[t].err
			if runs[t].err != "" || t >= len(replayed) {
				cr.Turns[t].Counts.FailedTurns = 1
			}
		}
	}
	cr.Finish(r.o.prices())
	if !r.o.keep {
		// Removed as soon as compared: spread over the run at its pace,
		// not a thousand removals at its end.
		r.remove(id)
	}
	return cr
}

// compareConversation compares the source's turns with the replayed ones;
// the caller finishes the report (ConversationReport.Finish) once the
// turns carry all they will.
func (r *replayRun) compareConversation(cr replay.ConversationReport, src replay.Source, replayed []replay.Turn) replay.ConversationReport {
	for t := range src.Turns {
		var rep *replay.Turn
		if t < len(replayed) {
			rep = &replayed[t]
		}
		tr := replay.CompareTurn(t, &src.Turns[t], rep, src.Recorded)
		if rep == nil {
			tr.Counts.FailedTurns = 1
		}
		cr.Turns = append(cr.Turns, tr)
	}
	return cr
}

// turn runs one user message in conversation conv and waits for its run
// to settle; it returns how long that took and the run's outcome.
func (r *replayRun) turn(ctx context.Context, conv *mesh.Conversation, turnID, text string) (float64, *mesh.RunSummary, error) {
	if err := r.pace.wait(ctx); err != nil {
		return 0, nil, err
	}
	done := make(chan struct{})
	r.mu.Lock()
	r.waiting[turnID] = done
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, turnID)
		r.mu.Unlock()
	}()
	hdr := nats.Header{}
	hdr.Set(mesh.HeaderSessionID, conv.SessionID)
	start := time.Now()
	item := mesh.WorkItem{Kind: mesh.WorkTurn, Session: conv.ID, TurnID: turnID, Message: text}
	if err := workloop.Publish(ctx, r.js, r.ns, mesh.RoleReplay, r.name, item, hdr); err != nil {
		return 0, nil, err
	}
	timer := time.NewTimer(r.o.turnTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return float64(time.Since(start).Microseconds()) / 1000, nil, fmt.Errorf("the turn did not end within %v", r.o.turnTimeout)
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	e, err := r.res.Sessions.Get(ctx, conv.ID)
	if err != nil {
		return ms, nil, fmt.Errorf("read %s: %w", conv.ID, err)
	}
	head, err := store.DecodeHead(conv.ID, e.Value(), e.Revision())
	if err != nil {
		return ms, nil, err
	}
	if head.LastRun == nil || !head.LastRun.Covers(turnID) {
		return ms, nil, errors.New("the turn ended without an outcome")
	}
	return ms, head.LastRun, nil
}

// removeConversations removes the replay's conversations: heads,
// messages and events.
func (r *replayRun) removeConversations() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r.mu.Lock()
	made := r.made
	r.made = nil
	r.mu.Unlock()
	for _, id := range made {
		r.purge(ctx, id)
	}
}

// remove removes one conversation of the replay now, and forgets it.
func (r *replayRun) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r.purge(ctx, id)
	r.mu.Lock()
	for i, m := range r.made {
		if m == id {
			r.made = append(r.made[:i], r.made[i+1:]...)
			break
		}
	}
	r.mu.Unlock()
}

// purge removes conversation id's head, messages and events.
func (r *replayRun) purge(ctx context.Context, id string) {
	if err := r.sessions.Purge(ctx, id); err != nil {
		r.log.Warn().Err(err).Str("session", id).Msg("could not remove a replay's conversation")
	}
	if err := store.PurgeEvents(ctx, r.js, r.ns, id); err != nil {
		r.log.Warn().Err(err).Str("session", id).Msg("could not remove a replay's events")
	}
}

// publish writes the report where --out and --html say and stores it in
// the mesh: whole when it fits the bucket, else without the turns' texts.
func (r *replayRun) publish(ctx context.Context, rep *replay.Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if r.o.out != "" {
		if err := os.WriteFile(r.o.out, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if r.o.html != "" {
		f, err := os.Create(r.o.html)
		if err != nil {
			return fmt.Errorf("--html: %w", err)
		}
		err = replay.WriteHTML(f, rep)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--html: %w", err)
		}
	}
	stored, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if len(stored) > store.MaxReportBytes {
		if stored, err = json.Marshal(trimmed(rep)); err != nil {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return store.NewReplayStore(r.res.Replays).Put(sctx, r.id, stored)
}

// trimmed is rep without the turns' texts and call arguments, which the
// bucket has no room for; the counts stay whole.
func trimmed(rep *replay.Report) *replay.Report {
	t := *rep
	t.Trimmed = true
	t.Conversations = make([]replay.ConversationReport, len(rep.Conversations))
	for i, c := range rep.Conversations {
		c.Turns = nil
		t.Conversations[i] = c
	}
	return &t
}

// pacer spaces the starts of turns: at most rate a second (0: no limit).
type pacer struct {
	mu    sync.Mutex
	every time.Duration
	next  time.Time
}

func newPacer(rate float64) pacer {
	if rate <= 0 {
		return pacer{}
	}
	return pacer{every: time.Duration(float64(time.Second) / rate)}
}

// wait returns when the next start is due.
func (p *pacer) wait(ctx context.Context) error {
	if p.every == 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.every)
	p.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
