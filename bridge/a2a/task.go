package a2a

import (
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// timeLayout is how task timestamps are written: ISO 8601 in UTC with
// milliseconds, as A2A 1.0 asks and 0.3 clients parse (RFC 3339).
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// view says how a conversation is shown as a task.
type view struct {
	// history bounds the messages in Task.history: nil means all, 0 none.
	history *int
	// pending says that a run this request started has not ended yet: the
	// task is working whatever the conversation says (a resume not yet
	// claimed leaves it as the decision found it), unless its turn is
	// still queued (submitted).
	pending bool
	// run, when the conversation's last run is this one, makes the state
	// that run's outcome even if another turn has started since.
	run string
	// hint replaces the text of an input-required status message.
	hint string
	// noArtifacts leaves the artifacts out (ListTasks without
	// includeArtifacts).
	noArtifacts bool
}

// stateOf maps a conversation to a task state:
//
//	a message queued for an agent (queued)    submitted
//	a turn holds it (status running)          working
//	waiting_approval                          input-required
//	status completed                          completed
//	active, no run yet                        submitted
//	active, last run success                  completed
//	active, last run error                    failed
//	active, last run cancelled                canceled
func stateOf(conv *mesh.Conversation, v view) wire.TaskState {
	queued := conv.Queued != nil && conv.Turn == nil
	if v.pending && !queued {
		return wire.StateWorking
	}
	if lr := conv.LastRun; v.run != "" && lr.Covers(v.run) {
		return outcomeState(lr.Outcome)
	}
	switch {
	case queued:
		return wire.StateSubmitted
	case conv.Turn != nil || conv.Status == mesh.StatusRunning:
		return wire.StateWorking
	case conv.Status == mesh.StatusWaitingApproval:
		return wire.StateInputRequired
	case conv.Status == mesh.StatusCompleted:
		return wire.StateCompleted
	case conv.LastRun == nil:
		return wire.StateSubmitted
	}
	return outcomeState(conv.LastRun.Outcome)
}

func outcomeState(outcome string) wire.TaskState {
	switch outcome {
	case mesh.OutcomeInterrupt:
		return wire.StateInputRequired
	case mesh.OutcomeError:
		return wire.StateFailed
	case mesh.OutcomeCancelled:
		return wire.StateCanceled
	}
	return wire.StateCompleted
}

// taskOf shows a conversation as a task: id and contextId are the
// conversation id, the state comes from [stateOf], the artifact is the
// last run's reply (completed tasks only), the history is the user and
// assistant messages with text.
func taskOf(conv *mesh.Conversation, v view) *wire.Task {
	state := stateOf(conv, v)
	t := &wire.Task{
		Kind: wire.KindTask, ID: conv.ID, ContextID: conv.ID,
		Status:   wire.TaskStatus{State: state, Timestamp: stamp(conv.UpdatedAt)},
		History:  historyOf(conv, v.history),
		Metadata: map[string]any{"session_id": conv.SessionID},
	}
	lr := conv.LastRun
	switch state {
	case wire.StateInputRequired:
		t.Status.Message = approvalMessage(conv, v.hint)
	case wire.StateFailed:
		text := "The task failed."
		if lr != nil && lr.Error != "" {
			text = "The task failed: " + lr.Error
		} else if lr != nil && lr.Response != "" {
			text = lr.Response
		}
		t.Status.Message = agentMessage(conv.ID, statusMessageID(conv), text)
	case wire.StateCanceled:
		text := "The task was canceled."
		if lr != nil && lr.Response != "" {
			text = lr.Response
		}
		t.Status.Message = agentMessage(conv.ID, statusMessageID(conv), text)
	case wire.StateCompleted:
		if a := replyArtifact(conv); a != nil && !v.noArtifacts {
			t.Artifacts = []wire.Artifact{*a}
		}
	}
	return t
}

// taskAfterRun is the task once run ended with end (nil when unknown): as
// [taskOf] shows it, except that a run that failed before it could record
// its outcome (RUN_ERROR, and the conversation's last run is another one)
// makes the task failed.
func taskAfterRun(conv *mesh.Conversation, run string, end *mesh.Event, v view) *wire.Task {
	v.run = run
	t := taskOf(conv, v)
	if lr := conv.LastRun; end != nil && end.Type == mesh.EventRunError && !lr.Covers(run) {
		t.Status = wire.TaskStatus{State: wire.StateFailed, Timestamp: stamp(time.Now()), Message: agentMessage(conv.ID, run+"-status", "The task failed: "+end.Message)}
		t.Artifacts = nil
	}
	return t
}

// replyArtifact is the last run's reply, under the id of the message that
// holds it, so that a stream's artifact-update chunks and the task agree.
// In a group chat it is the last member's answer, and its metadata names
// that member ({"name": member}).
func replyArtifact(conv *mesh.Conversation) *wire.Artifact {
	lr := conv.LastRun
	if lr == nil || lr.Response == "" {
		return nil
	}
	a := &wire.Artifact{ArtifactID: lr.ID + "-reply", Name: "response", Parts: []wire.Part{wire.TextPart(lr.Response)}}
	if m := replyMessage(conv); m != nil {
		a.ArtifactID = m.ID
		if conv.Group != nil && m.Name != "" {
			a.Metadata = map[string]any{"name": m.Name}
		}
	}
	return a
}

// replyMessage is the assistant message of the last run that holds its
// reply (in a group chat, the last member's answer), nil when none does.
func replyMessage(conv *mesh.Conversation) *mesh.Message {
	lr := conv.LastRun
	for i := len(conv.Messages) - 1; i >= 0; i-- {
		m := &conv.Messages[i]
		if m.Role == mesh.RoleAssistant && lr.Covers(m.TurnID) && m.Content == lr.Response {
			return m
		}
	}
	return nil
}

func statusMessageID(conv *mesh.Conversation) string {
	if conv.LastRun != nil {
		return conv.LastRun.ID + "-status"
	}
	return conv.ID + "-status"
}

// approvalMessage is the status message of a task waiting for approval: a
// text part saying what waits and how to answer, and a data part
// {"approval": {uuid, tool_name, tool_args, description, server?,
// remote_task_id?, remote_agent_name?}}.
func approvalMessage(conv *mesh.Conversation, hint string) *wire.Message {
	ap := conv.PendingApproval
	if ap == nil {
		text := "The task needs input."
		if lr := conv.LastRun; lr != nil && lr.Response != "" {
			text = lr.Response
		}
		if hint != "" {
			text = hint + " " + text
		}
		return agentMessage(conv.ID, statusMessageID(conv), text)
	}
	text := fmt.Sprintf(`Approval required: %s. Reply "approved" (or "yes") to run it, or "rejected" (or "no") to refuse it; approval id %s.`, ap.Description, ap.UUID)
	if hint != "" {
		text = hint + " " + text
	}
	args := ap.ToolArgs
	if args == nil {
		args = map[string]any{}
	}
	data := map[string]any{"uuid": ap.UUID, "tool_name": ap.ToolName, "tool_args": args, "description": ap.Description}
	if ap.Server != "" {
		data["server"] = ap.Server
	}
	if ap.RemoteTaskID != "" {
		data["remote_task_id"], data["remote_agent_name"] = ap.RemoteTaskID, ap.RemoteAgentName
	}
	m := agentMessage(conv.ID, "approval-"+ap.UUID, text)
	m.Parts = append(m.Parts, wire.DataPart(map[string]any{"approval": data}))
	return m
}

func agentMessage(taskID, id, text string) *wire.Message {
	return &wire.Message{Kind: wire.KindMessage, MessageID: id, Role: wire.RoleAgent, Parts: []wire.Part{wire.TextPart(text)}, TaskID: taskID, ContextID: taskID}
}

// historyOf is the conversation's user and assistant messages with text,
// the last n of them when n is set. In a group chat an answer's metadata
// names the member who gave it ({"name": member}).
func historyOf(conv *mesh.Conversation, n *int) []wire.Message {
	if n != nil && *n == 0 {
		return nil
	}
	var out []wire.Message
	for _, m := range conv.Messages {
		var role string
		switch m.Role {
		case mesh.RoleUser:
			role = wire.RoleUser
		case mesh.RoleAssistant:
			role = wire.RoleAgent
		default:
			continue
		}
		if m.Content == "" {
			continue
		}
		msg := wire.Message{
			Kind: wire.KindMessage, MessageID: m.ID, Role: role, Parts: []wire.Part{wire.TextPart(m.Content)},
			TaskID: conv.ID, ContextID: conv.ID,
		}
		if conv.Group != nil && role == wire.RoleAgent && m.Name != "" {
			msg.Metadata = map[string]any{"name": m.Name}
		}
		out = append(out, msg)
	}
	if n != nil && len(out) > *n {
		out = out[len(out)-*n:]
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Format(timeLayout)
}
