package telemetry

// The bridge's limits (bridge/limit.go): what they refused, and the checks
// that could not be made.
var (
	limitRefusals     = counter("limit_refusals_total", "Requests the bridge refused for a limit, by limit (rate_principal, rate_ip, conversations, active_sessions, streams_principal, streams, budget).", "limit")
	sessionRejections = counter("session_rejections_total", "Messages refused because their conversation could not become active, by reason (principal, max_active_sessions).", "reason")
	limitErrors       = counter("limit_errors_total", "Limit checks that could not be made (NATS unreachable, a key contended) and let the request through.")
)

// Limits the bridge refuses for (mesh_limit_refusals_total).
const (
	LimitRatePrincipal    = "rate_principal"
	LimitRateIP           = "rate_ip"
	LimitConversations    = "conversations"
	LimitActiveSessions   = "active_sessions"
	LimitStreamsPrincipal = "streams_principal"
	LimitStreams          = "streams"
	// LimitBudget: a conversation's or a principal's daily model budget.
	LimitBudget = "budget"
)

// LimitRefused counts a request refused for limit (one of the Limit*
// constants); a refusal of a conversation's admission also counts as a
// session rejection (mesh_session_rejections_total).
func LimitRefused(limit string) {
	limitRefusals.WithLabelValues(limit).Inc()
	switch limit {
	case LimitConversations:
		sessionRejections.WithLabelValues("principal").Inc()
	case LimitActiveSessions:
		sessionRejections.WithLabelValues("max_active_sessions").Inc()
	}
}

// LimitFailed counts a limit check that failed and let its request through.
func LimitFailed() { limitErrors.WithLabelValues().Inc() }
