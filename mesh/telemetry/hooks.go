package telemetry

import (
	"context"
	"strconv"
	"time"
)

// This file is the hooks roles call, one line at the place where a thing
// happens. Each takes only bounded values; "" becomes "none" so that an
// empty label never hides a series.

func label(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// SetBuild records the version and role of this process (mesh_build_info),
// and exposes its mesh_shutdown_duration_seconds at 0.
func SetBuild(version, role string) {
	buildInfo.WithLabelValues(version, role).Set(1)
	shutdownTook.WithLabelValues().Set(0)
}

// ShutdownTook records how long the process took to stop.
func ShutdownTook(d time.Duration) { shutdownTook.WithLabelValues().Set(d.Seconds()) }

// WatchBreakers makes mesh_breaker_state report states(), read at each
// scrape: breaker name to "closed", "half-open" or "open".
func WatchBreakers(states func() map[string]string) {
	breakers.mu.Lock()
	breakers.states = states
	breakers.mu.Unlock()
}

// WatchHealth makes mesh_health_status report status() (0 healthy,
// 1 degraded, 2 unhealthy) and mesh_conversations report sessions()
// (conversations by status), both read at each scrape. Nil stops either.
func WatchHealth(status func() float64, sessions func() map[string]int) {
	health.mu.Lock()
	health.status, health.sessions = status, sessions
	health.mu.Unlock()
}

// TurnStarted counts a work item an agent began to run (kind: turn,
// resume, step) and returns the function that records its duration.
func TurnStarted(agent, kind string) (done func(context.Context)) {
	turnsStarted.WithLabelValues(agent, kind).Inc()
	start := time.Now()
	return func(ctx context.Context) {
		observe(ctx, turnDuration.WithLabelValues(agent, kind), time.Since(start).Seconds())
	}
}

// TurnFinished counts a run an agent ended with outcome.
func TurnFinished(agent, outcome string) { turnsFinished.WithLabelValues(agent, label(outcome)).Inc() }

// Kinds of tokens of mesh_model_tokens_total. Cached and cache_write
// tokens are parts of the input tokens, counted apart too.
const (
	TokensInput      = "input"
	TokensOutput     = "output"
	TokensCached     = "cached"
	TokensCacheWrite = "cache_write"
)

// Tokens are the tokens of one model call, by kind.
type Tokens struct{ Input, Output, Cached, CacheWrite int }

// ModelCall records one model call: its duration, the tokens it used and,
// when code is not empty, its failure. ctx's span is the duration's
// exemplar.
func ModelCall(ctx context.Context, provider, model string, d time.Duration, tok Tokens, code string) {
	modelCalls.WithLabelValues(provider, model).Inc()
	observe(ctx, modelDuration.WithLabelValues(provider, model), d.Seconds())
	for _, k := range [...]struct {
		kind string
		n    int
	}{{TokensInput, tok.Input}, {TokensOutput, tok.Output}, {TokensCached, tok.Cached}, {TokensCacheWrite, tok.CacheWrite}} {
		if k.n > 0 {
			modelTokens.WithLabelValues(provider, model, k.kind).Add(float64(k.n))
		}
	}
	if code != "" {
		modelErrors.WithLabelValues(provider, model, code).Inc()
	}
}

// ModelCost adds what a model call cost at the configured prices.
func ModelCost(provider, model string, cost float64) {
	if cost > 0 {
		modelCost.WithLabelValues(provider, model).Add(cost)
	}
}

// ModelCapacity records a provider endpoint's calls waiting for capacity,
// its calls in flight and its bound of calls in flight (0: none).
func ModelCapacity(provider string, waiting, inFlight, limit int) {
	modelWaiting.WithLabelValues(provider).Set(float64(waiting))
	modelInFlight.WithLabelValues(provider).Set(float64(inFlight))
	modelLimit.WithLabelValues(provider).Set(float64(limit))
}

// ModelThrottled counts an attempt the provider answered with a rate limit.
func ModelThrottled(provider string) { modelThrottle.WithLabelValues(provider).Inc() }

// ModelRetry counts an attempt of a model call that is tried again.
func ModelRetry(provider string) { modelRetries.WithLabelValues(provider).Inc() }

// Outcomes of tool calls.
const (
	ToolOK          = "ok"
	ToolError       = "error"       // the tool's own failure (isError), or the call failed
	ToolRefused     = "refused"     // approval missing or invalid, or rejected by a person
	ToolUnavailable = "unavailable" // no tool host answered, or its breaker is open
	ToolReplayed    = "replayed"    // a tool host answered from mesh_calls
)

// ToolCall records a tool call the agent made.
func ToolCall(ctx context.Context, server, tool, outcome string, d time.Duration) {
	toolCalls.WithLabelValues(server, tool, outcome).Inc()
	observe(ctx, toolDuration.WithLabelValues(server, tool), d.Seconds())
}

// ToolhostCall records a call a tool host served; d is zero when the MCP
// server was not called.
func ToolhostCall(ctx context.Context, server, tool, outcome string, d time.Duration) {
	toolhostCalls.WithLabelValues(server, tool, outcome).Inc()
	if d > 0 {
		observe(ctx, toolhostDuration.WithLabelValues(server, tool), d.Seconds())
	}
}

// MCPRestart counts a restart of an MCP server.
func MCPRestart(server string) { mcpRestarts.WithLabelValues(server).Inc() }

// ApprovalRequested counts an approval recorded; policy is empty for one a
// person decides.
func ApprovalRequested(policy string) {
	if policy == "" {
		policy = "human"
	}
	approvalsRequested.WithLabelValues(policy).Inc()
}

// ApprovalDecided counts a decision on a pending approval, waited for wait.
func ApprovalDecided(approved bool, wait time.Duration) {
	outcome := "rejected"
	if approved {
		outcome = "approved"
	}
	approvalsDecided.WithLabelValues(outcome).Inc()
	approvalWait.WithLabelValues().Observe(wait.Seconds())
}

// SetApprovalsPending sets the number of approvals waiting for a decision
// and when the oldest of them was asked (zero when none waits).
func SetApprovalsPending(n int, oldest time.Time) {
	approvalsPending.WithLabelValues().Set(float64(n))
	oldestPending.Store(oldest.UnixNano())
	if oldest.IsZero() {
		oldestPending.Store(0)
	}
}

// WorkDelivered counts a redelivery of a work item of role's queue name
// (attempt 2 or later).
func WorkDelivered(role, name string, attempt int) {
	if attempt > 1 {
		workRedeliveries.WithLabelValues(role, name).Inc()
	}
}

// WorkGivenUp counts a work item failed after its last delivery.
func WorkGivenUp(role, name string) { workMaxDelivered.WithLabelValues(role, name).Inc() }

// SetWorkPending sets the pending count of a work consumer.
func SetWorkPending(consumer string, n uint64) { workPending.WithLabelValues(consumer).Set(float64(n)) }

// EventPublished counts an event published, by AG-UI type.
func EventPublished(typ string) { eventsPublished.WithLabelValues(typ).Inc() }

// SSEOpened counts an open stream of dialect; call the function it returns
// when the stream ends.
func SSEOpened(dialect string) (closed func()) {
	g := sseClients.WithLabelValues(dialect)
	g.Inc()
	return g.Dec
}

// SSESent counts an event written to a client of dialect.
func SSESent(dialect string) { sseEventsSent.WithLabelValues(dialect).Inc() }

// SSECutOff counts a stream cut off for a slow client.
func SSECutOff(dialect string) { sseCutOffs.WithLabelValues(dialect).Inc() }

// KVConflict counts a compare-and-set that met a newer revision.
func KVConflict(bucket string) { kvConflicts.WithLabelValues(bucket).Inc() }

// KVFailure counts a compare-and-set write that failed for good.
func KVFailure(bucket string) { kvFailures.WithLabelValues(bucket).Inc() }

// SessionLoaded records the time a conversation took to read.
func SessionLoaded(d time.Duration) { sessionLoad.WithLabelValues().Observe(d.Seconds()) }

// EventPropagated records d, the time a live event took from its storing
// to the bridge's followers, and reports whether it took more than late
// (counted as a violation).
func EventPropagated(d, late time.Duration) bool {
	eventPropagation.WithLabelValues().Observe(d.Seconds())
	if d <= late {
		return false
	}
	eventsLate.WithLabelValues().Inc()
	return true
}

// Reasons of failed saves (mesh_session_save_failures_total).
const (
	SaveConflict    = "conflict"    // a newer revision on every try
	SaveTimeout     = "timeout"     // no answer in time
	SaveUnavailable = "unavailable" // NATS or JetStream out of reach
	SaveError       = "error"       // anything else
)

// SaveReasons are the reasons a save may fail with.
func SaveReasons() []string { return []string{SaveConflict, SaveTimeout, SaveUnavailable, SaveError} }

// SessionSaveFailed counts a save of a conversation that failed, by
// reason (one of SaveReasons; anything else counts as error).
func SessionSaveFailed(reason string) {
	switch reason {
	case SaveConflict, SaveTimeout, SaveUnavailable:
	default:
		reason = SaveError
	}
	sessionSaveFails.WithLabelValues(reason).Inc()
}

// Feedback counts a user's rating of a message; a rating that is not like
// or dislike is counted as other.
func Feedback(rating string) {
	if rating != "like" && rating != "dislike" {
		rating = "other"
	}
	feedback.WithLabelValues(rating).Inc()
}

// SessionSaveAlert counts an alert raised by a save that failed three
// times in a row.
func SessionSaveAlert() { sessionSaveAlert.WithLabelValues().Inc() }

// HeartbeatMissed counts a node found silent.
func HeartbeatMissed(role string) { heartbeatMisses.WithLabelValues(role).Inc() }

// NodesWatched exposes a monitor's counters at 0 for every role it may
// find silent and every reason it may record one down: a series born at 1
// has no increase(), so an alert on the first node down would not fire.
func NodesWatched(roles, reasons []string) {
	for _, role := range roles {
		heartbeatMisses.WithLabelValues(role).Add(0)
		for _, reason := range reasons {
			nodesDown.WithLabelValues(role, label(reason)).Add(0)
		}
	}
}

// NodeDown counts a node recorded down.
func NodeDown(role, reason string) { nodesDown.WithLabelValues(role, label(reason)).Inc() }

// Recovery counts a recovery strategy applied to a node of role.
func Recovery(role, strategy string) { recoveries.WithLabelValues(role, strategy).Inc() }

// ProcessRestarted counts a child of mesh up started again.
func ProcessRestarted(role string) { restarts.WithLabelValues(role).Inc() }

// SetDegraded records whether degradation mode is on.
func SetDegraded(on bool) {
	v := 0.0
	if on {
		v = 1
	}
	degraded.WithLabelValues().Set(v)
}

// GroupRound counts a round of a group chat that ended, by reason.
func GroupRound(group, reason string) { groupRounds.WithLabelValues(group, label(reason)).Inc() }

// SpeakerSelected records the choice of a speaker and the time it took.
func SpeakerSelected(group, method string, d time.Duration) {
	groupSelections.WithLabelValues(group, label(method)).Inc()
	groupSelectTime.WithLabelValues(group).Observe(d.Seconds())
}

// HTTPRequest records a request the bridge answered; route is the pattern
// it matched ("" for none).
func HTTPRequest(ctx context.Context, route string, code int, d time.Duration) {
	route = label(route)
	httpRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	observe(ctx, httpDuration.WithLabelValues(route), d.Seconds())
}
