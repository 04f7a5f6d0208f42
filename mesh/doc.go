// Package mesh holds the contracts every Agent Mesh role shares: the names
// of subjects, streams and buckets ([Namespace]), the AG-UI event model
// ([Event]), the conversation model ([Conversation], [Message]), approvals
// and their signed statements ([Approval], [ApprovalStatement]), tool calls
// and the tool catalog ([ToolRequest], [ToolEntry]), work items
// ([WorkItem]), node liveness ([NodeInfo]), and the errors that keep their
// kind across NATS and HTTP ([Error]).
//
// Every role imports mesh; mesh imports no role and does no I/O of its own.
// What acts on these contracts lives beside it, one job per package:
//
//	mesh/store       the state in JetStream: conversations, messages, approvals, catalog, files, nodes; provisioning
//	mesh/bus         talking to other roles: tool calls, approval requests, event publishing
//	mesh/workloop    taking work from the work queue, and enqueueing it
//	mesh/limits      request budgets and active conversations every bridge counts together
//	mesh/identity    who a process is on NATS and what it may do: seeds, signing keys, the permission table
//	mesh/natsconn    a role's connection to NATS, with its wire guard
//	mesh/role        what a process gives each role it runs: connections, namespace, node id, logger
//	mesh/natsserver  the embedded NATS server, and the files of a plain nats-server
//
// # NATS layout
//
// With the default prefix "mesh" ([DefaultPrefix]):
//
//	stream MESH_EVENTS     mesh.evt.<session>.<TYPE>           every AG-UI event, limits retention
//	stream MESH_WORK       mesh.work.<role>.<name>.<session>   work queue: turns, tree steps, resumes, group steps
//	stream MESH_MESSAGES   mesh.msg.<session>                  conversations' messages, appended, never edited
//	KV     mesh_sessions   <session>                           conversation heads, changed by compare-and-set
//	KV     mesh_approvals  <approval uuid>, _keys.<key>        pending and decided approvals; approver keys
//	KV     mesh_tools      <server>.<tool>                     tool catalog published by tool hosts
//	KV     mesh_nodes      <role>.<node id>                    liveness registry
//	KV     mesh_calls      <call id>, a2a.<call id>            tool call records (run once)
//	KV     mesh_limits     rate.…, active.…                    request budgets, active conversations
//	object mesh_files      <session>.<file id>                 files of conversations' messages
//	req    mesh.tool.<server>.<tool>                           tool calls, served by tool hosts
//	req    mesh.approval.<uuid>.request                        approval requests, served by approvers
//	req    mesh.approval.<uuid>.decide                         decisions, served by approvers
//	pub    mesh.session.<session>.cancel                       abort the running turn
//	pub    mesh.hb.<role>.<node id>                            heartbeats
//	req    mesh.node.<node id>.probe                           liveness probes
//	pub    mesh.node.<node id>.restart                         a monitor asks a stuck node to exit
//
// A [Namespace] builds every one of those names for a prefix, from the
// constants of subjects.go; its builders refuse tokens that would change a
// subject's shape. See ExampleNamespace.
//
// # Conversations
//
// A [Conversation] is a head (status, pending approval, turn, state) and its
// messages; [Conversation.Stored] counts the messages already in the
// message log, which a change may append to and never edit. Stores change a
// conversation only by compare-and-set on the revision they read.
package mesh
