package mesh

import (
	"time"
)

// WorkKind says what a work item asks for.
type WorkKind string

// Work kinds.
const (
	// WorkTurn runs a turn for a new user message.
	WorkTurn WorkKind = "turn"
	// WorkResume resumes a run paused for an approval, once it is decided.
	WorkResume WorkKind = "resume"
	// WorkStep runs one step of the agent tree (wire value "node").
	WorkStep WorkKind = "node"
)

// WorkItem is a message of the work stream, on mesh.work.<role>.<name>,
// or for a user's message on mesh.work.<role>.<name>.<session> (see
// [workloop.Subject]). Credentials travel in its headers ([HeaderAuthorization]),
// never here.
type WorkItem struct {
	Kind    WorkKind `json:"kind"`
	Session string   `json:"session"`
	// TurnID identifies the turn; for a resume it is the approval id. It is
	// also the run id of the AG-UI events the turn publishes.
	TurnID string `json:"turn_id"`
	// Message is the user's message of a turn.
	Message string `json:"message,omitempty"`
	// Regenerate: the turn answers the conversation's last user message
	// (Message) again; it adds no user message and supersedes the answer
	// after it.
	Regenerate bool `json:"regenerate,omitempty"`
	// Files are the files of the user's message (their bytes are in
	// mesh_files).
	Files []File `json:"files,omitempty"`
	// Metadata is the client's, for the user message ([Message.Metadata]).
	Metadata map[string]any `json:"metadata,omitempty"`
	// ApprovalID is the decided approval a resume carries on from.
	ApprovalID string `json:"approval_id,omitempty"`
	// Step, Gen and RunID: the key of the tree step a step item runs (wire
	// name node), which run of it, and the AG-UI run its events belong to.
	Step  string `json:"node,omitempty"`
	Gen   int    `json:"gen,omitempty"`
	RunID string `json:"run_id,omitempty"`
	// Group is set on a member's turn of a group chat (TurnID names the
	// member turn; it adds no user message) and on the group role's items.
	Group string `json:"group,omitempty"`
	// ClaimAtOnce asks the agent to record its claim of a turn (status
	// running) before the run, not with the run's own save: its caller
	// answers as soon as an agent holds the turn (an A2A non-blocking send).
	ClaimAtOnce bool      `json:"claim_at_once,omitempty"`
	EnqueuedAt  time.Time `json:"enqueued_at"`
}

// UserTurn reports whether the item is a user's message: a turn that is not
// a member's turn of a group chat.
func (item WorkItem) UserTurn() bool { return item.Kind == WorkTurn && item.Group == "" }

// CancelRequest is the optional body of a message on
// mesh.session.<session>.cancel. Without a run id it stops whatever turn the
// session runs; with one it stops that run, even if it has not started yet.
type CancelRequest struct {
	RunID string `json:"run_id,omitempty"`
}
