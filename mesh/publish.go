package mesh

import (
	"github.com/nats-io/nats.go/jetstream"
)

// Headers the mesh sets on its messages.
const (
	// HeaderMsgID is JetStream's deduplication header.
	HeaderMsgID = jetstream.MsgIDHeader
	// HeaderRun names the run an event belongs to, so that a reader can
	// follow one run without decoding the payload (RUN_ERROR has no runId).
	HeaderRun = "Mesh-Run"
	// HeaderAuthorization carries the caller's bearer token with a work item.
	// Tokens travel in headers only: never in payloads, KV values or logs.
	HeaderAuthorization = "Authorization"
	// HeaderSessionID carries the conversation's 8-hex trace id, to an A2A
	// sub-agent too, so that one conversation's calls can be traced from
	// agent to agent.
	HeaderSessionID = "X-Session-ID"
	// HeaderPrincipal names the authenticated principal on a decision
	// (mesh.approval.<uuid>.decide): the bridge sets it, and the approver
	// records it as who decided, before the body's "by".
	HeaderPrincipal = "Mesh-Principal"
	// HeaderDecisionID names one decision request: the bridge sends a
	// decision again with the same id when an answer was lost, and the
	// approver answers the second as the first ([Decision.ID]).
	HeaderDecisionID = "Mesh-Decision-Id"
)
