package mesh

import "github.com/nats-io/nats-server/v2/server"

// ServerPermissionsForTest are p as the embedded server takes them.
func ServerPermissionsForTest(p *Permissions) *server.Permissions { return serverPermissions(p) }

// NumRoutesForTest counts the server's route connections.
func (s *Server) NumRoutesForTest() int { return s.ns.NumRoutes() }
