package telemetry

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
)

// Namespace prefixes every metric of the mesh.
const Namespace = "mesh"

// registry holds this process's collectors: the mesh's, and the Go
// runtime's and process's (CPU seconds, resident memory, open files).
var registry = prometheus.NewRegistry()

// Registry is the registry of this process's collectors.
func Registry() *prometheus.Registry { return registry }

// durations are the buckets of latency histograms, 5 ms to 5 min: turns
// and model calls take seconds, KV and tool calls milliseconds.
var durations = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// names are the metrics this package defines, by full name.
var names = map[string]Metric{}

// Names are the metrics this package defines, by full name, with their
// type ("counter", "gauge", "histogram") and labels: the list
// docs/observability.md's table and deploy/'s rules and dashboard are
// checked against. The map is a copy.
func Names() map[string]Metric { return maps.Clone(names) }

// Metric describes one metric of [Names].
type Metric struct {
	Type   string
	Help   string
	Labels []string
}

func define(name, typ, help string, labels []string) {
	names[Namespace+"_"+name] = Metric{Type: typ, Help: help, Labels: labels}
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	define(name, "counter", help, labels)
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	registry.MustRegister(c)
	return c
}

func gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	define(name, "gauge", help, labels)
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	registry.MustRegister(g)
	return g
}

func histogram(name, help string, labels ...string) *prometheus.HistogramVec {
	return histogramOf(durations, name, help, labels...)
}

// fastDurations are the buckets of what takes milliseconds or less:
// an event's way from its stream to a follower.
var fastDurations = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}

func histogramOf(buckets []float64, name, help string, labels ...string) *prometheus.HistogramVec {
	define(name, "histogram", help, labels)
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
	registry.MustRegister(h)
	return h
}

// The collectors, by area. Roles call the hooks of hooks.go rather than
// these, so that label values stay bounded in one place.
var (
	buildInfo = gauge("build_info", "Always 1: the mesh version and role of this process.", "version", "role")

	turnsStarted  = counter("turns_started_total", "Work items an agent began to run, by kind (turn, resume, step).", "agent", "kind")
	turnsFinished = counter("turns_finished_total", "Runs an agent ended, by outcome (success, interrupt, cancelled, error).", "agent", "outcome")
	turnDuration  = histogram("turn_duration_seconds", "Time an agent spent on one work item, by kind.", "agent", "kind")

	modelCalls    = counter("model_calls_total", "Calls to a model, by provider and model.", "provider", "model")
	modelDuration = histogram("model_call_duration_seconds", "Duration of model calls, retries included.", "provider", "model")
	modelTokens   = counter("model_tokens_total", "Tokens of model calls by kind: input (every prompt token), output, and the parts of input the provider's prompt cache served (cached) or stored (cache_write).", "provider", "model", "kind")
	modelCost     = counter("model_cost_total", "What model calls cost at the configured prices (prices:), in their currency; stays 0 for a model without a price.", "provider", "model")
	modelErrors   = counter("model_errors_total", "Model calls that failed, by error code.", "provider", "model", "code")
	modelRetries  = counter("model_retries_total", "Attempts of a model call that were retried.", "provider")
	modelWaiting  = gauge("model_calls_waiting", "Model calls waiting for their provider's capacity (concurrency, rate, a rate limit's pause), by provider endpoint.", "provider")
	modelInFlight = gauge("model_calls_in_flight", "Model calls sent and not yet answered, by provider endpoint.", "provider")
	modelLimit    = gauge("model_concurrency_limit", "The bound of calls in flight to a provider endpoint: configured, or learnt from its rate limits; 0 when there is none.", "provider")
	modelThrottle = counter("model_throttled_total", "Model call attempts the provider answered with a rate limit (429), waited for and sent again.", "provider")

	toolCalls        = counter("tool_calls_total", "Tool calls an agent made, by outcome (ok, error, refused, unavailable).", "server", "tool", "outcome")
	toolDuration     = histogram("tool_call_duration_seconds", "Duration of tool calls as the agent saw them.", "server", "tool")
	toolhostCalls    = counter("toolhost_calls_total", "Calls a tool host served, by outcome (ok, error, refused, replayed).", "server", "tool", "outcome")
	toolhostDuration = histogram("toolhost_call_duration_seconds", "Duration of the MCP server's tools/call.", "server", "tool")
	mcpRestarts      = counter("mcp_server_restarts_total", "Restarts of an MCP server by its tool host.", "server")

	approvalsRequested = counter("approvals_requested_total", "Approvals recorded, by policy (human for those a person decides).", "policy")
	approvalsDecided   = counter("approvals_decided_total", "Approvals a person, a policy or a timeout decided, by outcome.", "outcome")
	approvalWait       = histogram("approval_decision_seconds", "Time from an approval's request to its decision (human ones).")
	approvalsPending   = gauge("approvals_pending", "Approvals waiting for a decision, as this approver sees the bucket.")
	oldestPending      atomic.Int64 // unix nanoseconds; 0 when none waits

	workRedeliveries = counter("work_redeliveries_total", "Work items delivered again (attempt 2 or later).", "role", "name")
	workMaxDelivered = counter("work_max_deliveries_total", "Work items given up after their last delivery.", "role", "name")
	workPending      = gauge("work_pending", "Work items waiting in a consumer of MESH_WORK, by consumer, as the bridge reads them every 15 s.", "consumer")

	eventsPublished  = counter("events_published_total", "AG-UI events published to MESH_EVENTS, by type.", "type")
	sseClients       = gauge("sse_clients", "Open event streams, by dialect.", "dialect")
	sseEventsSent    = counter("sse_events_sent_total", "Events written to SSE clients, by dialect.", "dialect")
	eventPropagation = histogramOf(fastDurations, "event_propagation_seconds", "Time from an event's storing in MESH_EVENTS to its hand-off to the bridge's live followers (replays not counted).")
	eventsLate       = counter("event_latency_violations_total", "Live events that took more than 10 ms from their storing to the bridge's followers.")
	sseCutOffs       = counter("sse_slow_consumer_cutoffs_total", "Streams cut off because their client fell too far behind, by dialect.", "dialect")

	kvConflicts      = counter("kv_cas_conflicts_total", "Compare-and-set writes that met a newer revision and were applied again.", "bucket")
	kvFailures       = counter("kv_update_failures_total", "Compare-and-set writes that failed for good.", "bucket")
	sessionLoad      = histogram("session_load_duration_seconds", "Time to read a conversation from mesh_sessions (session restore).")
	sessionSaveFails = counter("session_save_failures_total", "Saves of a conversation that failed, by reason (conflict, timeout, unavailable, error).", "reason")
	sessionSaveAlert = counter("session_save_alerts_total", "Alerts raised by saves of a run's outcome that failed three times in a row.")

	heartbeatMisses = counter("heartbeat_misses_total", "Nodes the monitor found silent past their deadline, by role.", "role")
	nodesDown       = counter("nodes_down_total", "Nodes the monitor recorded down, by role and reason (silent, zombie, restarted).", "role", "reason")
	recoveries      = counter("recoveries_total", "Recovery actions the monitor applied, by role and strategy.", "role", "strategy")
	restarts        = counter("process_restarts_total", "Children of mesh up started again after they exited, by role.", "role")
	degraded        = gauge("degraded", "1 while the mesh is in degradation mode.")
	shutdownTook    = gauge("shutdown_duration_seconds", "Time this process took to stop, from its signal to its connections closed; 0 while it runs (seen in the last OTLP push).")

	groupRounds     = counter("group_rounds_total", "Rounds of a group chat that ended, by reason.", "group", "reason")
	groupSelections = counter("group_speaker_selections_total", "Speakers chosen, by selection method.", "group", "method")
	groupSelectTime = histogram("group_speaker_selection_duration_seconds", "Time to choose the next speaker.", "group")

	feedback = counter("feedback_total", "Ratings users gave messages, by rating (like, dislike).", "rating")

	httpRequests = counter("http_requests_total", "HTTP requests the bridge answered, by route pattern and status code.", "route", "code")
	httpDuration = histogram("http_request_duration_seconds", "Duration of HTTP requests, by route pattern (streams last as long as their client).", "route")
)

func init() {
	define("approval_oldest_pending_seconds", "gauge", "Age of the oldest approval waiting for a decision; 0 when none waits.", nil)
	define("breaker_state", "gauge", "Circuit breakers of this process: 0 closed, 1 half-open, 2 open.", []string{"breaker"})
	define("conversations", "gauge", conversationsDesc.help, []string{"status"})
	define("health_status", "gauge", healthDesc.help, nil)
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), breakers, health,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "approval_oldest_pending_seconds",
			Help: "Age of the oldest approval waiting for a decision; 0 when none waits."}, func() float64 {
			at := oldestPending.Load()
			if at == 0 {
				return 0
			}
			return time.Since(time.Unix(0, at)).Seconds()
		}))
}

// breakerDesc is mesh_breaker_state: the state of each circuit breaker of
// the process, read from the role when scraped.
var breakerDesc = prometheus.NewDesc(Namespace+"_breaker_state",
	"Circuit breakers of this process: 0 closed, 1 half-open, 2 open.", []string{"breaker"}, nil)

// breakerCollector reports the states the role's function gives.
type breakerCollector struct {
	mu     sync.Mutex
	states func() map[string]string
}

var breakers = &breakerCollector{}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakerDesc }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.states
	c.mu.Unlock()
	if f == nil {
		return
	}
	for name, state := range f() {
		v := 0.0
		switch state {
		case "half-open":
			v = 1
		case "open":
			v = 2
		}
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, v, name)
	}
}

type describedGauge struct {
	desc *prometheus.Desc
	help string
}

func newDescribed(name, help string, labels ...string) describedGauge {
	return describedGauge{prometheus.NewDesc(Namespace+"_"+name, help, labels, nil), help}
}

// The bridge's view of the mesh, read from it when scraped.
var (
	conversationsDesc = newDescribed("conversations", "Conversations by status (queued, running, waiting_approval, completed…), as the bridge's index counts them: what /health reports as sessions.", "status")
	healthDesc        = newDescribed("health_status", "The mesh's health as /health decides it: 0 healthy, 1 degraded, 2 unhealthy.")
)

// healthCollector reports the bridge's functions: nothing until
// [WatchHealth] is called (only the bridge has a view of the mesh).
type healthCollector struct {
	mu       sync.Mutex
	status   func() float64
	sessions func() map[string]int
}

var health = &healthCollector{}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- conversationsDesc.desc
	ch <- healthDesc.desc
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	status, sessions := c.status, c.sessions
	c.mu.Unlock()
	if status != nil {
		ch <- prometheus.MustNewConstMetric(healthDesc.desc, prometheus.GaugeValue, status())
	}
	if sessions != nil {
		for s, n := range sessions() {
			ch <- prometheus.MustNewConstMetric(conversationsDesc.desc, prometheus.GaugeValue, float64(n), s)
		}
	}
}

// observe records v in h, with ctx's span as the exemplar when it is
// sampled: the OpenMetrics exposition then links a latency bucket to a
// trace that shows it.
func observe(ctx context.Context, h prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()})
			return
		}
	}
	h.Observe(v)
}
