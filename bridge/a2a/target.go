package a2a

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// groupPrefix and agentPrefix are the patterns under which a group's and
// an agent's card and endpoint are mounted; {name} is the group or agent.
const (
	groupPrefix = "/groups/{name}"
	agentPrefix = "/agents/{name}"
)

// target is the A2A agent an endpoint serves: the mesh's agent, or one of
// its group chats. Its tasks are its own conversations: the agent's have
// no group, a group's are chats of that group; a task of another target
// is unknown to it (-32001).
type target struct {
	// group is the group served; nil means an agent.
	group *config.Group
	// agent is the agent served under /agents/<name> (GET /agents); nil
	// with no group means the mesh's default agent at the root.
	agent *core.Agent
}

// agent adapts a handler of a target to the agent's routes.
func (h *handler) agent(f func(http.ResponseWriter, *http.Request, target)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { f(w, r, target{}) }
}

// named adapts a handler of a target to an agent's routes under /agents:
// the agent of the directory named by the path, or 404 (agent_not_found).
func (h *handler) named(f func(http.ResponseWriter, *http.Request, target)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, err := h.core.Agent(r.Context(), r.PathValue("name"))
		if err != nil {
			core.WriteError(w, err)
			return
		}
		f(w, r, target{agent: a})
	}
}

// agentName is the agent whose conversations the target serves, empty for
// a group.
func (t target) agentName(cfg Config) string {
	switch {
	case t.group != nil:
		return ""
	case t.agent != nil:
		return t.agent.Name
	}
	return cfg.Name
}

// create starts a conversation of the target: a chat of its group, or a
// conversation with its agent.
func (t target) create(ctx context.Context, h *handler, id string, caller core.Caller) (*mesh.Conversation, error) {
	if t.group != nil {
		return h.core.CreateChat(ctx, id, t.group.Name, caller)
	}
	return h.core.CreateFor(ctx, id, t.agentName(h.cfg), caller)
}

// group adapts a handler of a target to a group's routes: the group named
// by the path, or 404 with the bridge's JSON error (group_not_found).
func (h *handler) group(f func(http.ResponseWriter, *http.Request, target)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g, err := h.core.Group(r.PathValue("name"))
		if err != nil {
			core.WriteError(w, err)
			return
		}
		f(w, r, target{group: g})
	}
}

// groupName is the group the target serves, empty for the agent: the
// group of its conversations.
func (t target) groupName() string {
	if t.group == nil {
		return ""
	}
	return t.group.Name
}

// path is the target's JSON-RPC endpoint: /a2a, or /groups/<name>/a2a.
func (t target) path() string {
	switch {
	case t.group != nil:
		return "/groups/" + url.PathEscape(t.group.Name) + Path
	case t.agent != nil:
		return "/agents/" + url.PathEscape(t.agent.Name) + Path
	}
	return Path
}

// cardPath is where the target's card is: /.well-known/agent-card.json,
// or /groups/<name>/.well-known/agent-card.json.
func (t target) cardPath() string {
	return strings.TrimSuffix(t.path(), Path) + wire.CardPath
}

// owns reports whether a conversation of group (empty: not a group chat)
// and agent is a task of the target: a group's chats; an agent's
// conversations under /agents/<name>; at the root, as before there were
// several, every conversation that is not a group chat.
func (t target) owns(group, agent string) bool {
	if group != "" || t.group != nil {
		return group == t.groupName()
	}
	return t.agent == nil || agent == t.agent.Name
}

// groupOf is the group of a conversation, empty when it is not a chat.
func groupOf(c *mesh.Conversation) string {
	if c.Group == nil {
		return ""
	}
	return c.Group.Name
}

// headGroup is [groupOf] for a conversation's head.
func headGroup(h *store.SessionHead) string {
	if h.Group == nil {
		return ""
	}
	return h.Group.Name
}

// name and description present the target in its card. A group without
// a description is described by its members.
func (t target) name(cfg Config) string {
	if t.group != nil {
		return t.group.Name
	}
	return t.agentName(cfg)
}

func (t target) description(cfg Config) string {
	if g := t.group; g != nil {
		if strings.TrimSpace(g.Description) != "" {
			return g.Description
		}
		members := make([]string, 0, len(g.Participants))
		for _, p := range g.Participants {
			members = append(members, p.Agent)
		}
		return "Group chat " + g.Name + " of an Agent Mesh: " + joinAnd(members) + " answer each message in turn; the last answer is the reply."
	}
	desc := cfg.Description
	if t.agent != nil && t.agent.Name != cfg.Name {
		desc = t.agent.Description
	}
	if strings.TrimSpace(desc) != "" {
		return desc
	}
	return "Agent " + t.agentName(cfg) + " of an Agent Mesh: its tools are MCP servers, its destructive calls wait for a human's approval."
}

// skillsOf are the agent's tools and sub-agents ([handler.skills]), or a
// group's members: one skill each (id and name: the agent's name; tags
// "member", the group, the member's routing keywords and its declared
// capabilities). A member's
// description is its participant's, else the agent's when it is the
// mesh's agent, else that of the agent in another group.
func (h *handler) skillsOf(ctx context.Context, t target) ([]wire.Skill, error) {
	g := t.group
	if g == nil {
		return h.agentSkills(ctx, t)
	}
	skills := make([]wire.Skill, 0, len(g.Participants))
	for _, p := range g.Participants {
		desc := p.Description
		if desc == "" && p.Agent == h.cfg.Name {
			desc = h.cfg.Description
		}
		for _, other := range h.core.Groups() {
			for _, q := range other.Participants {
				if desc == "" && q.Agent == p.Agent {
					desc = q.Description
				}
			}
		}
		if desc == "" {
			desc = "Agent " + p.Agent + ", a member of the group chat " + g.Name
		}
		tags := append(append([]string{"member", g.Name}, p.Keywords...), p.Capabilities...)
		skills = append(skills, wire.Skill{ID: p.Agent, Name: p.Agent, Description: desc, Tags: tags})
	}
	return skills, nil
}

// joinAnd joins names as a sentence does: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	switch len(names) {
	case 0:
		return "its members"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
