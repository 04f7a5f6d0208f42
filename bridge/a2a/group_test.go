package a2a

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	a2ago "github.com/a2aproject/a2a-go/a2a"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// teamPath is the JSON-RPC endpoint of the fixture's group team.
const teamPath = "/groups/team/a2a"

// getJSON GETs path and returns the status and the body.
func (f *fixture) getJSON(path string) (int, []byte) {
	f.t.Helper()
	resp, err := f.srv.Client().Get(f.srv.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		f.t.Errorf("GET %s: Content-Type %q", path, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, data
}

// memberNames are the names the history's agent messages carry in their
// metadata.
func memberNames(history []wire.Message) []string {
	var out []string
	for _, m := range history {
		if m.Role == wire.RoleAgent {
			name, _ := m.Metadata["name"].(string)
			out = append(out, name)
		}
	}
	return out
}

func TestGroupCard(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	for _, path := range []string{"/groups/team" + wire.CardPath, "/groups/team" + wire.LegacyCardPath} {
		status, data := f.getJSON(path)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, status, data)
		}
		var card wire.AgentCard
		if err := json.Unmarshal(data, &card); err != nil {
			t.Fatal(err)
		}
		url := f.srv.URL + teamPath
		checkCard(t, "GET "+path, card, "team", "Three resource clerks", url)
		want := []wire.Interface{{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"}, {URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3"}}
		if !slices.Equal(card.SupportedInterfaces, want) {
			t.Errorf("supportedInterfaces = %+v, want %+v", card.SupportedInterfaces, want)
		}
		wantSkills := []wire.Skill{
			{ID: "alice", Name: "alice", Description: "lists resources", Tags: []string{"member", "team", "list"}},
			{ID: "bob", Name: "bob", Description: "Agent bob, a member of the group chat team", Tags: []string{"member", "team"}},
			{ID: "carol", Name: "carol", Description: "reports resources", Tags: []string{"member", "team", "reports"}},
		}
		if len(card.Skills) != len(wantSkills) {
			t.Fatalf("skills = %+v, want %+v", card.Skills, wantSkills)
		}
		for i, s := range card.Skills {
			w := wantSkills[i]
			if s.ID != w.ID {
				t.Errorf("skill %d id = %q, want %q", i, s.ID, w.ID)
			}
			if s.Name != w.Name {
				t.Errorf("skill %d name = %q, want %q", i, s.Name, w.Name)
			}
			if s.Description != w.Description {
				t.Errorf("skill %d description = %q, want %q", i, s.Description, w.Description)
			}
			if !slices.Equal(s.Tags, w.Tags) {
				t.Errorf("skill %d tags = %q, want %q", i, s.Tags, w.Tags)
			}
		}
		var goCard a2ago.AgentCard
		if err := json.Unmarshal(data, &goCard); err != nil {
			t.Errorf("a2a-go cannot read the card: %v", err)
			continue
		}
		if goCard.URL != url {
			t.Errorf("a2a-go reads url %q, want %q", goCard.URL, url)
		}
		if goCard.Name != "team" {
			t.Errorf("a2a-go reads name %q, want team", goCard.Name)
		}
		if len(goCard.Skills) != 3 {
			t.Errorf("a2a-go reads %d skills, want 3: %+v", len(goCard.Skills), goCard.Skills)
		}
	}

	// A group without a description is described by its members; a member
	// that is the mesh's agent has the agent's description.
	_, data := f.getJSON("/groups/pair" + wire.CardPath)
	var pair wire.AgentCard
	_ = json.Unmarshal(data, &pair)
	if pair.Name != "pair" || !strings.Contains(pair.Description, "tester and alice answer each message in turn") || pair.URL != f.srv.URL+"/groups/pair/a2a" {
		t.Errorf("pair card = %s", data)
	}
	if len(pair.Skills) != 2 {
		t.Errorf("pair has %d skills, want 2: %+v", len(pair.Skills), pair.Skills)
	} else {
		if pair.Skills[0].ID != "tester" {
			t.Errorf("pair skill 0 id = %q, want tester", pair.Skills[0].ID)
		}
		if pair.Skills[0].Description != "Manages resources." {
			t.Errorf("pair skill 0 description = %q, want the agent's %q", pair.Skills[0].Description, "Manages resources.")
		}
		if pair.Skills[1].Description != "lists resources" {
			t.Errorf("pair skill 1 description = %q, want the member's %q", pair.Skills[1].Description, "lists resources")
		}
	}

	// The agent's card is the agent's.
	_, data = f.getJSON(wire.CardPath)
	var main wire.AgentCard
	_ = json.Unmarshal(data, &main)
	if main.Name != "tester" || main.URL != f.srv.URL+Path {
		t.Errorf("agent card = %s", data)
	}
}

func TestGroupUnknown(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	check := func(what string, status int, data []byte) {
		t.Helper()
		var body struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		if status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404: %s", what, status, data)
		}
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("%s: body %s: %v", what, data, err)
			return
		}
		if body.Code != "group_not_found" {
			t.Errorf("%s: code %q, want group_not_found", what, body.Code)
		}
		if !strings.Contains(body.Error, `"nope"`) {
			t.Errorf("%s: error %q, want it to name \"nope\"", what, body.Error)
		}
	}
	for _, path := range []string{"/groups/nope" + wire.CardPath, "/groups/nope" + wire.LegacyCardPath} {
		status, data := f.getJSON(path)
		check("GET "+path, status, data)
	}
	resp := f.at("/groups/nope/a2a").do(t.Context(), "", send03(1, wire.MethodSend, "list all resources", ""))
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	check("POST /groups/nope/a2a", resp.StatusCode, data)
}

// A message to a group's endpoint starts a chat of that group: each member
// answers in turn, the task's artifact is the last answer, the history
// names each member.
func TestGroupSend(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	g := f.at(teamPath)
	var task wire.Task
	a := g.result("", send03(1, wire.MethodSend, "list all resources", ""), &task)
	if task.Status.State != wire.StateCompleted || task.ContextID != task.ID || len(task.Artifacts) != 1 {
		t.Fatalf("task = %s", a.Result)
	}
	if goTask, ok := strict03(t, a.Result).(*a2ago.Task); !ok || goTask.Status.State != a2ago.TaskStateCompleted {
		t.Errorf("a2a-go reads %#v", goTask)
	}
	conv, err := f.core.Sessions.Get(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if conv.Group == nil {
		t.Fatalf("conversation %s is not a group chat, want a chat of team", conv.ID)
	}
	if conv.Group.Name != "team" {
		t.Fatalf("conversation is a chat of %q, want team", conv.Group.Name)
	}
	if conv.LastRun == nil {
		t.Fatal("conversation has no last run")
	}
	// The artifact is carol's answer.
	last := conv.Messages[len(conv.Messages)-1]
	art := task.Artifacts[0]
	if got := textOf(art.Parts); got != conv.LastRun.Response {
		t.Errorf("artifact text %q, want the last run's response %q", got, conv.LastRun.Response)
	}
	if art.ArtifactID != last.ID {
		t.Errorf("artifact id %q, want the last message's %q", art.ArtifactID, last.ID)
	}
	if last.Name != "carol" {
		t.Errorf("last message by %q, want carol", last.Name)
	}
	if art.Metadata["name"] != "carol" {
		t.Errorf("artifact metadata name = %v, want carol", art.Metadata["name"])
	}
	if got := memberNames(task.History); !slices.Equal(got, []string{"alice", "bob", "carol"}) || task.History[0].Role != wire.RoleUser {
		t.Errorf("history by %v, want the user, then alice, bob, carol", got)
	}

	// The next message is the next round of the same chat.
	g.result("", send03(2, wire.MethodSend, "list all resources", task.ID), &task)
	if task.Status.State != wire.StateCompleted || len(task.History) != 8 {
		t.Errorf("second round: %s with %d messages, want completed with 8", task.Status.State, len(task.History))
	}

	// A new contextId makes a chat of the group with that id (1.0 here).
	var res10 wire.SendMessageResponseV1
	f.at(teamPath).result("1.0", rpc(3, wire.MethodSendMessage, `{"message":{"messageId":"m-3","role":"ROLE_USER","contextId":"team-ctx","parts":[{"text":"list all resources"}]}}`), &res10)
	if res10.Task == nil {
		t.Fatalf("1.0 send with a new contextId = %+v, want a task", res10)
	}
	if res10.Task.ID != "team-ctx" {
		t.Fatalf("1.0 send with a new contextId: task %q, want team-ctx", res10.Task.ID)
	}
	if res10.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("1.0 send with a new contextId: state %q, want TASK_STATE_COMPLETED", res10.Task.Status.State)
	}
	if n := len(res10.Task.Artifacts); n != 1 {
		t.Fatalf("1.0 send with a new contextId: %d artifacts, want 1", n)
	}
	if c, err := f.core.Sessions.Get(t.Context(), "team-ctx"); err != nil || c.Group == nil || c.Group.Name != "team" {
		t.Errorf("team-ctx = %+v, %v: want a chat of team", c, err)
	}
}

// A task belongs to one endpoint: the agent's conversations to /a2a, a
// group's chats to its own; any other is an unknown task.
func TestGroupTasksAreItsOwn(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	team, pair := f.at(teamPath), f.at("/groups/pair/a2a")
	var chat, solo wire.Task
	team.result("", send03(1, wire.MethodSend, "list all resources", ""), &chat)
	f.result("", send03(2, wire.MethodSend, "list all resources", ""), &solo)
	empty, err := f.core.CreateChat(t.Context(), "team-empty", "team", core.Caller{})
	if err != nil {
		t.Fatal(err)
	}

	var got wire.Task
	team.result("", rpc(3, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, chat.ID)), &got)
	if got.ID != chat.ID || got.Status.State != wire.StateCompleted {
		t.Errorf("tasks/get of the chat on its endpoint = %+v", got)
	}
	team.result("", rpc(4, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, empty.ID)), &got)
	if got.Status.State != wire.StateSubmitted {
		t.Errorf("a chat with no message yet = %+v", got.Status)
	}
	for _, tt := range []struct {
		name    string
		f       *fixture
		version string
		body    string
	}{
		{"agent gets a chat", f, "", rpc(5, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, chat.ID))},
		{"agent sends to a chat", f, "", send03(6, wire.MethodSend, "list all resources", chat.ID)},
		{"agent cancels a chat", f, "", rpc(7, wire.MethodCancel, fmt.Sprintf(`{"id":%q}`, chat.ID))},
		{"agent 1.0 gets a chat", f, "1.0", rpc(8, wire.MethodGetTask, fmt.Sprintf(`{"id":%q}`, chat.ID))},
		{"group gets the agent's", team, "", rpc(9, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, solo.ID))},
		{"group sends to the agent's", team, "", send03(10, wire.MethodSend, "list all resources", solo.ID)},
		{"group continues the agent's context", team, "", rpc(11, wire.MethodSend, fmt.Sprintf(`{"message":{"kind":"message","messageId":"m-11","role":"user","contextId":%q,"parts":[{"kind":"text","text":"hi"}]}}`, solo.ID))},
		{"another group gets the chat", pair, "", rpc(12, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, chat.ID))},
		{"group 1.0 gets an unknown task", team, "1.0", rpc(13, wire.MethodGetTask, `{"id":"no-such-task"}`)},
	} {
		a := tt.f.call(tt.version, tt.body)
		if a.Status != http.StatusOK || a.Error == nil || a.Error.Code != wire.CodeTaskNotFound {
			t.Errorf("%s: %s, want -32001", tt.name, a.Raw)
		}
	}
	_, events := team.stream("", rpc(14, wire.MethodResubscribe, fmt.Sprintf(`{"id":%q}`, solo.ID)))
	if len(events) != 1 || !strings.Contains(events[0], `"code":-32001`) {
		t.Errorf("group resubscribes to the agent's: %v", events)
	}

	// ListTasks lists the endpoint's own.
	ids := func(fx *fixture) []string {
		var page wire.ListTasksResponseV1
		fx.result("1.0", rpc(15, wire.MethodListTasks, `{}`), &page)
		var out []string
		for _, task := range page.Tasks {
			out = append(out, task.ID)
		}
		slices.Sort(out)
		return out
	}
	want := []string{chat.ID, empty.ID}
	slices.Sort(want)
	if got := ids(team); !slices.Equal(got, want) {
		t.Errorf("team lists %v, want %v", got, want)
	}
	if got := ids(pair); len(got) != 0 {
		t.Errorf("pair lists %v, want none", got)
	}
	if got := ids(f); slices.Contains(got, chat.ID) || slices.Contains(got, empty.ID) || !slices.Contains(got, solo.ID) {
		t.Errorf("the agent lists %v: want its own (%s), no chat", got, solo.ID)
	}
}

// A stream of a group's task says who speaks, streams each answer as an
// artifact named after its member, and ends with the last one.
func TestGroupStream(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	g := f.at(teamPath)
	_, events := g.stream("", send03(1, wire.MethodStream, "list all resources", ""))
	results := responses(t, events, "1")
	first, ok := strict03(t, results[0]).(*a2ago.Task)
	if !ok || first.Status.State != a2ago.TaskStateSubmitted {
		t.Fatalf("first event = %s", results[0])
	}
	var speakers, authors []string
	var reply *a2ago.TaskArtifactUpdateEvent
	for _, r := range results[1:] {
		switch ev := strict03(t, r).(type) {
		case *a2ago.TaskStatusUpdateEvent:
			if m := ev.Status.Message; m != nil && strings.HasSuffix(m.Parts[0].(a2ago.TextPart).Text, " speaks") {
				speakers = append(speakers, m.Metadata["name"].(string))
			}
		case *a2ago.TaskArtifactUpdateEvent:
			name, _ := ev.Artifact.Metadata["name"].(string)
			if len(authors) == 0 || authors[len(authors)-1] != name {
				authors = append(authors, name)
			}
			if ev.LastChunk {
				reply = ev
			}
		}
	}
	if want := []string{"alice", "bob", "carol"}; !slices.Equal(speakers, want) || !slices.Equal(authors, want) {
		t.Errorf("speakers %v, artifacts by %v; want %v", speakers, authors, want)
	}
	last, ok := strict03(t, results[len(results)-1]).(*a2ago.TaskStatusUpdateEvent)
	if !ok {
		t.Fatalf("last event %s, want a status update", results[len(results)-1])
	}
	if !last.Final {
		t.Fatalf("last event is not final: %s", results[len(results)-1])
	}
	if last.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("last event state %q, want %q", last.Status.State, a2ago.TaskStateCompleted)
	}
	if reply == nil {
		t.Fatal("no reply artifact in the stream")
	}
	var got wire.Task
	g.result("", rpc(2, wire.MethodGet, fmt.Sprintf(`{"id":%q}`, first.ID)), &got)
	if got.Artifacts[0].ArtifactID != string(reply.Artifact.ID) || got.Artifacts[0].Metadata["name"] != "carol" {
		t.Errorf("streamed reply %+v, task's artifact %+v", reply.Artifact, got.Artifacts[0])
	}

	// 1.0
	_, events = g.stream("1.0", send10(3, wire.MethodSendStreamingMessage, "list all resources", ""))
	results = responses(t, events, "3")
	var end wire.StreamResponseV1
	_ = json.Unmarshal(results[len(results)-1], &end)
	if end.StatusUpdate == nil || end.StatusUpdate.Status.State != "TASK_STATE_COMPLETED" {
		t.Errorf("1.0 last item = %s", results[len(results)-1])
	}
}

// A member's destructive call pauses the chat as input-required; the
// task's next message decides it, and the round goes on.
func TestGroupApproval(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t)
	g := f.at(teamPath)
	var task wire.Task
	g.result("", send03(1, wire.MethodSend, "add resource grp-item with value 7", ""), &task)
	first := approvalOf(t, &task)
	if names := memberNames(task.History); !slices.Equal(names, []string{"alice"}) {
		t.Errorf("history by %v, want alice", names)
	}
	a := g.call("", rpc(2, wire.MethodCancel, fmt.Sprintf(`{"id":%q}`, task.ID)))
	if a.Error == nil || a.Error.Code != wire.CodeTaskNotCancelable {
		t.Errorf("cancel of a paused chat: %s", a.Raw)
	}
	g.result("", send03(3, wire.MethodSend, "approved", task.ID), &task)
	if !f.tools.Has("grp-item") {
		t.Fatal("alice's call did not run after approval")
	}
	// The next members ask for the same call: refuse them until the round
	// ends (max_turns 3).
	for i := 4; task.Status.State == wire.StateInputRequired && i < 8; i++ {
		if ap := approvalOf(t, &task); ap["uuid"] == first["uuid"] {
			t.Fatalf("the decided approval %v is still pending", ap["uuid"])
		}
		g.result("", send03(i, wire.MethodSend, "rejected", task.ID), &task)
	}
	if task.Status.State != wire.StateCompleted || len(task.Artifacts) != 1 || task.Artifacts[0].Metadata["name"] != "carol" {
		t.Fatalf("after the round: %+v", task)
	}
	conv, err := f.core.Sessions.Get(t.Context(), task.ID)
	if err != nil || conv.Group == nil || conv.Group.Ended != mesh.GroupEndMaxTurns {
		t.Errorf("chat %+v, %v: want ended by max_turns", conv.Group, err)
	}
}
