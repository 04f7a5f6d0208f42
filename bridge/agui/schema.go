package agui

// EventSchemas are the JSON Schemas (draft 2020-12) of the dialects'
// events, by name: SimpleEvent is one event of POST /api/chat,
// DottedEvent one of POST /api/conversation, each a oneOf keyed on "type"
// whose variants admit no other field. The rest are their parts. ref is
// the prefix of their references to each other: "#/components/schemas/"
// in the bridge's OpenAPI document, "#/$defs/" in a standalone schema.
//
// Clients generate their types (TypeScript, zod …) from them; the tests
// check every event the dialects send against them, so they cannot drift
// from the encoders.
func EventSchemas(ref string) map[string]any {
	str := map[string]any{"type": "string"}
	integer := map[string]any{"type": "integer", "minimum": 0}
	millis := map[string]any{"type": "integer", "minimum": 0, "description": "Unix time in milliseconds"}
	anything := map[string]any{}
	to := func(name string) map[string]any { return map[string]any{"$ref": ref + name} }
	object := func(props map[string]any, required ...string) map[string]any {
		o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			o["required"] = required
		}
		return o
	}
	// variant is one event type: its "type" constant, the timestamp when
	// the dialect stamps every event, and its own fields.
	variant := func(typ string, stamped bool, props map[string]any, required ...string) map[string]any {
		all := map[string]any{"type": map[string]any{"const": typ}}
		for k, v := range props {
			all[k] = v
		}
		required = append([]string{"type"}, required...)
		if stamped {
			all["timestamp"] = millis
			required = append(required, "timestamp")
		}
		return object(all, required...)
	}
	simple := func(typ string, props map[string]any, required ...string) map[string]any {
		return variant(typ, false, props, required...)
	}
	dotted := func(typ string, props map[string]any, required ...string) map[string]any {
		return variant(typ, true, props, required...)
	}
	withDescription := func(schema map[string]any, description string) map[string]any {
		out := map[string]any{"description": description}
		for k, v := range schema {
			out[k] = v
		}
		return out
	}

	return map[string]any{
		"DialectError": object(map[string]any{
			"code":    withDescription(map[string]any{"type": "string"}, "simple: LLM_TIMEOUT, RATE_LIMIT, LLM_ERROR, VALIDATION_ERROR, TIMEOUT, UNKNOWN, UNAVAILABLE; dotted: the mesh's run error codes (RATE_LIMIT, LLM_TIMEOUT, CANCELLED, INTERNAL_ERROR …), and TOOL_ERROR or REJECTED on tool_call.end"),
			"message": str,
			"resetAt": withDescription(map[string]any{"type": "string", "format": "date-time"}, "simple dialect, a refusal by the mesh's limits: when the limit resets"),
			"details": withDescription(map[string]any{"type": "object"}, "meshCode (the mesh's code when it differs), partialText (the text already streamed), retryAfter and resetAt (a refusal by the mesh's limits)"),
		}, "code", "message"),
		"DialectApproval": object(map[string]any{
			"uuid": str, "toolName": str, "toolArgs": map[string]any{"type": "object"}, "description": str, "toolCallId": str,
		}, "uuid"),
		"SimpleStats": object(map[string]any{
			"executionTime":    withDescription(integer, "milliseconds since the request"),
			"agentInvocations": withDescription(map[string]any{"type": "integer", "minimum": 0}, "the run's tool calls (sub-agents included)"),
			"totalCandidates":  withDescription(map[string]any{"type": "integer", "minimum": 0}, "what the run's successful tool results returned: the items of a JSON array, of an object's longest array field, else 1 each"),
			"intent":           str,
			"totalTokens":      map[string]any{"type": "integer", "minimum": 0},
		}, "executionTime", "agentInvocations", "totalCandidates"),
		"SimpleToolResult": object(map[string]any{
			"type": map[string]any{"const": "tool_result"}, "tool": str, "result": withDescription(map[string]any{}, "the tool's JSON result, or its text"), "isError": map[string]any{"type": "boolean"},
		}, "type", "tool", "result"),
		"SimpleApprovalRequired": object(map[string]any{
			"type": map[string]any{"const": "approval_required"}, "approval": to("DialectApproval"),
		}, "type", "approval"),
		"SimpleEvent": map[string]any{
			"description": "one event of the simple dialect (POST /api/chat), the data of one server-sent event",
			"oneOf": []any{
				simple("log", map[string]any{"content": str, "timestamp": millis}, "content", "timestamp"),
				simple("text", map[string]any{"delta": str}, "delta"),
				simple("data", map[string]any{"structuredData": map[string]any{"oneOf": []any{to("SimpleToolResult"), to("SimpleApprovalRequired")}}}, "structuredData"),
				simple("done", map[string]any{"stats": to("SimpleStats")}, "stats"),
				simple("error", map[string]any{"error": to("DialectError")}, "error"),
				simple("ping", nil),
			},
		},
		"DottedEvent": map[string]any{
			"description": "one event of the dotted dialect (POST /api/conversation), the data of one server-sent event",
			"oneOf": []any{
				dotted("message.start", map[string]any{"messageId": str}, "messageId"),
				dotted("message.content", map[string]any{"messageId": str, "content": str}, "messageId", "content"),
				dotted("message.end", map[string]any{"messageId": str, "metadata": object(map[string]any{"totalTokens": integer, "intent": str})}, "messageId"),
				dotted("message.feedback", map[string]any{"messageId": str, "feedback": object(map[string]any{"rating": str, "comment": str, "by": str})}, "messageId", "feedback"),
				dotted("tool_call.start", map[string]any{"toolCallId": str, "name": str, "input": withDescription(map[string]any{}, "the parsed arguments, or their text when they are not JSON")}, "toolCallId", "name"),
				dotted("tool_call.end", map[string]any{"toolCallId": str, "output": anything, "error": to("DialectError")}, "toolCallId"),
				dotted("state.snapshot", map[string]any{"state": anything}, "state"),
				dotted("state.delta", map[string]any{"patch": withDescription(map[string]any{"type": "array", "items": object(map[string]any{
					"op": map[string]any{"enum": []any{"add", "remove", "replace", "move", "copy", "test"}}, "path": str, "from": str, "value": anything,
				}, "op", "path")}, "RFC 6902 JSON Patch")}, "patch"),
				dotted("activity.start", map[string]any{"activityId": str, "name": str, "description": str}, "activityId", "name"),
				dotted("activity.end", map[string]any{"activityId": str}, "activityId"),
				dotted("approval.requested", map[string]any{"approval": to("DialectApproval")}, "approval"),
				dotted("approval.decided", map[string]any{"approval": object(map[string]any{"uuid": str, "status": str}, "uuid", "status")}, "approval"),
				dotted("error", map[string]any{"error": to("DialectError")}, "error"),
			},
		},
	}
}
