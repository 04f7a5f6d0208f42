package mesh

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ApprovalStatus is the state of an approval.
type ApprovalStatus string

// Approval states: pending, then exactly one of approved or rejected.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalRejected ApprovalStatus = "rejected"
)

// Approval is a destructive call waiting for, or having had, a human
// decision. It lives in the approvals bucket under its UUID.
type Approval struct {
	UUID           string `json:"uuid"`
	ConversationID string `json:"conversation_id"`
	// SessionID is the conversation's trace id.
	SessionID string `json:"session_id,omitempty"`
	// Agent is the agent whose work queue takes the resume.
	Agent string `json:"agent"`
	// RunID is the run that paused.
	RunID      string `json:"run_id"`
	ToolCallID string `json:"tool_call_id"`
	// ToolName is the function name the model used; Tool is the MCP name
	// of the tool on Server.
	ToolName string `json:"tool_name"`
	Server   string `json:"server,omitempty"`
	Tool     string `json:"tool,omitempty"`
	// CallID is the call id the tool host runs the approved call under:
	// the approval id for a human's decision, the model's call id for a
	// policy's. The approver sets it.
	CallID   string         `json:"call_id,omitempty"`
	ToolArgs map[string]any `json:"tool_args"`
	// ArgsHash is [ArgsHash] of ToolArgs when the approver created the
	// approval; Seal is its signature over what was asked (decision
	// pending), so that it signs a decision only while the record still
	// matches it.
	ArgsHash    string             `json:"args_hash,omitempty"`
	Seal        *ApprovalStatement `json:"seal,omitempty"`
	Description string             `json:"description"`
	// Policy names the policy that decided at once (PolicyNonDestructive,
	// PolicyAllowDestructive); empty for an approval a person decides.
	Policy string `json:"policy,omitempty"`
	// RemoteTaskID and RemoteAgentName make this a proxy approval: a
	// sub-agent reached over A2A asked for it, and the decision is forwarded
	// to that agent's task.
	RemoteTaskID    string `json:"remote_task_id,omitempty"`
	RemoteAgentName string `json:"remote_agent_name,omitempty"`
	// StepPath locates the paused step in the agent tree (wire name
	// node_path).
	StepPath []int          `json:"node_path,omitempty"`
	Status   ApprovalStatus `json:"status"`
	Decision *Decision      `json:"decision,omitempty"`
	// ResumeEnqueued is set once the resume work item is in the work queue.
	ResumeEnqueued bool `json:"resume_enqueued,omitempty"`
	// Traceparent is the W3C trace context of the run that asked: the
	// resume continues that trace, however late the decision comes.
	Traceparent string    `json:"traceparent,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	DecidedAt   time.Time `json:"decided_at,omitzero"`

	Revision uint64 `json:"-"`
}

// Pending converts the approval to the form a conversation carries.
func (a *Approval) Pending() *PendingApproval {
	return &PendingApproval{
		UUID: a.UUID, ConversationID: a.ConversationID, ToolCallID: a.ToolCallID,
		ToolName: a.ToolName, Server: a.Server, ToolArgs: a.ToolArgs, ArgsHash: a.ArgsHash, Description: a.Description,
		RemoteTaskID: a.RemoteTaskID, RemoteAgentName: a.RemoteAgentName, CreatedAt: a.CreatedAt,
	}
}

// AskedHash is "sha256:" and the hex SHA-256 of the [CanonicalJSON] of the
// approval as it was asked for: every field but those a decision sets
// (status, decision, decision time, resume enqueued) and the seal itself.
// The approver's seal carries it ([ApprovalStatement.Asked]).
func (a *Approval) AskedHash() (string, error) {
	c := *a
	c.Seal, c.Decision, c.Status, c.DecidedAt, c.ResumeEnqueued, c.Revision = nil, nil, "", time.Time{}, false, 0
	data, err := CanonicalJSON(c)
	if err != nil {
		return "", fmt.Errorf("hash approval %s: %w", a.UUID, err)
	}
	sum := sha256.Sum256(data)
	return argsHashPrefix + hex.EncodeToString(sum[:]), nil
}

// Unsealed reports whether a is pending with no seal: a release before
// seals (0.1.0) asked for it, or something other than an approver wrote
// it. Neither is approved until an admin has read it and the approver has
// sealed it ([Reseal]).
func (a *Approval) Unsealed() bool {
	return a.Status == ApprovalPending && a.Seal == nil && a.Policy == ""
}

// Reseal asks the approver to seal an [Approval.Unsealed] approval once an
// admin has read it (mesh migrate): ArgsHash is [ArgsHash] of the
// arguments the admin was shown, so a record changed since is refused.
type Reseal struct {
	ArgsHash string `json:"args_hash"`
	By       string `json:"by,omitempty"`
}

// Public is the approval as events and conversations show it: without the
// seal, which only the approver reads.
func (a *Approval) Public() *Approval {
	c := *a
	c.Seal = nil
	if c.Decision != nil && c.Decision.ID != "" {
		// A request id, the approver's business only.
		d := *c.Decision
		d.ID = ""
		c.Decision = &d
	}
	return &c
}

// Decision is what a human (or a policy) decided.
type Decision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// ArgsHash is the hash of the arguments the decider was shown, when
	// its client sent it; a decision whose ArgsHash differs from the
	// approval's is refused ([ErrApprovalArgsChanged]).
	ArgsHash string `json:"args_hash,omitempty"`
	// ID is the id of the request that made the decision
	// ([HeaderDecisionID]): that request sent again is answered with the
	// approval as it decided it, where any other decision is refused.
	ID string `json:"id,omitempty"`
	// Statement is the approver's signed statement of this decision, which
	// the tool host checks before it runs the call.
	Statement *ApprovalStatement `json:"statement,omitempty"`
}

// decisionBody is every form a decision can take on the wire:
// {"approved": true}, {"action": "approve"} or {"answer": "yes"}, with an
// optional "by", "reason" and "args_hash".
type decisionBody struct {
	Approved *bool   `json:"approved"`
	Action   *string `json:"action"`
	Answer   *string `json:"answer"`
	By       string  `json:"by"`
	Reason   string  `json:"reason"`
	ArgsHash string  `json:"args_hash"`
}

const decisionFormats = `{"approved": true|false}, {"action": "approve"|"reject"} or {"answer": "yes"|"no"}`

// ParseDecision reads a decision in any of its three formats ({"approved":
// true}, {"action": "approve"} or {"answer": "yes"}), so that a client may
// send whichever it finds natural. The error matches [ErrBadRequest] and
// says what is expected.
func ParseDecision(body []byte) (Decision, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Decision{}, ErrBadRequest.With("empty body: send " + decisionFormats)
	}
	var b decisionBody
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return Decision{}, ErrBadRequest.With("invalid decision: " + JSONErrorText(err) + "; send " + decisionFormats)
	}
	d := Decision{By: b.By, Reason: b.Reason, ArgsHash: b.ArgsHash}
	n := 0
	if b.Approved != nil {
		d.Approved = *b.Approved
		n++
	}
	for _, word := range []struct {
		field string
		v     *string
	}{{"action", b.Action}, {"answer", b.Answer}} {
		if word.v == nil {
			continue
		}
		ok, known := ParseApprovalWord(*word.v)
		if !known {
			return Decision{}, ErrBadRequest.With(fmt.Sprintf("%s %q is neither an approval nor a rejection; send %s", word.field, *word.v, decisionFormats))
		}
		if n > 0 && ok != d.Approved {
			return Decision{}, ErrBadRequest.With("the decision's fields contradict each other")
		}
		d.Approved = ok
		n++
	}
	if n == 0 {
		return Decision{}, ErrBadRequest.With("no decision found: send " + decisionFormats)
	}
	return d, nil
}

var (
	approveWords = []string{"approve", "approved", "yes", "y", "ok", "okay", "accept", "accepted", "allow", "confirm", "confirmed", "go", "true"}
	rejectWords  = []string{"reject", "rejected", "no", "n", "deny", "denied", "decline", "declined", "cancel", "refuse", "false"}
)

// ParseApprovalWord reads a word or short reply as an approval ("approved",
// "yes" …) or a rejection ("rejected", "no" …). known is false when the text
// is neither, so that a client's free text is not taken for a decision.
func ParseApprovalWord(s string) (approved, known bool) {
	w := strings.ToLower(strings.TrimSpace(s))
	w = strings.Trim(w, ".!, ")
	for _, a := range approveWords {
		if w == a {
			return true, true
		}
	}
	for _, r := range rejectWords {
		if w == r {
			return false, true
		}
	}
	return false, false
}
