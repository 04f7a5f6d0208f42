package a2a

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/a2a"
	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/nodes/agent"
)

// strict03 decodes a 0.3 result or stream item with the a2a-go SDK's own
// types, which reject what a 0.3 client would.
func strict03(t *testing.T, raw json.RawMessage) a2ago.Event {
	t.Helper()
	ev, err := a2ago.UnmarshalEventJSON(raw)
	if err != nil {
		t.Fatalf("a2a-go cannot read %s: %v", raw, err)
	}
	return ev
}

func textOf(parts []wire.Part) string { return wire.PartsText(parts) }

func TestCard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) {
		c.SubAgents = []config.A2AAgent{{Name: "helper", URL: "http://127.0.0.1:1", Description: "Helps with everything", Destructive: true}}
	})
	for _, path := range []string{wire.CardPath, wire.LegacyCardPath} {
		resp, err := f.srv.Client().Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("GET %s: %d %s: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), data)
		}
		var card wire.AgentCard
		if err := json.Unmarshal(data, &card); err != nil {
			t.Fatal(err)
		}
		url := f.srv.URL + "/a2a"
		checkCard(t, "GET "+path, card, "tester", "Manages resources.", url)
		want := []wire.Interface{{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"}, {URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3"}}
		if !slices.Equal(card.SupportedInterfaces, want) {
			t.Errorf("supportedInterfaces = %+v, want %+v", card.SupportedInterfaces, want)
		}
		if !strings.Contains(string(data), `"pushNotifications":false`) || !slices.Contains(card.DefaultInputModes, "text/plain") {
			t.Errorf("capabilities or modes missing: %s", data)
		}
		skills := map[string]wire.Skill{}
		for _, s := range card.Skills {
			skills[s.ID] = s
		}
		for id, tags := range map[string][]string{
			"resources_list": {"resources", "mcp", "read-only"},
			"resources_add":  {"resources", "mcp", "destructive"},
			"helper":         {"a2a", "sub-agent", "destructive"},
		} {
			s, ok := skills[id]
			if !ok {
				t.Errorf("skill %s missing from the card", id)
				continue
			}
			if !slices.Equal(s.Tags, tags) {
				t.Errorf("skill %s tags = %q, want %q", id, s.Tags, tags)
			}
			if s.Name == "" {
				t.Errorf("skill %s has no name", id)
			}
			if s.Description == "" {
				t.Errorf("skill %s has no description", id)
			}
		}
		// What a2a-go 0.3's resolver and client factory read.
		var goCard a2ago.AgentCard
		if err := json.Unmarshal(data, &goCard); err != nil {
			t.Fatalf("a2a-go cannot read the card: %v", err)
		}
		if goCard.URL != url {
			t.Errorf("a2a-go reads url %q, want %q", goCard.URL, url)
		}
		if goCard.PreferredTransport != a2ago.TransportProtocolJSONRPC {
			t.Errorf("a2a-go reads preferred transport %q, want %q", goCard.PreferredTransport, a2ago.TransportProtocolJSONRPC)
		}
		if !goCard.Capabilities.Streaming {
			t.Error("a2a-go reads streaming false, want true")
		}
		if len(goCard.Skills) != 3 {
			t.Errorf("a2a-go reads %d skills, want 3: %+v", len(goCard.Skills), goCard.Skills)
		}
	}
}

func TestPublicURL(t *testing.T) {
	t.Parallel()
	r, _ := http.NewRequest(http.MethodGet, "http://10.0.0.7:8080/.well-known/agent-card.json", nil)
	for _, tt := range []struct{ name, public, want string }{
		{"configured", "https://agents.example.com/", "https://agents.example.com"},
		{"from the request", "", "http://10.0.0.7:8080"},
	} {
		h := &handler{cfg: Config{PublicURL: tt.public}}
		if got := h.publicURL(r); got != tt.want {
			t.Errorf("%s: publicURL = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// message/send with a list request returns a completed task with an
// artifact.
func TestSendCompleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var task wire.Task
	a := f.result("", send03(1, wire.MethodSend, "list all resources", ""), &task)
	if string(a.ID) != "1" {
		t.Errorf("id = %s, want 1", a.ID)
	}
	if task.Kind != "task" {
		t.Fatalf("kind = %q, want task: %s", task.Kind, a.Result)
	}
	if task.ID == "" {
		t.Fatalf("task without an id: %s", a.Result)
	}
	if task.ContextID != task.ID {
		t.Fatalf("contextId = %q, want the task id %q", task.ContextID, task.ID)
	}
	if task.Status.State != wire.StateCompleted {
		t.Fatalf("state = %q, want %q", task.Status.State, wire.StateCompleted)
	}
	if task.Status.Timestamp == "" {
		t.Fatalf("status without a timestamp: %s", a.Result)
	}
	if len(task.Artifacts) != 1 || !strings.Contains(textOf(task.Artifacts[0].Parts), "db-1") {
		t.Errorf("artifacts = %+v, want the reply listing db-1", task.Artifacts)
	}
	if len(task.History) != 2 {
		t.Errorf("history has %d messages, want the user's and the agent's: %+v", len(task.History), task.History)
	} else {
		if task.History[0].Role != "user" {
			t.Errorf("history[0] role = %q, want user", task.History[0].Role)
		}
		if got := task.History[0].Text(); got != "list all resources" {
			t.Errorf("history[0] text = %q, want %q", got, "list all resources")
		}
		if task.History[1].Role != "agent" {
			t.Errorf("history[1] role = %q, want agent", task.History[1].Role)
		}
	}
	if task.Metadata["session_id"] != traceID {
		t.Errorf("metadata = %v, want the caller's trace id", task.Metadata)
	}
	if goTask, ok := strict03(t, a.Result).(*a2ago.Task); !ok || goTask.Status.State != a2ago.TaskStateCompleted || len(goTask.Artifacts) != 1 {
		t.Errorf("a2a-go reads %#v", goTask)
	}
	conv, err := f.core.Sessions.Get(t.Context(), task.ID)
	if err != nil || conv.SessionID != traceID {
		t.Errorf("conversation %v, %v: want one with trace id %s", conv, err, traceID)
	}
	// historyLength
	var short wire.Task
	f.result("", rpc(2, wire.MethodGet, fmt.Sprintf(`{"id":%q,"historyLength":1}`, task.ID)), &short)
	if len(short.History) != 1 || short.History[0].Role != "agent" {
		t.Errorf("historyLength 1: history = %+v", short.History)
	}
	var none wire.Task
	f.result("", rpc(3, wire.MethodGet, fmt.Sprintf(`{"id":%q,"historyLength":0}`, task.ID)), &none)
	if none.History != nil {
		t.Errorf("historyLength 0: history = %+v", none.History)
	}
}

// approvalOf checks an input-required task and returns its approval data.
func approvalOf(t *testing.T, task *wire.Task) map[string]any {
	t.Helper()
	if task.Status.State != wire.StateInputRequired || task.Status.Message == nil || len(task.Status.Message.Parts) != 2 {
		t.Fatalf("task %+v: want input-required with a text and a data part", task.Status)
	}
	m := task.Status.Message
	if m.Role != "agent" || !strings.Contains(m.Parts[0].Text, "Approval required") || m.Parts[1].Kind != "data" {
		t.Fatalf("status message = %+v", m)
	}
	ap, _ := m.Parts[1].Data["approval"].(map[string]any)
	if ap == nil {
		t.Fatalf("no approval in the data part: %v", m.Parts[1].Data)
	}
	if ap["uuid"] == "" {
		t.Fatalf("approval without a uuid: %v", ap)
	}
	if ap["tool_name"] != "resources_add" {
		t.Fatalf("approval tool_name = %v, want resources_add", ap["tool_name"])
	}
	if ap["description"] == "" {
		t.Fatalf("approval without a description: %v", ap)
	}
	return ap
}

// A destructive request pauses (input-required with the approval), a REST
// decision resumes it, tasks/get sees it completed; a conversation made by
// REST is a task too.
func TestApprovalAndGet(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var task wire.Task
	f.result("", send03(1, wire.MethodSend, "add resource a2a-test-item with value 77", ""), &task)
	ap := approvalOf(t, &task)
	if args, _ := ap["tool_args"].(map[string]any); args["name"] != "a2a-test-item" || args["value"] != 77.0 {
		t.Errorf("tool_args = %v", ap["tool_args"])
	}
	strict03(t, meshtest.JSON(task))
	f.decide(ap["uuid"].(string), true)
	var got wire.Task
	f.result("", rpc(2, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, task.ID)), &got)
	f.checkApprovedTask(t, "after approval", got, task.ID, "a2a-test-item")

	// A conversation made by REST is a task.
	resp, err := f.srv.Client().Post(f.srv.URL+"/conversations", "application/json", strings.NewReader(`{"message":"list all resources"}`))
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Conversation mesh.Conversation `json:"conversation"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	f.result("", rpc(3, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, created.Conversation.ID)), &got)
	if got.ID != created.Conversation.ID {
		t.Errorf("tasks/get of a REST conversation: id %q, want %q", got.ID, created.Conversation.ID)
	}
	if got.Status.State != wire.StateCompleted {
		t.Errorf("tasks/get of a REST conversation: state %q, want %q", got.Status.State, wire.StateCompleted)
	}
	if len(got.Artifacts) != 1 {
		t.Errorf("tasks/get of a REST conversation: %d artifacts, want 1: %+v", len(got.Artifacts), got.Artifacts)
	} else if textOf(got.Artifacts[0].Parts) == "" {
		t.Errorf("tasks/get of a REST conversation: the artifact has no text: %+v", got.Artifacts[0])
	}
}

// message/send with the taskId of a paused task approves or rejects its
// approval; other text leaves it waiting.
func TestContinuation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var task wire.Task
	f.result("", send03(1, wire.MethodSend, "add resource cont-yes with value 1", ""), &task)
	approvalOf(t, &task)

	var same wire.Task
	f.result("", send03(2, wire.MethodSend, "maybe later", task.ID), &same)
	approvalOf(t, &same)
	if !strings.HasPrefix(same.Status.Message.Parts[0].Text, `"maybe later" is neither an approval nor a rejection.`) {
		t.Errorf("hint = %q", same.Status.Message.Parts[0].Text)
	}
	if f.tools.Has("cont-yes") {
		t.Fatal("the call ran without approval")
	}

	var done wire.Task
	f.result("", send03(3, wire.MethodSend, "approved", task.ID), &done)
	f.checkApprovedTask(t, `after "approved"`, done, task.ID, "cont-yes")

	f.result("", send03(4, wire.MethodSend, "add resource cont-no with value 2", ""), &task)
	ap := approvalOf(t, &task)
	f.result("", send03(5, wire.MethodSend, "Rejected.", task.ID), &done)
	if done.Status.State != wire.StateCompleted || f.tools.Has("cont-no") {
		t.Fatalf("after \"rejected\": %+v, resource created: %v", done, f.tools.Has("cont-no"))
	}
	if reply := textOf(done.Artifacts[0].Parts); !strings.Contains(reply, "not approved") {
		t.Errorf("reply after rejection = %q", reply)
	}
	decided, err := f.core.Approvals.Get(t.Context(), ap["uuid"].(string))
	if err != nil {
		t.Fatalf("get the approval: %v", err)
	}
	if decided.Status != mesh.ApprovalRejected {
		t.Errorf("approval status = %q, want %q", decided.Status, mesh.ApprovalRejected)
	}
	if decided.Decision == nil {
		t.Error("approval has no decision, want one by a2a")
	} else if decided.Decision.By != "a2a" {
		t.Errorf("approval decided by %q, want a2a", decided.Decision.By)
	}

	// A data part {"approved": true} decides too, and 1.0 does the same.
	f.result("", send03(6, wire.MethodSend, "add resource cont-data with value 3", ""), &task)
	approvalOf(t, &task)
	body := rpc(7, wire.MethodSend, fmt.Sprintf(`{"message":{"kind":"message","messageId":"m-7","role":"user","taskId":%q,"parts":[{"kind":"data","data":{"approved":true}}]}}`, task.ID))
	f.result("", body, &done)
	if done.Status.State != wire.StateCompleted || !f.tools.Has("cont-data") {
		t.Errorf("after a data part: %+v", done.Status)
	}
	var res10 wire.SendMessageResponseV1
	f.result("1.0", send10(8, wire.MethodSendMessage, "add resource cont-10 with value 4", ""), &res10)
	if res10.Task == nil || res10.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("1.0 add = %+v", res10)
	}
	f.result("1.0", send10(9, wire.MethodSendMessage, "yes", res10.Task.ID), &res10)
	if res10.Task.Status.State != "TASK_STATE_COMPLETED" || !f.tools.Has("cont-10") {
		t.Errorf("1.0 after yes: %+v", res10.Task.Status)
	}

	// A completed task takes the next message as a new turn.
	f.result("", send03(10, wire.MethodSend, "list all resources", done.ID), &done)
	if done.Status.State != wire.StateCompleted || !strings.Contains(textOf(done.Artifacts[0].Parts), "cont-data") {
		t.Errorf("next turn: %+v", done)
	}
}

// TestStates covers the states the other tests do not reach: a
// conversation with no run yet is submitted, one whose run failed failed.
func TestStates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	conv, err := f.core.NewConversation(t.Context(), core.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	var task wire.Task
	f.result("", rpc(1, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, conv.ID)), &task)
	if task.Status.State != wire.StateSubmitted || task.History != nil || task.Artifacts != nil {
		t.Errorf("new conversation = %+v", task)
	}
	var t10 wire.TaskV1
	f.result("1.0", rpc(2, wire.MethodGetTask, fmt.Sprintf(`{"id":%q}`, conv.ID)), &t10)
	if t10.Status.State != "TASK_STATE_SUBMITTED" {
		t.Errorf("1.0 new conversation = %+v", t10.Status)
	}
	f.result("", send03(3, wire.MethodSend, "please explode", conv.ID), &task)
	if task.Status.State != wire.StateFailed {
		t.Errorf("failed run: state %q, want %q", task.Status.State, wire.StateFailed)
	}
	if task.Status.Message == nil {
		t.Error("failed run: no status message, want the model's error")
	} else if got := task.Status.Message.Text(); !strings.Contains(got, "the model exploded") {
		t.Errorf("failed run: status message %q, want it to hold %q", got, "the model exploded")
	}
	if task.Artifacts != nil {
		t.Errorf("failed run: artifacts %+v, want none", task.Artifacts)
	}
	strict03(t, meshtest.JSON(task))
	f.result("1.0", rpc(4, wire.MethodGetTask, fmt.Sprintf(`{"id":%q}`, conv.ID)), &t10)
	if t10.Status.State != "TASK_STATE_FAILED" || t10.Status.Message.Role != "ROLE_AGENT" {
		t.Errorf("1.0 failed run = %+v", t10.Status)
	}
	// A stream of a failing run ends failed.
	_, events := f.stream("", send03(5, wire.MethodStream, "explode again", conv.ID))
	results := responses(t, events, "5")
	var end wire.StatusUpdate
	if json.Unmarshal(results[len(results)-1], &end) != nil || end.Status.State != wire.StateFailed || !end.Final {
		t.Errorf("last event = %s", results[len(results)-1])
	}
}

func TestNonBlocking(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var task wire.Task
	f.result("", send03(1, wire.MethodSend, "slow: list all resources", "", "configuration", `{"blocking":false}`), &task)
	if task.Status.State != wire.StateWorking || len(task.Artifacts) != 0 {
		t.Fatalf("non-blocking send = %+v", task)
	}
	close(f.model.gate)
	meshtest.Eventually(t, 10*time.Second, func() bool {
		var got wire.Task
		f.result("", rpc(2, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, task.ID)), &got)
		return got.Status.State == wire.StateCompleted
	}, "the task never completed")
	var res10 wire.SendMessageResponseV1
	f.result("1.0", send10(3, wire.MethodSendMessage, "list all resources", "", "configuration", `{"returnImmediately":true}`), &res10)
	if res10.Task == nil || res10.Task.Status.State != "TASK_STATE_WORKING" {
		t.Errorf("1.0 returnImmediately = %+v", res10)
	}
}

// A non-blocking send answers once an agent has the run: a tasks/get or
// tasks/cancel right after it sees the run, not the task as it was before.
// The agent defers the claim of a short run for longer than the send waits
// for it, so the send must ask for the claim at once (WorkItem.ClaimAtOnce).
func TestNonBlockingSendIsVisibleAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, "", nil, func(c *agent.Config) { c.ClaimAfter = time.Minute })
	var first wire.Task
	f.result("", send03(1, wire.MethodSend, "list all resources", ""), &first)
	if first.Status.State != wire.StateCompleted {
		t.Fatalf("first send = %+v", first)
	}
	for i := range 5 {
		var task wire.Task
		f.result("", send03(10*i+2, wire.MethodSend, "slow: list again", first.ID, "configuration", `{"blocking":false}`), &task)
		var got wire.Task
		f.result("", rpc(10*i+3, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, task.ID)), &got)
		if got.Status.State != wire.StateWorking {
			t.Fatalf("send %d: tasks/get right after a non-blocking send = %s, want working", i, got.Status.State)
		}
		var canceled wire.Task
		f.result("", rpc(10*i+4, wire.MethodCancel, fmt.Sprintf(`{"id":%q}`, task.ID)), &canceled)
		if canceled.Status.State != wire.StateCanceled {
			t.Fatalf("send %d: tasks/cancel right after = %s, want canceled", i, canceled.Status.State)
		}
	}
}

// responses decodes a stream's events as JSON-RPC responses with id id.
func responses(t *testing.T, events []string, id string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, e := range events {
		var r struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(e), &r); err != nil {
			t.Fatalf("stream event %s: not JSON: %v", e, err)
		}
		if r.JSONRPC != "2.0" {
			t.Fatalf("stream event %s: jsonrpc %q, want 2.0", e, r.JSONRPC)
		}
		if string(r.ID) != id {
			t.Fatalf("stream event %s: id %s, want %s", e, r.ID, id)
		}
		if r.Error != nil {
			t.Fatalf("stream event %s: an error, want a result", e)
		}
		if r.Result == nil {
			t.Fatalf("stream event %s: no result", e)
		}
		out = append(out, r.Result)
	}
	return out
}

func TestStream03(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	resp, events := f.stream("", send03(7, wire.MethodStream, "list all resources", ""))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	results := responses(t, events, "7")
	if len(results) < 4 {
		t.Fatalf("events = %v", events)
	}
	first, ok := strict03(t, results[0]).(*a2ago.Task)
	if !ok {
		t.Fatalf("first event = %s, want a task", results[0])
	}
	if first.Status.State != a2ago.TaskStateSubmitted {
		t.Fatalf("first event state = %q, want %q", first.Status.State, a2ago.TaskStateSubmitted)
	}
	if len(first.History) != 1 {
		t.Fatalf("first event history has %d messages, want the user's: %s", len(first.History), results[0])
	}
	if first.History[0].ID != "m-7" {
		t.Fatalf("first event history[0] id = %q, want m-7", first.History[0].ID)
	}
	var sawWorking, sawChunk bool
	for i, r := range results[1:] {
		switch ev := strict03(t, r).(type) {
		case *a2ago.TaskStatusUpdateEvent:
			if ev.TaskID != first.ID || ev.ContextID != string(first.ID) {
				t.Errorf("status update for another task: %s", r)
			}
			if ev.Final != (i == len(results)-2) {
				t.Errorf("final = %v on event %d of %d", ev.Final, i+1, len(results))
			}
			sawWorking = sawWorking || ev.Status.State == a2ago.TaskStateWorking
		case *a2ago.TaskArtifactUpdateEvent:
			sawChunk = true
		default:
			t.Errorf("event %s", r)
		}
	}
	last := strict03(t, results[len(results)-1]).(*a2ago.TaskStatusUpdateEvent)
	reply := strict03(t, results[len(results)-2]).(*a2ago.TaskArtifactUpdateEvent)
	if !sawWorking {
		t.Error("no working status update in the stream")
	}
	if !sawChunk {
		t.Error("no artifact chunk in the stream")
	}
	if last.Status.State != a2ago.TaskStateCompleted {
		t.Errorf("last event state = %q, want %q", last.Status.State, a2ago.TaskStateCompleted)
	}
	if !last.Final {
		t.Errorf("last event is not final: %s", results[len(results)-1])
	}
	if !reply.LastChunk {
		t.Errorf("the reply before the last event is not the last chunk: %s", results[len(results)-2])
	}
	if reply.Append {
		t.Errorf("the reply before the last event appends, want the whole reply: %s", results[len(results)-2])
	}
	var got wire.Task
	f.result("", rpc(8, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, first.ID)), &got)
	if got.Artifacts[0].ArtifactID != string(reply.Artifact.ID) || textOf(got.Artifacts[0].Parts) != reply.Artifact.Parts[0].(a2ago.TextPart).Text {
		t.Errorf("streamed reply %+v, task's artifact %+v", reply.Artifact, got.Artifacts[0])
	}

	// A destructive call ends the stream input-required; a streamed
	// "approved" streams the resume.
	_, events = f.stream("", send03(9, wire.MethodStream, "add resource streamed with value 5", ""))
	results = responses(t, events, "9")
	var end wire.StatusUpdate
	_ = json.Unmarshal(results[len(results)-1], &end)
	if end.Kind != "status-update" {
		t.Fatalf("last event kind = %q, want status-update: %s", end.Kind, results[len(results)-1])
	}
	if !end.Final {
		t.Fatalf("last event is not final: %s", results[len(results)-1])
	}
	if end.Status.State != wire.StateInputRequired {
		t.Fatalf("last event state = %q, want %q", end.Status.State, wire.StateInputRequired)
	}
	if n := len(end.Status.Message.Parts); n != 2 {
		t.Fatalf("last event's message has %d parts, want the text and the approval: %s", n, results[len(results)-1])
	}
	_, events = f.stream("", send03(10, wire.MethodStream, "approved", end.TaskID))
	results = responses(t, events, "10")
	var resumed wire.Task
	_ = json.Unmarshal(results[0], &resumed)
	_ = json.Unmarshal(results[len(results)-1], &end)
	if resumed.Status.State != wire.StateWorking {
		t.Errorf("resume stream: first event state %q, want %q: %s", resumed.Status.State, wire.StateWorking, results[0])
	}
	if end.Status.State != wire.StateCompleted {
		t.Errorf("resume stream: last event state %q, want %q: %s", end.Status.State, wire.StateCompleted, results[len(results)-1])
	}
	if !end.Final {
		t.Errorf("resume stream: last event is not final: %s", results[len(results)-1])
	}
	if !f.tools.Has("streamed") {
		t.Error("resume stream: the resource streamed was not created")
	}
}

func TestStream10(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	resp, events := f.stream("1.0", send10(4, wire.MethodSendStreamingMessage, "list all resources", ""))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	results := responses(t, events, "4")
	for _, r := range results {
		if strings.Contains(string(r), `"kind"`) || strings.Contains(string(r), `"final"`) {
			t.Errorf("1.0 event with a 0.3 field: %s", r)
		}
	}
	var first, last wire.StreamResponseV1
	_ = json.Unmarshal(results[0], &first)
	_ = json.Unmarshal(results[len(results)-1], &last)
	if first.Task == nil {
		t.Fatalf("first item = %s, want a task", results[0])
	}
	if first.Task.Status.State != "TASK_STATE_SUBMITTED" {
		t.Fatalf("first item state = %q, want TASK_STATE_SUBMITTED", first.Task.Status.State)
	}
	if first.Task.History[0].Role != "ROLE_USER" {
		t.Fatalf("first item history[0] role = %q, want ROLE_USER", first.Task.History[0].Role)
	}
	if first.Task.History[0].Parts[0].Text == nil {
		t.Fatalf("first item history[0] has no text part: %s", results[0])
	}
	if last.StatusUpdate == nil || last.StatusUpdate.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("last item = %s", results[len(results)-1])
	}
	var artifacts int
	for _, r := range results {
		var item wire.StreamResponseV1
		_ = json.Unmarshal(r, &item)
		if item.ArtifactUpdate != nil {
			artifacts++
			if item.ArtifactUpdate.Artifact.Parts[0].Text == nil {
				t.Errorf("artifact part without text: %s", r)
			}
		}
	}
	if artifacts == 0 {
		t.Errorf("no artifact update in %v", events)
	}
	// input-required ends a 1.0 stream too.
	_, events = f.stream("1.0", send10(5, wire.MethodSendStreamingMessage, "add resource s10 with value 1", ""))
	results = responses(t, events, "5")
	_ = json.Unmarshal(results[len(results)-1], &last)
	if last.StatusUpdate == nil || last.StatusUpdate.Status.State != "TASK_STATE_INPUT_REQUIRED" || last.StatusUpdate.Status.Message.Role != "ROLE_AGENT" {
		t.Errorf("last item = %s", results[len(results)-1])
	}
}

// lines reads a stream's "data:" lines as they come.
type lines struct{ sc *bufio.Scanner }

func (l *lines) next(t *testing.T) string {
	t.Helper()
	for l.sc.Scan() {
		if d, ok := strings.CutPrefix(l.sc.Text(), "data: "); ok {
			return d
		}
	}
	t.Fatalf("stream ended: %v", l.sc.Err())
	return ""
}

func (l *lines) rest() []string {
	var out []string
	for l.sc.Scan() {
		if d, ok := strings.CutPrefix(l.sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestResubscribe(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var task wire.Task
	f.result("", send03(1, wire.MethodSend, "slow: list all resources", "", "configuration", `{"blocking":false}`), &task)
	<-f.model.entered
	resp := f.do(t.Context(), "", rpc(2, wire.MethodResubscribe, fmt.Sprintf(`{"id":%q}`, task.ID)))
	defer resp.Body.Close()
	l := &lines{sc: bufio.NewScanner(resp.Body)}
	first := responses(t, []string{l.next(t)}, "2")[0]
	if ev, ok := strict03(t, first).(*a2ago.Task); !ok || ev.Status.State != a2ago.TaskStateWorking || string(ev.ID) != task.ID {
		t.Fatalf("first event = %s", first)
	}
	close(f.model.gate)
	rest := responses(t, l.rest(), "2")
	last, ok := strict03(t, rest[len(rest)-1]).(*a2ago.TaskStatusUpdateEvent)
	if !ok || last.Status.State != a2ago.TaskStateCompleted || !last.Final {
		t.Errorf("last event = %s", rest[len(rest)-1])
	}

	// A finished task: 0.3 gets it and a final update; 1.0 refuses.
	_, events := f.stream("", rpc(3, wire.MethodResubscribe, fmt.Sprintf(`{"id":%q}`, task.ID)))
	results := responses(t, events, "3")
	if len(results) != 2 {
		t.Fatalf("resubscribe to a completed task: %v", events)
	}
	if u, ok := strict03(t, results[1]).(*a2ago.TaskStatusUpdateEvent); !ok || !u.Final || u.Status.State != a2ago.TaskStateCompleted {
		t.Errorf("second event = %s", results[1])
	}
	a := f.call("1.0", rpc(4, wire.MethodSubscribeToTask, fmt.Sprintf(`{"id":%q}`, task.ID)))
	if a.Error == nil || a.Error.Code != wire.CodeUnsupportedOperation || a.Status != http.StatusOK {
		t.Errorf("SubscribeToTask of a completed task: %s", a.Raw)
	}
	// An input-required task: the task, then the end.
	var res10 wire.SendMessageResponseV1
	f.result("1.0", send10(5, wire.MethodSendMessage, "add resource sub with value 1", ""), &res10)
	_, events = f.stream("1.0", rpc(6, wire.MethodSubscribeToTask, fmt.Sprintf(`{"id":%q}`, res10.Task.ID)))
	results = responses(t, events, "6")
	var item wire.StreamResponseV1
	if len(results) != 1 {
		t.Fatalf("SubscribeToTask of an input-required task: %d items, want the task alone: %v", len(results), events)
	}
	if err := json.Unmarshal(results[0], &item); err != nil {
		t.Fatalf("SubscribeToTask of an input-required task: item %s: %v", results[0], err)
	}
	if item.Task == nil {
		t.Fatalf("SubscribeToTask of an input-required task: item %s, want a task", results[0])
	}
	if item.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Errorf("SubscribeToTask of an input-required task: state %q, want TASK_STATE_INPUT_REQUIRED", item.Task.Status.State)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var task wire.Task
	f.result("", send03(1, wire.MethodSend, "slow: list all resources", "", "configuration", `{"blocking":false}`), &task)
	<-f.model.entered
	var canceled wire.Task
	f.result("", rpc(2, wire.MethodCancel, fmt.Sprintf(`{"id":%q}`, task.ID)), &canceled)
	if canceled.Status.State != wire.StateCanceled || canceled.Status.Message == nil {
		t.Fatalf("tasks/cancel = %+v", canceled)
	}
	strict03(t, meshtest.JSON(canceled))
	for _, tt := range []struct {
		name, version, body string
		code                int
	}{
		{"again", "", rpc(3, wire.MethodCancel, fmt.Sprintf(`{"id":%q}`, task.ID)), wire.CodeTaskNotCancelable},
		{"unknown", "", rpc(4, wire.MethodCancel, `{"id":"no-such-task"}`), wire.CodeTaskNotFound},
		{"1.0 unknown", "1.0", rpc(5, wire.MethodCancelTask, `{"id":"no-such-task"}`), wire.CodeTaskNotFound},
	} {
		a := f.call(tt.version, tt.body)
		if a.Status != http.StatusOK || a.Error == nil || a.Error.Code != tt.code {
			t.Errorf("%s: %s, want code %d", tt.name, a.Raw, tt.code)
		}
	}
	var res10 wire.SendMessageResponseV1
	f.result("1.0", send10(6, wire.MethodSendMessage, "add resource c with value 1", ""), &res10)
	a := f.call("1.0", rpc(7, wire.MethodCancelTask, fmt.Sprintf(`{"id":%q}`, res10.Task.ID)))
	if a.Error == nil || a.Error.Code != wire.CodeTaskNotCancelable || !strings.Contains(a.Error.Message, "rejected") {
		t.Errorf("cancel of an input-required task: %s", a.Raw)
	}
	// 1.0 shape of a canceled task.
	f.result("1.0", send10(8, wire.MethodSendMessage, "slow: list again", "", "configuration", `{"returnImmediately":true}`), &res10)
	<-f.model.entered
	var t10 wire.TaskV1
	f.result("1.0", rpc(9, wire.MethodCancelTask, fmt.Sprintf(`{"id":%q}`, res10.Task.ID)), &t10)
	if t10.Status.State != "TASK_STATE_CANCELED" {
		t.Errorf("CancelTask = %+v", t10)
	}
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var res10 wire.SendMessageResponseV1
	var ids []string
	for i := range 3 {
		f.result("1.0", send10(i, wire.MethodSendMessage, "list all resources", ""), &res10)
		ids = append(ids, res10.Task.ID)
	}
	f.result("1.0", send10(9, wire.MethodSendMessage, "add resource l with value 1", ""), &res10)
	waiting := res10.Task.ID

	var all wire.ListTasksResponseV1
	a := f.result("1.0", rpc(10, wire.MethodListTasks, `{}`), &all)
	if all.TotalSize < 4 {
		t.Fatalf("ListTasks totalSize = %d, want 4 at least", all.TotalSize)
	}
	if len(all.Tasks) != all.TotalSize {
		t.Fatalf("ListTasks gave %d tasks, want all %d on one page", len(all.Tasks), all.TotalSize)
	}
	if all.PageSize != 50 {
		t.Fatalf("ListTasks pageSize = %d, want the default 50", all.PageSize)
	}
	if all.NextPageToken != "" {
		t.Fatalf("ListTasks nextPageToken = %q, want none", all.NextPageToken)
	}
	if !strings.Contains(a.Raw, `"nextPageToken":""`) {
		t.Fatalf("ListTasks = %s, want an empty nextPageToken written out", a.Raw)
	}
	if all.Tasks[0].ID != waiting {
		t.Errorf("first task %s, want the newest (%s)", all.Tasks[0].ID, waiting)
	}
	for _, task := range all.Tasks {
		if task.History != nil || task.Artifacts != nil {
			t.Errorf("task %s has history or artifacts by default", task.ID)
		}
	}
	// Pages of 2 visit every task once.
	var seen []string
	token := ""
	for range 10 {
		var page wire.ListTasksResponseV1
		f.result("1.0", rpc(11, wire.MethodListTasks, fmt.Sprintf(`{"pageSize":2,"pageToken":%q}`, token)), &page)
		if len(page.Tasks) > 2 || page.TotalSize != all.TotalSize || page.PageSize != 2 {
			t.Fatalf("page = %+v", page)
		}
		for _, task := range page.Tasks {
			seen = append(seen, task.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	var want []string
	for _, task := range all.Tasks {
		want = append(want, task.ID)
	}
	if !slices.Equal(seen, want) {
		t.Errorf("pages = %v, want %v", seen, want)
	}
	var one wire.ListTasksResponseV1
	f.result("1.0", rpc(12, wire.MethodListTasks, fmt.Sprintf(`{"contextId":%q,"includeArtifacts":true,"historyLength":1}`, ids[1])), &one)
	if one.TotalSize != 1 {
		t.Errorf("by contextId: totalSize = %d, want 1: %+v", one.TotalSize, one)
	} else {
		if one.Tasks[0].ID != ids[1] {
			t.Errorf("by contextId: task %s, want %s", one.Tasks[0].ID, ids[1])
		}
		if n := len(one.Tasks[0].Artifacts); n != 1 {
			t.Errorf("by contextId with includeArtifacts: %d artifacts, want 1", n)
		}
		if n := len(one.Tasks[0].History); n != 1 {
			t.Errorf("by contextId with historyLength 1: %d messages, want 1", n)
		}
	}
	f.result("1.0", rpc(13, wire.MethodListTasks, `{"status":"TASK_STATE_INPUT_REQUIRED"}`), &one)
	if one.TotalSize != 1 || one.Tasks[0].ID != waiting {
		t.Errorf("by status = %+v", one)
	}
	f.result("1.0", rpc(14, wire.MethodListTasks, `{"statusTimestampAfter":"2999-01-01T00:00:00Z"}`), &one)
	if one.TotalSize != 0 || one.Tasks == nil {
		t.Errorf("after 2999 = %+v", one)
	}
}

func TestForwardsCaller(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	work := make(chan nats.Header, 16)
	sub, err := f.m.NC.Subscribe("mesh.work.agent.>", func(m *nats.Msg) { work <- m.Header })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	decisions := make(chan nats.Header, 16)
	dsub, err := f.m.NC.Subscribe("mesh.approval.*.decide", func(m *nats.Msg) { decisions <- m.Header })
	if err != nil {
		t.Fatal(err)
	}
	defer dsub.Unsubscribe()

	a := f.call("", send03(1, wire.MethodSend, "add resource fwd with value 1", ""), "Authorization", "Bearer test-token-123", mesh.HeaderSessionID, "abcd1234")
	var task wire.Task
	_ = json.Unmarshal(a.Result, &task)
	if h := <-work; h.Get("Authorization") != "Bearer test-token-123" || h.Get(mesh.HeaderSessionID) != "abcd1234" {
		t.Errorf("turn headers = %v", h)
	}
	if task.Metadata["session_id"] != "abcd1234" {
		t.Errorf("metadata = %v", task.Metadata)
	}
	f.call("", send03(2, wire.MethodSend, "approved", task.ID), "Authorization", "Bearer other-token")
	if h := <-decisions; h.Get("Authorization") != "Bearer other-token" {
		t.Errorf("decision headers = %v", h)
	}
	if h := <-work; h.Get("Authorization") != "Bearer other-token" {
		t.Errorf("resume headers = %v (the decider's token)", h)
	}
	f.call("", send03(3, wire.MethodSend, "list all resources", ""))
	if h := <-work; h.Get("Authorization") != "" {
		t.Errorf("turn without a token carries %q", h.Get("Authorization"))
	}
}

func TestBusy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var task wire.Task
	f.result("", send03(1, wire.MethodSend, "slow: list all resources", "", "configuration", `{"blocking":false}`), &task)
	<-f.model.entered
	defer close(f.model.gate)
	a := f.call("", send03(2, wire.MethodSend, "list all resources", task.ID))
	if a.Error == nil || a.Error.Code != wire.CodeUnsupportedOperation || a.Status != http.StatusOK {
		t.Errorf("message/send to a working task: %s", a.Raw)
	}
	// 0.3 streams answer errors as one SSE event, 1.0 as JSON.
	resp, events := f.stream("", send03(3, wire.MethodStream, "list all resources", task.ID))
	if resp.Header.Get("Content-Type") != "text/event-stream" || len(events) != 1 || !strings.Contains(events[0], `"code":-32004`) {
		t.Errorf("0.3 stream to a working task: %s %v", resp.Header.Get("Content-Type"), events)
	}
	a = f.call("1.0", send10(4, wire.MethodSendStreamingMessage, "list all resources", task.ID))
	if a.Error == nil || a.Error.Code != wire.CodeUnsupportedOperation || !strings.HasPrefix(a.Header.Get("Content-Type"), "application/json") {
		t.Errorf("1.0 stream to a working task: %s", a.Raw)
	}
}

// errorCase is a request that must get a JSON-RPC error.
type errorCase struct {
	name    string
	version string
	body    string
	code    int
	status  int
	// id is the id the answer must carry.
	id string
}

func TestErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	msg03 := `{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}`
	huge := rpc(1, wire.MethodSend, `{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"`+strings.Repeat("x", 100<<10)+`"}]}}`)
	for _, tt := range []errorCase{
		{"bad JSON", "", `{"jsonrpc":"2.0","id":1,"method":`, wire.CodeParseError, 200, "null"},
		{"not JSON at all", "", `hello`, wire.CodeParseError, 200, "null"},
		{"empty body", "", ``, wire.CodeInvalidRequest, 200, "null"},
		{"batch", "", `[` + rpc(1, wire.MethodGet, `{"id":"x"}`) + `]`, wire.CodeInvalidRequest, 200, "null"},
		{"a string", "", `"message/send"`, wire.CodeInvalidRequest, 200, "null"},
		{"no jsonrpc", "", `{"id":1,"method":"tasks/get","params":{"id":"x"}}`, wire.CodeInvalidRequest, 200, "1"},
		{"jsonrpc 1.0", "", `{"jsonrpc":"1.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, wire.CodeInvalidRequest, 200, "1"},
		{"no method", "", `{"jsonrpc":"2.0","id":"a"}`, wire.CodeInvalidRequest, 200, `"a"`},
		{"method not a string", "", `{"jsonrpc":"2.0","id":1,"method":42}`, wire.CodeInvalidRequest, 200, "1"},
		{"id an object", "", `{"jsonrpc":"2.0","id":{"x":1},"method":"tasks/get","params":{"id":"x"}}`, wire.CodeInvalidRequest, 200, "null"},
		{"unknown method", "", rpc(1, "tasks/explode", `{}`), wire.CodeMethodNotFound, 200, "1"},
		{"1.0 method in 0.3", "", rpc(1, wire.MethodGetTask, `{"id":"x"}`), wire.CodeMethodNotFound, 200, "1"},
		{"0.3 method in 1.0", "1.0", rpc(1, wire.MethodGet, `{"id":"x"}`), wire.CodeMethodNotFound, 200, "1"},
		{"list in 0.3", "", rpc(1, "tasks/list", `{}`), wire.CodeMethodNotFound, 200, "1"},
		{"no params", "", `{"jsonrpc":"2.0","id":1,"method":"message/send"}`, wire.CodeInvalidParams, 200, "1"},
		{"params an array", "", rpc(1, wire.MethodSend, `["hi"]`), wire.CodeInvalidParams, 200, "1"},
		{"no message", "", rpc(1, wire.MethodSend, `{}`), wire.CodeInvalidParams, 200, "1"},
		{"message a string", "", rpc(1, wire.MethodSend, `{"message":"hi"}`), wire.CodeInvalidParams, 200, "1"},
		{"parts an object", "", rpc(1, wire.MethodSend, `{"message":{"messageId":"m","role":"user","parts":{"kind":"text"}}}`), wire.CodeInvalidParams, 200, "1"},
		{"no text part", "", rpc(1, wire.MethodSend, `{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"uri":"http://x/f"}}]}}`), wire.CodeInvalidParams, 200, "1"},
		{"blank text", "", rpc(1, wire.MethodSend, `{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"  "}]}}`), wire.CodeInvalidParams, 200, "1"},
		{"unknown part kind", "", rpc(1, wire.MethodSend, `{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"video","text":"x"}]}}`), wire.CodeInvalidParams, 200, "1"},
		{"role agent", "", rpc(1, wire.MethodSend, `{"message":{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}}`), wire.CodeInvalidParams, 200, "1"},
		{"no messageId", "", rpc(1, wire.MethodSend, `{"message":{"kind":"message","role":"user","parts":[{"kind":"text","text":"hi"}]}}`), wire.CodeInvalidParams, 200, "1"},
		{"blocking a string", "", rpc(1, wire.MethodSend, `{"message":`+msg03+`,"configuration":{"blocking":"yes"}}`), wire.CodeInvalidParams, 200, "1"},
		{"negative history", "", rpc(1, wire.MethodGet, `{"id":"x","historyLength":-1}`), wire.CodeInvalidParams, 200, "1"},
		{"push config", "", rpc(1, wire.MethodSend, `{"message":`+msg03+`,"configuration":{"pushNotificationConfig":{"url":"http://x"}}}`), wire.CodePushNotificationUnsupported, 200, "1"},
		{"push method", "", rpc(1, "tasks/pushNotificationConfig/set", `{}`), wire.CodePushNotificationUnsupported, 200, "1"},
		{"get without id", "", rpc(1, wire.MethodGet, `{}`), wire.CodeInvalidParams, 200, "1"},
		{"id a number", "", rpc(1, wire.MethodGet, `{"id":5}`), wire.CodeInvalidParams, 200, "1"},
		{"unknown task", "", rpc("q", wire.MethodGet, `{"id":"no-such-task"}`), wire.CodeTaskNotFound, 200, `"q"`},
		{"hostile task id", "", rpc(1, wire.MethodGet, `{"id":"a.b.>"}`), wire.CodeTaskNotFound, 200, "1"},
		{"send to unknown task", "", rpc(1, wire.MethodSend, `{"message":{"kind":"message","messageId":"m","role":"user","taskId":"nope","parts":[{"kind":"text","text":"hi"}]}}`), wire.CodeTaskNotFound, 200, "1"},
		{"hostile contextId", "", rpc(1, wire.MethodSend, `{"message":{"kind":"message","messageId":"m","role":"user","contextId":"a.*","parts":[{"kind":"text","text":"hi"}]}}`), wire.CodeInvalidParams, 200, "1"},
		{"version 2.0", "2.0", rpc(1, wire.MethodSendMessage, `{}`), wire.CodeVersionNotSupported, 200, "1"},
		{"version garbage", "latest", `not json`, wire.CodeVersionNotSupported, 200, "null"},
		{"1.0 role user", "1.0", rpc(1, wire.MethodSendMessage, `{"message":{"messageId":"m","role":"user","parts":[{"text":"hi"}]}}`), wire.CodeInvalidParams, 200, "1"},
		{"1.0 0.3 parts", "1.0", rpc(1, wire.MethodSendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"text"}]}}`), wire.CodeInvalidParams, 200, "1"},
		{"1.0 page size", "1.0", rpc(1, wire.MethodListTasks, `{"pageSize":101}`), wire.CodeInvalidParams, 200, "1"},
		{"1.0 page token", "1.0", rpc(1, wire.MethodListTasks, `{"pageToken":"garbage"}`), wire.CodeInvalidParams, 200, "1"},
		{"1.0 status", "1.0", rpc(1, wire.MethodListTasks, `{"status":"TASK_STATE_RUNNING"}`), wire.CodeInvalidParams, 200, "1"},
		{"1.0 timestamp", "1.0", rpc(1, wire.MethodListTasks, `{"statusTimestampAfter":"yesterday"}`), wire.CodeInvalidParams, 200, "1"},
		{"1.0 extended card", "1.0", rpc(1, "GetExtendedAgentCard", `{}`), wire.CodeUnsupportedOperation, 200, "1"},
		{"huge body", "", huge, wire.CodeInvalidRequest, 413, "null"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := f.do(t.Context(), tt.version, tt.body)
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var a struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Result  json.RawMessage `json:"result"`
				Error   *wire.Error     `json:"error"`
			}
			if err := json.Unmarshal(data, &a); err != nil {
				t.Fatalf("answer %q: %v", data, err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, data)
			}
			if a.JSONRPC != "2.0" {
				t.Fatalf("jsonrpc %q, want 2.0: %s", a.JSONRPC, data)
			}
			if a.Error == nil {
				t.Fatalf("answer %s, want an error", data)
			}
			if a.Error.Code != tt.code {
				t.Fatalf("error code %d, want %d: %s", a.Error.Code, tt.code, data)
			}
			if a.Error.Message == "" {
				t.Fatalf("error without a message: %s", data)
			}
			if a.Result != nil {
				t.Fatalf("answer %s, want no result beside the error", data)
			}
			if string(a.ID) != tt.id {
				t.Fatalf("id %s, want %s", a.ID, tt.id)
			}
			if len(data) > 2000 {
				t.Errorf("answer of %d bytes echoes the request", len(data))
			}
			// 1.0 errors carry details; 0.3 ones no data (a2a-go decodes
			// data as an object).
			_, isA2A := map[int]bool{wire.CodeTaskNotFound: true, wire.CodeTaskNotCancelable: true, wire.CodePushNotificationUnsupported: true, wire.CodeUnsupportedOperation: true, wire.CodeVersionNotSupported: true}[tt.code]
			details, _ := a.Error.Data.([]any)
			switch {
			case tt.code == wire.CodeVersionNotSupported || (tt.version == "1.0" && isA2A):
				info, _ := details[0].(map[string]any)
				if info["@type"] != wire.ErrorInfoType || info["reason"] != wire.ErrorReason(tt.code) || info["domain"] != "a2a-protocol.org" {
					t.Errorf("1.0 error data = %v", a.Error.Data)
				}
			case tt.version == "" && a.Error.Data != nil:
				t.Errorf("0.3 error with data %v", a.Error.Data)
			}
		})
	}
	// 1.0 invalid params name the field.
	a := f.call("1.0", rpc(1, wire.MethodSendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}`))
	if a.Error == nil || a.Error.Code != wire.CodeInvalidParams || !strings.Contains(string(a.Error.Data), `"fieldViolations":[{"field":"message.parts"`) {
		t.Errorf("1.0 invalid params: %s", a.Raw)
	}
	// The 0.3 error answers decode with a2a-go's types: code and message.
	a = f.call("", rpc("x", wire.MethodGet, `{"id":"no-such-task"}`))
	var goErr struct {
		ID    string `json:"id"`
		Error *struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.Raw), &goErr); err != nil || goErr.ID != "x" || goErr.Error.Code != -32001 {
		t.Errorf("a2a-go's envelope cannot read %s: %v", a.Raw, err)
	}
}

// A2A streams draw on the bridge's one pool of stream slots: once the other
// surfaces have taken them all, a stream is refused with an error saying so.
func TestStreamsPastMaxStreamsAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	taken := 0
	for f.core.AcquireStream() {
		taken++
	}
	_, events := f.stream("", send03(1, wire.MethodStream, "list all resources", ""))
	if len(events) != 1 || !strings.Contains(events[0], "too many concurrent streams") {
		t.Errorf("0.3 message/stream with no slot left: %q, want one error event", events)
	}
	if a := f.call("1.0", send10(2, wire.MethodSendStreamingMessage, "list all resources", "")); a.Error == nil || !strings.Contains(a.Error.Message, "too many concurrent streams") {
		t.Errorf("1.0 SendStreamingMessage with no slot left: %s", a.Raw)
	}
	for range taken {
		f.core.ReleaseStream()
	}
	if _, events := f.stream("", send03(3, wire.MethodStream, "list all resources", "")); len(events) < 2 {
		t.Errorf("a stream after the slots were given back: %q", events)
	}
}

// checkApprovedTask checks a task read after its approval: the same task,
// completed, with its one artifact, and the tool's resource created.
func (f *fixture) checkApprovedTask(t *testing.T, what string, task wire.Task, id, resource string) {
	t.Helper()
	if task.ID != id {
		t.Fatalf("%s: task id %q, want %q", what, task.ID, id)
	}
	if task.Status.State != wire.StateCompleted {
		t.Fatalf("%s: state %q, want %q", what, task.Status.State, wire.StateCompleted)
	}
	if len(task.Artifacts) != 1 {
		t.Fatalf("%s: %d artifacts, want 1: %+v", what, len(task.Artifacts), task.Artifacts)
	}
	if !f.tools.Has(resource) {
		t.Fatalf("%s: the resource %s was not created", what, resource)
	}
}
