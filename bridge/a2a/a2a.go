// Package a2a serves the mesh's agent, and each of its group chats as an
// agent of its own, to other agents over the Agent2Agent protocol,
// versions 0.3 and 1.0, on the bridge:
//
//	GET  /.well-known/agent-card.json                the agent card (also /.well-known/agent.json)
//	POST /a2a                                        JSON-RPC 2.0; the A2A-Version header picks the
//	                                                 version (absent: 0.3; unknown: -32009)
//	GET  /groups/{name}/.well-known/agent-card.json  the card of group {name} (also …/agent.json)
//	POST /groups/{name}/a2a                          the same JSON-RPC methods, for the group's chats
//
// A task is a conversation: its id and its contextId are the conversation
// id. A message without taskId starts a conversation (with the caller's
// X-Session-ID as trace id) unless its contextId names one, which it then
// continues or creates with that id. Every request's Authorization and
// X-Session-ID travel with the turns and decisions it starts, in NATS
// headers only ([core.Caller]).
//
//	                 0.3                   1.0
//	send             message/send          SendMessage           → Task  /  {"task": Task}
//	stream           message/stream        SendStreamingMessage  → SSE of JSON-RPC responses
//	get              tasks/get             GetTask               → Task
//	cancel           tasks/cancel          CancelTask            → Task
//	subscribe        tasks/resubscribe     SubscribeToTask       → SSE
//	list             —                     ListTasks             → {tasks, nextPageToken, pageSize, totalSize}
//
// # Task states
//
//	conversation                             task state       status message
//	a message waits for an agent (queued)    submitted
//	a turn runs (status running)             working
//	waiting_approval                         input-required   text + data {"approval": {uuid, tool_name, tool_args, description}}
//	active, no run yet                       submitted
//	active, last run succeeded               completed        (the reply is the artifact)
//	active, last run failed                  failed           the error
//	active, last run cancelled               canceled
//
// A message no agent has taken up yet leaves the task submitted: a
// non-blocking send answers once an agent has the run (working) or after
// 2 s (submitted), a stream starts with the task submitted and says working
// at RUN_STARTED, tasks/resubscribe follows it, and tasks/cancel cancels it
// before it runs. A second message meanwhile is refused (-32004).
//
// A completed task has one artifact, the last run's reply (artifactId: the
// id of the message holding it); the history is the conversation's user
// and assistant messages with text (historyLength: how many of the last).
//
// # Groups
//
// Each group of the configuration is an A2A agent of its own under
// /groups/{name}: its card names the group, describes it (its
// description, else its members), advertises /groups/{name}/a2a and has
// one skill per member (id and name: the member's agent); capabilities and
// versions are the agent's. Its tasks are chats of the group: a message
// without taskId or with a new contextId starts one ([core.Core.CreateChat]),
// and each message runs a round, the members answering in turn. The task
// works until the round ends; its artifact is the last member's answer
// (metadata {"name": member}); its history holds every member's answer,
// each with metadata {"name": member}; a stream says who speaks
// (status-update "<member> speaks") and streams each answer as its own
// artifact. A member's destructive call pauses the round as input-required,
// answered as for the agent. A task is served by one endpoint only: /a2a
// knows the agent's conversations, /groups/{name}/a2a the chats of
// {name}; any other id is an unknown task (-32001), and ListTasks lists the
// endpoint's own. An unknown group is HTTP 404 group_not_found (the
// bridge's JSON error), for its card and its endpoint alike.
//
// # Continuing a task
//
// message/send with the taskId of a task waiting for approval decides that
// approval: "approved", "yes" … approve, "rejected", "no" … reject
// ([mesh.ParseApprovalWord]; a data part {"approved": bool} works too); the
// answer is the task after the resume ran. Any other text leaves the task
// input-required and says what is expected. A task that is working refuses
// a message with -32004; a completed (or failed, canceled) one takes it as
// its next turn, since a conversation goes on.
//
// # Versions
//
//	                     0.3                                  1.0
//	objects              "kind" on tasks, messages, parts     no kind; parts {text} {data} {url} {raw}
//	roles, states        user / agent, completed …            ROLE_USER / ROLE_AGENT, TASK_STATE_COMPLETED …
//	send result          the Task                             {"task": Task}
//	stream items         Task, status-update, artifact-update {"task"}, {"statusUpdate"}, {"artifactUpdate"}
//	end of a stream      status-update with "final": true     the stream ends after the last statusUpdate
//	non-blocking send    configuration.blocking: false        configuration.returnImmediately: true
//	error data           none                                 [ErrorInfo] (A2A errors), [BadRequest] (invalid params)
//	subscribe, terminal  the task, then a final update        -32004 unsupported operation
//	stream errors        one SSE event (a2a-go reads SSE)     a JSON answer (as the reference server)
//
// # Errors
//
// Every JSON-RPC error is answered with HTTP 200, except a body over
// MaxBodyBytes (-32600 with HTTP 413): -32700 invalid JSON, -32600 not a
// single request object (batches are refused), -32601 unknown method (or a
// method of the other version), -32602 invalid params (no message, no text
// part, wrong types), -32001 unknown task, -32002 task not cancelable,
// -32003 push notifications, -32004 a task that is working, -32009 an
// A2A-Version other than 0.3 and 1.0, -32603 the mesh failed.
//
// # Goroutines
//
// None of its own: each request runs on its server goroutine; a stream
// follows the events stream through the core's hub ([core.Core.Follow]) and
// ends when its run ends, its client leaves (the task goes on) or the core
// stops.
package a2a

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/bridge/sse"
	"github.com/agentmesh/agentmesh/config"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// Config configures the A2A server.
type Config struct {
	Core *core.Core
	// Name and Description present the agent in its card.
	Name, Description string
	// Version is the card's version (the agent's, not the protocol's).
	// Empty means "dev".
	Version string
	// PublicURL is the base URL clients reach the bridge at; the card
	// advertises PublicURL + "/a2a". Empty means the scheme and Host of the
	// card request.
	PublicURL string
	// SubAgents are the A2A agents the mesh delegates to; each is a skill
	// of the card (see [SubAgents]).
	SubAgents []config.A2AAgent
	// MaxBodyBytes bounds request bodies. Zero means 1 MiB.
	MaxBodyBytes int64
	// WaitTimeout is how long a blocking send waits for its run before it
	// answers the task as working. Zero means 30s.
	WaitTimeout time.Duration
	// KeepAlive is the interval of SSE comments on idle streams. Zero means 15s.
	KeepAlive time.Duration
	// Bearer says the bridge takes bearer tokens: the card advertises the
	// scheme, and lists its skills only to an authenticated caller.
	// BearerFormat is "JWT" when JWTs are accepted.
	Bearer       bool
	BearerFormat string
	Logger       zerolog.Logger
}

type handler struct {
	cfg  Config
	core *core.Core
	log  zerolog.Logger
}

// Register mounts the agent card and the JSON-RPC endpoint on mux, and
// those of every group chat under /groups/{name}.
func Register(mux core.Mux, cfg Config) {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = config.DefaultMaxBodyBytes
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = config.DefaultWaitTimeout
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = sse.DefaultKeepAlive
	}
	h := &handler{cfg: cfg, core: cfg.Core, log: cfg.Logger}
	mux.HandleFunc("GET "+wire.CardPath, h.agent(h.card))
	mux.HandleFunc("GET "+wire.LegacyCardPath, h.agent(h.card))
	mux.HandleFunc("POST "+Path, h.agent(h.rpc))
	mux.HandleFunc("GET "+groupPrefix+wire.CardPath, h.group(h.card))
	mux.HandleFunc("GET "+groupPrefix+wire.LegacyCardPath, h.group(h.card))
	mux.HandleFunc("POST "+groupPrefix+Path, h.group(h.rpc))
	mux.HandleFunc("GET "+agentPrefix+wire.CardPath, h.named(h.card))
	mux.HandleFunc("GET "+agentPrefix+wire.LegacyCardPath, h.named(h.card))
	mux.HandleFunc("POST "+agentPrefix+Path, h.named(h.rpc))
}
