package identity

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/mesh"
)

// RoleAdmin is the identity of provisioning, operators and the nats CLI:
// it may publish and subscribe to everything.
const RoleAdmin = "admin"

// Roles are the roles that connect with an identity of their own, in the
// order of the permission table.
func Roles() []string {
	return []string{mesh.RoleAgent, mesh.RoleToolhost, mesh.RoleApprover, mesh.RoleGroup, mesh.RoleBridge, mesh.RoleMonitor, mesh.RoleReplay}
}

// ResponderSuffix ends the name of a role's responder identity.
//
// On NATS a requester chooses the reply subject, and the server lets a
// responder publish its answer wherever the responder may publish at all:
// a request whose reply subject is $KV.<bucket>.<key> makes a responder
// that writes that bucket write that key. So no role answers with its own
// identity. Its services and its probe answers go out on a second
// connection, with its responder identity, which may subscribe to what the
// role serves and publish nothing but answers to inboxes ([GrantReply]):
// the server refuses any other reply, whatever a process does.
const ResponderSuffix = "-responder"

// Responder is the name of role's responder identity.
func Responder(role string) string { return role + ResponderSuffix }

// Identities are the names of every identity of the mesh's roles, each role
// followed by its responder: with [RoleAdmin], what `mesh creds` writes a
// seed for.
func Identities() []string {
	out := make([]string, 0, 2*len(Roles()))
	for _, r := range Roles() {
		out = append(out, r, Responder(r))
	}
	return out
}

// GrantKind says what a [Grant] allows.
type GrantKind string

// Grant kinds.
const (
	// GrantPublish: core publish on a subject (no reply expected).
	GrantPublish GrantKind = "publish"
	// GrantStore: publish into a stream (events, work); the stream's
	// acknowledgement comes to the role's inbox.
	GrantStore GrantKind = "store"
	// GrantRequest: requests on a subject, replies to the role's inbox.
	GrantRequest GrantKind = "request"
	// GrantSubscribe: core subscription to a subject.
	GrantSubscribe GrantKind = "subscribe"
	// GrantServe: a service endpoint, on the role's responder identity:
	// subscribe, and answer what comes in to the caller's inbox.
	GrantServe GrantKind = "serve"
	// GrantReply: publish answers to the inboxes Subject matches; all the
	// publishing a responder identity does. Never written in the table:
	// derived from it (the inboxes of the roles whose requests the role
	// serves, and [OperatorInboxes]).
	GrantReply GrantKind = "reply"
	// GrantConsume: a durable pull consumer of a stream (Consumer names its
	// pattern, Filter its filter subject): create it, pull, acknowledge.
	GrantConsume GrantKind = "consume"
	// GrantConsumerInfo: read the state of consumers (no messages).
	GrantConsumerInfo GrantKind = "consumer-info"
	// GrantConsumerList: list the consumers of a stream with their state
	// (no messages).
	GrantConsumerList GrantKind = "consumer-list"
	// GrantFollow: ordered and ephemeral consumers of a stream, filtered.
	GrantFollow GrantKind = "follow"
	// GrantStreamGet: read a stream's messages on Filter's subjects by
	// subject and sequence (no consumer).
	GrantStreamGet GrantKind = "stream-get"
	// GrantLog: append to a stream on Filter's subjects and read it by
	// direct gets (the message log, MESH_MESSAGES).
	GrantLog GrantKind = "log"
	// GrantStreamPurge: purge a stream's messages, or delete them one at a
	// time (the API names no subject: the grant is the whole stream's).
	GrantStreamPurge GrantKind = "stream-purge"
	// GrantKVRead: get keys of a bucket (Filter: which keys).
	GrantKVRead GrantKind = "kv-read"
	// GrantKVWatch: watch and list keys of a bucket (ordered consumers).
	GrantKVWatch GrantKind = "kv-watch"
	// GrantKVWrite: put, update and delete keys of a bucket.
	GrantKVWrite GrantKind = "kv-write"
	// GrantObjectRead: read objects of an object store (Subject: its base
	// name): their metadata by direct get, their chunks through an ordered
	// consumer.
	GrantObjectRead GrantKind = "object-read"
	// GrantObjectWrite: put objects into an object store.
	GrantObjectWrite GrantKind = "object-write"
)

// Grant is one line of the permission table: one thing a role may do.
type Grant struct {
	Kind GrantKind
	// Subject is the subject of a publish, request, subscription or
	// service, the stream of a consumer, or the bucket (base name) of a KV
	// grant.
	Subject string
	// Consumer is a consumer's name, or "*" (GrantConsume,
	// GrantConsumerInfo): NATS wildcards are whole tokens, so agent_* cannot
	// be said; the filter is what keeps a role to its own work. Filter is
	// the consumer's filter subject, or a KV grant's keys (empty: every key).
	Consumer, Filter string
	// Why says what the role does with it.
	Why string
}

// Permissions is what one identity may do on NATS: the allow lists the
// server enforces, and the grants they were built from.
type Permissions struct {
	// Role is the identity's name: a role, a role's [Responder], or
	// [RoleAdmin].
	Role   string
	Grants []Grant
	// Publish and Subscribe are the allowed subjects (server permissions).
	// No identity answers a request outside Publish: none has
	// allow_responses.
	Publish, Subscribe []string
	// Inbox is the identity's inbox prefix (nats.CustomInboxPrefix): only
	// a role may subscribe below its own, so no other role reads its
	// replies.
	Inbox string
	// Buckets are the KV buckets (base names) the role binds at start.
	Buckets []string
	// Streams are the streams (base names) the role binds at start: those
	// it reads messages of by sequence or subject.
	Streams []string
	// Objects are the object stores (base names) the role binds at start.
	Objects []string

	ns mesh.Namespace
}

// OperatorInboxes are the reply subjects of a client that keeps the default
// inbox prefix of nats.go, nats.js and the nats CLI: _INBOX.<nuid>, and
// _INBOX.<nuid>.<token> for a request answered through its shared reply
// subscription. A role's own inboxes (_INBOX.<prefix>.<role>.…) have four
// tokens or more, so answering operators opens no way into a role's inbox.
func OperatorInboxes() []string { return []string{"_INBOX.*", "_INBOX.*.*"} }

// Permissions returns the permissions of an identity: one of
// [Roles()], a role's [Responder], or [RoleAdmin]; ok is false for
// another name.
func PermissionsOf(n mesh.Namespace, name string) (p Permissions, ok bool) {
	p = Permissions{Role: name, Inbox: n.Inbox(name), ns: n}
	if name == RoleAdmin {
		p.Inbox = ""
		p.Publish, p.Subscribe = []string{">"}, []string{">"}
		p.Buckets = []string{mesh.BucketSessions, mesh.BucketApprovals, mesh.BucketTools, mesh.BucketNodes, mesh.BucketCalls, mesh.BucketLimits, mesh.BucketUsage, mesh.BucketReplays}
		p.Streams = []string{mesh.StreamEvents, mesh.StreamWork, mesh.StreamMessages}
		p.Objects = []string{mesh.BucketFiles}
		return p, true
	}
	if role, ok := strings.CutSuffix(name, ResponderSuffix); ok && roleGrants(n, role) != nil {
		// A responder requests nothing: it has no inbox of its own.
		p.Grants = responderGrants(n, role)
	} else if grants := roleGrants(n, name); grants != nil {
		// Its own inbox: to read replies, and to answer itself a request
		// its wire guard would not send (wire.go).
		p.Publish = []string{p.Inbox + ".>"}
		p.Subscribe = []string{p.Inbox + ".>"}
		for _, g := range append(nodeGrants(n, name), grants...) {
			if g.Kind != GrantServe {
				p.Grants = append(p.Grants, g)
			}
		}
	} else {
		return Permissions{}, false
	}
	for _, g := range p.Grants {
		pub, sub := compile(n, g)
		p.Publish = appendNew(p.Publish, pub...)
		p.Subscribe = appendNew(p.Subscribe, sub...)
		switch g.Kind {
		case GrantKVRead, GrantKVWatch, GrantKVWrite:
			p.Buckets = appendNew(p.Buckets, g.Subject)
		case GrantStreamGet, GrantLog:
			p.Streams = appendNew(p.Streams, strings.TrimPrefix(g.Subject, n.Stream("")))
		case GrantObjectRead, GrantObjectWrite:
			p.Objects = appendNew(p.Objects, g.Subject)
		}
	}
	return p, true
}

// responderGrants are the grants of role's responder identity: what the
// role serves, and answers to the inboxes of the roles that may ask for it
// and of operators' clients.
func responderGrants(n mesh.Namespace, role string) []Grant {
	var grants []Grant
	for _, g := range append(nodeGrants(n, role), roleGrants(n, role)...) {
		if g.Kind == GrantServe {
			grants = append(grants, g)
		}
	}
	served := slices.Clone(grants)
	for _, caller := range Roles() {
		for _, req := range append(nodeGrants(n, caller), roleGrants(n, caller)...) {
			asks := slices.ContainsFunc(served, func(s Grant) bool { return SubjectsOverlap(s.Subject, req.Subject) })
			inbox := n.Inbox(caller) + ".>"
			if req.Kind != GrantRequest || !asks || slices.ContainsFunc(grants, func(g Grant) bool { return g.Subject == inbox }) {
				continue
			}
			grants = append(grants, Grant{Kind: GrantReply, Subject: inbox, Why: "answers to the " + caller + " (" + req.Why + ")"})
		}
	}
	for _, inbox := range OperatorInboxes() {
		grants = append(grants, Grant{Kind: GrantReply, Subject: inbox, Why: "answers to operators' clients"})
	}
	return grants
}

// nodeGrants are what every role process does as a node of the mesh.
func nodeGrants(n mesh.Namespace, role string) []Grant {
	return []Grant{
		{Kind: GrantPublish, Subject: n.HeartbeatsOf(role), Why: "heartbeats"},
		{Kind: GrantKVWrite, Subject: mesh.BucketNodes, Filter: role + ".*", Why: "its own liveness key"},
		{Kind: GrantServe, Subject: n.ProbeAll(), Why: "answer liveness probes"},
		{Kind: GrantSubscribe, Subject: n.RestartAll(), Why: "exit when a monitor finds it stuck"},
	}
}

// roleGrants is the permission table: what each role's job needs, and
// nothing else. Every subject a role publishes, serves or reads, every
// stream it consumes and every bucket it reads or writes is here.
func roleGrants(n mesh.Namespace, role string) []Grant {
	work := n.WorkOf
	// The event subjects of one type, of every conversation.
	events := func(t mesh.EventType) string { return must(n.EventsOfType(t)) }
	switch role {
	case mesh.RoleAgent:
		g := []Grant{
			{Kind: GrantConsume, Subject: n.Stream(mesh.StreamWork), Consumer: "*", Filter: work(mesh.RoleAgent), Why: "turns, tree steps, resumes (with the caller's token)"},
			{Kind: GrantStore, Subject: work(mesh.RoleAgent), Why: "tree steps"},
			{Kind: GrantStore, Subject: work(mesh.RoleGroup), Why: "a member's turn ended (group_next)"},
			{Kind: GrantStore, Subject: n.EventSubjects(), Why: "AG-UI events"},
			{Kind: GrantRequest, Subject: n.ToolAll(), Why: "tool calls"},
			{Kind: GrantRequest, Subject: n.ApprovalRequestAll(), Why: "ask for an approval"},
			{Kind: GrantSubscribe, Subject: n.SessionCancelAll(), Why: "cancel requests"},
			{Kind: GrantPublish, Subject: n.SessionCancelAll(), Why: "stop the rest of a failed tree"},
			{Kind: GrantKVRead, Subject: mesh.BucketSessions, Why: "conversations"},
			{Kind: GrantKVWrite, Subject: mesh.BucketSessions, Why: "conversations, by compare-and-set"},
			{Kind: GrantLog, Subject: n.Stream(mesh.StreamMessages), Filter: n.MessagesAll(), Why: "conversations' messages: append, read"},
			{Kind: GrantKVRead, Subject: mesh.BucketApprovals, Why: "the decided approval a resume carries on"},
			{Kind: GrantKVRead, Subject: mesh.BucketTools, Why: "the tool catalog"},
			{Kind: GrantKVWatch, Subject: mesh.BucketTools, Why: "the tool catalog"},
			{Kind: GrantKVRead, Subject: mesh.BucketNodes, Filter: mesh.RoleToolhost + ".*", Why: "is the toolhost of a call alive"},
			{Kind: GrantKVRead, Subject: mesh.BucketCalls, Filter: mesh.SubAgentCallPrefix + "*", Why: "its sub-agent call records"},
			{Kind: GrantKVWrite, Subject: mesh.BucketCalls, Filter: mesh.SubAgentCallPrefix + "*", Why: "its sub-agent call records (the tool hosts' are theirs alone)"},
			{Kind: GrantObjectRead, Subject: mesh.BucketFiles, Why: "the files of a conversation, sent to the model"},
			{Kind: GrantKVRead, Subject: mesh.BucketUsage, Why: "principals' daily spend: a daily budget spent refuses the turn"},
			{Kind: GrantKVWrite, Subject: mesh.BucketUsage, Why: "principals' daily spend: it adds what its model calls used (the only writer)"},
		}
		return g
	case mesh.RoleGroup:
		return []Grant{
			{Kind: GrantConsume, Subject: n.Stream(mesh.StreamWork), Consumer: "*", Filter: work(mesh.RoleGroup), Why: "group chat work (with the caller's token)"},
			{Kind: GrantStore, Subject: work(mesh.RoleAgent), Why: "members' turns"},
			{Kind: GrantStore, Subject: work(mesh.RoleGroup), Why: "its own checks and next steps"},
			{Kind: GrantStore, Subject: n.EventSubjects(), Why: "AG-UI events"},
			{Kind: GrantSubscribe, Subject: n.SessionCancelAll(), Why: "cancel requests"},
			{Kind: GrantKVRead, Subject: mesh.BucketSessions, Why: "conversations"},
			{Kind: GrantKVWrite, Subject: mesh.BucketSessions, Why: "conversations, by compare-and-set"},
			{Kind: GrantLog, Subject: n.Stream(mesh.StreamMessages), Filter: n.MessagesAll(), Why: "conversations' messages: append, read"},
			{Kind: GrantKVRead, Subject: mesh.BucketNodes, Filter: mesh.RoleAgent + ".*", Why: "which members are alive"},
			{Kind: GrantKVWatch, Subject: mesh.BucketNodes, Filter: mesh.RoleAgent + ".*", Why: "which members are alive"},
		}
	case mesh.RoleToolhost:
		return slices.Concat([]Grant{
			{Kind: GrantServe, Subject: n.ToolAll(), Why: "tool calls (micro service " + mesh.ToolServiceName + ")"},
		}, discovery(mesh.ToolServiceName), []Grant{
			{Kind: GrantKVRead, Subject: mesh.BucketTools, Why: "its catalog entries"},
			{Kind: GrantKVWatch, Subject: mesh.BucketTools, Why: "its catalog entries, to drop stale ones"},
			{Kind: GrantKVWrite, Subject: mesh.BucketTools, Why: "publish its tools"},
			{Kind: GrantKVRead, Subject: mesh.BucketCalls, Why: "call records (run once)"},
			{Kind: GrantKVWatch, Subject: mesh.BucketCalls, Why: "wait for a call another attempt runs"},
			{Kind: GrantKVWrite, Subject: mesh.BucketCalls, Why: "call records (run once)"},
			{Kind: GrantKVRead, Subject: mesh.BucketNodes, Filter: mesh.RoleToolhost + ".*", Why: "is the host of a started call alive"},
			{Kind: GrantKVRead, Subject: mesh.BucketApprovals, Filter: mesh.ApprovalKeysFilter, Why: "the approvers' public keys"},
			{Kind: GrantKVWatch, Subject: mesh.BucketApprovals, Filter: mesh.ApprovalKeysFilter, Why: "the approvers' public keys, as they are published"},
		})
	case mesh.RoleApprover:
		return slices.Concat([]Grant{
			{Kind: GrantServe, Subject: n.ApprovalDecideAll(), Why: "decisions (with the decider's token)"},
			{Kind: GrantServe, Subject: n.ApprovalRequestAll(), Why: "record a pending approval"},
			{Kind: GrantServe, Subject: n.ApprovalResealAll(), Why: "seal an approval asked before seals, for the admin (mesh migrate)"},
		}, discovery(mesh.ApprovalServiceName), []Grant{
			{Kind: GrantStore, Subject: events(mesh.EventCustom), Why: "approval_decided"},
			{Kind: GrantStore, Subject: work(mesh.RoleAgent), Why: "resumes (with the decider's token)"},
			{Kind: GrantKVRead, Subject: mesh.BucketApprovals, Why: "approvals"},
			{Kind: GrantKVWatch, Subject: mesh.BucketApprovals, Why: "decided approvals whose resume is missing"},
			{Kind: GrantKVWrite, Subject: mesh.BucketApprovals, Why: "approvals: the only writer"},
			{Kind: GrantKVRead, Subject: mesh.BucketTools, Why: "is a tool destructive (policy non_destructive)"},
		})
	case mesh.RoleBridge:
		return []Grant{
			{Kind: GrantStore, Subject: work(mesh.RoleAgent), Why: "turns (with the caller's token)"},
			{Kind: GrantStore, Subject: work(mesh.RoleGroup), Why: "group chat messages (with the caller's token)"},
			{Kind: GrantRequest, Subject: n.ApprovalDecideAll(), Why: "decisions (with the decider's token)"},
			{Kind: GrantPublish, Subject: n.SessionCancelAll(), Why: "cancel a run"},
			{Kind: GrantStore, Subject: events(mesh.EventCustom), Why: "run_queued: a message the bridge queued"},
			{Kind: GrantStore, Subject: events(mesh.EventRunError), Why: "a queued turn not taken or lost (UNAVAILABLE, TURN_LOST)"},
			{Kind: GrantStore, Subject: events(mesh.EventRunFinished), Why: "a queued turn cancelled before an agent took it"},
			{Kind: GrantFollow, Subject: n.Stream(mesh.StreamEvents), Filter: n.EventsAll(), Why: "stream events to clients"},
			{Kind: GrantStreamPurge, Subject: n.Stream(mesh.StreamEvents), Why: "DELETE /conversations/{id}?purge=true (admins): a conversation's events"},
			{Kind: GrantStreamPurge, Subject: n.Stream(mesh.StreamMessages), Why: "DELETE /conversations/{id}?purge=true (admins): a conversation's messages"},
			{Kind: GrantConsumerInfo, Subject: n.Stream(mesh.StreamWork), Consumer: "*", Why: "/ready: is an agent pulling"},
			{Kind: GrantConsumerList, Subject: n.Stream(mesh.StreamWork), Why: "/ops/mesh: the work queue of every agent and group"},
			{Kind: GrantStreamGet, Subject: n.Stream(mesh.StreamWork), Filter: work("*"), Why: "is a queued turn's item still there (it published it, and holds the token it carries)"},
			{Kind: GrantRequest, Subject: mesh.ServicePing(mesh.ToolServiceName), Why: "/ready"},
			{Kind: GrantRequest, Subject: mesh.ServicePing(mesh.ApprovalServiceName), Why: "/ready"},
			{Kind: GrantKVRead, Subject: mesh.BucketSessions, Why: "conversations"},
			{Kind: GrantKVWatch, Subject: mesh.BucketSessions, Why: "list conversations"},
			{Kind: GrantKVWrite, Subject: mesh.BucketSessions, Why: "create conversations"},
			{Kind: GrantLog, Subject: n.Stream(mesh.StreamMessages), Filter: n.MessagesAll(), Why: "conversations' messages: pages, notices of lost turns"},
			{Kind: GrantFollow, Subject: n.Stream(mesh.StreamMessages), Filter: n.MessagesAll(), Why: "keep the records agents append, which the answers to their turns show (what the direct gets above read too)"},
			{Kind: GrantKVRead, Subject: mesh.BucketApprovals, Why: "show approvals"},
			{Kind: GrantKVWatch, Subject: mesh.BucketApprovals, Why: "list approvals"},
			{Kind: GrantKVRead, Subject: mesh.BucketTools, Why: "/tools, the agent card"},
			{Kind: GrantKVWatch, Subject: mesh.BucketTools, Why: "/tools, the agent card"},
			{Kind: GrantKVRead, Subject: mesh.BucketNodes, Why: "/health"},
			{Kind: GrantKVWatch, Subject: mesh.BucketNodes, Why: "/health, degradation mode"},
			{Kind: GrantKVRead, Subject: mesh.BucketLimits, Why: "request budgets, active conversations"},
			{Kind: GrantKVWrite, Subject: mesh.BucketLimits, Why: "request budgets, active conversations, by compare-and-set"},
			{Kind: GrantKVRead, Subject: mesh.BucketUsage, Why: "principals' daily spend: refuse a message past a daily budget"},
			{Kind: GrantObjectWrite, Subject: mesh.BucketFiles, Why: "store the files of users' messages"},
			{Kind: GrantObjectRead, Subject: mesh.BucketFiles, Why: "GET /conversations/{id}/files/{file}"},
			{Kind: GrantKVRead, Subject: mesh.BucketReplays, Why: "GET /replays/{id}: a replay's report"},
			{Kind: GrantKVWatch, Subject: mesh.BucketReplays, Why: "GET /replays: the reports"},
		}
	case mesh.RoleReplay:
		// An agent of its own queue that may run read-only tools and
		// nothing else: no approval request, no approvals, no call
		// records, so it can obtain no statement a tool host would run a
		// tool that is not read-only with.
		return []Grant{
			{Kind: GrantConsume, Subject: n.Stream(mesh.StreamWork), Consumer: "*", Filter: work(mesh.RoleReplay), Why: "the replay's turns"},
			{Kind: GrantStore, Subject: work(mesh.RoleReplay), Why: "the replay's turns"},
			{Kind: GrantStore, Subject: n.EventSubjects(), Why: "AG-UI events of the replay's runs"},
			{Kind: GrantRequest, Subject: n.ToolAll(), Why: "read-only tool calls (the tool host runs no other without an approval)"},
			{Kind: GrantSubscribe, Subject: n.SessionCancelAll(), Why: "cancel requests"},
			{Kind: GrantKVRead, Subject: mesh.BucketSessions, Why: "the recorded conversations, its own"},
			{Kind: GrantKVWatch, Subject: mesh.BucketSessions, Why: "find the recorded conversations (time range, agent)"},
			{Kind: GrantKVWrite, Subject: mesh.BucketSessions, Why: "its own conversations, by compare-and-set, removed after the report"},
			{Kind: GrantLog, Subject: n.Stream(mesh.StreamMessages), Filter: n.MessagesAll(), Why: "conversations' messages: read the recorded ones, append its own"},
			{Kind: GrantStreamPurge, Subject: n.Stream(mesh.StreamMessages), Why: "remove its own conversations' messages after the report"},
			{Kind: GrantFollow, Subject: n.Stream(mesh.StreamMessages), Filter: n.MessagesAll(), Why: "read a conversation's log before removing it: a branch may share it"},
			{Kind: GrantStreamPurge, Subject: n.Stream(mesh.StreamEvents), Why: "remove its own conversations' events after the report"},
			{Kind: GrantFollow, Subject: n.Stream(mesh.StreamEvents), Filter: n.EventsAll(), Why: "read a conversation's events before removing them, one at a time"},
			{Kind: GrantKVRead, Subject: mesh.BucketTools, Why: "the tool catalog: which tools are read-only"},
			{Kind: GrantKVWatch, Subject: mesh.BucketTools, Why: "the tool catalog"},
			{Kind: GrantKVRead, Subject: mesh.BucketNodes, Filter: mesh.RoleToolhost + ".*", Why: "is the toolhost of a call alive"},
			{Kind: GrantKVRead, Subject: mesh.BucketReplays, Why: "reports"},
			{Kind: GrantKVWrite, Subject: mesh.BucketReplays, Why: "store its report"},
		}
	case mesh.RoleMonitor:
		return []Grant{
			{Kind: GrantSubscribe, Subject: n.HeartbeatAll(), Why: "every node's heartbeats"},
			{Kind: GrantRequest, Subject: n.ProbeAll(), Why: "liveness probes"},
			{Kind: GrantPublish, Subject: n.RestartAll(), Why: "ask a stuck node to exit"},
			{Kind: GrantStore, Subject: must(n.Event(mesh.SystemSession, mesh.EventCustom)), Why: "node_down, node_up, degradation"},
			{Kind: GrantKVRead, Subject: mesh.BucketNodes, Why: "every node"},
			{Kind: GrantKVWatch, Subject: mesh.BucketNodes, Why: "every node"},
			{Kind: GrantKVWrite, Subject: mesh.BucketNodes, Why: "down records, degradation mode"},
		}
	}
	return nil
}

// discovery are the grants of a micro service's discovery subjects.
func discovery(svc string) []Grant {
	var out []Grant
	for _, s := range ServiceSubjects(svc) {
		out = append(out, Grant{Kind: GrantServe, Subject: s, Why: "service discovery"})
	}
	return out
}

// must is a subject of the table, built from valid tokens.
func must(subject string, err error) string {
	if err != nil {
		panic(fmt.Sprintf("identity: permission table: %v", err))
	}
	return subject
}

// compile turns a grant into the subjects it allows to publish and to
// subscribe to.
func compile(n mesh.Namespace, g Grant) (pub, sub []string) {
	const api = "$JS.API."
	switch g.Kind {
	case GrantPublish, GrantStore, GrantRequest, GrantReply:
		return []string{g.Subject}, nil
	case GrantSubscribe, GrantServe:
		return nil, []string{g.Subject}
	case GrantConsume:
		s, c := g.Subject, g.Consumer
		return []string{
			api + "CONSUMER.CREATE." + s + "." + c + "." + g.Filter,
			api + "CONSUMER.INFO." + s + "." + c,
			api + "CONSUMER.MSG.NEXT." + s + "." + c,
			// Acks, naks and progress: the v1 and v2 (domain, account hash) forms.
			"$JS.ACK." + s + "." + c + ".>",
			"$JS.ACK.*.*." + s + "." + c + ".>",
		}, nil
	case GrantConsumerInfo:
		return []string{api + "CONSUMER.INFO." + g.Subject + "." + g.Consumer}, nil
	case GrantConsumerList:
		return []string{api + "CONSUMER.LIST." + g.Subject}, nil
	case GrantStreamGet:
		// The API names no subject: the grant is the whole stream's. The
		// stream's info binds it (jetstream.Stream).
		return []string{api + "STREAM.INFO." + g.Subject, api + "STREAM.MSG.GET." + g.Subject}, nil
	case GrantLog:
		// A direct get names its sequence (or subject) in the body, not
		// the API subject: the grant reads the whole log.
		return []string{g.Filter, api + "STREAM.INFO." + g.Subject, api + "DIRECT.GET." + g.Subject}, nil
	case GrantStreamPurge:
		return []string{api + "STREAM.INFO." + g.Subject, api + "STREAM.PURGE." + g.Subject, api + "STREAM.MSG.DELETE." + g.Subject}, nil
	case GrantFollow:
		s := g.Subject
		pub := []string{
			api + "STREAM.INFO." + s,
			api + "CONSUMER.CREATE." + s + ".*." + g.Filter,
			api + "CONSUMER.INFO." + s + ".*",
			api + "CONSUMER.MSG.NEXT." + s + ".*",
			api + "CONSUMER.DELETE." + s + ".*",
		}
		// A consumer of several filter subjects names none in its create
		// subject, so the server cannot hold it to Filter: that form is
		// allowed only when Filter is everything the stream stores.
		if g.Filter == streamSubjects(n, s) {
			pub = append(pub, api+"CONSUMER.CREATE."+s+".*")
		}
		return pub, nil
	}
	if g.Kind == GrantObjectRead || g.Kind == GrantObjectWrite {
		return compileObjects(n, g)
	}
	bucket := n.Bucket(g.Subject)
	stream := "KV_" + bucket
	keys := g.Filter
	if keys == "" {
		keys = ">"
	}
	switch g.Kind {
	case GrantKVRead:
		return []string{api + "STREAM.INFO." + stream, api + "DIRECT.GET." + stream + ".$KV." + bucket + "." + keys}, nil
	case GrantKVWatch:
		return []string{
			api + "STREAM.INFO." + stream,
			api + "CONSUMER.CREATE." + stream + ".*.$KV." + bucket + "." + keys,
			api + "CONSUMER.DELETE." + stream + ".*",
			// Flow control of the watch's push consumer (v1 and v2 forms).
			"$JS.FC." + stream + ".>",
			"$JS.FC.*.*." + stream + ".>",
		}, nil
	case GrantKVWrite:
		return []string{api + "STREAM.INFO." + stream, "$KV." + bucket + "." + keys}, nil
	}
	panic(fmt.Sprintf("identity: unknown grant kind %q", g.Kind))
}

// compileObjects turns an object store grant into subjects. An object's
// name is encoded in its subjects: the grant is the whole store's.
func compileObjects(n mesh.Namespace, g Grant) (pub, sub []string) {
	const api = "$JS.API."
	bucket := n.Bucket(g.Subject)
	stream := "OBJ_" + bucket
	if g.Kind == GrantObjectWrite {
		// Chunks, then the metadata (a rollup of the object's subject).
		return []string{api + "STREAM.INFO." + stream, "$O." + bucket + ".C.>", "$O." + bucket + ".M.>"}, nil
	}
	return []string{
		api + "STREAM.INFO." + stream,
		api + "DIRECT.GET." + stream + ".$O." + bucket + ".M.>",
		// The ordered push consumer that reads an object's chunks (its
		// deliver subject is the role's inbox), its flow control.
		api + "CONSUMER.CREATE." + stream + ".*.$O." + bucket + ".C.>",
		api + "CONSUMER.DELETE." + stream + ".*",
		"$JS.FC." + stream + ".>",
		"$JS.FC.*.*." + stream + ".>",
	}, nil
}

// streamSubjects is the wildcard of everything stream (its full name)
// stores, or "" for a stream that is not one of the mesh's.
func streamSubjects(n mesh.Namespace, stream string) string {
	switch stream {
	case n.Stream(mesh.StreamEvents):
		return n.EventsAll()
	case n.Stream(mesh.StreamWork):
		return n.WorkAll()
	case n.Stream(mesh.StreamMessages):
		return n.MessagesAll()
	}
	return ""
}

func appendNew(list []string, items ...string) []string {
	for _, s := range items {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// CanPublish reports whether the permissions allow publishing on subject.
func (p Permissions) CanPublish(subject string) bool { return matchAny(p.Publish, subject) }

// CanSubscribe reports whether the server lets the identity subscribe to
// subject. It matches subject's tokens against the allowed patterns as
// nats-server does, wildcards taken as they are written: a '*' of the
// table matches a '>' too, so where the table allows $SRV.* the server
// lets the identity subscribe to $SRV.> (which then receives every
// discovery subject, none of them the mesh's).
func (p Permissions) CanSubscribe(subject string) bool {
	st := strings.Split(subject, ".")
	for _, pat := range p.Subscribe {
		if tokensMatch(strings.Split(pat, "."), st) {
			return true
		}
	}
	return false
}

// tokensMatch reports whether pattern matches the tokens of subject, each
// taken literally: '*' any one token, '>' one or more.
func tokensMatch(pattern, subject []string) bool {
	for i, p := range pattern {
		if p == ">" {
			return len(subject) > i
		}
		if i >= len(subject) || p != "*" && p != subject[i] {
			return false
		}
	}
	return len(pattern) == len(subject)
}

// CanRead reports whether the role can see messages on subject, by a core
// subscription, through a consumer of the stream that stores them
// (streams: the subjects each stream of the mesh stores, by stream name),
// or, for a key of a bucket ($KV.<bucket>.<key>), by reading the bucket.
func (p Permissions) CanRead(subject string, streams map[string]string) bool {
	if p.CanSubscribe(subject) {
		return true
	}
	for _, g := range p.Grants {
		switch g.Kind {
		case GrantConsume, GrantFollow, GrantStreamGet, GrantLog:
			if SubjectMatches(streams[g.Subject], subject) && SubjectMatches(g.Filter, subject) {
				return true
			}
		case GrantKVRead, GrantKVWatch:
			keys := g.Filter
			if keys == "" {
				keys = ">"
			}
			if rest, ok := strings.CutPrefix(subject, "$KV."); ok {
				bucket, key, _ := strings.Cut(rest, ".")
				if bucket == p.ns.Bucket(g.Subject) && SubjectMatches(keys, key) {
					return true
				}
			}
		}
	}
	return false
}

func matchAny(patterns []string, subject string) bool {
	for _, pat := range patterns {
		if SubjectMatches(pat, subject) {
			return true
		}
	}
	return false
}

// SubjectsOverlap reports whether some subject matches both patterns, with
// NATS wildcards: '*' one token, '>' one or more.
func SubjectsOverlap(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		if at[i] == ">" || bt[i] == ">" {
			return true
		}
		if at[i] != "*" && bt[i] != "*" && at[i] != bt[i] {
			return false
		}
	}
	return len(at) == len(bt)
}

// SubjectMatches reports whether subject (literal, or itself a pattern, in
// which case its wildcard tokens must be matched by the same wildcards)
// matches pattern, with NATS wildcards: '*' one token, '>' the rest.
func SubjectMatches(pattern, subject string) bool {
	if pattern == "" {
		return false
	}
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) {
			return false
		}
		if p != "*" && p != st[i] || p == "*" && st[i] == ">" {
			return false
		}
	}
	return len(pt) == len(st)
}

// ServiceSubjects are the micro discovery subjects a service named svc
// answers: $SRV.<verb>, $SRV.<verb>.<svc> and $SRV.<verb>.<svc>.<id>.
func ServiceSubjects(svc string) []string {
	return []string{"$SRV.*", "$SRV.*." + svc, "$SRV.*." + svc + ".*"}
}
