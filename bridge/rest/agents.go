package rest

import (
	"net/http"
	"net/url"

	"github.com/agentmesh/agentmesh/bridge/core"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
)

// agentView is an agent of the directory with where to reach it over A2A.
type agentView struct {
	core.Agent
	// Card is the agent's A2A card, A2A its JSON-RPC endpoint (paths on
	// this bridge).
	Card string `json:"card"`
	A2A  string `json:"a2a"`
}

func viewOf(a core.Agent) agentView {
	base := "/agents/" + url.PathEscape(a.Name)
	return agentView{Agent: a, Card: base + wire.CardPath, A2A: base + "/a2a"}
}

// agents lists the agent directory: every configured agent and every agent
// a live process serves, with its status (online, busy, offline).
func (a *api) agents(w http.ResponseWriter, r *http.Request) {
	list, err := a.core.Agents(r.Context())
	if err != nil {
		core.WriteError(w, err)
		return
	}
	out := make([]agentView, 0, len(list))
	for _, ag := range list {
		out = append(out, viewOf(ag))
	}
	core.WriteJSON(w, http.StatusOK, map[string]any{"agents": out})
}

// agent is one agent of the directory.
func (a *api) agent(w http.ResponseWriter, r *http.Request) {
	ag, err := a.core.Agent(r.Context(), r.PathValue("name"))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, viewOf(*ag))
}
