// Package agent is the agent role: it takes work items from its agents' work
// queues and runs them (the model, the tools, the approvals, the agent
// tree), keeping nothing in memory that another replica would need.
//
// Each agent name has one durable pull consumer on mesh.work.agent.<name>.*
// (the last token names the conversation); every replica pulls from it, so
// work runs on whichever replica is free and, if that replica dies, is redelivered to another once its AckWait
// passes (running work keeps its item alive with in-progress signals).
// The conversation lives in the sessions bucket and changes only by
// compare-and-set; events go to mesh.evt.<session>.<TYPE>; tools are
// called on mesh.tool.<server>.<tool>; approvals are asked of the approver
// on mesh.approval.<uuid>.request (the agent never writes the approvals
// bucket, it only reads decisions there); calls to sub-agents are recorded
// in the calls bucket; a request on
// mesh.session.<session>.cancel stops the runs it names. Every id
// (messages, calls, approvals, events, work items) derives from the work
// item, so work run again after a crash is applied once. A user's message
// waits in the conversation as queued (mesh.QueuedTurn, recorded by the
// bridge) until the claim takes it up, in the save that claims; another
// copy of a turn that is claimed already (a lost item published again) is
// dropped.
//
// # The life of a work item
//
// A work item is a turn (a user's message, or a member's turn of a group
// chat), a step (one leaf of the agent tree), or a resume (an approval was
// decided). A step is one node of the configured tree (config.Node): an
// llm or a2a leaf, or a sequential, parallel or loop composite; "node"
// alone means a process.
//
//	agent.go     Run consumes the queue; handle makes each item a turn and
//	             acks, naks or, on its last delivery, fails it
//	turn.go      turn.run, the whole life in one function: claim, announce,
//	             run the step, settle
//	claim.go     claim the conversation (a turn), the step (a step item) or
//	             the waiting step (a resume); keep the claim alive
//	model.go     an llm step: history, model call, resolving its tool calls
//	tools.go     what the model is offered, and calling an MCP tool
//	names.go     the function names models call tools by
//	delegate.go  calls to sub-agents over A2A, and a2a steps
//	remote.go    the sub-agents: cards, breakers, retries (the A2A client)
//	pause.go     a destructive call pauses on an approval; a resume runs the
//	             decided call; notices for people
//	exchange.go  what a run writes: its messages, their ids and authors
//	state.go     the conversation state a run changes: tools' state patches,
//	             set_state, their STATE_DELTAs, saving them with the run
//	outcome.go   settle: apply the step's outcome, publish steps and the end
//	             of runs, enqueue the next steps; fail a given-up item
//	tree.go      apply an outcome to the tree: schedule, join, loop, end
//	step.go      the configured tree, prepared once by New
//	member.go    a member's turn of a group chat, and telling the group
//	health.go    liveness (Health) and circuit breaker states
//
// A turn of an agent without a tree runs its one llm step in its own work
// item. With a tree, the turn starts the root; composites only schedule
// their children, and each leaf runs as a work item of its own, so the
// branches of a parallel step run on whichever replicas are free.
//
// A destructive call saves the conversation as waiting_approval and ends the
// work item (nothing blocks on a human); the decision comes back as a resume
// on any replica, which sends the approver's signed decision with the call:
// the tool host runs nothing that is not read-only without one. A call that
// needs no person (a tool that is not destructive, or a destructive one in
// a step with allow_destructive) gets a decision by policy from the approver
// first, which checks the policy itself. Sub-agents (the a2a lists of agent.yaml) are tools named
// a2a_<name>; a call is a JSON-RPC message/send carrying the caller's
// Authorization and the conversation's X-Session-ID, and one that answers
// input-required pauses the run on a proxy approval whose decision is
// forwarded to it. A sub-agent's call is made by the agent itself, so the
// agent, not a tool host, enforces that a destructive sub-agent is called
// only after a person's approval.
//
// [Role.Run] owns every goroutine it starts (the consumer, the workers, the
// catalog watch, the agent card refresh). When its context is cancelled it
// stops taking work, lets running work items finish within DrainTimeout,
// hands the others back for redelivery, and returns nil.
package agent
