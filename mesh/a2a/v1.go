package a2a

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Version 1.0 shapes. A2A 1.0 serializes the lf.a2a.v1 protobuf messages as
// ProtoJSON: camelCase fields, no "kind" discriminators, enums by their
// SCREAMING_SNAKE names, parts as a oneof of text, raw, url and data, and a
// wrapper object ({"task"}, {"message"}, {"statusUpdate"},
// {"artifactUpdate"}) where a result can be one of several types. The types
// below are those shapes; the V1 methods and the From…V1 functions convert
// between them and the 0.3 types of this package, which the mesh uses
// internally.
//
// Reference: specification/a2a.proto of a2aproject/A2A v1.0.1, and the
// JSON-RPC transport of @a2a-js/sdk 1.x.

// ProtocolVersion10 is the protocolVersion of a 1.0 interface in a card.
const ProtocolVersion10 = "1.0"

// BindingJSONRPC is the protocolBinding (1.0) and transport (0.3) of
// JSON-RPC over HTTP.
const BindingJSONRPC = "JSONRPC"

// Roles of messages in 1.0.
const (
	RoleUserV1  = "ROLE_USER"
	RoleAgentV1 = "ROLE_AGENT"
)

// RoleV1 is the 1.0 spelling of a 0.3 role; an unknown role gives
// ROLE_UNSPECIFIED.
func RoleV1(role string) string {
	switch role {
	case RoleUser:
		return RoleUserV1
	case RoleAgent:
		return RoleAgentV1
	}
	return "ROLE_UNSPECIFIED"
}

// RoleFromV1 is the 0.3 spelling of a 1.0 role; ok is false for any other
// value.
func RoleFromV1(role string) (string, bool) {
	switch role {
	case RoleUserV1:
		return RoleUser, true
	case RoleAgentV1:
		return RoleAgent, true
	}
	return "", false
}

// V1 is the 1.0 name of the state: TASK_STATE_COMPLETED …
func (s TaskState) V1() string {
	if s == "" || s == StateUnknown {
		return "TASK_STATE_UNSPECIFIED"
	}
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

// TaskStateFromV1 reads a 1.0 state name; ok is false for
// TASK_STATE_UNSPECIFIED and anything that is not a state.
func TaskStateFromV1(s string) (TaskState, bool) {
	name, ok := strings.CutPrefix(s, "TASK_STATE_")
	if !ok {
		return "", false
	}
	st := TaskState(strings.ToLower(strings.ReplaceAll(name, "_", "-")))
	switch st {
	case StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateCanceled,
		StateFailed, StateRejected, StateAuthRequired:
		return st, true
	}
	return "", false
}

// PartV1 is a 1.0 part: exactly one of Text, Raw, URL and Data is set.
type PartV1 struct {
	Text *string `json:"text,omitempty"`
	// Raw is base64, as ProtoJSON writes bytes.
	Raw string `json:"raw,omitempty"`
	URL string `json:"url,omitempty"`
	// Data is any JSON value (google.protobuf.Value).
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TextPartV1 is a 1.0 text part.
func TextPartV1(text string) PartV1 { return PartV1{Text: &text} }

// MessageV1 is a 1.0 message.
type MessageV1 struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            []PartV1       `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

// TaskStatusV1 is a 1.0 task status.
type TaskStatusV1 struct {
	State     string     `json:"state"`
	Message   *MessageV1 `json:"message,omitempty"`
	Timestamp string     `json:"timestamp,omitempty"`
}

// ArtifactV1 is a 1.0 artifact.
type ArtifactV1 struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []PartV1       `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

// TaskV1 is a 1.0 task.
type TaskV1 struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId,omitempty"`
	Status    TaskStatusV1   `json:"status"`
	Artifacts []ArtifactV1   `json:"artifacts,omitempty"`
	History   []MessageV1    `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// StatusUpdateV1 is a 1.0 TaskStatusUpdateEvent: no "final"; a stream ends
// after the task reaches a terminal or interrupted state.
type StatusUpdateV1 struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatusV1   `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// ArtifactUpdateV1 is a 1.0 TaskArtifactUpdateEvent.
type ArtifactUpdateV1 struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  ArtifactV1     `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// StreamResponseV1 is one item of a 1.0 stream: exactly one field is set.
type StreamResponseV1 struct {
	Task           *TaskV1           `json:"task,omitempty"`
	Message        *MessageV1        `json:"message,omitempty"`
	StatusUpdate   *StatusUpdateV1   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *ArtifactUpdateV1 `json:"artifactUpdate,omitempty"`
}

// SendMessageResponseV1 is the result of SendMessage: a task or a message.
type SendMessageResponseV1 struct {
	Task    *TaskV1    `json:"task,omitempty"`
	Message *MessageV1 `json:"message,omitempty"`
}

// SendMessageConfigV1 configures SendMessage. Blocking is the default;
// ReturnImmediately asks for the task as soon as it is created.
type SendMessageConfigV1 struct {
	AcceptedOutputModes        []string        `json:"acceptedOutputModes,omitempty"`
	TaskPushNotificationConfig json.RawMessage `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength              *int            `json:"historyLength,omitempty"`
	ReturnImmediately          bool            `json:"returnImmediately,omitempty"`
}

// SendMessageRequestV1 are the params of SendMessage and SendStreamingMessage.
type SendMessageRequestV1 struct {
	Tenant        string               `json:"tenant,omitempty"`
	Message       *MessageV1           `json:"message"`
	Configuration *SendMessageConfigV1 `json:"configuration,omitempty"`
	Metadata      map[string]any       `json:"metadata,omitempty"`
}

// GetTaskRequestV1 are the params of GetTask.
type GetTaskRequestV1 struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

// TaskIDRequestV1 are the params of CancelTask and SubscribeToTask.
type TaskIDRequestV1 struct {
	Tenant   string         `json:"tenant,omitempty"`
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// ListTasksRequestV1 are the params of ListTasks.
type ListTasksRequestV1 struct {
	Tenant    string `json:"tenant,omitempty"`
	ContextID string `json:"contextId,omitempty"`
	// Status filters by state (TASK_STATE_…).
	Status string `json:"status,omitempty"`
	// PageSize is 1 to 100; unset means 50.
	PageSize  *int   `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
	// HistoryLength bounds each task's history.
	HistoryLength *int `json:"historyLength,omitempty"`
	// StatusTimestampAfter keeps tasks whose status changed at or after this
	// ISO 8601 time.
	StatusTimestampAfter string `json:"statusTimestampAfter,omitempty"`
	IncludeArtifacts     *bool  `json:"includeArtifacts,omitempty"`
}

// ListTasksResponseV1 is the result of ListTasks. Every field is always
// present; NextPageToken is "" on the last page.
type ListTasksResponseV1 struct {
	Tasks         []TaskV1 `json:"tasks"`
	NextPageToken string   `json:"nextPageToken"`
	PageSize      int      `json:"pageSize"`
	TotalSize     int      `json:"totalSize"`
}

// V1 converts a 0.3 part. A file part becomes a url or raw part.
func (p Part) V1() PartV1 {
	out := PartV1{Metadata: p.Metadata}
	switch {
	case p.Kind == "text" || (p.Kind == "" && p.Data == nil && p.File == nil):
		t := p.Text
		out.Text = &t
	case p.Kind == "data" || p.Data != nil:
		out.Data, _ = json.Marshal(p.Data)
	case p.File != nil:
		out.Filename, out.MediaType = p.File.Name, p.File.MimeType
		if p.File.URI != "" {
			out.URL = p.File.URI
		} else {
			out.Raw = p.File.Bytes
		}
	}
	return out
}

// PartFromV1 converts a 1.0 part. Data that is not a JSON object is wrapped
// as {"value": data}, since 0.3 data parts hold objects only.
func PartFromV1(p PartV1) (Part, error) {
	switch {
	case p.Text != nil:
		return Part{Kind: "text", Text: *p.Text, Metadata: p.Metadata}, nil
	case len(p.Data) > 0 && string(p.Data) != "null":
		var obj map[string]any
		if err := json.Unmarshal(p.Data, &obj); err != nil {
			var v any
			if err := json.Unmarshal(p.Data, &v); err != nil {
				return Part{}, fmt.Errorf("part data: %w", err)
			}
			obj = map[string]any{"value": v}
		}
		return Part{Kind: "data", Data: obj, Metadata: p.Metadata}, nil
	case p.URL != "":
		return Part{Kind: "file", File: &File{Name: p.Filename, MimeType: p.MediaType, URI: p.URL}, Metadata: p.Metadata}, nil
	case p.Raw != "":
		if _, err := base64.StdEncoding.DecodeString(p.Raw); err != nil {
			if _, err := base64.URLEncoding.DecodeString(p.Raw); err != nil {
				return Part{}, fmt.Errorf("part raw: not base64")
			}
		}
		return Part{Kind: "file", File: &File{Name: p.Filename, MimeType: p.MediaType, Bytes: p.Raw}, Metadata: p.Metadata}, nil
	}
	return Part{}, fmt.Errorf("part has none of text, data, url and raw")
}

func partsV1(parts []Part) []PartV1 {
	out := make([]PartV1, len(parts))
	for i, p := range parts {
		out[i] = p.V1()
	}
	return out
}

// V1 converts a 0.3 message.
func (m *Message) V1() *MessageV1 {
	if m == nil {
		return nil
	}
	return &MessageV1{
		MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Role: RoleV1(m.Role),
		Parts: partsV1(m.Parts), Metadata: m.Metadata, ReferenceTaskIDs: m.ReferenceTaskIDs,
	}
}

// MessageFromV1 converts a 1.0 message; it fails on an unknown role or a
// part with no content.
func MessageFromV1(m *MessageV1) (*Message, error) {
	role, ok := RoleFromV1(m.Role)
	if !ok {
		return nil, fmt.Errorf("role %q is not %s or %s", m.Role, RoleUserV1, RoleAgentV1)
	}
	out := &Message{
		Kind: KindMessage, MessageID: m.MessageID, Role: role, TaskID: m.TaskID, ContextID: m.ContextID,
		ReferenceTaskIDs: m.ReferenceTaskIDs, Metadata: m.Metadata, Parts: make([]Part, 0, len(m.Parts)),
	}
	for i, p := range m.Parts {
		part, err := PartFromV1(p)
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, part)
	}
	return out, nil
}

// V1 converts a 0.3 status.
func (s TaskStatus) V1() TaskStatusV1 {
	return TaskStatusV1{State: s.State.V1(), Message: s.Message.V1(), Timestamp: s.Timestamp}
}

// V1 converts a 0.3 artifact.
func (a Artifact) V1() ArtifactV1 {
	return ArtifactV1{ArtifactID: a.ArtifactID, Name: a.Name, Description: a.Description, Parts: partsV1(a.Parts), Metadata: a.Metadata}
}

// V1 converts a 0.3 task.
func (t *Task) V1() *TaskV1 {
	if t == nil {
		return nil
	}
	out := &TaskV1{ID: t.ID, ContextID: t.ContextID, Status: t.Status.V1(), Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, a.V1())
	}
	for i := range t.History {
		out.History = append(out.History, *t.History[i].V1())
	}
	return out
}

// V1 converts a 0.3 status update; Final has no 1.0 counterpart.
func (u StatusUpdate) V1() *StatusUpdateV1 {
	return &StatusUpdateV1{TaskID: u.TaskID, ContextID: u.ContextID, Status: u.Status.V1(), Metadata: u.Metadata}
}

// V1 converts a 0.3 artifact update.
func (u ArtifactUpdate) V1() *ArtifactUpdateV1 {
	return &ArtifactUpdateV1{TaskID: u.TaskID, ContextID: u.ContextID, Artifact: u.Artifact.V1(), Append: u.Append, LastChunk: u.LastChunk, Metadata: u.Metadata}
}
