package mesh

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

const (
	// DefaultPrefix is the first token of every subject and the base of every
	// stream and bucket name. Several meshes can share one NATS server by using
	// different prefixes.
	DefaultPrefix = "mesh"

	// Subject templates. The first %s is the prefix; the others are tokens that the
	// builders of [Namespace] validate.
	// SubjectEvent carries one AG-UI event of one session: mesh.evt.<session>.<TYPE>.
	SubjectEvent = "%s.evt.%s.%s"
	// SubjectWork carries the work items of one conversation for one
	// consumer: mesh.work.<role>.<name>.<session>. The conversation's token
	// lets a bridge ask the stream whether a turn it queued is still there,
	// with one lookup on that subject, and keeps the consumer's filter one
	// subject (mesh.work.<role>.<name>.*) that permissions can name.
	SubjectWork = "%s.work.%s.%s.%s"
	// SubjectTool is the request subject of one tool: mesh.tool.<server>.<tool>.
	SubjectTool = "%s.tool.%s.%s"
	// SubjectApprovalDecide takes a decision on one approval: mesh.approval.<uuid>.decide.
	SubjectApprovalDecide = "%s.approval.%s.decide"
	// SubjectApprovalRequest asks the approver for an approval (a human's,
	// or a policy's at once): mesh.approval.<uuid>.request.
	SubjectApprovalRequest = "%s.approval.%s.request"
	// SubjectApprovalReseal asks the approver to seal a pending approval
	// that a release before seals recorded, after an admin read it
	// (mesh migrate): mesh.approval.<uuid>.reseal.
	SubjectApprovalReseal = "%s.approval.%s.reseal"
	// SubjectSessionCancel aborts the running turn of a session: mesh.session.<session>.cancel.
	SubjectSessionCancel = "%s.session.%s.cancel"
	// SubjectHeartbeat is where a node announces itself: mesh.hb.<role>.<node id>.
	SubjectHeartbeat = "%s.hb.%s.%s"
	// SubjectProbe answers liveness probes of one node: mesh.node.<node id>.probe.
	SubjectProbe = "%s.node.%s.probe"

	// SubjectRestart asks a node to exit so that its supervisor starts it again:
	// mesh.node.<node id>.restart.
	SubjectRestart = "%s.node.%s.restart"
)

// Roles, as they appear in work and heartbeat subjects and in node keys.
const (
	RoleAgent    = "agent"
	RoleToolhost = "toolhost"
	RoleApprover = "approver"
	RoleGroup    = "group"
	RoleBridge   = "bridge"
	RoleMonitor  = "monitor"
	RoleNATS     = "nats"
	// RoleReplay runs recorded conversations against another agent
	// configuration (`mesh replay`): its turns are on mesh.work.replay.*.*,
	// a queue no live agent consumes.
	RoleReplay = "replay"
)

// Stream and bucket base names. The full name adds the prefix: MESH_EVENTS,
// MESH_WORK, mesh_sessions … with the default prefix.
const (
	StreamEvents    = "EVENTS"
	StreamWork      = "WORK"
	StreamMessages  = "MESSAGES"
	BucketSessions  = "sessions"
	BucketApprovals = "approvals"
	BucketTools     = "tools"
	BucketNodes     = "nodes"
	BucketCalls     = "calls"
	// BucketLimits holds the request budgets and the sets of active
	// conversations every bridge counts together (ratelimit.go).
	BucketLimits = "limits"
	// BucketUsage holds what each principal's conversations spent on
	// models per day, which the agents that spend write and the bridges
	// read for the daily budgets (usage.go).
	BucketUsage = "usage"
	// BucketFiles is the object store of conversations' files (files.go):
	// mesh_files, its stream OBJ_mesh_files.
	BucketFiles = "files"
	// BucketReplays holds the reports of `mesh replay`, by run id, which
	// the bridge serves to admins (GET /replays).
	BucketReplays = "replays"
)

// The NATS micro services of the mesh: every toolhost registers
// ToolServiceName and every approver ApprovalServiceName, so `nats micro
// ls` lists them.
const (
	ToolServiceName     = "mesh-tools"
	ApprovalServiceName = "mesh-approvals"
)

// ServicePing is the subject that pings every instance of the service svc.
func ServicePing(svc string) string { return "$SRV.PING." + svc }

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Namespace builds the subjects, stream names and bucket names of one mesh.
// The zero value is not usable; use [NewNamespace].
type Namespace struct {
	prefix string
}

// NewNamespace returns the namespace for prefix; an empty prefix means
// [DefaultPrefix]. A prefix is letters, digits, '_' and '-'.
func NewNamespace(prefix string) (Namespace, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(prefix) {
		return Namespace{}, fmt.Errorf("%w: prefix %q: use letters, digits, '_' and '-'", ErrInvalidToken, prefix)
	}
	return Namespace{prefix: prefix}, nil
}

// DefaultNamespace is the namespace of [DefaultPrefix].
func DefaultNamespace() Namespace { return Namespace{prefix: DefaultPrefix} }

// Prefix returns the first token of the namespace's subjects.
func (n Namespace) Prefix() string { return n.prefix }

// Stream returns the full name of a stream, e.g. MESH_EVENTS for [StreamEvents].
func (n Namespace) Stream(base string) string {
	return strings.ToUpper(n.prefix) + "_" + base
}

// Bucket returns the full name of a KV bucket, e.g. mesh_sessions for [BucketSessions].
func (n Namespace) Bucket(base string) string {
	return n.prefix + "_" + base
}

// Event returns mesh.evt.<session>.<TYPE>.
func (n Namespace) Event(session string, typ EventType) (string, error) {
	return n.build(SubjectEvent, session, string(typ))
}

// EventsAll is the wildcard of every event of the mesh: mesh.evt.>.
func (n Namespace) EventsAll() string { return n.prefix + ".evt.>" }

// EventsOf is the wildcard of every event of one session: mesh.evt.<session>.>.
func (n Namespace) EventsOf(session string) (string, error) {
	if err := CheckToken(session); err != nil {
		return "", err
	}
	return n.prefix + ".evt." + session + ".>", nil
}

// Messages returns mesh.msg.<conversation>: the conversation's messages
// in the message log (messages.go).
func (n Namespace) Messages(conv string) (string, error) {
	if err := CheckToken(conv); err != nil {
		return "", err
	}
	return n.prefix + ".msg." + conv, nil
}

// MessagesAll is the wildcard of every conversation's messages: mesh.msg.*.
func (n Namespace) MessagesAll() string { return n.prefix + ".msg.*" }

// EventsOfType is the wildcard of one event type in every session: mesh.evt.*.<TYPE>.
func (n Namespace) EventsOfType(typ EventType) (string, error) {
	if err := CheckToken(string(typ)); err != nil {
		return "", err
	}
	return n.prefix + ".evt.*." + string(typ), nil
}

// Work returns mesh.work.<role>.<name>.<session>.
func (n Namespace) Work(role, name, session string) (string, error) {
	return n.build(SubjectWork, role, name, session)
}

// WorkFilter is the filter of the consumer of role and name:
// mesh.work.<role>.<name>.*, every conversation's items.
func (n Namespace) WorkFilter(role, name string) (string, error) {
	if err := CheckToken(role); err != nil {
		return "", err
	}
	if err := CheckToken(name); err != nil {
		return "", err
	}
	return n.prefix + ".work." + role + "." + name + ".*", nil
}

// WorkAll is the wildcard of the work stream: mesh.work.*.*.*. A publish
// on a subject of another shape is refused by JetStream rather than kept
// where no consumer takes it.
func (n Namespace) WorkAll() string { return n.prefix + ".work.*.*.*" }

// Tool returns mesh.tool.<server>.<tool>; both names pass through [ToolToken].
func (n Namespace) Tool(server, tool string) (string, error) {
	return n.build(SubjectTool, server, ToolToken(tool))
}

// ApprovalDecide returns mesh.approval.<uuid>.decide.
func (n Namespace) ApprovalDecide(approvalID string) (string, error) {
	return n.build(SubjectApprovalDecide, approvalID)
}

// ApprovalDecideAll is the wildcard approvers serve: mesh.approval.*.decide.
func (n Namespace) ApprovalDecideAll() string { return n.prefix + ".approval.*.decide" }

// ApprovalRequest returns mesh.approval.<uuid>.request.
func (n Namespace) ApprovalRequest(approvalID string) (string, error) {
	return n.build(SubjectApprovalRequest, approvalID)
}

// ApprovalRequestAll is the wildcard approvers serve: mesh.approval.*.request.
func (n Namespace) ApprovalRequestAll() string { return n.prefix + ".approval.*.request" }

// ApprovalReseal returns mesh.approval.<uuid>.reseal.
func (n Namespace) ApprovalReseal(approvalID string) (string, error) {
	return n.build(SubjectApprovalReseal, approvalID)
}

// ApprovalResealAll is the wildcard approvers serve: mesh.approval.*.reseal.
func (n Namespace) ApprovalResealAll() string { return n.prefix + ".approval.*.reseal" }

// SessionCancel returns mesh.session.<session>.cancel.
func (n Namespace) SessionCancel(session string) (string, error) {
	return n.build(SubjectSessionCancel, session)
}

// SessionCancelAll is the wildcard agents listen on: mesh.session.*.cancel.
func (n Namespace) SessionCancelAll() string { return n.prefix + ".session.*.cancel" }

// Heartbeat returns mesh.hb.<role>.<node id>.
func (n Namespace) Heartbeat(role, node string) (string, error) {
	return n.build(SubjectHeartbeat, role, node)
}

// HeartbeatAll is the wildcard monitors watch: mesh.hb.>.
func (n Namespace) HeartbeatAll() string { return n.prefix + ".hb.>" }

// Probe returns mesh.node.<node id>.probe.
func (n Namespace) Probe(node string) (string, error) {
	return n.build(SubjectProbe, node)
}

func (n Namespace) build(template string, tokens ...string) (string, error) {
	args := make([]any, 0, len(tokens)+1)
	args = append(args, n.prefix)
	for _, t := range tokens {
		if err := CheckToken(t); err != nil {
			return "", err
		}
		args = append(args, t)
	}
	return fmt.Sprintf(template, args...), nil
}

// CheckToken reports whether s can be one token of a subject and one part of a
// KV key: not empty, and only letters, digits, '_', '-' and '='.
func CheckToken(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrInvalidToken)
	}
	for i := 0; i < len(s); i++ {
		if !tokenByte(s[i]) {
			return fmt.Errorf("%w: %q has %q at %d", ErrInvalidToken, s, s[i], i)
		}
	}
	return nil
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '='
}

// ToolToken turns an MCP tool name into a subject token and key part. MCP
// allows '.', '/' and other characters that NATS tokens cannot hold; those,
// and '=' itself, become '=' followed by two hex digits, so the mapping is
// reversible and names that are already plain stay as they are.
func ToolToken(name string) string {
	plain := name != ""
	for i := 0; i < len(name); i++ {
		if !tokenByte(name[i]) || name[i] == '=' {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	if name == "" {
		return "="
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if tokenByte(c) && c != '=' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "=%02x", c)
	}
	return b.String()
}

// ToolName reverses [ToolToken].
func toolName(token string) (string, error) {
	if token == "=" {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(token); i++ {
		c := token[i]
		if c != '=' {
			b.WriteByte(c)
			continue
		}
		if i+3 > len(token) {
			return "", fmt.Errorf("%w: truncated escape in %q", ErrInvalidToken, token)
		}
		v, err := strconv.ParseUint(token[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%w: bad escape in %q", ErrInvalidToken, token)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// Restart returns mesh.node.<node id>.restart.
func (n Namespace) Restart(node string) (string, error) {
	return n.build(SubjectRestart, node)
}

// EventSubjects is the wildcard of an event of any session and type:
// mesh.evt.*.*.
func (n Namespace) EventSubjects() string { return n.prefix + ".evt.*.*" }

// HeartbeatsOf is the wildcard of the heartbeats of role: mesh.hb.<role>.*.
func (n Namespace) HeartbeatsOf(role string) string { return n.prefix + ".hb." + role + ".*" }

// ProbeAll is the wildcard of every node's probe subject.
func (n Namespace) ProbeAll() string { return n.prefix + ".node.*.probe" }

// RestartAll is the wildcard of every node's restart subject.
func (n Namespace) RestartAll() string { return n.prefix + ".node.*.restart" }

// ToolAll is the wildcard of every tool's request subject.
func (n Namespace) ToolAll() string { return n.prefix + ".tool.>" }

// WorkOf is the wildcard of every work item of role: mesh.work.<role>.*.*.
func (n Namespace) WorkOf(role string) string { return n.prefix + ".work." + role + ".*.*" }

// Inbox is the inbox prefix of role: _INBOX.<prefix>.<role>.
func (n Namespace) Inbox(role string) string { return "_INBOX." + n.prefix + "." + role }
