package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/sony/gobreaker/v2"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file holds the sub-agents reached over A2A: each entry of an a2a
// list becomes a tool the model can pick beside the MCP tools, with its
// agent card fetched and cached, and its calls guarded by a circuit
// breaker. delegate.go runs the calls within a turn.

// RemoteConfig tunes the calls to sub-agents.
type RemoteConfig struct {
	// HTTP sends the requests. Nil means a client of the agent's own; each
	// call is bounded by CallTimeout, not by the client.
	HTTP *http.Client
	// CallTimeout bounds one delegation, retries and waiting for the task to
	// finish included. Zero means 120s.
	CallTimeout time.Duration
	// Retries is how many times an attempt that met no answer, or a 5xx, is
	// made again. Zero means 2; -1 means none.
	Retries int
	// Backoff is the wait before the first retry, doubled for each next one.
	// Zero means 200ms.
	Backoff time.Duration
	// BreakerFailures is how many failed attempts in a row open a
	// sub-agent's circuit breaker. Zero means 5.
	BreakerFailures int
	// BreakerCooldown is how long an open breaker refuses calls before it
	// lets one through to probe. Zero means 30s.
	BreakerCooldown time.Duration
	// CardTTL is how long an agent card is used before it is fetched again.
	// Zero means 5 minutes.
	CardTTL time.Duration
	// CardRetry is how soon a card that could not be fetched is tried again
	// in the background. Zero means 15s.
	CardRetry time.Duration
	// PollInterval is the first wait between tasks/get polls of a task that
	// is still working when message/send answers; it doubles up to 2s. Zero
	// means 250ms.
	PollInterval time.Duration
}

func (c RemoteConfig) withDefaults() RemoteConfig {
	if c.HTTP == nil {
		c.HTTP = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 120 * time.Second
	}
	switch {
	case c.Retries == 0:
		c.Retries = 2
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.Backoff <= 0 {
		c.Backoff = 200 * time.Millisecond
	}
	if c.BreakerFailures <= 0 {
		c.BreakerFailures = 5
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = 30 * time.Second
	}
	if c.CardTTL <= 0 {
		c.CardTTL = 5 * time.Minute
	}
	if c.CardRetry <= 0 {
		c.CardRetry = 15 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	return c
}

// cardFetchTimeout bounds one background fetch of an agent card.
const cardFetchTimeout = 10 * time.Second

// remoteServerPrefix marks a call to a sub-agent: its ToolCall.Server (and
// its approval's Server) is "a2a:<name>". MCP server names cannot hold ':',
// so the two never mix.
const remoteServerPrefix = "a2a:"

// remoteName returns the sub-agent a call goes to, if it goes to one.
func remoteName(call mesh.ToolCall) (string, bool) {
	name, ok := strings.CutPrefix(call.Server, remoteServerPrefix)
	return name, ok && name != ""
}

// remoteFunctionName is the name the model calls a sub-agent by: a2a_<name>,
// kept within maxFunctionName and the characters every model API takes.
func remoteFunctionName(name string) string { return functionName("a2a_" + name) }

// messageSchema is the parameters of every sub-agent tool.
var messageSchema = json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"The task for the agent in plain words, with everything it needs to know."}},"required":["message"]}`)

// remotePool holds one remoteAgent per configured sub-agent (by name and
// URL), so that every step offering it shares its card and its breaker.
type remotePool struct {
	cfg    RemoteConfig
	client *a2a.Client
	log    zerolog.Logger

	mu     sync.Mutex
	agents map[string]*remoteAgent // by name + "\x00" + url
	order  []*remoteAgent
}

func newRemotePool(cfg RemoteConfig, log zerolog.Logger) *remotePool {
	cfg = cfg.withDefaults()
	return &remotePool{cfg: cfg, client: &a2a.Client{HTTP: cfg.HTTP}, log: log, agents: map[string]*remoteAgent{}}
}

// set returns the sub-agents of one a2a list (the agent's, or a tree
// step's), creating those not seen yet.
func (p *remotePool) set(list []config.A2AAgent) *remoteSet {
	s := &remoteSet{byFunc: map[string]*remoteAgent{}, byName: map[string]*remoteAgent{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range list {
		key := c.Name + "\x00" + c.URL
		r := p.agents[key]
		if r == nil {
			r = p.newRemote(c)
			p.agents[key] = r
			p.order = append(p.order, r)
		}
		if s.byName[c.Name] != nil {
			continue // config validation refuses duplicates; keep the first
		}
		s.list = append(s.list, r)
		s.byFunc[r.fn] = r
		s.byName[c.Name] = r
	}
	return s
}

func (p *remotePool) all() []*remoteAgent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*remoteAgent(nil), p.order...)
}

// refresh keeps the cards of every sub-agent fresh until ctx ends: a card is
// fetched again after CardTTL, a missing one every CardRetry.
func (p *remotePool) refresh(ctx context.Context) {
	tick := min(p.cfg.CardRetry, p.cfg.CardTTL)
	for {
		for _, r := range p.all() {
			if r.cardDue(time.Now()) {
				fctx, cancel := context.WithTimeout(ctx, cardFetchTimeout)
				_, _ = r.fetchCard(fctx)
				cancel()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(tick):
		}
	}
}

// remoteSet is the sub-agents one llm step offers.
type remoteSet struct {
	list   []*remoteAgent
	byFunc map[string]*remoteAgent
	byName map[string]*remoteAgent
}

// remoteAgent is one sub-agent: its configuration, its cached card and the
// breaker of its endpoint.
type remoteAgent struct {
	cfg    config.A2AAgent
	fn     string
	pool   *remotePool
	log    zerolog.Logger
	gate   *gobreaker.TwoStepCircuitBreaker[struct{}]
	client *a2a.Client

	fetchMu sync.Mutex // one fetch at a time

	mu        sync.Mutex
	card      *a2a.AgentCard
	fetchedAt time.Time // of card
	failedAt  time.Time // of the last failed fetch
	cardErr   error
}

// Outcomes reported to a breaker.
var (
	errRemoteFailure  = errors.New("sub-agent failure")
	errRemoteExcluded = errors.New("not the sub-agent's fault")
)

func (p *remotePool) newRemote(c config.A2AAgent) *remoteAgent {
	failures := uint32(p.cfg.BreakerFailures)
	r := &remoteAgent{cfg: c, fn: remoteFunctionName(c.Name), pool: p, client: p.client,
		log: p.log.With().Str("sub_agent", c.Name).Logger()}
	r.gate = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "a2a " + c.Name,
		MaxRequests: 1,
		Timeout:     p.cfg.BreakerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errRemoteExcluded) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			r.log.Warn().Str("from", from.String()).Str("to", to.String()).Msg("sub-agent circuit breaker")
		},
	})
	return r
}

// tool is the sub-agent as the model sees it.
func (r *remoteAgent) tool() llm.Tool {
	return llm.Tool{Name: r.fn, Description: r.description(), Parameters: messageSchema, Destructive: r.cfg.IsDestructive()}
}

// maxToolDescription bounds a sub-agent tool's description.
const maxToolDescription = 1024

// description says what the sub-agent does: the configured description,
// else the card's, then the card's skills.
func (r *remoteAgent) description() string {
	r.mu.Lock()
	card := r.card
	r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "Delegate a task to the agent %s", r.cfg.Name)
	desc := strings.TrimSpace(r.cfg.Description)
	if desc == "" && card != nil {
		desc = strings.TrimSpace(card.Description)
	}
	if desc != "" {
		b.WriteString(": ")
		b.WriteString(desc)
	}
	if card != nil && len(card.Skills) > 0 {
		var skills []string
		for _, s := range card.Skills {
			name := s.Name
			if name == "" {
				name = s.ID
			}
			if s.Description != "" && s.Description != name {
				name += " (" + s.Description + ")"
			}
			skills = append(skills, name)
		}
		if !strings.HasSuffix(b.String(), ".") {
			b.WriteString(".")
		}
		b.WriteString(" Skills: " + strings.Join(skills, "; ") + ".")
	}
	out := b.String()
	if rs := []rune(out); len(rs) > maxToolDescription {
		out = string(rs[:maxToolDescription-1]) + "…"
	}
	return out
}

// cardDue reports whether the background refresh should fetch the card.
func (r *remoteAgent) cardDue(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.card != nil && now.Sub(r.fetchedAt) < r.pool.cfg.CardTTL {
		return false
	}
	return r.failedAt.IsZero() || now.Sub(r.failedAt) >= r.pool.cfg.CardRetry
}

// cachedCard returns the card if one was fetched, even a stale one.
func (r *remoteAgent) cachedCard() *a2a.AgentCard {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.card
}

// fetchCard reads the card now. A card that cannot be fetched leaves the
// last good one in place.
func (r *remoteAgent) fetchCard(ctx context.Context) (*a2a.AgentCard, error) {
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	card, err := r.client.FetchCard(ctx, r.cfg.URL)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.cardErr == nil {
			r.log.Warn().Err(err).Str("url", r.cfg.URL).Msg("agent card unavailable")
		}
		r.failedAt, r.cardErr = time.Now(), err
		return r.card, err
	}
	if r.card == nil || r.cardErr != nil {
		r.log.Info().Str("url", r.cfg.URL).Str("endpoint", a2a.CardEndpoint(card, r.cfg.URL)).Str("card_name", card.Name).Msg("agent card fetched")
	}
	r.card, r.fetchedAt, r.cardErr = card, time.Now(), nil
	return card, nil
}

// endpoint is the JSON-RPC address of the sub-agent, from its card. When
// there is no card yet it is fetched first, through the breaker (an agent
// whose card does not answer is as down as one whose endpoint does not) and
// within cardFetchTimeout.
func (r *remoteAgent) endpoint(ctx context.Context) (string, error) {
	if card := r.cachedCard(); card != nil {
		return a2a.CardEndpoint(card, r.cfg.URL), nil
	}
	done, err := r.gate.Allow()
	if err != nil {
		return "", classify(ctx, err)
	}
	fctx, cancel := context.WithTimeout(ctx, cardFetchTimeout)
	card, err := r.fetchCard(fctx)
	cancel()
	switch {
	case card != nil:
		done(nil)
		return a2a.CardEndpoint(card, r.cfg.URL), nil
	case a2a.Transient(ctx, err):
		done(errRemoteFailure)
	default:
		done(errRemoteExcluded)
	}
	return "", &remoteError{kind: remoteUnavailable, err: fmt.Errorf("agent card: %w", err)}
}

// remoteOutcome is what a sub-agent answered, as a turn keeps it (and the
// calls bucket records it).
type remoteOutcome struct {
	// State is the task's state; empty when the answer was a message.
	State     a2a.TaskState `json:"state,omitempty"`
	TaskID    string        `json:"task_id,omitempty"`
	ContextID string        `json:"context_id,omitempty"`
	// Text is the task's artifacts (else its status message), or the
	// message's text.
	Text string `json:"text"`
	// Approval describes what an input-required task waits for.
	Approval string `json:"approval,omitempty"`
	// Error is the failure of the call, when it failed: what the model read.
	Error string `json:"error,omitempty"`
}

// Kinds of remote failures, for the texts the model reads.
const (
	remoteUnavailable = "unavailable"
	remoteRefused     = "refused"
	remoteAnswerError = "error"
	remoteUnreadable  = "unreadable"
)

// remoteError is a call to a sub-agent that got no usable answer.
type remoteError struct {
	kind string
	err  error
}

func (e *remoteError) Error() string { return e.err.Error() }
func (e *remoteError) Unwrap() error { return e.err }

// classify wraps a client error by what it means for the caller.
func classify(ctx context.Context, err error) *remoteError {
	var re *remoteError
	if errors.As(err, &re) {
		return re
	}
	var se *a2a.StatusError
	var rpc *a2a.Error
	switch {
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		return &remoteError{kind: remoteUnavailable, err: fmt.Errorf("circuit breaker open after repeated failures: %w", err)}
	case ctx.Err() != nil:
		return &remoteError{kind: remoteUnavailable, err: fmt.Errorf("no answer in time: %w", err)}
	case errors.As(err, &rpc):
		return &remoteError{kind: remoteAnswerError, err: err}
	case errors.As(err, &se) && !a2a.Transient(ctx, err):
		return &remoteError{kind: remoteRefused, err: err}
	case a2a.Transient(ctx, err):
		return &remoteError{kind: remoteUnavailable, err: err}
	}
	return &remoteError{kind: remoteUnreadable, err: err}
}

// text is what the model reads of a failed call to the sub-agent name.
func (e *remoteError) text(name string) string {
	switch e.kind {
	case remoteRefused:
		return fmt.Sprintf("sub-agent %s refused the call: %v", name, e.err)
	case remoteAnswerError:
		return fmt.Sprintf("sub-agent %s answered with an error: %v", name, e.err)
	case remoteUnreadable:
		return fmt.Sprintf("sub-agent %s sent an answer that could not be read: %v", name, e.err)
	}
	return fmt.Sprintf("sub-agent %s unavailable: %v", name, e.err)
}

// attempt runs one request through the breaker, retrying transient failures
// with exponential backoff.
func (r *remoteAgent) attempt(ctx context.Context, do func(context.Context) error) error {
	wait := r.pool.cfg.Backoff
	for try := 0; ; try++ {
		done, err := r.gate.Allow()
		if err != nil {
			return classify(ctx, err)
		}
		err = do(ctx)
		switch {
		case err == nil:
			done(nil)
			return nil
		case a2a.Transient(ctx, err):
			done(errRemoteFailure)
		default:
			done(errRemoteExcluded)
			return classify(ctx, err)
		}
		if try >= r.pool.cfg.Retries {
			return classify(ctx, err)
		}
		r.log.Debug().Err(err).Int("attempt", try+1).Dur("wait", wait).Msg("sub-agent call failed; retrying")
		select {
		case <-ctx.Done():
			return classify(ctx, err)
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// send makes a message/send to the sub-agent and waits for a state worth
// reporting: a message, or a task that is finished or waits for input.
func (r *remoteAgent) send(ctx context.Context, hdr http.Header, params a2a.SendParams) (*remoteOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, r.pool.cfg.CallTimeout)
	defer cancel()
	if r.gate.State() == gobreaker.StateOpen {
		return nil, classify(ctx, gobreaker.ErrOpenState)
	}
	ep, err := r.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	var res *a2a.SendResult
	if err := r.attempt(ctx, func(ctx context.Context) error {
		var err error
		res, err = r.client.SendMessage(ctx, ep, params, hdr)
		return err
	}); err != nil {
		return nil, err
	}
	if res.Message != nil {
		return &remoteOutcome{Text: res.Message.Text(), ContextID: res.Message.ContextID}, nil
	}
	return r.settle(ctx, ep, hdr, res.Task)
}

// getTask reads a task's state with tasks/get, waiting like send does.
func (r *remoteAgent) getTask(ctx context.Context, hdr http.Header, taskID string) (*remoteOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, r.pool.cfg.CallTimeout)
	defer cancel()
	ep, err := r.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	var task *a2a.Task
	if err := r.attempt(ctx, func(ctx context.Context) error {
		var err error
		task, err = r.client.GetTask(ctx, ep, a2a.TaskQueryParams{ID: taskID}, hdr)
		return err
	}); err != nil {
		return nil, err
	}
	return r.settle(ctx, ep, hdr, task)
}

// settle polls a task that is still submitted or working until it finishes,
// waits for input, or ctx ends.
func (r *remoteAgent) settle(ctx context.Context, ep string, hdr http.Header, task *a2a.Task) (*remoteOutcome, error) {
	wait := r.pool.cfg.PollInterval
	for !settled(task.Status.State) {
		select {
		case <-ctx.Done():
			return nil, &remoteError{kind: remoteUnavailable, err: fmt.Errorf("task %s still %s after %v", task.ID, task.Status.State, r.pool.cfg.CallTimeout)}
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
		if err := r.attempt(ctx, func(ctx context.Context) error {
			t, err := r.client.GetTask(ctx, ep, a2a.TaskQueryParams{ID: task.ID}, hdr)
			if err == nil {
				task = t
			}
			return err
		}); err != nil {
			return nil, err
		}
	}
	out := &remoteOutcome{State: task.Status.State, TaskID: task.ID, ContextID: task.ContextID, Text: task.Text()}
	if task.Status.State == a2a.StateInputRequired {
		out.Approval = approvalText(task.Status.Message)
		out.Text = task.Status.Message.Text()
	}
	return out, nil
}

// settled reports whether a task's state is worth reporting: finished, or
// waiting for the caller.
func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.StateInputRequired || s == a2a.StateAuthRequired
}

// approvalText describes what an input-required task waits for: the
// description of an approval in a data part ({"description": …} or
// {"approval": {"description": …}}), else the message's text.
func approvalText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	for _, p := range m.Parts {
		if p.Data == nil {
			continue
		}
		if d, ok := p.Data["description"].(string); ok && d != "" {
			return d
		}
		if ap, ok := p.Data["approval"].(map[string]any); ok {
			if d, ok := ap["description"].(string); ok && d != "" {
				return d
			}
		}
	}
	var texts []string
	for _, p := range m.Parts {
		if p.Kind == "text" && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	if len(texts) > 0 {
		return strings.Join(texts, "\n")
	}
	return m.Text()
}
