package a2a

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// dialect is one version of the protocol: its method names and how it reads
// params and writes results. Requests are read into the version-neutral
// [sendRequest]; tasks and events are built as 0.3 objects and converted on
// the way out.
type dialect interface {
	version() string
	methods() map[string]method
	// send reads the params of the send methods.
	send(c *call) (*sendRequest, *rpcError)
	// taskQuery reads the params of get (id, historyLength).
	taskQuery(c *call) (string, *int, *rpcError)
	// taskID reads the params of cancel and subscribe.
	taskID(c *call) (string, *rpcError)
	// sendResult is the result of the send method.
	sendResult(t *wire.Task) any
	// task is the result of get and cancel.
	task(t *wire.Task) any
	// item is one event of a stream: a task, status update or artifact
	// update.
	item(ev any) any
}

// sendRequest is a message sent to the agent, whatever the version.
type sendRequest struct {
	msg *wire.Message
	// text joins the message's text parts.
	text string
	// approved is a decision a data part {"approved": bool} carries.
	approved *bool
	// uploads are the message's file parts (0.3 file {bytes|uri, mimeType,
	// name}; 1.0 {raw|url, mediaType, filename}, read as 0.3's).
	uploads []core.Upload
	// blocking: wait until the task ends or pauses before answering.
	blocking bool
	history  *int
}

// readMessage checks a message and extracts what the mesh uses of it.
func readMessage(m *wire.Message, roleWant string) (*sendRequest, *rpcError) {
	if m == nil {
		return nil, errParams("message", `"message" is required`)
	}
	if strings.TrimSpace(m.MessageID) == "" {
		return nil, errParams("message.messageId", `"message.messageId" is required`)
	}
	if m.Role != wire.RoleUser {
		return nil, errParams("message.role", fmt.Sprintf(`"message.role" must be %q`, roleWant))
	}
	req := &sendRequest{msg: m, blocking: true}
	var texts []string
	for _, p := range m.Parts {
		switch {
		case p.Kind == "text":
			if strings.TrimSpace(p.Text) != "" {
				texts = append(texts, p.Text)
			}
		case p.Kind == "data":
			if b, ok := p.Data["approved"].(bool); ok {
				req.approved = &b
			}
		case p.Kind == "file" && p.File != nil:
			req.uploads = append(req.uploads, core.Upload{Name: p.File.Name, MediaType: p.File.MimeType, Base64: p.File.Bytes, URL: p.File.URI})
		}
	}
	req.text = strings.Join(texts, "\n")
	if req.text == "" && req.approved == nil && len(req.uploads) == 0 {
		return nil, errParams("message.parts", "the message has no text part: send at least one non-empty text part")
	}
	return req, nil
}

// v03 is A2A 0.3: slash methods, "kind" discriminators, lower-case roles
// and states, status updates with "final".
type v03 struct{}

func (v03) version() string { return wire.Version03 }

func (v03) methods() map[string]method {
	return map[string]method{
		wire.MethodSend:        send,
		wire.MethodStream:      stream,
		wire.MethodGet:         get,
		wire.MethodCancel:      cancel,
		wire.MethodResubscribe: resubscribe,

		"tasks/pushNotificationConfig/set":    pushUnsupported,
		"tasks/pushNotificationConfig/get":    pushUnsupported,
		"tasks/pushNotificationConfig/list":   pushUnsupported,
		"tasks/pushNotificationConfig/delete": pushUnsupported,
		"agent/getAuthenticatedExtendedCard":  extendedCardUnsupported,
	}
}

func (v03) send(c *call) (*sendRequest, *rpcError) {
	var p struct {
		Message       *wire.Message `json:"message"`
		Configuration *struct {
			HistoryLength          *int            `json:"historyLength"`
			Blocking               *bool           `json:"blocking"`
			PushNotificationConfig json.RawMessage `json:"pushNotificationConfig"`
		} `json:"configuration"`
	}
	if err := c.decodeParams(&p); err != nil {
		return nil, err
	}
	if p.Message != nil {
		if p.Message.Kind != "" && p.Message.Kind != wire.KindMessage {
			return nil, errParams("message.kind", `"message.kind" must be "message"`)
		}
		for i, part := range p.Message.Parts {
			switch part.Kind {
			case "text", "data", "file":
			case "":
				if part.Text == "" {
					return nil, errParams(fmt.Sprintf("message.parts[%d].kind", i), fmt.Sprintf(`"message.parts[%d].kind" must be "text", "data" or "file"`, i))
				}
				p.Message.Parts[i].Kind = "text"
			default:
				return nil, errParams(fmt.Sprintf("message.parts[%d].kind", i), fmt.Sprintf(`"message.parts[%d].kind" must be "text", "data" or "file"`, i))
			}
		}
	}
	req, err := readMessage(p.Message, wire.RoleUser)
	if err != nil {
		return nil, err
	}
	if cfg := p.Configuration; cfg != nil {
		if len(cfg.PushNotificationConfig) > 0 && string(cfg.PushNotificationConfig) != "null" {
			return nil, &rpcError{Code: wire.CodePushNotificationUnsupported, Message: "push notifications are not supported; poll the task or stream it"}
		}
		if cfg.Blocking != nil {
			req.blocking = *cfg.Blocking
		}
		if err := checkHistory("configuration.historyLength", cfg.HistoryLength); err != nil {
			return nil, err
		}
		req.history = cfg.HistoryLength
	}
	return req, nil
}

func (v03) taskQuery(c *call) (string, *int, *rpcError) {
	var p wire.TaskQueryParams
	if err := c.decodeParams(&p); err != nil {
		return "", nil, err
	}
	if p.ID == "" {
		return "", nil, errParams("id", `"id" is required`)
	}
	if mesh.CheckID(p.ID) != nil {
		return "", nil, errTaskNotFound(p.ID)
	}
	return p.ID, p.HistoryLength, checkHistory("historyLength", p.HistoryLength)
}

func (v03) taskID(c *call) (string, *rpcError) {
	var p wire.TaskIDParams
	if err := c.decodeParams(&p); err != nil {
		return "", err
	}
	if p.ID == "" {
		return "", errParams("id", `"id" is required`)
	}
	if mesh.CheckID(p.ID) != nil {
		return "", errTaskNotFound(p.ID)
	}
	return p.ID, nil
}

func (v03) sendResult(t *wire.Task) any { return t }
func (v03) task(t *wire.Task) any       { return t }
func (v03) item(ev any) any             { return ev }

// v10 is A2A 1.0: PascalCase methods, ProtoJSON objects without "kind",
// ROLE_* and TASK_STATE_* enums, results and stream items wrapped by type.
type v10 struct{}

func (v10) version() string { return wire.Version10 }

func (v10) methods() map[string]method {
	return map[string]method{
		wire.MethodSendMessage:          send,
		wire.MethodSendStreamingMessage: stream,
		wire.MethodGetTask:              get,
		wire.MethodCancelTask:           cancel,
		wire.MethodSubscribeToTask:      resubscribe,
		wire.MethodListTasks:            listTasks,

		"CreateTaskPushNotificationConfig": pushUnsupported,
		"GetTaskPushNotificationConfig":    pushUnsupported,
		"ListTaskPushNotificationConfigs":  pushUnsupported,
		"DeleteTaskPushNotificationConfig": pushUnsupported,
		"GetExtendedAgentCard":             extendedCardUnsupported,
	}
}

func (v10) send(c *call) (*sendRequest, *rpcError) {
	var p wire.SendMessageRequestV1
	if err := c.decodeParams(&p); err != nil {
		return nil, err
	}
	if p.Message == nil {
		return nil, errParams("message", `"message" is required`)
	}
	m, err := wire.MessageFromV1(p.Message)
	if err != nil {
		field := "message.parts"
		if strings.HasPrefix(err.Error(), "role") {
			field = "message.role"
		}
		return nil, errParams(field, "invalid message: "+err.Error())
	}
	req, rerr := readMessage(m, wire.RoleUserV1)
	if rerr != nil {
		return nil, rerr
	}
	if cfg := p.Configuration; cfg != nil {
		if len(cfg.TaskPushNotificationConfig) > 0 && string(cfg.TaskPushNotificationConfig) != "null" {
			return nil, &rpcError{Code: wire.CodePushNotificationUnsupported, Message: "push notifications are not supported; poll the task or stream it"}
		}
		req.blocking = !cfg.ReturnImmediately
		if err := checkHistory("configuration.historyLength", cfg.HistoryLength); err != nil {
			return nil, err
		}
		req.history = cfg.HistoryLength
	}
	return req, nil
}

func (v10) taskQuery(c *call) (string, *int, *rpcError) {
	var p wire.GetTaskRequestV1
	if err := c.decodeParams(&p); err != nil {
		return "", nil, err
	}
	if p.ID == "" {
		return "", nil, errParams("id", `"id" is required`)
	}
	if mesh.CheckID(p.ID) != nil {
		return "", nil, errTaskNotFound(p.ID)
	}
	return p.ID, p.HistoryLength, checkHistory("historyLength", p.HistoryLength)
}

func (v10) taskID(c *call) (string, *rpcError) {
	var p wire.TaskIDRequestV1
	if err := c.decodeParams(&p); err != nil {
		return "", err
	}
	if p.ID == "" {
		return "", errParams("id", `"id" is required`)
	}
	if mesh.CheckID(p.ID) != nil {
		return "", errTaskNotFound(p.ID)
	}
	return p.ID, nil
}

func (v10) sendResult(t *wire.Task) any { return wire.SendMessageResponseV1{Task: t.V1()} }
func (v10) task(t *wire.Task) any       { return t.V1() }

func (v10) item(ev any) any {
	switch e := ev.(type) {
	case *wire.Task:
		return wire.StreamResponseV1{Task: e.V1()}
	case *wire.StatusUpdate:
		return wire.StreamResponseV1{StatusUpdate: e.V1()}
	case *wire.ArtifactUpdate:
		return wire.StreamResponseV1{ArtifactUpdate: e.V1()}
	}
	return ev
}
