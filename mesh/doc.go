// Package mesh holds the contracts every Agent Mesh role shares: the names of
// subjects, streams and buckets, the AG-UI event model, the conversation
// (session) model and its compare-and-set store, approvals, the tool catalog,
// work items, errors that cross NATS, and the embedded NATS server.
//
// Roles import mesh; mesh imports no role. The goroutines started here end
// with what started them: the embedded [Server]'s on [Server.Shutdown], a
// [WorkLoop]'s and a [WatchKV]'s when their context ends, and
// [KeepInProgress]'s when its stop func is called.
//
// # NATS layout
//
// With the default prefix "mesh" ([DefaultPrefix]):
//
//	stream MESH_EVENTS   mesh.evt.<session>.<TYPE>     every AG-UI event, limits retention
//	stream MESH_WORK     mesh.work.<role>.<name>.<session>  work queue: turns, tree steps, resumes, group steps
//	KV     mesh_sessions <session>                     conversations, changed by compare-and-set
//	KV     mesh_approvals <approval uuid>              pending and decided approvals
//	KV     mesh_tools    <server>.<tool>               tool catalog published by toolhosts
//	KV     mesh_nodes    <role>.<node id>              liveness registry
//	KV     mesh_calls    <call id>                     tool call records (run once)
//	req    mesh.tool.<server>.<tool>                   tool calls, served by toolhosts
//	req    mesh.approval.<uuid>.decide                 decisions, served by approvers
//	req    mesh.approval.<uuid>.request                approval requests, served by approvers
//	pub    mesh.session.<session>.cancel               abort the running turn
//	pub    mesh.hb.<role>.<node id>                    heartbeats
//	req    mesh.node.<node id>.probe                   liveness probes
//
// A [Namespace] builds every one of those names for a prefix; [Provision]
// creates the streams and buckets idempotently.
//
// # Identities
//
// Every role connects with an identity of its own (an nkey, [EnsureSeeds]),
// allowed only what its job needs: [Namespace.Permissions] is the one table
// of who may publish, subscribe, consume and read or write which bucket, and
// configures the embedded [Server] ([ServerUser]). With identities on, only
// the admin provisions; a role binds what it uses ([BindRetry]). [Connect]
// opens a role's connection, with its own inbox and a wire guard that keeps
// it on the bus when a subject is longer than the server takes, and drops
// what JetStream pushes outside its inbox (see wire.go).
//
// # Work
//
// Roles take their work from durable pull consumers on the work stream
// through a [WorkLoop]: a bounded number of workers, each item kept in
// progress while it is handled, and a drain when the role stops (the items
// in hand finish within a deadline, the others are handed back for
// redelivery). See ExampleWorkLoop.
//
// # Sessions
//
// A [Conversation] lives in the sessions bucket under its id and is only ever
// changed through [SessionStore.Update], which loads it, applies a change
// function and writes it back with the revision it read; on a conflict it
// reloads and applies the change again.
package mesh
