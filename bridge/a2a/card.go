package a2a

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// Path is where the JSON-RPC endpoint is mounted.
const Path = "/a2a"

// card serves the target's card on both well-known paths. One card serves
// both versions: the 0.3 fields (url, protocolVersion 0.3.0,
// preferredTransport) that a2a-go 0.3 reads, and 1.0's
// supportedInterfaces, 1.0 first, which @a2a-js/sdk 1.x reads (a card with
// supportedInterfaces is a 1.0 card to it, and it picks the 1.0 entry).
func (h *handler) card(w http.ResponseWriter, r *http.Request, t target) {
	skills, err := h.skillsOf(r.Context(), t)
	if !h.core.Authenticated(core.CallerOf(r)) {
		// The card is public, so a client learns how to authenticate; what
		// the agent can do is for those who did.
		skills = []wire.Skill{}
	}
	if err != nil {
		w.Header().Set("Retry-After", "1")
		core.WriteError(w, mesh.ErrUnavailable.With("the tool catalog cannot be read: "+err.Error()))
		return
	}
	url := h.publicURL(r) + t.path()
	version := h.cfg.Version
	if version == "" {
		version = "dev"
	}
	card := wire.AgentCard{
		Name: t.name(h.cfg), Description: t.description(h.cfg), URL: url, Version: version,
		ProtocolVersion:    wire.ProtocolVersion03,
		PreferredTransport: wire.BindingJSONRPC,
		Capabilities:       wire.Capabilities{Streaming: true, PushNotifications: false, Extensions: []wire.AgentExtension{forkExtension()}},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             skills,
		SupportedInterfaces: []wire.Interface{
			{URL: url, ProtocolBinding: wire.BindingJSONRPC, ProtocolVersion: wire.Version10},
			{URL: url, ProtocolBinding: wire.BindingJSONRPC, ProtocolVersion: wire.Version03},
		},
	}
	if h.cfg.Bearer {
		card.SecuritySchemes, card.Security, card.SecurityRequirements = wire.BearerSecurity(h.cfg.BearerFormat)
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	core.WriteJSON(w, http.StatusOK, card)
}

// publicURL is the base URL clients reach the bridge at: Config.PublicURL,
// else the scheme and Host of the request.
func (h *handler) publicURL(r *http.Request) string {
	if h.cfg.PublicURL != "" {
		return strings.TrimRight(h.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// agentSkills are the skills of an agent target: the default agent's
// ([handler.skills]), or those of an agent under /agents that its
// processes offer (the directory's tools and sub-agents).
func (h *handler) agentSkills(ctx context.Context, t target) ([]wire.Skill, error) {
	all, err := h.skills(ctx)
	if err != nil || t.agent == nil || t.agent.Name == h.cfg.Name {
		return all, err
	}
	skills := []wire.Skill{}
	for _, s := range all {
		if slices.Contains(t.agent.Tools, s.ID) {
			skills = append(skills, s)
		}
	}
	for _, name := range t.agent.SubAgents {
		skills = append(skills, wire.Skill{ID: "a2a." + name, Name: name, Description: "Delegates to the A2A agent " + name, Tags: []string{"a2a", "sub-agent"}})
	}
	return skills, nil
}

// skills are one skill per tool of the catalog (id = tool name; tags: the
// server, "mcp", and "destructive" or "read-only") and one per A2A
// sub-agent (id = its name; tags "a2a", "sub-agent", "destructive" when it
// needs approval). An id already taken is prefixed with the server name
// ("<server>.<tool>") or "a2a.".
func (h *handler) skills(ctx context.Context) ([]wire.Skill, error) {
	tools, err := h.core.Catalog.List(ctx)
	if err != nil {
		return nil, err
	}
	skills := []wire.Skill{}
	seen := map[string]bool{}
	for _, t := range tools {
		id := t.Name
		if seen[id] {
			id = t.Server + "." + t.Name
		}
		seen[id] = true
		name := t.Title
		if name == "" && t.Annotations != nil {
			name = t.Annotations.Title
		}
		if name == "" {
			name = t.Name
		}
		desc := t.Description
		if desc == "" {
			desc = "Tool " + t.Name + " of the MCP server " + t.Server
		}
		tags := []string{t.Server, "mcp"}
		switch {
		case t.DestructiveHint:
			tags = append(tags, "destructive")
		case t.ReadOnlyHint:
			tags = append(tags, "read-only")
		}
		skills = append(skills, wire.Skill{ID: id, Name: name, Description: desc, Tags: tags})
	}
	for _, a := range h.cfg.SubAgents {
		id := a.Name
		if seen[id] {
			id = "a2a." + a.Name
		}
		seen[id] = true
		desc := a.Description
		if desc == "" {
			desc = "Delegates to the A2A agent " + a.Name
		}
		tags := []string{"a2a", "sub-agent"}
		if a.IsDestructive() {
			tags = append(tags, "destructive")
		}
		skills = append(skills, wire.Skill{ID: id, Name: a.Name, Description: desc, Tags: tags})
	}
	return skills, nil
}
