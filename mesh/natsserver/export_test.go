package natsserver

import (
	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentmesh/agentmesh/mesh/identity"
)

// ServerPermissionsForTest are p as the embedded server takes them.
func ServerPermissionsForTest(p *identity.Permissions) *server.Permissions {
	return serverPermissions(p)
}

// NumRoutesForTest counts the server's route connections.
func (s *Server) NumRoutesForTest() int { return s.ns.NumRoutes() }

// RouteNamesForTest names the servers this one has a route with.
func (s *Server) RouteNamesForTest() []string {
	rz, err := s.ns.Routez(nil)
	if err != nil {
		return nil
	}
	var names []string
	for _, r := range rz.Routes {
		names = append(names, r.RemoteName)
	}
	return names
}
