package core

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// The agent directory: every agent this bridge's configuration defines and
// every agent a live process serves, with what their processes say of them
// in their heartbeats (mesh_nodes), so that GET /agents, the per-agent A2A
// cards and the web page's picker show each one's status.

// Statuses of an agent in the directory.
const (
	// AgentOnline: a live process serves it with a worker free.
	AgentOnline = "online"
	// AgentBusy: every worker of every live process serving it is running
	// a turn; a new turn waits in the work queue.
	AgentBusy = "busy"
	// AgentOffline: no live process serves it; its turns wait in the work
	// queue until one does.
	AgentOffline = "offline"
)

// AgentDef is an agent the bridge's configuration defines: the main agent,
// and the group members defined with a prompt or a model.
type AgentDef struct {
	Name, Description string
	// Prompt is the system prompt stored as the first message of its
	// conversations.
	Prompt string
	// Capabilities are what the configuration says it can do.
	Capabilities []string
	// Disabled: the configuration says enabled: false. The directory
	// leaves it out, even when an older process still serves it, and no
	// conversation is created for it.
	Disabled bool
}

// Agent is an agent of the directory.
type Agent struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Status      string   `json:"status"`
	Tools       []string `json:"tools"`
	SubAgents   []string `json:"sub_agents"`
	// Capabilities are what the agent's configuration says it can do;
	// Models the models its live processes' llm steps call.
	Capabilities []string `json:"capabilities"`
	Models       []string `json:"models"`
	// Nodes are the live processes serving it; Workers and Busy their
	// workers for it, all together; Waiting the turns among Busy whose
	// model calls wait for the provider's capacity.
	Nodes   []string `json:"nodes"`
	Workers int      `json:"workers"`
	Busy    int      `json:"busy"`
	Waiting int      `json:"waiting"`
	// Default marks the agent a conversation is for when it names none.
	Default bool `json:"default,omitempty"`
}

// Agents lists the directory, by name: the configured agents and every
// agent a process says it serves, offline when no live process does (a
// process a monitor found dead keeps its record, and so its agents, for
// ten minutes; one that stopped cleanly takes its agents with it).
func (c *Core) Agents(ctx context.Context) ([]Agent, error) {
	nodes, err := store.NewNodes(c.cfg.Resources.Nodes).List(ctx)
	if err != nil {
		return nil, mesh.ErrUnavailable.With("the nodes bucket cannot be read: " + err.Error())
	}
	byName := map[string]*Agent{}
	get := func(name string) *Agent {
		a := byName[name]
		if a == nil {
			a = &Agent{Name: name, Tools: []string{}, SubAgents: []string{}, Capabilities: []string{}, Models: []string{}, Nodes: []string{}}
			byName[name] = a
		}
		return a
	}
	disabled := map[string]bool{}
	for _, d := range c.agentDefs() {
		if d.Disabled {
			disabled[d.Name] = true
			continue
		}
		a := get(d.Name)
		a.Description = d.Description
		a.Capabilities = union(a.Capabilities, d.Capabilities)
	}
	for _, n := range nodes {
		if n.Role != mesh.RoleAgent {
			continue
		}
		for _, info := range n.Agents {
			if disabled[info.Name] {
				continue
			}
			a := get(info.Name)
			a.Capabilities = union(a.Capabilities, info.Capabilities)
			if a.Description == "" {
				a.Description = info.Description
			}
			if !serving(n.State) {
				continue
			}
			a.Tools = union(a.Tools, info.Tools)
			a.Models = union(a.Models, info.Models)
			a.SubAgents = union(a.SubAgents, info.SubAgents)
			a.Nodes = append(a.Nodes, n.Node)
			a.Workers += info.Workers
			a.Busy += min(info.Busy, info.Workers)
			a.Waiting += min(info.Waiting, info.Busy)
		}
	}
	out := make([]Agent, 0, len(byName))
	for _, a := range byName {
		switch {
		case len(a.Nodes) == 0:
			a.Status = AgentOffline
		case a.Busy >= a.Workers:
			a.Status = AgentBusy
		default:
			a.Status = AgentOnline
		}
		sort.Strings(a.Nodes)
		a.Default = a.Name == c.cfg.Agent
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Agent is one agent of the directory, or ErrAgentNotFound.
func (c *Core) Agent(ctx context.Context, name string) (*Agent, error) {
	list, err := c.Agents(ctx)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i], nil
		}
	}
	if c.disabled(name) {
		return nil, mesh.ErrAgentNotFound.With(fmt.Sprintf("agent %s is disabled: its configuration says enabled: false", mesh.Clip(name)))
	}
	return nil, mesh.ErrAgentNotFound.With(fmt.Sprintf("agent %s is neither configured nor served by a live process; GET /agents lists them", mesh.Clip(name)))
}

// disabled reports whether the configuration disables the agent of that
// name.
func (c *Core) disabled(name string) bool {
	for _, d := range c.agentDefs() {
		if d.Name == name {
			return d.Disabled
		}
	}
	return false
}

// CreateFor is [Core.CreateConversation] for the agent of that name (empty:
// the default agent): a configured agent, or one a live process serves.
func (c *Core) CreateFor(ctx context.Context, id, agent string, caller Caller) (*mesh.Conversation, error) {
	if agent == "" || agent == c.cfg.Agent {
		return c.CreateConversation(ctx, id, caller)
	}
	if mesh.CheckToken(agent) != nil || len(agent) > mesh.MaxIDLen {
		return nil, mesh.ErrAgentNotFound.With(fmt.Sprintf("agent %s not found: an agent name is letters, digits, '_' and '-'", mesh.Clip(agent)))
	}
	if _, err := c.Agent(ctx, agent); err != nil {
		return nil, err
	}
	return c.create(ctx, id, "", agent, caller)
}

// agentDefs are the configured agents, the default one first.
func (c *Core) agentDefs() []AgentDef {
	if len(c.cfg.Agents) > 0 {
		return c.cfg.Agents
	}
	return []AgentDef{{Name: c.cfg.Agent, Prompt: c.cfg.Prompt}}
}

// serving says a node in that state takes work.
func serving(state string) bool { return state == mesh.NodeReady || state == mesh.NodeDegraded }

// union adds the names of more missing from list, sorted.
func union(list, more []string) []string {
	for _, m := range more {
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	sort.Strings(list)
	return list
}
