package main

import (
	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// roleUses is what of the configuration a process of role uses, and so
// which secrets of the environment `mesh up` hands it (config.Config.Env):
// the agents call the models of their trees and of the groups' members, a
// group the selector model of its llm strategy, the tool host starts and
// reaches the MCP servers, the bridge checks callers' credentials. The
// approver needs none of these: approvalKeys gives it its signing key's
// path.
func roleUses(cfg *config.Config, role string) config.Uses {
	switch role {
	case mesh.RoleAgent:
		return config.Uses{Models: cfg.AgentModels()}
	case mesh.RoleGroup:
		return config.Uses{Models: cfg.SelectorModels()}
	case mesh.RoleToolhost:
		return config.Uses{Tools: true}
	case mesh.RoleBridge:
		return config.Uses{Auth: true}
	}
	return config.Uses{}
}
