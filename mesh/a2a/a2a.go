// Package a2a holds the wire types of the Agent2Agent protocol that both
// sides of the mesh speak: the bridge serves them (package bridge/a2a) and
// agents call remote agents with them. The types here are the 0.3 JSON
// shapes ("kind" discriminators, lower-case roles and states), JSON-RPC 2.0
// envelopes and error codes; version 1.0's shapes are produced and read by
// the server, which speaks both.
//
// Reference: the A2A specification, v0.3.0 and v1.0.
package a2a

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Protocol versions, as the A2A-Version header names them. A request without
// the header is 0.3.
const (
	Version03     = "0.3"
	Version10     = "1.0"
	HeaderVersion = "A2A-Version"
	// ProtocolVersion03 is the card's protocolVersion of 0.3 agents.
	ProtocolVersion03 = "0.3.0"
	// HeaderExtensions activates extensions (comma-separated URIs) on a
	// request, and lists on the answer those the agent applied;
	// HeaderExtensionsLegacy is its 0.3 name.
	HeaderExtensions       = "A2A-Extensions"
	HeaderExtensionsLegacy = "X-A2A-Extensions"
)

// ExtensionFork is the URI of the mesh's fork extension: a message in a
// new context whose metadata[ExtensionFork] is {"from": contextId, and
// "before" or "after" (a message id) or "event_seq"} starts that context
// as a branch of the other (docs/a2a.md).
const ExtensionFork = "https://github.com/agentmesh/agentmesh/blob/main/docs/a2a.md#the-fork-extension"

// Well-known paths of the agent card.
const (
	CardPath       = "/.well-known/agent-card.json"
	LegacyCardPath = "/.well-known/agent.json"
)

// JSON-RPC methods of version 0.3.
const (
	MethodSend        = "message/send"
	MethodStream      = "message/stream"
	MethodGet         = "tasks/get"
	MethodCancel      = "tasks/cancel"
	MethodResubscribe = "tasks/resubscribe"
)

// JSON-RPC methods of version 1.0.
const (
	MethodSendMessage          = "SendMessage"
	MethodSendStreamingMessage = "SendStreamingMessage"
	MethodGetTask              = "GetTask"
	MethodCancelTask           = "CancelTask"
	MethodSubscribeToTask      = "SubscribeToTask"
	MethodListTasks            = "ListTasks"
)

// JSON-RPC and A2A error codes.
const (
	CodeParseError                  = -32700
	CodeInvalidRequest              = -32600
	CodeMethodNotFound              = -32601
	CodeInvalidParams               = -32602
	CodeInternalError               = -32603
	CodeTaskNotFound                = -32001
	CodeTaskNotCancelable           = -32002
	CodePushNotificationUnsupported = -32003
	CodeUnsupportedOperation        = -32004
	CodeContentTypeNotSupported     = -32005
	CodeVersionNotSupported         = -32009
	// CodeTaskGone is the mesh's own (in JSON-RPC's range for servers):
	// the task's conversation was deleted or expired. A2A 0.3 has no
	// deletion; the HTTP status is 410 and data.code says which.
	CodeTaskGone = -32050
	// CodeRateLimited and CodeOverCapacity are this mesh's refusals by a
	// limit (HTTP 429 and 503, which the answer keeps), outside the codes
	// A2A reserves: data is {code, resetAt, retryAfter} in 0.3, an
	// ErrorInfo (reason RATE_LIMITED or OVER_CAPACITY) whose metadata
	// holds code and resetAt in 1.0.
	CodeRateLimited  = -32029
	CodeOverCapacity = -32053
)

// Request is a JSON-RPC 2.0 request.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC 2.0 response: a result or an error.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object; it is also a Go error.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("a2a error %d: %s", e.Code, e.Message) }

// Roles of messages (0.3).
const (
	RoleUser  = "user"
	RoleAgent = "agent"
)

// TaskState is the state of a task (0.3 spelling).
type TaskState string

// Task states.
const (
	StateSubmitted     TaskState = "submitted"
	StateWorking       TaskState = "working"
	StateInputRequired TaskState = "input-required"
	StateCompleted     TaskState = "completed"
	StateCanceled      TaskState = "canceled"
	StateFailed        TaskState = "failed"
	StateRejected      TaskState = "rejected"
	StateAuthRequired  TaskState = "auth-required"
	StateUnknown       TaskState = "unknown"
)

// Terminal reports whether no more updates follow a task in this state.
func (s TaskState) Terminal() bool {
	switch s {
	case StateCompleted, StateCanceled, StateFailed, StateRejected:
		return true
	}
	return false
}

// Part is one part of a message or artifact: text, data or a file.
type Part struct {
	Kind     string         `json:"kind"`
	Text     string         `json:"text,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
	File     *File          `json:"file,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// File is the content of a file part: bytes (base64) or a URI.
type File struct {
	Name     string `json:"name,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	Bytes    string `json:"bytes,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// TextPart is a text part.
func TextPart(text string) Part { return Part{Kind: "text", Text: text} }

// DataPart is a data part.
func DataPart(data map[string]any) Part { return Part{Kind: "data", Data: data} }

// Message is a message between a client and an agent.
type Message struct {
	Kind             string         `json:"kind"`
	MessageID        string         `json:"messageId"`
	Role             string         `json:"role"`
	Parts            []Part         `json:"parts"`
	TaskID           string         `json:"taskId,omitempty"`
	ContextID        string         `json:"contextId,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
	Metadata         map[string]any `json:"metadata,omitempty"`
}

// Text joins the text parts of the message.
func (m *Message) Text() string {
	if m == nil {
		return ""
	}
	return PartsText(m.Parts)
}

// PartsText joins the text of text parts, and data parts as JSON.
func PartsText(parts []Part) string {
	var out []string
	for _, p := range parts {
		switch {
		case p.Kind == "text" || (p.Kind == "" && p.Text != ""):
			out = append(out, p.Text)
		case p.Kind == "data" || p.Data != nil:
			b, _ := json.Marshal(p.Data)
			out = append(out, string(b))
		}
	}
	return strings.Join(out, "\n")
}

// TaskStatus is where a task stands.
type TaskStatus struct {
	State     TaskState `json:"state"`
	Message   *Message  `json:"message,omitempty"`
	Timestamp string    `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// Task is a unit of work of an agent.
type Task struct {
	Kind      string         `json:"kind"`
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Text is the text of the task's artifacts, else of its status message.
func (t *Task) Text() string {
	var out []string
	for _, a := range t.Artifacts {
		if s := PartsText(a.Parts); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return t.Status.Message.Text()
	}
	return strings.Join(out, "\n")
}

// StatusUpdate is a streamed change of a task's status.
type StatusUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Final     bool           `json:"final"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// ArtifactUpdate is a streamed artifact, or a chunk of one.
type ArtifactUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  Artifact       `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Kinds of 0.3 objects.
const (
	KindMessage        = "message"
	KindTask           = "task"
	KindStatusUpdate   = "status-update"
	KindArtifactUpdate = "artifact-update"
)

// SendConfig configures message/send.
type SendConfig struct {
	AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
	HistoryLength       *int     `json:"historyLength,omitempty"`
	Blocking            *bool    `json:"blocking,omitempty"`
}

// SendParams are the params of message/send and message/stream.
type SendParams struct {
	Message       Message        `json:"message"`
	Configuration *SendConfig    `json:"configuration,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// TaskIDParams are the params of tasks/cancel and tasks/resubscribe.
type TaskIDParams struct {
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// TaskQueryParams are the params of tasks/get.
type TaskQueryParams struct {
	ID            string         `json:"id"`
	HistoryLength *int           `json:"historyLength,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// SendResult is the result of message/send: a task or a message, told apart
// by kind.
type SendResult struct {
	Task    *Task
	Message *Message
}

// UnmarshalJSON reads a task or a message.
func (r *SendResult) UnmarshalJSON(data []byte) error {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &k); err != nil {
		return err
	}
	switch k.Kind {
	case KindTask:
		r.Task = new(Task)
		return json.Unmarshal(data, r.Task)
	case KindMessage:
		r.Message = new(Message)
		return json.Unmarshal(data, r.Message)
	}
	return fmt.Errorf("a2a: result of kind %q is neither a task nor a message", k.Kind)
}

// AgentCard describes an agent (0.3 fields, plus 1.0's supportedInterfaces
// so that clients of both versions accept it).
type AgentCard struct {
	Name                string         `json:"name"`
	Description         string         `json:"description"`
	URL                 string         `json:"url"`
	Version             string         `json:"version"`
	ProtocolVersion     string         `json:"protocolVersion"`
	PreferredTransport  string         `json:"preferredTransport,omitempty"`
	Capabilities        Capabilities   `json:"capabilities"`
	DefaultInputModes   []string       `json:"defaultInputModes"`
	DefaultOutputModes  []string       `json:"defaultOutputModes"`
	Skills              []Skill        `json:"skills"`
	SupportedInterfaces []Interface    `json:"supportedInterfaces,omitempty"`
	Provider            *Provider      `json:"provider,omitempty"`
	DocumentationURL    string         `json:"documentationUrl,omitempty"`
	Metadata            map[string]any `json:"metadata,omitempty"`
	// SecuritySchemes and Security (0.3) or SecurityRequirements (1.0)
	// say how to authenticate; one scheme object carries both versions'
	// fields, which each version's readers pick from.
	SecuritySchemes      map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	Security             []map[string][]string     `json:"security,omitempty"`
	SecurityRequirements []SecurityRequirement     `json:"securityRequirements,omitempty"`
}

// SecurityScheme is an HTTP authentication scheme: 0.3's {type: "http",
// scheme, bearerFormat} and 1.0's {httpAuthSecurityScheme: {scheme,
// bearerFormat}} in one object.
type SecurityScheme struct {
	Type         string                  `json:"type,omitempty"`
	Scheme       string                  `json:"scheme,omitempty"`
	BearerFormat string                  `json:"bearerFormat,omitempty"`
	Description  string                  `json:"description,omitempty"`
	HTTPAuth     *HTTPAuthSecurityScheme `json:"httpAuthSecurityScheme,omitempty"`
}

// HTTPAuthSecurityScheme is 1.0's HTTP authentication scheme.
type HTTPAuthSecurityScheme struct {
	Scheme       string `json:"scheme"`
	BearerFormat string `json:"bearerFormat,omitempty"`
	Description  string `json:"description,omitempty"`
}

// SecurityRequirement is 1.0's: the schemes a request must satisfy, each
// with its scopes.
type SecurityRequirement struct {
	Schemes map[string]StringList `json:"schemes"`
}

// StringList is 1.0's list of strings.
type StringList struct {
	List []string `json:"list"`
}

// BearerSecurity is the card's security of an agent that takes bearer
// tokens (format "JWT" when JWTs are accepted), under the name "bearer".
func BearerSecurity(format string) (map[string]SecurityScheme, []map[string][]string, []SecurityRequirement) {
	desc := "Authorization: Bearer <token>: a static token of the mesh's configuration or a JWT of its issuer"
	schemes := map[string]SecurityScheme{"bearer": {Type: "http", Scheme: "bearer", BearerFormat: format, Description: desc,
		HTTPAuth: &HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: format, Description: desc}}}
	return schemes, []map[string][]string{{"bearer": {}}}, []SecurityRequirement{{Schemes: map[string]StringList{"bearer": {List: []string{}}}}}
}

// Capabilities of an agent.
type Capabilities struct {
	Streaming              bool `json:"streaming"`
	PushNotifications      bool `json:"pushNotifications"`
	StateTransitionHistory bool `json:"stateTransitionHistory,omitempty"`
	// Extensions are the protocol extensions the agent supports, each
	// named by a URI; a client activates one with the A2A-Extensions
	// header (X-A2A-Extensions in 0.3).
	Extensions []AgentExtension `json:"extensions,omitempty"`
}

// AgentExtension declares an extension an agent supports.
type AgentExtension struct {
	URI         string         `json:"uri"`
	Description string         `json:"description,omitempty"`
	Required    bool           `json:"required,omitempty"`
	Params      map[string]any `json:"params,omitempty"`
}

// Skill is something an agent can do.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
}

// Interface is a transport an agent is reached by (1.0).
type Interface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// Provider names who runs an agent.
type Provider struct {
	Organization string `json:"organization"`
	URL          string `json:"url,omitempty"`
}
