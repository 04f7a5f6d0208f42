package core

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// putNode writes a node's heartbeat record as its beat would.
func putNode(t *testing.T, m *meshtest.Mesh, n mesh.NodeInfo) {
	t.Helper()
	data, _ := json.Marshal(n)
	if _, err := m.Nodes.Put(t.Context(), n.Key(), data); err != nil {
		t.Fatal(err)
	}
}

// The directory: configured agents offline until a live process serves
// them; an agent online while a worker is free, busy when every worker of
// every process serving it is taken; down, draining and starting
// processes serve nothing (their agents listed offline); an agent only
// another process knows is listed.
func TestAgentDirectory(t *testing.T) {
	m := meshtest.New(t)
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "main", Prompt: "be main",
		Agents: []AgentDef{{Name: "main", Description: "the main one", Prompt: "be main"}, {Name: "critic", Prompt: "be critical"}}})
	if err != nil {
		t.Fatal(err)
	}
	putNode(t, m, mesh.NodeInfo{Node: "a1", Role: mesh.RoleAgent, State: mesh.NodeReady, Agents: []mesh.AgentInfo{
		{Name: "main", Tools: []string{"resources_list", "resources_add"}, Workers: 4, Busy: 4},
		{Name: "critic", Workers: 2, Busy: 0},
	}})
	putNode(t, m, mesh.NodeInfo{Node: "a2", Role: mesh.RoleAgent, State: mesh.NodeReady, Agents: []mesh.AgentInfo{
		{Name: "main", Tools: []string{"resources_list"}, SubAgents: []string{"planner"}, Workers: 4, Busy: 4},
		{Name: "elsewhere", Description: "served by its own process", Workers: 1, Busy: 0},
	}})
	putNode(t, m, mesh.NodeInfo{Node: "a3", Role: mesh.RoleAgent, State: mesh.NodeDown, Agents: []mesh.AgentInfo{{Name: "ghost", Workers: 1}}})
	putNode(t, m, mesh.NodeInfo{Node: "a4", Role: mesh.RoleAgent, State: mesh.NodeDraining, Agents: []mesh.AgentInfo{{Name: "critic", Workers: 9}}})

	list, err := c.Agents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Agent{}
	for _, a := range list {
		got[a.Name] = a
	}
	var names []string
	for _, a := range list {
		names = append(names, a.Name)
	}
	if want := []string{"critic", "elsewhere", "ghost", "main"}; !slices.Equal(names, want) {
		t.Fatalf("directory %q, want %q", names, want)
	}
	if a := got["ghost"]; a.Status != AgentOffline || len(a.Nodes) != 0 || a.Workers != 0 {
		t.Errorf("ghost, served by a node found down = %+v, want offline", a)
	}
	main := got["main"]
	// Busy on two nodes, 8 of 8 workers, both tools and the sub-agent.
	if main.Status != AgentBusy {
		t.Errorf("main status %s, want %s", main.Status, AgentBusy)
	}
	if main.Workers != 8 || main.Busy != 8 {
		t.Errorf("main %d of %d workers busy, want 8 of 8", main.Busy, main.Workers)
	}
	if !main.Default {
		t.Error("main is not the default agent")
	}
	if main.Description != "the main one" {
		t.Errorf("main description %q, want %q", main.Description, "the main one")
	}
	if len(main.Nodes) != 2 {
		t.Errorf("main on %d nodes, want 2: %+v", len(main.Nodes), main.Nodes)
	}
	if len(main.Tools) != 2 {
		t.Errorf("main tools %q, want both", main.Tools)
	} else if main.Tools[0] != "resources_add" {
		t.Errorf("main tools %q, want resources_add first", main.Tools)
	}
	if len(main.SubAgents) != 1 {
		t.Errorf("main sub-agents %+v, want one", main.SubAgents)
	}
	if a := got["critic"]; a.Status != AgentOnline || a.Workers != 2 || len(a.Nodes) != 1 {
		t.Errorf("critic = %+v, want online on a1 only (a4 drains)", a)
	}
	if a := got["elsewhere"]; a.Status != AgentOnline || a.Description != "served by its own process" || a.Default {
		t.Errorf("elsewhere = %+v", a)
	}

	// Every worker of main frees up on a2: online again.
	putNode(t, m, mesh.NodeInfo{Node: "a2", Role: mesh.RoleAgent, State: mesh.NodeReady, Agents: []mesh.AgentInfo{{Name: "main", Workers: 4, Busy: 1}}})
	if a, err := c.Agent(t.Context(), "main"); err != nil || a.Status != AgentOnline || a.Busy != 5 {
		t.Errorf("main after a2 freed workers = %+v, %v", a, err)
	}
	// The processes go: the configured agents stay, offline; the others leave.
	for _, k := range []string{"agent.a1", "agent.a2"} {
		if err := m.Nodes.Delete(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	if a, err := c.Agent(t.Context(), "critic"); err != nil || a.Status != AgentOffline || a.Workers != 0 {
		t.Errorf("critic with no process = %+v, %v; want offline", a, err)
	}
	if _, err := c.Agent(t.Context(), "elsewhere"); !errors.Is(err, mesh.ErrAgentNotFound) {
		t.Errorf("an agent no one configures or serves: %v, want agent_not_found", err)
	}
}

// A conversation is created for any agent of the directory: with the
// system prompt when the configuration defines the agent, without when
// only its process knows it; an unknown or malformed name is 404.
func TestCreateForAnAgent(t *testing.T) {
	m := meshtest.New(t)
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "main", Prompt: "be main",
		Agents: []AgentDef{{Name: "main", Prompt: "be main"}, {Name: "critic", Prompt: "be critical"}}})
	if err != nil {
		t.Fatal(err)
	}
	putNode(t, m, mesh.NodeInfo{Node: "b1", Role: mesh.RoleAgent, State: mesh.NodeReady, Agents: []mesh.AgentInfo{{Name: "remote", Workers: 1}}})
	for _, tc := range []struct {
		agent, wantAgent, wantPrompt string
	}{{"", "main", "be main"}, {"critic", "critic", "be critical"}, {"remote", "remote", ""}} {
		conv, err := c.CreateFor(t.Context(), mesh.NewID(), tc.agent, Caller{})
		if err != nil {
			t.Fatalf("agent %q: %v", tc.agent, err)
		}
		stored, err := c.Sessions.Get(t.Context(), conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		prompt := ""
		if len(stored.Messages) > 0 {
			prompt = stored.Messages[0].Content
		}
		if stored.Agent != tc.wantAgent || prompt != tc.wantPrompt {
			t.Errorf("agent %q: stored for %q with prompt %q, want %q and %q", tc.agent, stored.Agent, prompt, tc.wantAgent, tc.wantPrompt)
		}
	}
	for _, name := range []string{"nobody", "a.b", "x>"} {
		if _, err := c.CreateFor(t.Context(), mesh.NewID(), name, Caller{}); !errors.Is(err, mesh.ErrAgentNotFound) {
			t.Errorf("agent %q: %v, want agent_not_found", name, err)
		}
	}
}

// Capabilities come from the configuration and from what the processes
// serving an agent say (and its models from the processes); a disabled agent is not listed, even while an old
// process still serves it, and no conversation is created for it.
func TestDirectoryCapabilitiesAndDisabledAgents(t *testing.T) {
	m := meshtest.New(t)
	c, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "main", Prompt: "be main",
		Agents: []AgentDef{
			{Name: "main", Prompt: "be main", Capabilities: []string{"planning"}},
			{Name: "critic", Prompt: "be critical", Disabled: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	putNode(t, m, mesh.NodeInfo{Node: "a1", Role: mesh.RoleAgent, State: mesh.NodeReady, Agents: []mesh.AgentInfo{
		{Name: "main", Capabilities: []string{"infra changes", "planning"}, Models: []string{"openai:gpt-4o-mini"}, Workers: 1},
		{Name: "critic", Workers: 1},
		{Name: "remote", Capabilities: []string{"search"}, Workers: 1},
	}})
	list, err := c.Agents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, a := range list {
		got[a.Name] = a.Capabilities
	}
	want := map[string][]string{"main": {"infra changes", "planning"}, "remote": {"search"}}
	if len(got) != len(want) || !slices.Equal(got["main"], want["main"]) || !slices.Equal(got["remote"], want["remote"]) {
		t.Errorf("capabilities by agent = %v, want %v (critic is disabled)", got, want)
	}
	for _, a := range list {
		if a.Name == "main" && !slices.Equal(a.Models, []string{"openai:gpt-4o-mini"}) {
			t.Errorf("main's models %v, want the one its process calls", a.Models)
		}
	}
	if _, err := c.CreateFor(t.Context(), mesh.NewID(), "critic", Caller{}); !errors.Is(err, mesh.ErrAgentNotFound) {
		t.Errorf("a conversation with the disabled critic: %v, want agent_not_found", err)
	}

	// With the default agent disabled, a conversation must name another.
	d, err := New(Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "main",
		Agents: []AgentDef{{Name: "main", Disabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateFor(t.Context(), mesh.NewID(), "", Caller{}); !errors.Is(err, mesh.ErrAgentNotFound) {
		t.Errorf("a conversation with the disabled default agent: %v, want agent_not_found", err)
	}
	if _, err := d.CreateFor(t.Context(), mesh.NewID(), "remote", Caller{}); err != nil {
		t.Errorf("a conversation with remote: %v", err)
	}
}
