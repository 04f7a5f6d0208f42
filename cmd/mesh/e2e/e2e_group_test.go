package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// groupConfig is the default agent plus the groups given (YAML under
// groups:).
func groupConfig(t testing.TB, groups string) string {
	return defaultConfig(t) + "\ngroups:\n" + groups
}

// newGroupChat creates a chat of group and returns its id.
func (m *meshProc) newGroupChat(group string) string {
	m.t.Helper()
	out := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"group": group})
	id := str(out, "conversation", "id")
	if id == "" || str(out, "conversation", "group", "name") != group {
		m.t.Fatalf("no group chat in %v", out)
	}
	return id
}

// speakers lists the authors of a conversation's assistant answers.
func speakers(conv map[string]any) []string {
	var out []string
	for _, msg := range list(conv, "messages") {
		if str(msg, "role") == "assistant" && obj(msg)["notice"] != true && len(list(msg, "tool_calls")) == 0 {
			out = append(out, str(msg, "name"))
		}
	}
	return out
}

const teamGroup = `  - name: team
    description: Three resource clerks
    strategy: round_robin
    max_turns: 3
    participants:
      - {agent: alice, description: lists resources, prompt: "You are Alice, a resource clerk."}
      - {agent: bob, description: checks resources, prompt: "You are Bob, a resource clerk."}
      - {agent: carol, description: reports resources, prompt: "You are Carol, a resource clerk."}
`

func TestGroupRoundRobinReachesMaxTurns(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: groupConfig(t, teamGroup)})
	conv := m.newGroupChat("team")
	out := m.send(conv, "list all resources")
	c := obj(out, "conversation")
	if str(c, "status") != "active" || str(out, "result", "outcome") != "success" {
		t.Fatalf("answer = %v", out)
	}
	if got := strings.Join(speakers(c), ","); got != "alice,bob,carol" {
		t.Errorf("speakers %s, want alice,bob,carol", got)
	}
	if str(c, "group", "ended") != "max_turns" {
		t.Errorf("group = %v, want ended by max_turns", obj(c, "group"))
	}
	evs := turnEvents(t, m, conv, "RUN_FINISHED")
	var selected []string
	for _, ev := range evs {
		if str(ev, "type") == "CUSTOM" && str(ev, "name") == "speaker_selected" {
			selected = append(selected, str(ev, "value", "speaker"))
		}
	}
	if strings.Join(selected, ",") != "alice,bob,carol" {
		t.Errorf("speaker_selected %v", selected)
	}
}

// gatedGroupConfig is the default agent, the gated items server of
// testmcp_test.go (items_list blocks until the gate file exists) and the
// groups given.
func gatedGroupConfig(t testing.TB, dir, groups string) string {
	return defaultConfig(t) + `  - name: items
    command: mesh-test-mcp
    env:
      ` + testMCPEnv + `: "1"
      ` + testGateEnv + `: "` + filepath.Join(dir, "gate") + `"
      ` + testCallsEnv + `: "` + filepath.Join(dir, "calls") + `"
mesh:
  ack_wait: 2s
  restart_backoff: 100ms
groups:
` + groups
}

// groupEvents reads the events of a conversation until its n-th
// RUN_FINISHED or RUN_ERROR.
func groupEvents(t *testing.T, m *meshProc, conv string) []map[string]any {
	t.Helper()
	return turnEvents(t, m, conv, "RUN_FINISHED")
}

// customs lists the values of the CUSTOM events named name.
func customs(evs []map[string]any, name string) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		if str(ev, "type") == "CUSTOM" && str(ev, "name") == name {
			out = append(out, obj(ev, "value"))
		}
	}
	return out
}

func TestGroupSurvivesKillOfTheGroupProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: gatedGroupConfig(t, dir, `  - name: pair
    max_turns: 2
    participants:
      - {agent: first, prompt: "You list items."}
      - {agent: second, prompt: "You list items too."}
`)})
	// The offline planner picks the tool that matches best: items_list,
	// once the members' process has the items server's tools.
	offered(t, m, "items_list", "first", "second")
	conv := m.newGroupChat("pair")
	wait := m.sendLater(conv, "list items")
	// The first member is in its tool call, which waits for the gate.
	meshtest.Eventually(t, 30*time.Second, func() bool { return lines(t, filepath.Join(dir, "calls")) > 0 }, "the first member never called its tool")
	groupPID := m.childPID("group")
	if err := killPID(groupPID); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 30*time.Second, func() bool { return m.childPID("group") != groupPID }, "group process not restarted")
	openGate(t, dir)
	wait(90*time.Second, "the chat did not finish after the group process was killed")
	var c map[string]any
	meshtest.Eventually(t, 60*time.Second, func() bool {
		c = obj(m.do(http.StatusOK, "GET", "/conversations/"+conv, nil), "conversation")
		return str(c, "status") == "active"
	}, "the chat did not end")
	if got := strings.Join(speakers(c), ","); got != "first,second" {
		t.Errorf("speakers %s, want first,second: no turn lost or doubled", got)
	}
	if n := lines(t, filepath.Join(dir, "calls")); n != 2 {
		t.Errorf("items_list ran %d times, want 2 (one per member turn)", n)
	}
	ids := map[string]bool{}
	for _, msg := range list(c, "messages") {
		if ids[str(msg, "id")] {
			t.Errorf("message %s twice", str(msg, "id"))
		}
		ids[str(msg, "id")] = true
	}
	evs := groupEvents(t, m, conv)
	var selected []string
	for _, v := range customs(evs, "speaker_selected") {
		selected = append(selected, str(v, "speaker"))
	}
	if strings.Join(selected, ",") != "first,second" {
		t.Errorf("speaker_selected %v, want first then second once each", selected)
	}
}

// offered waits until the agent directory says every agent is offered
// tool: the processes serving them have it in their catalog.
func offered(t *testing.T, m *meshProc, tool string, agents ...string) {
	t.Helper()
	meshtest.Eventually(t, 30*time.Second, func() bool {
		for _, a := range agents {
			status, body := m.try("GET", "/agents/"+a, nil)
			if status != http.StatusOK || !slices.Contains(list(body, "tools"), any(tool)) {
				return false
			}
		}
		return true
	}, "%v not offered %s", agents, tool)
}

// outsiderConfig is the configuration of an agent served by a process of
// its own, outside `mesh up`: a member of m's group.
func outsiderConfig(t *testing.T, m *meshProc) string {
	t.Helper()
	path := filepath.Join(m.dir, "outsider.yaml")
	if err := os.WriteFile(path, []byte("name: outsider\nprompt: You list items.\nllm:\n  model: offline\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGroupSkipsAMemberWhoseProcessIsDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: gatedGroupConfig(t, dir, `  - name: crew
    max_turns: 1
    participants:
      - {agent: outsider, description: served by its own process}
      - {agent: inside, prompt: "You list items."}
`)})
	cmd, _ := runRole(t, m, "agent", "MESH_CONFIG="+outsiderConfig(t, m), "MESH_NODE_ID=outsider-1")
	servedBy(t, m, "outsider")
	conv := m.newGroupChat("crew")
	wait := m.sendLater(conv, "list items")
	// The outsider speaks first, and its tool call hangs; its process is
	// killed and stays down.
	meshtest.Eventually(t, 30*time.Second, func() bool { return lines(t, filepath.Join(dir, "calls")) > 0 }, "the outsider never called its tool")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var skipped []map[string]any
	meshtest.Eventually(t, 30*time.Second, func() bool {
		skipped = customs(readEvents(t, m, conv), "speaker_skipped")
		return len(skipped) > 0
	}, "no speaker_skipped event")
	if str(skipped[0], "member") != "outsider" || !strings.Contains(str(skipped[0], "reason"), "no live process") {
		t.Errorf("speaker_skipped = %v", skipped[0])
	}
	openGate(t, dir)
	body := wait(60*time.Second, "the chat did not go on without the outsider")
	c := obj(body, "conversation")
	if str(c, "status") != "active" || strings.Join(speakers(c), ",") != "inside" {
		t.Errorf("status %s, speakers %v; want the chat done by inside alone", str(c, "status"), speakers(c))
	}
}

// meshJS connects to m's NATS server for the test's own reads.
func meshJS(t *testing.T, m *meshProc) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(m.adminNATS(t))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// readEvents reads the events stored so far for a conversation, straight
// from the events stream.
func readEvents(t *testing.T, m *meshProc, conv string) []map[string]any {
	t.Helper()
	js := meshJS(t, m)
	cons, err := js.OrderedConsumer(t.Context(), "MESH_EVENTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"mesh.evt." + conv + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10000, jetstream.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for msg := range batch.Messages() {
		var v map[string]any
		if err := json.Unmarshal(msg.Data(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// servedBy waits until a live agent process announces agent.
func servedBy(t *testing.T, m *meshProc, agent string) {
	t.Helper()
	kv, err := meshJS(t, m).KeyValue(t.Context(), "mesh_nodes")
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 30*time.Second, func() bool {
		keys, _ := kv.ListKeys(t.Context())
		if keys == nil {
			return false
		}
		for k := range keys.Keys() {
			e, err := kv.Get(t.Context(), k)
			if err == nil && strings.Contains(string(e.Value()), `"`+agent+`"`) && strings.HasPrefix(k, "agent.") {
				return true
			}
		}
		return false
	}, "no live process serves %s", agent)
}

func TestGroupStopsOnCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := startMesh(t, meshOpts{config: gatedGroupConfig(t, dir, `  - name: pair
    participants:
      - {agent: first, prompt: "You list items."}
      - {agent: second, prompt: "You list items too."}
`)})
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644) })
	conv := m.newGroupChat("pair")
	wait := m.sendLater(conv, "list items")
	meshtest.Eventually(t, 30*time.Second, func() bool { return lines(t, filepath.Join(dir, "calls")) > 0 }, "the first member never called its tool")
	m.do(http.StatusAccepted, "POST", "/conversations/"+conv+"/cancel", nil)
	body := wait(30*time.Second, "the chat did not stop")
	c := obj(body, "conversation")
	if str(body, "result", "outcome") != "cancelled" || str(c, "status") != "active" || str(c, "group", "ended") != "stopped" {
		t.Fatalf("answer = %v, want the round stopped", body)
	}
	// The chat takes messages again, and the stopped member's turn left
	// nothing behind.
	openGate(t, dir)
	out := m.send(conv, "list all resources")
	if str(out, "result", "outcome") != "success" {
		t.Errorf("next message: %v", obj(out, "result"))
	}
}

func TestGroupOfTenMembers(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("  - name: ten\n    max_turns: 10\n    participants:\n")
	for i := range 10 {
		fmt.Fprintf(&b, "      - {agent: member-%d, description: clerk %d, prompt: \"You are clerk %d.\"}\n", i, i, i)
	}
	m := startMesh(t, meshOpts{config: groupConfig(t, b.String())})
	conv := m.newGroupChat("ten")
	out := m.send(conv, "list all resources")
	c := obj(out, "conversation")
	got := speakers(c)
	if len(got) != 10 || str(c, "group", "ended") != "max_turns" {
		t.Fatalf("speakers %v, group %v", got, obj(c, "group"))
	}
	for i, s := range got {
		if s != fmt.Sprintf("member-%d", i) {
			t.Errorf("turn %d by %s, want member-%d", i+1, s, i)
		}
	}
}

func TestGroupRouterAndModelSelection(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: groupConfig(t, `  - name: desk
    strategy: router
    max_turns: 1
    default: generalist
    participants:
      - {agent: generalist, description: answers anything, prompt: "You help."}
      - {agent: remover, description: removes resources, keywords: [remove, delete], prompt: "You remove resources."}
      - {agent: lister, description: lists resources, patterns: ["(?i)\\blist\\b"], prompt: "You list resources."}
  - name: panel
    strategy: llm
    max_turns: 1
    participants:
      - {agent: poet, description: writes poems about the weather, prompt: "You write poems."}
      - {agent: librarian, description: lists and counts the resources of the catalog, prompt: "You list resources."}
`)})
	for _, tt := range []struct{ group, message, speaker, strategy string }{
		{"desk", "list all resources", "lister", "router"},
		{"desk", "hello there", "generalist", "router"},
		{"panel", "list the resources of the catalog", "librarian", "llm"},
	} {
		conv := m.newGroupChat(tt.group)
		out := m.send(conv, tt.message)
		if got := speakers(obj(out, "conversation")); len(got) != 1 || got[0] != tt.speaker {
			t.Errorf("%s %q: speakers %v, want %s", tt.group, tt.message, got, tt.speaker)
		}
		sel := customs(readEvents(t, m, conv), "speaker_selected")
		if len(sel) != 1 || str(sel[0], "strategy") != tt.strategy || str(sel[0], "reason") == "" {
			t.Errorf("%s %q: speaker_selected %v", tt.group, tt.message, sel)
		}
	}
}

// scriptedMembers answers as the members of the termination tests, told
// apart by their prompts, through OpenAI's wire format.
type scriptedMembers struct{}

func (scriptedMembers) Model() string { return "scripted" }
func (scriptedMembers) Generate(_ context.Context, req llm.Request) (*llm.Response, error) {
	answered := false
	for _, m := range req.Messages {
		answered = answered || m.Role == llm.RoleTool
	}
	switch {
	case strings.HasPrefix(req.System, "You close."):
		return &llm.Response{Text: "All done here. TERMINATE"}, nil
	case strings.HasPrefix(req.System, "You finish.") && !answered:
		for _, tool := range req.Tools {
			if tool.Name == "end_chat" {
				return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "end-1", Name: "end_chat", Arguments: json.RawMessage(`{}`)}}}, nil
			}
		}
		return &llm.Response{Text: "no end_chat offered"}, nil
	case strings.HasPrefix(req.System, "You finish."):
		return &llm.Response{Text: "Finished."}, nil
	}
	return &llm.Response{Text: "Working on it."}, nil
}

func TestGroupTerminationRules(t *testing.T) {
	t.Parallel()
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, Backend: scriptedMembers{}})
	m := startMesh(t, meshOpts{config: groupConfig(t, `  - name: phrase
    participants:
      - {agent: worker, prompt: "You work.", model: gpt-4o-mini}
      - {agent: closer, prompt: "You close.", model: gpt-4o-mini}
      - {agent: never, prompt: "You work too.", model: gpt-4o-mini}
  - name: done
    participants:
      - {agent: worker, prompt: "You work.", model: gpt-4o-mini}
      - {agent: finisher, prompt: "You finish.", model: gpt-4o-mini}
      - {agent: never, prompt: "You work too.", model: gpt-4o-mini}
`), env: []string{"OPENAI_API_KEY=k", "OPENAI_BASE_URL=" + srv.BaseURL()}})
	for _, tt := range []struct{ group, speakers, ended, response string }{
		{"phrase", "worker,closer", "termination_phrase", "All done here. TERMINATE"},
		{"done", "worker,finisher", "participant_done", "Finished."},
	} {
		conv := m.newGroupChat(tt.group)
		out := m.send(conv, "get going")
		c := obj(out, "conversation")
		if got := strings.Join(speakers(c), ","); got != tt.speakers || str(c, "group", "ended") != tt.ended {
			t.Errorf("%s: speakers %s, ended %q; want %s ended by %s", tt.group, got, str(c, "group", "ended"), tt.speakers, tt.ended)
		}
		if str(out, "result", "response") != tt.response {
			t.Errorf("%s: response %q, want %q", tt.group, str(out, "result", "response"), tt.response)
		}
		ended := customs(readEvents(t, m, conv), "group_ended")
		if len(ended) != 1 || str(ended[0], "reason") != tt.ended {
			t.Errorf("%s: group_ended %v", tt.group, ended)
		}
	}
}

// TestGroupOverAGUI runs the official AG-UI client on a group chat named in
// forwardedProps: the client accepts the stream, each member's message
// says who wrote it, and speaker_selected events say who speaks and why.
func TestGroupOverAGUI(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@ag-ui/client")
	m := startMesh(t, meshOpts{config: groupConfig(t, teamGroup)})
	thread := uuid.NewString()
	var res struct {
		Events  []string `json:"events"`
		Starts  []struct{ MessageID, Name string }
		Customs []struct {
			Name  string         `json:"name"`
			Value map[string]any `json:"value"`
		} `json:"customs"`
		Outcome string `json:"outcome"`
		Error   string `json:"error"`
	}
	runPeer(t, node, "agui-group.mjs", time.Minute, []string{"AGUI_URL=" + m.url("/agui"), "THREAD_ID=" + thread, "GROUP=team", "MESSAGE=list all resources"}, &res, nil)
	if res.Error != "" || res.Outcome != "success" {
		t.Fatalf("the AG-UI client: outcome %q, error %s\nevents %v", res.Outcome, res.Error, res.Events)
	}
	var names, selected []string
	for _, s := range res.Starts {
		names = append(names, s.Name)
	}
	for _, c := range res.Customs {
		if c.Name == "speaker_selected" {
			selected = append(selected, fmt.Sprint(c.Value["speaker"]))
			if c.Value["reason"] == nil || c.Value["strategy"] != "round_robin" {
				t.Errorf("speaker_selected %v, want a strategy and a reason", c.Value)
			}
		}
	}
	if strings.Join(names, ",") != "alice,bob,carol" || strings.Join(selected, ",") != "alice,bob,carol" {
		t.Errorf("message authors %v, speakers selected %v; want alice, bob, carol", names, selected)
	}
	c := obj(m.do(http.StatusOK, "GET", "/conversations/"+thread, nil), "conversation")
	if str(c, "group", "name") != "team" || strings.Join(speakers(c), ",") != "alice,bob,carol" {
		t.Errorf("conversation %s: group %v, speakers %v", thread, obj(c, "group"), speakers(c))
	}
}

// TestGroupMemberApprovals: a member's destructive call pauses the chat on
// an approval like a single agent's; each decision carries the chat on,
// and the next member speaks after it.
func TestGroupMemberApprovals(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: groupConfig(t, `  - name: ops
    max_turns: 2
    participants:
      - {agent: adder, prompt: "You manage resources."}
      - {agent: checker, prompt: "You manage resources too."}
`)})
	conv := m.newGroupChat("ops")
	first := m.addPending(conv, "add resource grp-1 with value 5")
	if str(first, "tool_name") != "resources_add" {
		t.Fatalf("approval = %v", first)
	}
	// Approved: adder's call runs, then checker speaks and asks for its own.
	out := m.do(http.StatusOK, "POST", "/approvals/"+str(first, "uuid"), map[string]any{"answer": "yes"})
	second := obj(out, "result", "approval")
	if str(out, "conversation", "status") != "waiting_approval" || str(second, "uuid") == "" || str(second, "uuid") == str(first, "uuid") {
		t.Fatalf("after the first approval: %v", obj(out, "result"))
	}
	if m.resourceRows("grp-1") != 1 {
		t.Fatalf("rows of grp-1 = %d after the approval", m.resourceRows("grp-1"))
	}
	out = m.do(http.StatusOK, "POST", "/approvals/"+str(second, "uuid"), map[string]any{"answer": "no"})
	c := obj(out, "conversation")
	if str(c, "status") != "active" || str(out, "result", "outcome") != "success" || str(c, "group", "ended") != "max_turns" {
		t.Fatalf("after the rejection: %v", out)
	}
	if got := strings.Join(speakers(c), ","); got != "adder,checker" {
		t.Errorf("speakers %s, want adder,checker", got)
	}
	if m.resourceRows("grp-1") != 1 {
		t.Errorf("rows of grp-1 = %d, want 1 (the second add was rejected)", m.resourceRows("grp-1"))
	}
	// Three runs: the message, then each decision's resume; the first two
	// end as interrupted, the last when the chat ends.
	var ends []string
	for _, ev := range readEvents(t, m, conv) {
		if str(ev, "type") == "RUN_FINISHED" {
			ends = append(ends, str(ev, "outcome", "type"))
		}
	}
	if strings.Join(ends, ",") != "interrupt,interrupt,success" {
		t.Errorf("RUN_FINISHED outcomes %v", ends)
	}
}

// TestGroupExample runs config/examples/group.yaml: the router gives the
// first turn to the member whose pattern matches, round robin the rest.
func TestGroupExample(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: exampleConfig(t, "group")})
	groups := list(m.do(http.StatusOK, "GET", "/groups", nil), "groups")
	if len(groups) != 1 || str(groups[0], "name") != "desk" || len(list(groups[0], "participants")) != 3 {
		t.Fatalf("GET /groups = %v", groups)
	}
	conv := m.newGroupChat("desk")
	out := m.send(conv, "list all resources")
	got := speakers(obj(out, "conversation"))
	if len(got) != 3 || got[0] != "auditor" {
		t.Errorf("speakers %v, want the auditor first and three turns", got)
	}
	plain := m.newConversation()
	listed := map[string]string{}
	for _, c := range list(m.do(http.StatusOK, "GET", "/conversations", nil), "conversations") {
		listed[str(c, "id")], _ = obj(c)["group"].(string)
	}
	if listed[conv] != "desk" || listed[plain] != "" {
		t.Errorf("GET /conversations marks the group chat %q and the agent's %q; want desk and nothing", listed[conv], listed[plain])
	}
	m.do(http.StatusNotFound, "POST", "/conversations", map[string]any{"group": "nope"})
}
