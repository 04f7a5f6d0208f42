package telemetry

// This file makes series exist at 0 before their first event. A counter
// born at 1 has no increase() at its birth, so an alert on the first
// failure would not fire, and a dashboard shows "no data" for what is
// zero. Each role calls the hooks here at start with the label values it
// knows then (its agents, models, servers, groups); label values met only
// later (tools, routes, event types) appear when first used.

// AgentQueue exposes agent's series: the work items it takes, by kind, the
// outcomes its runs end with, and its queue's redeliveries and give-ups.
func AgentQueue(role, agent string, kinds, outcomes []string) {
	for _, kind := range kinds {
		turnsStarted.WithLabelValues(agent, kind).Add(0)
		turnDuration.WithLabelValues(agent, kind)
	}
	for _, outcome := range outcomes {
		turnsFinished.WithLabelValues(agent, label(outcome)).Add(0)
	}
	WorkQueue(role, agent)
}

// WorkQueue exposes the redeliveries and give-ups of role's queue name.
func WorkQueue(role, name string) {
	workRedeliveries.WithLabelValues(role, name).Add(0)
	workMaxDelivered.WithLabelValues(role, name).Add(0)
}

// ModelEndpoint exposes the series of calls to model of provider, and its
// failures by each code it may fail with.
func ModelEndpoint(provider, model string, codes []string) {
	modelCalls.WithLabelValues(provider, model).Add(0)
	modelDuration.WithLabelValues(provider, model)
	for _, kind := range []string{TokensInput, TokensOutput, TokensCached} {
		modelTokens.WithLabelValues(provider, model, kind).Add(0)
	}
	modelCost.WithLabelValues(provider, model).Add(0)
	for _, code := range codes {
		modelErrors.WithLabelValues(provider, model, code).Add(0)
	}
	modelRetries.WithLabelValues(provider).Add(0)
	modelThrottle.WithLabelValues(provider).Add(0)
	modelWaiting.WithLabelValues(provider).Set(0)
	modelInFlight.WithLabelValues(provider).Set(0)
	modelLimit.WithLabelValues(provider)
}

// Conversations exposes the series of a process that reads and saves
// conversations in bucket.
func Conversations(bucket string) {
	kvConflicts.WithLabelValues(bucket).Add(0)
	kvFailures.WithLabelValues(bucket).Add(0)
	sessionLoad.WithLabelValues()
	for _, r := range SaveReasons() {
		sessionSaveFails.WithLabelValues(r).Add(0)
	}
	sessionSaveAlert.WithLabelValues().Add(0)
}

// ToolServer exposes the restarts of an MCP server a tool host runs.
func ToolServer(server string) { mcpRestarts.WithLabelValues(server).Add(0) }

// Approvals exposes an approver's series: approvals requested by each
// policy ("human" for a person's), decided by outcome, and none pending.
func Approvals(policies []string) {
	approvalsRequested.WithLabelValues("human").Add(0)
	for _, p := range policies {
		approvalsRequested.WithLabelValues(p).Add(0)
	}
	approvalsDecided.WithLabelValues("approved").Add(0)
	approvalsDecided.WithLabelValues("rejected").Add(0)
	approvalWait.WithLabelValues()
	approvalsPending.WithLabelValues().Set(0)
}

// Recoveries exposes a monitor's recovery actions, for every role it
// watches and every strategy, and degradation mode off.
func Recoveries(roles, strategies []string) {
	for _, role := range roles {
		for _, s := range strategies {
			recoveries.WithLabelValues(role, s).Add(0)
		}
	}
	degraded.WithLabelValues().Set(0)
}

// Supervised exposes the restarts of the children of `mesh up`, by role.
func Supervised(roles []string) {
	for _, role := range roles {
		restarts.WithLabelValues(role).Add(0)
	}
}

// Group exposes a group chat's rounds by each reason they may end with,
// and its speaker selections by each method.
func Group(group string, reasons, methods []string) {
	for _, r := range reasons {
		groupRounds.WithLabelValues(group, label(r)).Add(0)
	}
	for _, m := range methods {
		groupSelections.WithLabelValues(group, label(m)).Add(0)
	}
	groupSelectTime.WithLabelValues(group)
}

// Bridge exposes a bridge's series: its streams by dialect, the ratings,
// and the refusals by each limit.
func Bridge(dialects []string) {
	for _, d := range dialects {
		sseClients.WithLabelValues(d).Set(0)
		sseEventsSent.WithLabelValues(d).Add(0)
		sseCutOffs.WithLabelValues(d).Add(0)
	}
	for _, r := range []string{"like", "dislike", "other"} {
		feedback.WithLabelValues(r).Add(0)
	}
	for _, l := range []string{LimitRatePrincipal, LimitRateIP, LimitConversations, LimitActiveSessions, LimitStreamsPrincipal, LimitStreams} {
		limitRefusals.WithLabelValues(l).Add(0)
	}
	sessionRejections.WithLabelValues("principal").Add(0)
	sessionRejections.WithLabelValues("max_active_sessions").Add(0)
	limitErrors.WithLabelValues().Add(0)
	eventPropagation.WithLabelValues()
	eventsLate.WithLabelValues().Add(0)
}

// Tool exposes an agent's calls of a tool in the catalog, by each outcome.
func Tool(server, tool string) {
	for _, o := range []string{ToolOK, ToolError, ToolRefused, ToolUnavailable} {
		toolCalls.WithLabelValues(server, tool, o).Add(0)
	}
	toolDuration.WithLabelValues(server, tool)
}

// HostedTool exposes a tool host's calls of a tool it serves, by each
// outcome.
func HostedTool(server, tool string) {
	for _, o := range []string{ToolOK, ToolError, ToolRefused, ToolReplayed} {
		toolhostCalls.WithLabelValues(server, tool, o).Add(0)
	}
	toolhostDuration.WithLabelValues(server, tool)
}

// EventTypes exposes the events a process publishes, by each type.
func EventTypes(types []string) {
	for _, t := range types {
		eventsPublished.WithLabelValues(t).Add(0)
	}
}
