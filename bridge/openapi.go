package bridge

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/agentmesh/agentmesh/bridge/agui"
	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/mcpserver"
	"github.com/agentmesh/agentmesh/bridge/ops"
	"github.com/agentmesh/agentmesh/bridge/replays"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/replay"
)

// The OpenAPI 3.1 document of the bridge (GET /openapi.json), built from
// the router's own patterns (bridge.Routes), their access rules and the Go
// types the handlers encode, so that a route cannot be served undocumented
// (TestOpenAPICoversEveryRoute) and a schema cannot drift from its type.
// GET /docs renders it.

// OpenAPIPath is where the document is served.
const OpenAPIPath = "/openapi.json"

// operation documents one route.
type operation struct {
	summary, description string
	tag                  string
	query                []param
	// body is the JSON request body's schema; optional says it may be
	// left out.
	body     map[string]any
	optional bool
	example  any
	// responses by status; default is the error body for the rest.
	responses map[string]response
}

type param struct{ name, description, typ string }

// response is one answer: JSON with a schema, or another content type.
type response struct {
	description string
	schema      map[string]any
	contentType string // empty: application/json
	// event is the schema of each server-sent event's data, for a stream.
	event map[string]any
}

// Content types of the non-JSON answers.
const (
	contentSSE  = "text/event-stream"
	contentHTML = "text/html"
	contentText = "text/plain"
)

// operations documents every route by its pattern; s gives schemas of Go
// types.
func operations(s *schemas) map[string]operation {
	obj := func(props map[string]any, required ...string) map[string]any {
		o := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			o["required"] = required
		}
		return o
	}
	str := map[string]any{"type": "string"}
	arr := func(items map[string]any) map[string]any { return map[string]any{"type": "array", "items": items} }
	ok := func(desc string, schema map[string]any) map[string]response {
		return map[string]response{"200": {description: desc, schema: schema}}
	}
	stream := func(desc string) map[string]response {
		return map[string]response{"200": {description: desc, contentType: contentSSE}}
	}
	// eventStream is a stream whose events' data the component event
	// describes (agui.EventSchemas).
	eventStream := func(desc, event string) map[string]response {
		return map[string]response{"200": {description: desc + "; each event's data is one " + event + " (x-itemSchema)", contentType: contentSSE,
			event: map[string]any{"$ref": "#/components/schemas/" + event}}}
	}
	conv := s.ref(mesh.Conversation{})
	runAnswer := obj(map[string]any{
		"conversation": conv,
		"result":       s.ref(core.Result{}),
		"approval":     s.ref(mesh.Approval{}),
	}, "conversation")
	queued := obj(map[string]any{
		"conversation":    conv,
		"conversation_id": str, "run_id": str, "events_url": str,
		"status": map[string]any{"type": "string", "enum": []any{"queued", "running"}},
	}, "conversation_id", "run_id", "status")
	runResponses := func(okStatus string) map[string]response {
		return map[string]response{
			okStatus: {description: "the turn ran: the conversation as stored and the run's result", schema: runAnswer},
			"202":    {description: "the wait limit (http.wait_timeout) passed first: the turn goes on; follow events_url", schema: queued},
		}
	}
	messageBody := obj(map[string]any{
		"message": map[string]any{"type": "string", "description": "the user's message"},
		"files": arr(obj(map[string]any{
			"name":       str,
			"media_type": map[string]any{"type": "string", "description": "image/png, image/jpeg, image/gif, image/webp, application/pdf or text/plain (files.media_types)"},
			"data":       map[string]any{"type": "string", "contentEncoding": "base64", "description": "the bytes in base64 (at most files.max_bytes decoded)"},
			"url":        map[string]any{"type": "string", "format": "uri", "description": "or an https URL, passed on to the model's API as it is (never fetched by the mesh)"},
		}, "media_type")),
		"metadata": map[string]any{"type": "object", "description": "the client's own data for the user message (at most 4096 bytes as JSON), stored with it and returned as given in its messages[].metadata; the model does not see it"},
		"group":    map[string]any{"type": "string", "description": "POST /conversations only: make it a chat of this group (GET /groups)"},
		"agent":    map[string]any{"type": "string", "description": "POST /conversations only: a conversation with this agent (GET /agents); empty: the default agent"},
	})
	rpc := obj(map[string]any{"jsonrpc": map[string]any{"const": "2.0"}, "id": map[string]any{}, "method": str, "params": map[string]any{}}, "jsonrpc", "method")
	rpcAnswer := obj(map[string]any{"jsonrpc": map[string]any{"const": "2.0"}, "id": map[string]any{}, "result": map[string]any{}, "error": obj(map[string]any{"code": map[string]any{"type": "integer"}, "message": str, "data": map[string]any{}}, "code", "message")}, "jsonrpc")
	card := ok("the agent card (A2A 0.3 fields and 1.0 supportedInterfaces); skills only for an authenticated caller when authentication is on", s.ref(wire.AgentCard{}))
	a2aOp := func(who string) operation {
		return operation{tag: "A2A", summary: "A2A JSON-RPC endpoint of " + who,
			description: "message/send, message/stream (SSE), tasks/get, tasks/list, tasks/cancel, tasks/resubscribe in A2A 0.3 (no header) or 1.0 (A2A-Version: 1.0: SendMessage, GetTask …). A task is a conversation; refusals are JSON-RPC errors. The fork extension (capabilities.extensions of the card; activated by the A2A-Extensions header, X-A2A-Extensions in 0.3, and listed back): a message in a new context whose metadata[\"" + wire.ExtensionFork + "\"] is {from: contextId, and before or after (a message id) or event_seq} starts that context as a branch of the other.",
			body:        rpc, responses: map[string]response{
				"200": {description: "a JSON-RPC response, or for the streaming methods a stream of them as server-sent events", schema: rpcAnswer},
				// Refusals are JSON-RPC errors too, with the HTTP status of
				// their kind (401, 403, 404, 410, 429 …).
				"default": {description: "a JSON-RPC error: authentication (-32600), a task deleted or expired (-32050, 410), limits (-32029, -32053) …; or the bridge's JSON error when the path names no group or agent (404)",
					schema: map[string]any{"anyOf": []any{rpcAnswer, map[string]any{"$ref": "#/components/schemas/Error"}}}}}}
	}
	run := obj(map[string]any{"threadId": str, "runId": str, "messages": arr(map[string]any{}), "tools": arr(map[string]any{}), "context": arr(map[string]any{}),
		"state": map[string]any{}, "forwardedProps": map[string]any{"type": "object", "description": "group: a new thread is a chat of that group; agent: a conversation with that agent; action: regenerate (the run answers the thread's last user message again; messages may be empty) or feedback (with messageId, rating, comment: the run records it and carries CUSTOM feedback); fork: {from: thread id, and before or after (a message id) or event_seq}: the new thread is a branch of that thread at that point, and the run answers the last user message there"},
		"resume": arr(map[string]any{})}, "threadId", "runId")
	agent := obj(map[string]any{"card": str, "a2a": str}, "card", "a2a")
	agent["allOf"] = []any{s.ref(core.Agent{})}
	group := obj(map[string]any{"name": str, "description": str, "strategy": str, "max_turns": map[string]any{"type": "integer"},
		"participants": arr(obj(map[string]any{"agent": str, "description": str}, "agent"))}, "name")

	mcpOps := func(summary, description string, responses map[string]response, body map[string]any) operation {
		return operation{tag: "MCP", summary: summary, description: description, body: body, responses: responses}
	}
	return map[string]operation{
		"POST " + mcpserver.Path: mcpOps("MCP Streamable HTTP: a JSON-RPC message",
			"The Model Context Protocol server: initialize, tools/list, tools/call … (the mesh's agents and group chats as tools). The answer is JSON or a stream of server-sent events (progress, then the result); Mcp-Session-Id names the session, which belongs to the principal that opened it.",
			map[string]response{"200": {description: "the JSON-RPC response, or a stream of messages as server-sent events", schema: rpcAnswer},
				"202": {description: "a notification or response accepted", contentType: "text/plain"}}, rpc),
		"GET " + mcpserver.Path: mcpOps("MCP Streamable HTTP: the server's stream of a session",
			"Server-sent events the server sends outside a request (notifications); resumable with Last-Event-ID.",
			map[string]response{"200": {description: "the session's stream", contentType: "text/event-stream"}}, nil),
		"GET " + mcpserver.MetadataPath: mcpOps("OAuth Protected Resource Metadata of /mcp (RFC 9728)",
			"How an MCP client authenticates to /mcp: the resource, the bearer methods and, with JWTs, their issuer as the authorization server. A 401 of /mcp points here (WWW-Authenticate resource_metadata). Open.",
			ok("the resource's metadata", obj(map[string]any{"resource": str, "resource_name": str, "bearer_methods_supported": arr(str), "authorization_servers": arr(str)}, "resource")), nil),
		"DELETE " + mcpserver.Path: mcpOps("MCP Streamable HTTP: end a session", "Ends the session Mcp-Session-Id names.",
			map[string]response{"204": {description: "the session ended", contentType: "text/plain"}}, nil),
		"GET /health": {tag: "Operations", summary: "The mesh's health", description: "Healthy, degraded (1 to 3 nodes failed, or a breaker not closed) or unhealthy; live nodes by role, failed nodes, breakers, metrics endpoints, degradation. Open.",
			responses: ok("the mesh's health", s.ref(core.Health{}))},
		"GET /ready": {tag: "Operations", summary: "Readiness: can a turn run now?", description: "NATS, storage, a toolhost, an approver and an agent pulling work. 503 with Retry-After when not. Open.",
			responses: map[string]response{"200": {description: "ready", schema: obj(map[string]any{"ready": map[string]any{"type": "boolean"}, "checks": map[string]any{"type": "object", "additionalProperties": str}}, "ready", "checks")},
				"503": {description: "not ready: checks say what is missing", schema: obj(map[string]any{"ready": map[string]any{"type": "boolean"}, "checks": map[string]any{"type": "object", "additionalProperties": str}}, "ready", "checks")}}},
		"GET /tools": {tag: "Catalog", summary: "The tool catalog and the A2A sub-agents",
			responses: ok("tools with their JSON schemas and hints; sub-agents the model sees as tools a2a_<name>", obj(map[string]any{
				"tools":      arr(s.ref(mesh.ToolEntry{})),
				"sub_agents": arr(obj(map[string]any{"name": str, "url": str, "description": str, "destructive": map[string]any{"type": "boolean"}}, "name", "url", "destructive")),
			}, "tools", "sub_agents"))},
		"GET /groups": {tag: "Catalog", summary: "The group chats", responses: ok("the configured group chats", obj(map[string]any{"groups": arr(group)}, "groups"))},
		"GET /agents": {tag: "Catalog", summary: "The agent directory", description: "Every configured agent and every agent a live process serves, with its status (online, busy, offline), declared capabilities, models, tools, sub-agents, nodes and workers; an agent with enabled: false is not listed.",
			responses: ok("the agents, by name", obj(map[string]any{"agents": arr(agent)}, "agents"))},
		"GET /agents/{name}": {tag: "Catalog", summary: "One agent of the directory", responses: ok("the agent", agent)},
		"POST /conversations": {tag: "Conversations", summary: "Create a conversation, and run its first turn when a message is given",
			description: "With agent, a conversation with that agent; with group, a chat of that group. X-Session-ID sets the trace id; Authorization is forwarded to sub-agents.",
			body:        messageBody, optional: true, example: map[string]any{"message": "list all resources"},
			responses: func() map[string]response {
				r := runResponses("201")
				r["201"] = response{description: "created (and the first turn's result when a message was given)", schema: runAnswer}
				return r
			}()},
		"GET /conversations": {tag: "Conversations", summary: "A page of the caller's conversations, newest first", description: "Newest first by creation, with counts by status (admins: every conversation); next_cursor pages on. With watch=true the answer is Server-Sent Events (text/event-stream) instead: {\"type\":\"conversations\", …the same page} at once, then again whenever one of those conversations changes (a turn, a decision made elsewhere); an EventSource passes ?access_token=<stream token> (POST /auth/stream-token).",
			query: []param{{"limit", "conversations per page: 1 to 500, default 50", "integer"}, {"cursor", "next_cursor of the page before", "string"},
				{"status", "active, queued, running, waiting_approval, completed, deleted or expired", "string"}, {"owner", "admins: the conversations of this principal", "string"},
				{"watch", "true: follow the page as Server-Sent Events", "boolean"}},
			responses: ok("a page", obj(map[string]any{"conversations": arr(s.ref(mesh.ConversationSummary{})), "next_cursor": str,
				"summary": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "integer"}}}, "conversations", "summary"))},
		"DELETE /conversations/{id}": {tag: "Conversations", summary: "Delete a conversation (owner or admin)",
			description: "The conversation becomes a tombstone: its running turn is cancelled, its pending approvals are rejected, and every later request for it answers 410 deleted; its events stay readable until the stream's age limit. Deleting again answers the same tombstone.",
			query:       []param{{"purge", "true (admins only): also remove its events and stored data; afterwards it is not found", "boolean"}},
			responses:   ok("the tombstone and what the deletion stopped", s.ref(core.DeleteResult{}))},
		"GET /conversations/{id}": {tag: "Conversations", summary: "A conversation with a page of its messages",
			query:     []param{{"messages", "how many messages the page holds: 1 to 500, default 50", "integer"}, {"before", "the cursor of the page (messages_before of the newer page); default: the newest", "string"}},
			responses: ok("the conversation's head and a page of its messages", obj(map[string]any{"conversation": conv}, "conversation"))},
		"POST /conversations/{id}/messages": {tag: "Conversations", summary: "Send a message: run a turn and wait for its answer",
			description: "Idempotency-Key runs a message once. 409 while a turn runs or an approval waits (the body names the approval). 429 budget_exceeded once the conversation's model budget, or its owner's for the day, is spent: no model is called. The result's usage counts the turn's tokens (cached ones included) and cost; the conversation's usage those of every run since it began, by model.",
			body:        messageBody, example: map[string]any{"message": "add resource web-1 with value 7"}, responses: runResponses("200")},
		"GET /conversations/{id}/files/{file}": {tag: "Conversations", summary: "A file of a conversation (owner or admin)",
			description: "The bytes of a file a message carries (its files[].id), with its media type; 404 for anyone but the conversation's owner and admins.",
			responses:   map[string]response{"200": {description: "the file's bytes", contentType: "*/*"}}},
		"POST /conversations/{id}/cancel": {tag: "Conversations", summary: "Stop the running turn",
			responses: map[string]response{"202": {description: "the cancel was sent", schema: obj(map[string]any{"conversation_id": str, "cancel_requested": map[string]any{"type": "boolean"}}, "conversation_id", "cancel_requested")}}},
		"POST /conversations/{id}/regenerate": {tag: "Conversations", summary: "Regenerate the last answer: run a new turn from the last user message and wait for it",
			description: "The earlier answer (the messages after the last user message) is kept and listed in the conversation's superseded (message id → the regenerating turn): shown to people, no longer sent to models. 409 while a turn runs or an approval waits, or nothing_to_regenerate without a user message; 400 on a group chat.",
			body:        obj(map[string]any{"run_id": map[string]any{"type": "string", "description": "the new run's id; default: a new one"}}), optional: true, example: map[string]any{},
			responses: runResponses("200")},
		"POST /conversations/{id}/messages/{messageId}/feedback": {tag: "Conversations", summary: "Like or dislike a message",
			description: "One rating per principal per message, the latest wins; stored in the conversation's feedback (by message id), published as CUSTOM feedback {messageId, rating, comment?, by} on its events and counted in mesh_feedback_total. 404 message_not_found for a message the conversation does not hold; 400 for a rating that is not like or dislike or a comment over " + strconv.Itoa(mesh.MaxFeedbackComment) + " characters.",
			body:        obj(map[string]any{"rating": map[string]any{"type": "string", "enum": []any{mesh.RatingLike, mesh.RatingDislike}}, "comment": map[string]any{"type": "string", "maxLength": mesh.MaxFeedbackComment}}, "rating"),
			example:     map[string]any{"rating": "like", "comment": "exactly what I needed"},
			responses:   ok("the feedback recorded", obj(map[string]any{"conversation_id": str, "feedback": s.ref(mesh.Feedback{})}, "conversation_id", "feedback"))},
		"POST /conversations/{id}/fork": {tag: "Conversations", summary: "Fork a conversation: a branch of yours from a point of its history",
			description: "Exactly one point: after (the branch keeps every message up to and including this one), before (every message before this one) or event_seq (the conversation as it was once the event with this stream sequence, its SSE id, had been written). The branch is a new conversation of the caller: its history is the original's up to the point, shared with it (not copied), its state the one the original's state events had there, its agent or group the original's; it has no pending approval, queued or running turn (a tool call of its history left waiting for a decision is answered there as not run). The original is unchanged. With message (and files, metadata), the branch is sent that message at once and the answer is the turn's, as POST /conversations/{id}/messages gives it: before=<a user message> with message is that message edited. 400 for no point, two points, a message not in the conversation, an event out of range or of another conversation; 404 for a conversation the caller may not read; 409 for an event inside a run that had not ended; 410 events_expired when the events of the point are no longer kept (mesh.events_max_age).",
			body: obj(map[string]any{
				"after":     map[string]any{"type": "string", "description": "the id of the last message the branch keeps"},
				"before":    map[string]any{"type": "string", "description": "the id of the first message the branch does not keep"},
				"event_seq": map[string]any{"type": "integer", "minimum": 1, "description": "the stream sequence (SSE id) of an event of the conversation"},
				"message":   map[string]any{"type": "string", "description": "a user message sent on the branch at once"},
				"files":     messageBody["properties"].(map[string]any)["files"],
				"metadata":  messageBody["properties"].(map[string]any)["metadata"],
			}), example: map[string]any{"before": "0b7f6c1e-5a8d-4c1e-9f3a-2d4b6e8a0c13", "message": "add resource web-2 with value 9 instead"},
			responses: func() map[string]response {
				r := runResponses("200")
				forked := s.ref(mesh.ForkPoint{})
				for k, v := range r {
					sc := map[string]any{}
					for kk, vv := range v.schema {
						sc[kk] = vv
					}
					props := map[string]any{"id": str, "forked_from": forked}
					for kk, vv := range v.schema["properties"].(map[string]any) {
						props[kk] = vv
					}
					sc["properties"] = props
					v.schema = sc
					r[k] = v
				}
				r["201"] = response{description: "the branch, as GET /conversations/{id} gives it, with its id and where it was forked", schema: obj(map[string]any{
					"id": str, "conversation_id": str, "conversation": conv, "forked_from": forked}, "id", "conversation", "forked_from")}
				return r
			}()},
		"GET /conversations/{id}/branches": {tag: "Conversations", summary: "A conversation's family: the conversation its branches come from, and every branch you may read",
			description: "root is the first conversation of the family (forked_from followed up); branches lists every member the caller may read, the root first (when readable), then by creation time. 404 for a conversation the caller may not read.",
			responses:   ok("the family", s.ref(core.Family{}))},
		"GET /conversations/{id}/events": {tag: "Streams", summary: "A conversation's AG-UI events, replayed then live",
			description: "Server-sent events; each id is the event's stream sequence: Last-Event-ID or ?after= resumes after it.",
			query:       []param{{"after", "resume after this event id", "integer"}, {"access_token", "a stream token (POST /auth/stream-token) for clients that cannot send headers", "string"}},
			responses:   stream("AG-UI events (RUN_STARTED, TEXT_MESSAGE_*, TOOL_CALL_*, CUSTOM …), one per SSE event")},
		"GET /approvals": {tag: "Approvals", summary: "A page of the approvals of the caller's conversations (approvers: all), newest first",
			query: []param{{"limit", "approvals per page: 1 to 500, default 50", "integer"}, {"cursor", "next_cursor of the page before", "string"},
				{"status", "pending, approved or rejected", "string"}, {"owner", "approvers and admins: the approvals of this principal's conversations", "string"}},
			responses: ok("a page", obj(map[string]any{"approvals": arr(s.ref(mesh.Approval{})), "next_cursor": str}, "approvals"))},
		"GET /approvals/{uuid}": {tag: "Approvals", summary: "An approval", responses: ok("the approval", obj(map[string]any{"approval": s.ref(mesh.Approval{})}, "approval"))},
		"POST /approvals/{uuid}": {tag: "Approvals", summary: "Decide an approval and wait for the resumed turn",
			description: `{"approved": true}, {"action": "approve"} or {"answer": "yes"} (and their rejections, with an optional reason). A second decision is 409 with the approval.`,
			body:        obj(map[string]any{"approved": map[string]any{"type": "boolean"}, "action": str, "answer": str, "reason": str}), example: map[string]any{"approved": true},
			responses: runResponses("200")},
		"POST /agui": {tag: "Streams", summary: "The official AG-UI endpoint", description: "RunAgentInput in; the run's events out, RUN_STARTED to RUN_FINISHED (outcome interrupt on an approval; the next run's resume decides it).",
			body: run, responses: stream("AG-UI events of the run")},
		"POST /api/conversation": {tag: "Streams", summary: "The dotted dialect (message.start, tool_call.end, state.delta …)",
			description: `{"message", "sessionId"?} runs a turn; {"action": "regenerate", "sessionId"} answers the session's last user message again. A rating given meanwhile comes as message.feedback.`,
			body:        obj(map[string]any{"message": str, "sessionId": str, "action": map[string]any{"type": "string", "enum": []any{"regenerate"}}}), responses: eventStream("dotted-dialect events", "DottedEvent")},
		"POST /api/chat": {tag: "Streams", summary: "The simple dialect (log, text, data, done, error, ping)",
			body: obj(map[string]any{"message": str, "messages": arr(map[string]any{})}), responses: eventStream("simple-dialect events", "SimpleEvent")},
		"POST /api/ai-sdk": {tag: "Streams", summary: "The Vercel AI SDK UI message stream (useChat's default transport)",
			description: `useChat's body: the last user message runs; trigger "regenerate-message" (useChat's regenerate()) answers the chat's last user message again instead.`,
			body:        obj(map[string]any{"id": str, "messages": arr(map[string]any{}), "trigger": str, "messageId": str}, "messages"), responses: stream("UI message stream parts, then data: [DONE]")},
		"GET /agui/ws": {tag: "Streams", summary: "AG-UI over a WebSocket", description: "Upgrade to a WebSocket: RunAgentInput (forwardedProps.action regenerate or feedback as on POST /agui), reattach, follow, unfollow, cancel and feedback ({type: feedback, threadId, messageId, rating, comment?}) frames in; a connection_open frame (connectionId, heartbeatMs, maxThreads) first, then event frames with sequence ids and cursors out. Opened with a stream token (?access_token=), it only reads: run, cancel and feedback frames get an error frame read_only. It closes after a connection_close frame: 1008 token expired when its token expires, 1001 when the bridge stops.",
			responses: map[string]response{"101": {description: "switching protocols: the socket is open"}}},
		"GET " + wire.CardPath:                     {tag: "A2A", summary: "The default agent's A2A card", responses: card},
		"GET " + wire.LegacyCardPath:               {tag: "A2A", summary: "The default agent's A2A card (the 0.2 path)", responses: card},
		"POST /a2a":                                a2aOp("the default agent (every conversation that is not a group chat)"),
		"GET /groups/{name}" + wire.CardPath:       {tag: "A2A", summary: "A group chat's A2A card", responses: card},
		"GET /groups/{name}" + wire.LegacyCardPath: {tag: "A2A", summary: "A group chat's A2A card (the 0.2 path)", responses: card},
		"POST /groups/{name}/a2a":                  a2aOp("a group chat"),
		"GET /agents/{name}" + wire.CardPath:       {tag: "A2A", summary: "An agent's A2A card", responses: card},
		"GET /agents/{name}" + wire.LegacyCardPath: {tag: "A2A", summary: "An agent's A2A card (the 0.2 path)", responses: card},
		"POST /agents/{name}/a2a":                  a2aOp("an agent of the directory"),
		"GET /ops/approvals":                       {tag: "Operations", summary: "The approver's inbox: every pending approval, oldest first, and recent decisions", query: []param{{"history", "how many decided approvals to include", "integer"}}, responses: ok("the inbox", s.ref(ops.Inbox{}))},
		"GET /ops/approvals/events":                {tag: "Operations", summary: "The inbox, live", responses: stream("inbox snapshots as they change")},
		"GET /ops/mesh":                            {tag: "Operations", summary: "The mesh view: processes by role, breakers, work queues, degradation", responses: ok("the mesh view", s.ref(ops.View{}))},
		"GET /ops/mesh/events":                     {tag: "Operations", summary: "The mesh view, live", responses: stream("mesh views and system events as they change")},
		"GET /ops/stats":                           {tag: "Operations", summary: "Recent rates: turns, events, p95 turn time, approvals waiting", responses: ok("samples", obj(map[string]any{"tick_ms": map[string]any{"type": "integer"}, "samples": arr(s.ref(ops.Sample{}))}, "tick_ms", "samples"))},
		"GET " + replays.ListPath: {tag: "Operations", summary: "The stored reports of replays (admins): JSON, or an HTML list for text/html",
			responses: ok("the reports, newest first", obj(map[string]any{"replays": arr(s.ref(replay.Summary{}))}, "replays"))},
		"GET " + replays.ReportPath: {tag: "Operations", summary: "One replay's report (admins): JSON, or its HTML page for text/html",
			responses: ok("the report", s.ref(replay.Report{}))},
		"GET /metrics":       {tag: "Operations", summary: "The bridge process's Prometheus metrics", responses: map[string]response{"200": {description: "Prometheus text exposition", contentType: contentText}}},
		"GET /docs":          {tag: "Documentation", summary: "This document, rendered", responses: map[string]response{"200": {description: "an HTML page", contentType: contentHTML}}},
		"GET " + OpenAPIPath: {tag: "Documentation", summary: "This document (OpenAPI 3.1)", responses: ok("the document", map[string]any{"type": "object"})},
		"GET /{$}":           {tag: "Web", summary: "The web chat page", responses: map[string]response{"200": {description: "the page", contentType: contentHTML}}},
		"GET /web/{name}":    {tag: "Web", summary: "The web page's scripts, styles and icon", responses: map[string]response{"200": {description: "a static file"}}},
		"GET /auth/me": {tag: "Identity", summary: "Who the caller is and what it may do", responses: ok("the caller", obj(map[string]any{"auth": map[string]any{"type": "boolean"}, "principal": s.ref(auth.Principal{}),
			"may": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "boolean"}}}, "auth", "principal", "may"))},
		"POST /auth/stream-token": {tag: "Identity", summary: "A short-lived token for an EventSource's query (?access_token=)", responses: ok("the token", obj(map[string]any{"token": str, "expires_at": map[string]any{"type": "string", "format": "date-time"},
			"expires_in": map[string]any{"type": "integer"}, "param": str}, "token", "expires_at", "expires_in", "param"))},
	}
}

// openAPIDoc builds the document for the routes of cfg.
func openAPIDoc(cfg Config) map[string]any {
	s := newSchemas()
	ops := operations(s)
	paths := map[string]any{}
	for _, r := range Routes(cfg) {
		method, pattern, found := strings.Cut(r.Pattern, " ")
		if !found {
			continue // the catch-all: every other path is 404
		}
		op, known := ops[r.Pattern]
		if !known {
			continue // TestOpenAPICoversEveryRoute fails
		}
		path := strings.ReplaceAll(pattern, "{$}", "")
		if path == "" {
			path = "/"
		}
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		if note := routeNotes[r.Pattern]; note != "" {
			op.description = note
		}
		item[strings.ToLower(method)] = op.encode(path, method, r.Need)
	}
	for name, schema := range agui.EventSchemas("#/components/schemas/") {
		s.defs[name] = schema
	}
	s.defs["Error"] = map[string]any{"type": "object", "required": []any{"error", "code"}, "properties": map[string]any{
		"error": map[string]any{"type": "string"}, "code": map[string]any{"type": "string", "description": "the error's kind: bad_request, session_not_found, turn_in_progress, waiting_approval, forbidden …"},
		"approval": map[string]any{"description": "the approval a conversation waits for (409 waiting_approval) or that was already decided (409 approval_decided)"},
	}}
	return map[string]any{
		"openapi": "3.1.0",
		// Relative: the bridge that serves the document, whatever its name.
		"servers": []any{map[string]any{"url": "/", "description": "the bridge that serves this document"}},
		"info": map[string]any{"title": "Agent Mesh bridge", "version": version(cfg),
			"description": "HTTP surface of an Agent Mesh: REST, AG-UI (SSE, WebSocket and its dialects), A2A JSON-RPC, the web page and operations. Authentication, when configured, is a bearer token (static or JWT); the roles viewer, user, approver and admin grant read, converse and decide."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         s.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "a static token or a JWT, when auth is configured"}},
		},
	}
}

func version(cfg Config) string {
	if cfg.Version == "" {
		return "dev"
	}
	return cfg.Version
}

// encode is the operation object of the route at path.
func (op operation) encode(path, method string, need auth.Permission) map[string]any {
	out := map[string]any{"summary": op.summary, "tags": []any{op.tag}, "operationId": operationID(method, path)}
	if op.description != "" {
		out["description"] = op.description
	}
	var params []any
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			params = append(params, map[string]any{"name": seg[1 : len(seg)-1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
	}
	for _, q := range op.query {
		params = append(params, map[string]any{"name": q.name, "in": "query", "description": q.description, "schema": map[string]any{"type": q.typ}})
	}
	if len(params) > 0 {
		out["parameters"] = params
	}
	if op.body != nil {
		media := map[string]any{"schema": op.body}
		if op.example != nil {
			media["example"] = op.example
		}
		out["requestBody"] = map[string]any{"required": !op.optional, "content": map[string]any{"application/json": media}}
	}
	responses := map[string]any{}
	for status, r := range op.responses {
		resp := map[string]any{"description": r.description}
		switch {
		case r.contentType != "":
			media := map[string]any{"schema": map[string]any{"type": "string"}}
			if r.event != nil {
				// OpenAPI 3.2's itemSchema, as an extension of 3.1; the
				// string's contentSchema says it too, where 3.1 tools look.
				media["x-itemSchema"] = r.event
				media["schema"] = map[string]any{"type": "string", "contentMediaType": contentSSE, "contentSchema": r.event,
					"description": "server-sent events; each event's data is one value of contentSchema"}
			}
			resp["content"] = map[string]any{r.contentType: media}
		case r.schema != nil:
			resp["content"] = map[string]any{"application/json": map[string]any{"schema": r.schema}}
		}
		responses[status] = resp
	}
	errSchema := map[string]any{"$ref": "#/components/schemas/Error"}
	if own, ok := op.responses["default"]; ok && own.schema != nil {
		errSchema = own.schema // the A2A endpoints answer JSON-RPC errors
	}
	for _, status := range op.errorStatuses(method+" "+path, method, path, need) {
		code := strconv.Itoa(status)
		if _, documented := responses[code]; documented {
			continue
		}
		responses[code] = map[string]any{"description": errorDescriptions[status],
			"content": map[string]any{"application/json": map[string]any{"schema": errSchema}}}
	}
	if _, own := op.responses["default"]; !own {
		responses["default"] = map[string]any{"description": "another error, in the same body",
			"content": map[string]any{"application/json": map[string]any{"schema": errSchema}}}
	}
	return finish(out, responses, need)
}

// errorDescriptions says when the bridge answers each error status.
var errorDescriptions = map[int]string{
	http.StatusBadRequest:            "bad input: malformed JSON, a field of the wrong type, an id or parameter out of its shape",
	http.StatusUnauthorized:          "authentication is on and the request carries no valid token",
	http.StatusForbidden:             "the caller's roles do not allow it, or a body-less request came from another site's page",
	http.StatusNotFound:              "no such conversation, approval, agent, group or file (or one the caller may not see)",
	http.StatusConflict:              "a turn runs or an approval waits (the body names it), or the approval was already decided",
	http.StatusGone:                  "the conversation was deleted or has expired",
	http.StatusRequestEntityTooLarge: "the body is larger than http.max_body_bytes",
	http.StatusUnsupportedMediaType:  "the body is not JSON (Content-Type: application/json)",
	http.StatusMisdirectedRequest:    "the Host is not a name of this bridge (http.hosts)",
	http.StatusTooManyRequests:       "a rate limit or a limit of open streams is spent; Retry-After says when to try again. A message whose conversation, or whose owner today, spent its model budget is refused with code budget_exceeded (Retry-After and resetAt for a daily budget: the next midnight UTC)",
	http.StatusInternalServerError:   "an error the bridge did not expect; its log has the details",
	http.StatusServiceUnavailable:    "a part of the mesh is away for now (NATS, a role, the cluster's majority); Retry-After says when to try again",
}

// Routes that answer from the bridge alone, without NATS.
var localRoutes = []string{"GET /docs", "GET " + OpenAPIPath, "GET /", "GET /web/{name}", "GET /metrics"}

// Dialects whose refusals by the limits are events of their own stream
// (writeRefusal), not an HTTP 429.
var refusedAsEvents = []string{"POST /agui", "POST /api/ai-sdk", "POST /api/chat", "POST /api/conversation"}

// Routes that run or decide a turn, and so meet a turn already running or
// an approval waiting, or an approval already decided.
var conflictRoutes = []string{"POST /conversations/{id}/messages", "POST /conversations/{id}/regenerate", "POST /approvals/{uuid}", "POST /conversations/{id}/fork",
	"POST /agui", "POST /api/ai-sdk", "POST /api/conversation", "GET /agui/ws"}

// errorStatuses are the error statuses the route route (method and path)
// can answer, by what it takes and what guards it.
func (op operation) errorStatuses(route, method, path string, need auth.Permission) []int {
	pathParams := strings.Contains(path, "{")
	statuses := []int{http.StatusMisdirectedRequest, http.StatusInternalServerError}
	if op.body != nil || len(op.query) > 0 || pathParams {
		statuses = append(statuses, http.StatusBadRequest)
	}
	if need != auth.Open {
		statuses = append(statuses, http.StatusUnauthorized, http.StatusForbidden)
	}
	if stateChanging(method) {
		statuses = append(statuses, http.StatusForbidden, http.StatusUnsupportedMediaType)
	}
	if op.body != nil {
		statuses = append(statuses, http.StatusRequestEntityTooLarge)
	}
	if pathParams {
		statuses = append(statuses, http.StatusNotFound)
	}
	if strings.HasPrefix(path, "/conversations/{id}") {
		statuses = append(statuses, http.StatusGone)
	}
	if slices.Contains(conflictRoutes, route) {
		statuses = append(statuses, http.StatusConflict)
	}
	if route != "GET /health" && route != "GET /ready" && !slices.Contains(refusedAsEvents, route) {
		statuses = append(statuses, http.StatusTooManyRequests)
	}
	if !slices.Contains(localRoutes, route) {
		statuses = append(statuses, http.StatusServiceUnavailable)
	}
	slices.Sort(statuses)
	return slices.Compact(statuses)
}

// finish sets an operation's responses and security.
func finish(out, responses map[string]any, need auth.Permission) map[string]any {
	out["responses"] = responses
	if need == auth.Open {
		out["security"] = []any{}
	} else {
		// Anonymous when the mesh configures no auth; a bearer token when it does.
		out["security"] = []any{map[string]any{"bearer": []any{}}, map[string]any{}}
	}
	return out
}

// operationID names an operation from its method and path:
// get_conversations_id_events.
func operationID(method, path string) string {
	var parts []string
	for _, seg := range strings.Split(path, "/") {
		seg = strings.Trim(seg, "{}")
		seg = strings.NewReplacer(".", "_", "-", "_").Replace(seg)
		if seg != "" {
			parts = append(parts, seg)
		}
	}
	if len(parts) == 0 {
		parts = []string{"root"}
	}
	return strings.ToLower(method) + "_" + strings.Join(parts, "_")
}

// OpenAPI is the OpenAPI document of the routes of cfg, encoded.
func OpenAPI(cfg Config) ([]byte, error) { return json.Marshal(openAPIDoc(cfg)) }

// openAPIHandler serves the document, built once.
func openAPIHandler(cfg Config) http.HandlerFunc {
	var once sync.Once
	var body []byte
	return func(w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { body, _ = json.Marshal(openAPIDoc(cfg)) })
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}

// documentedPatterns are the route patterns the document describes.
func documentedPatterns() []string {
	var out []string
	for p := range operations(newSchemas()) {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
