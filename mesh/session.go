package mesh

import (
	"encoding/json"
	"time"
)

// Status is the status of a conversation.
type Status string

// Conversation statuses. A conversation is active between turns,
// waiting_approval while a tool call waits for a person's decision and
// completed once ended; queued says a user's message waits in the work
// queue for an agent (Conversation.Queued), running that a turn holds the
// conversation.
const (
	StatusActive          Status = "active"
	StatusQueued          Status = "queued"
	StatusRunning         Status = "running"
	StatusWaitingApproval Status = "waiting_approval"
	StatusCompleted       Status = "completed"
)

// Role is the author of a message.
type Role string

// Message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Conversation is a session: what the sessions bucket holds under its id,
// what a client reads of it, and what a distributed turn needs to be
// resumed anywhere and applied once.
type Conversation struct {
	ID string `json:"id"`
	// SessionID is the 8-hex trace id forwarded as X-Session-ID, so that
	// the conversation's log lines and sub-agent calls can be traced
	// together.
	SessionID string `json:"session_id"`
	// Agent is the name of the agent that serves the conversation; its work
	// subject is mesh.work.agent.<Agent>.<conversation>.
	Agent string `json:"agent"`
	// Owner is the HTTP principal who created the conversation: only it
	// and admins reach it while authentication is on. Empty when it was
	// created with authentication off (or over NATS): admins only.
	Owner string `json:"owner,omitempty"`
	// Direct marks a conversation of direct tool calls (the MCP gateway):
	// each user message is a [DirectCall] the agent runs as asked, through
	// the catalog and the approvals, and its result is the answer; the
	// model is never called.
	Direct bool `json:"direct,omitempty"`
	// Replay is the run of `mesh replay` that made the conversation to
	// replay a recorded one; such a conversation has no owner (admins
	// only) and its destructive calls are never run.
	Replay string `json:"replay,omitempty"`
	Status Status `json:"status"`
	// Title is the conversation's first user message, clipped.
	Title string `json:"title,omitempty"`
	// Messages are the newest messages, as read (the history the model
	// gets, or a page); the log holds them all (messages.go). A change
	// appends to them; it never edits those read.
	Messages []Message `json:"messages"`
	// MessageCount counts the messages in the log.
	MessageCount int `json:"message_count,omitempty"`
	// MessageTail locates the newest [TailKept] messages in the log,
	// oldest first.
	MessageTail MessageTail `json:"message_tail,omitempty"`
	// ForkedFrom is set on a branch: the conversation and the point it
	// was forked at (fork.go).
	ForkedFrom *ForkPoint `json:"forked_from,omitempty"`
	// Shared locates the messages a branch shares with the conversations
	// it was forked from, nearest first: their records are read where
	// they are, not copied (fork.go).
	Shared          []SharedRecords  `json:"shared,omitempty"`
	PendingApproval *PendingApproval `json:"pending_approval,omitempty"`
	// PendingApprovals lists every approval the conversation waits for: more
	// than one when parallel branches of an agent tree each paused.
	PendingApprovals []PendingApproval `json:"pending_approvals,omitempty"`
	PipelineState    *PipelineState    `json:"pipeline_state,omitempty"`
	// Tree is the position of the run through the agent tree, while the
	// run goes on or waits, so that any replica can carry it on.
	Tree *TreeRun `json:"tree,omitempty"`
	// Group is set on a group chat: several agents answer in turn.
	Group *GroupRun `json:"group,omitempty"`
	// State is the conversation's state (see state.go): the output_key
	// values of the agent tree's steps, and what tools set.
	State map[string]any `json:"state,omitempty"`
	// Turn is the turn being executed, if any.
	Turn *Turn `json:"turn,omitempty"`
	// Queued is the user's message the bridge accepted and enqueued, until
	// an agent (or, in a group chat, the group role) claims it; the
	// conversation takes no other message meanwhile.
	Queued *QueuedTurn `json:"queued_turn,omitempty"`
	// RecentTurns lists the ids of the last turns applied, newest last, so that
	// a redelivered turn is recognised and not applied twice.
	RecentTurns []string `json:"recent_turns,omitempty"`
	// LastRun is the outcome of the most recent run.
	LastRun *RunSummary `json:"last_run,omitempty"`
	// Usage adds up the tokens (and cost) of every model call the
	// conversation's runs made, by model (usage.go).
	Usage *ConversationUsage `json:"usage,omitempty"`
	// Superseded maps the ids of messages a regenerated answer replaced
	// to the turn that regenerated it: shown, not sent to models
	// (actions.go).
	Superseded map[string]string `json:"superseded,omitempty"`
	// Feedback holds the users' ratings of messages, by message id, one
	// per principal (actions.go).
	Feedback map[string][]Feedback `json:"feedback,omitempty"`
	// DeletedAt and DeletedBy are set on a tombstone (status deleted,
	// lifecycle.go): when and by whom the conversation was deleted.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	DeletedBy string     `json:"deleted_by,omitempty"`
	// Version counts the saves of the conversation.
	Version   uint64    `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// Revision is the KV revision the conversation was read at.
	Revision uint64 `json:"-"`
	// stored counts the first Messages that are in the log; snap is a copy
	// of them (snapshot), to tell that a change left them as they were.
	stored int
	snap   []*Message
}

// recentTurnsKept bounds Conversation.RecentTurns.
const recentTurnsKept = 32

// Message is one message of a conversation.
type Message struct {
	ID      string `json:"id"`
	Role    Role   `json:"role"`
	Content string `json:"content"`
	// Name is the step of the tree or the group member that wrote the
	// message.
	Name string `json:"name,omitempty"`
	// Step is the key of the tree step whose run wrote the message (wire
	// name node).
	Step string `json:"node,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolName is the tool a tool message answers for.
	ToolName string `json:"tool_name,omitempty"`
	// IsError marks a tool result that is a failure.
	IsError bool `json:"is_error,omitempty"`
	// DecidedBy is, on the result of a call that waited for an approval,
	// who decided it (the approval's decision.by: the authenticated
	// principal who approved or rejected it, or a policy).
	DecidedBy string `json:"decided_by,omitempty"`
	// StandIn marks the result of a call a replay did not run (a tool that
	// is not read-only, a sub-agent): its content is the replay's stand-in,
	// and the call was never sent to a tool host or for approval.
	StandIn bool `json:"stand_in,omitempty"`
	// Notice marks an assistant message meant for people (an approval
	// request, an error): it is shown, but not sent back to models.
	Notice bool `json:"notice,omitempty"`
	// Metadata is what a client attached to its user message (REST
	// "metadata"), stored and returned as given; the model never sees it.
	Metadata map[string]any `json:"metadata,omitempty"`
	// Files are the images and documents a user message carries: their
	// bytes are in the object store mesh_files (files.go), not here.
	Files []File `json:"files,omitempty"`
	// Reasoning is what the model said of its reasoning before an
	// assistant message, for people; models never get it back.
	Reasoning string `json:"reasoning,omitempty"`
	// Thoughts are the signed reasoning blocks the model's provider wants
	// back with the message's tool calls (Anthropic's thinking); only that
	// provider gets them.
	Thoughts []Thought `json:"thoughts,omitempty"`
	// TurnID is the turn that added the message.
	TurnID    string    `json:"turn_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Thought is one signed reasoning block of a model's answer, kept as it
// came: thinking text and its signature, or a redacted block's data.
type Thought struct {
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"`
}

// ToolCall is a call a model asked for.
type ToolCall struct {
	ID string `json:"id"`
	// Name is the function name the model used.
	Name string `json:"name"`
	// Server and Tool locate the tool in the catalog; empty for tools the
	// agent implements itself.
	Server    string         `json:"server,omitempty"`
	Tool      string         `json:"tool,omitempty"`
	Arguments map[string]any `json:"arguments"`
	// Destructive says the call needed an approval.
	Destructive bool   `json:"destructive,omitempty"`
	ApprovalID  string `json:"approval_id,omitempty"`
}

// ArgumentsJSON is the JSON text of the call's arguments.
func (c ToolCall) ArgumentsJSON() string {
	if c.Arguments == nil {
		return "{}"
	}
	b, err := json.Marshal(c.Arguments)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// PendingApproval is the approval a paused conversation waits for.
type PendingApproval struct {
	UUID           string         `json:"uuid"`
	ConversationID string         `json:"conversation_id"`
	ToolCallID     string         `json:"tool_call_id"`
	ToolName       string         `json:"tool_name"`
	Server         string         `json:"server,omitempty"`
	ToolArgs       map[string]any `json:"tool_args"`
	// ArgsHash is the approver's hash of ToolArgs ([ArgsHash]); a client
	// may send the hash of the arguments it showed with its decision.
	ArgsHash    string `json:"args_hash,omitempty"`
	Description string `json:"description"`
	// RemoteTaskID and RemoteAgentName are set on a proxy approval: the
	// decision is forwarded to that A2A agent's task.
	RemoteTaskID    string    `json:"remote_task_id,omitempty"`
	RemoteAgentName string    `json:"remote_agent_name,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
}

// PipelineState is where a paused run stands, so that the resume can carry on
// from there on any replica.
type PipelineState struct {
	// PausedStepPath is the path of child indices from the root of the agent
	// tree to the paused step; empty for a single llm step. The wire names
	// (paused_node_path, paused_node_output_key) speak of nodes, as the
	// configuration's tree does.
	PausedStepPath      []int             `json:"paused_node_path"`
	PausedStepOutputKey string            `json:"paused_node_output_key,omitempty"`
	SessionState        map[string]string `json:"session_state,omitempty"`
	UserMessage         string            `json:"user_message,omitempty"`
	// RunID is the run that paused; Iterations the model calls it had made.
	RunID      string `json:"run_id,omitempty"`
	Iterations int    `json:"iterations"`
}

// Turn is a unit of work being executed on a conversation.
type Turn struct {
	ID      string   `json:"id"`
	Kind    WorkKind `json:"kind"`
	Node    string   `json:"node,omitempty"`
	Attempt int      `json:"attempt"`
	// Seq is the work stream sequence of the item that claimed the turn:
	// its redeliveries carry the same, another copy of the turn does not.
	Seq       uint64    `json:"seq,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// AliveAt is when a long run last said it still holds the turn.
	AliveAt time.Time `json:"alive_at,omitzero"`
}

// QueuedTurn is a user's message waiting in the work queue: recorded by
// the bridge by compare-and-set before it publishes the work item, and
// cleared by the claim that takes the turn up, in the same save.
type QueuedTurn struct {
	// ID is the turn id, also the run id of its AG-UI events.
	ID      string `json:"id"`
	Message string `json:"message"`
	Files   []File `json:"files,omitempty"`
	// Metadata is the client's, for the user message ([Message.Metadata]).
	Metadata map[string]any `json:"metadata,omitempty"`
	At       time.Time      `json:"at"`
	// By is the node id of the bridge that recorded it (or last published
	// it again): a bridge that finds that writer gone (restarted, or down
	// in mesh_nodes) need not wait for its publish.
	By string `json:"by,omitempty"`
	// Regenerate says the turn answers the last user message again
	// (Message is its text) instead of adding one.
	Regenerate bool `json:"regenerate,omitempty"`
	// Republished counts the times a bridge found the work item gone from
	// the work stream and published it again.
	Republished int `json:"republished,omitempty"`
}

// Unqueue clears the queued turn id, if it is the one queued; it reports
// whether it was.
func (c *Conversation) Unqueue(id string) bool {
	if c.Queued == nil || c.Queued.ID != id {
		return false
	}
	c.Queued = nil
	if c.Status == StatusQueued {
		c.Status = StatusActive
	}
	return true
}

// IdleStatus is the status of the conversation once no turn holds it:
// queued while a user's message still waits for its claim, else active.
func (c *Conversation) IdleStatus() Status {
	if c.Queued != nil {
		return StatusQueued
	}
	return StatusActive
}

// RunSummary is the outcome of a run, kept on the conversation.
type RunSummary struct {
	ID string `json:"id"`
	// Runs are the AG-UI runs the outcome ends: the turn, and the resumes
	// that carried it on.
	Runs []string `json:"runs,omitempty"`
	// Outcome is success, interrupt, cancelled or error.
	Outcome   string `json:"outcome"`
	Response  string `json:"response,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
	Error     string `json:"error,omitempty"`
	Usage     *Usage `json:"usage,omitempty"`
	// Model is the model that answered (of the last model call); empty
	// when none was called.
	Model string `json:"model,omitempty"`
	// ToolsCalled are the tools the run called, one name per call (a
	// denied call included: its result says so), in order.
	ToolsCalled []string `json:"tools_called,omitempty"`
	// Steps are the runs of the agent tree's leaf steps (their last run,
	// for a loop's): which replica ran each, and how it ended. Empty for an
	// agent without a tree. The wire name is nodes.
	Steps      []StepSummary `json:"nodes,omitempty"`
	FinishedAt time.Time     `json:"finished_at"`
}

// StepSummary is how one step of the tree ran.
type StepSummary struct {
	Key        string    `json:"key"`
	Name       string    `json:"name"`
	Status     string    `json:"status"`
	Worker     string    `json:"worker,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Covers reports whether the summary is the outcome of run id.
func (s *RunSummary) Covers(id string) bool {
	if s == nil {
		return false
	}
	if s.ID == id {
		return true
	}
	for _, r := range s.Runs {
		if r == id {
			return true
		}
	}
	return false
}

// States of a step's run (StepRun.Status, StepSummary.Status).
const (
	StepPending   = "pending"
	StepRunning   = "running"
	StepWaiting   = "waiting"
	StepDone      = "done"
	StepFailed    = "failed"
	StepCancelled = "cancelled"
)

// TreeRun is where a run stands in the agent tree: every step it started,
// by key. A step is one node of the configured tree (config.Node): an llm
// or a2a leaf, or a sequential, parallel or loop composite. "Node" alone
// means a process (NodeInfo, mesh_nodes). It lives in the conversation, so any replica can carry it on.
type TreeRun struct {
	// ID is the turn that started the run.
	ID          string `json:"id"`
	UserMessage string `json:"user_message"`
	// Steps by key: "r" is the root, "r.0" its first child, and so on
	// (wire name nodes).
	Steps map[string]*StepRun `json:"nodes"`
	// Runs are the AG-UI runs under way: the turn, and the resumes of
	// approvals decided since; they end together when the tree completes or
	// waits.
	Runs []string `json:"runs,omitempty"`
	// Usage adds up the tokens of every step's model calls.
	Usage *Usage `json:"usage,omitempty"`
	// Model is the model of the latest model call; ToolsCalled the tools
	// the steps called, one name per call, in the order their results came.
	Model       string    `json:"model,omitempty"`
	ToolsCalled []string  `json:"tools_called,omitempty"`
	StartedAt   time.Time `json:"started_at"`
}

// StepRun is the run of one step of the tree.
type StepRun struct {
	Key    string `json:"key"`
	Path   []int  `json:"path"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	Status string `json:"status"`
	// Gen counts the times the step was scheduled (a loop's iterations); it
	// keeps the ids of each run of the step apart.
	Gen int `json:"gen"`
	// RunID is the AG-UI run whose events the step publishes.
	RunID string `json:"run_id,omitempty"`
	// Next is the child a sequential step or loop runs next; Iteration the
	// loop's current iteration.
	Next      int    `json:"next,omitempty"`
	Iteration int    `json:"iteration,omitempty"`
	Output    string `json:"output,omitempty"`
	// Approvals are the approvals a waiting step waits for; Resumed is the
	// approval whose decision its current run carries on from.
	Approvals []string `json:"approvals,omitempty"`
	Resumed   string   `json:"resumed,omitempty"`
	// Iterations counts the model calls of the step's run so far, so that a
	// resumed run numbers its messages on from there (wire name steps).
	Iterations int `json:"steps,omitempty"`
	// ExitLoop: the step called exit_loop; its loop ends.
	ExitLoop   bool      `json:"exit_loop,omitempty"`
	Worker     string    `json:"worker,omitempty"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// HasTurn reports whether the turn id was applied to the conversation.
func (c *Conversation) HasTurn(id string) bool {
	for _, t := range c.RecentTurns {
		if t == id {
			return true
		}
	}
	return false
}

// MarkTurn records a turn as applied.
func (c *Conversation) MarkTurn(id string) {
	if c.HasTurn(id) {
		return
	}
	c.RecentTurns = append(c.RecentTurns, id)
	if n := len(c.RecentTurns); n > recentTurnsKept {
		c.RecentTurns = append(c.RecentTurns[:0:0], c.RecentTurns[n-recentTurnsKept:]...)
	}
}

// Stored counts the first Messages that the message log holds: those
// read, and those saved since. A change may append after them, never edit
// them.
func (c *Conversation) Stored() int { return c.stored }

// StoredSnapshot is what the store that read or saved the conversation
// holds of its stored messages: how many of the first Messages the log
// holds, and a copy of them as they were, to tell that a change left them
// as they were.
func (c *Conversation) StoredSnapshot() (n int, snap []*Message) { return c.stored, c.snap }

// SetStored records what the store holds of the conversation's messages
// (see StoredSnapshot): the store that reads or saves it calls it.
func (c *Conversation) SetStored(n int, snap []*Message) { c.stored, c.snap = n, snap }

// HasMessage reports whether a message with this id is in the conversation.
func (c *Conversation) HasMessage(id string) bool {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].ID == id {
			return true
		}
	}
	return false
}

// LastAssistantText is the content of the last assistant message with text.
func (c *Conversation) LastAssistantText() string {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		m := c.Messages[i]
		if m.Role == RoleAssistant && m.Content != "" {
			return m.Content
		}
	}
	return ""
}

// ConversationSummary is the short form of a conversation that lists show.
type ConversationSummary struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Agent     string `json:"agent"`
	// Group names the group whose chat this is; empty for an agent's.
	Group           string           `json:"group,omitempty"`
	Owner           string           `json:"owner,omitempty"`
	Status          Status           `json:"status"`
	Title           string           `json:"title,omitempty"`
	MessageCount    int              `json:"message_count"`
	PendingApproval *PendingApproval `json:"pending_approval,omitempty"`
	QueuedTurn      *QueuedTurn      `json:"queued_turn,omitempty"`
	// ForkedFrom: a branch's (fork.go).
	ForkedFrom *ForkPoint `json:"forked_from,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	// DeletedAt and DeletedBy: a tombstone's (lifecycle.go).
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	DeletedBy string     `json:"deleted_by,omitempty"`
}

// Summary returns the list form of c; its title is its first user message.
// It needs only the head.
func (c *Conversation) Summary() ConversationSummary {
	s := ConversationSummary{
		ID: c.ID, SessionID: c.SessionID, Agent: c.Agent, Owner: c.Owner, Status: c.Status,
		MessageCount: c.MessageCount, Title: c.Title, PendingApproval: c.PendingApproval, QueuedTurn: c.Queued, ForkedFrom: c.ForkedFrom,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, DeletedAt: c.DeletedAt, DeletedBy: c.DeletedBy,
	}
	if c.Group != nil {
		s.Group = c.Group.Name
	}
	if c.MessageCount == 0 { // a head of an earlier version
		s.MessageCount, s.Title = len(c.Messages), TitleOf(c.Messages)
	}
	return s
}

// TitleOf is the title of a conversation whose first messages are msgs:
// its first user message, clipped.
func TitleOf(msgs []Message) string {
	for _, m := range msgs {
		if m.Role == RoleUser {
			if r := []rune(m.Content); len(r) > 80 {
				return string(r[:80]) + "…"
			}
			return m.Content
		}
	}
	return ""
}

// DirectCall is the user message of a [Conversation.Direct] conversation:
// the hosted tool to call and its arguments.
type DirectCall struct {
	Server    string         `json:"server"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}
