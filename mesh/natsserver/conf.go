package natsserver

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/identity"
)

// AuthConfig is the authorization block of a nats-server
// configuration file that admits users with their permissions, exactly as
// the embedded server does: a plain nats-server (or a cluster of them)
// includes it to serve the mesh (`include ./auth.conf` at the top level).
func AuthConfig(users []User) string {
	var b strings.Builder
	b.WriteString("# Agent Mesh identities and their permissions (ARCHITECTURE.md, Identities and\n")
	b.WriteString("# permissions), written by `mesh creds`. Include it at the top level of nats-server.conf.\n")
	b.WriteString("authorization {\n  users = [\n")
	for _, u := range users {
		role := identity.RoleAdmin
		if u.Permissions != nil {
			role = u.Permissions.Role
		}
		fmt.Fprintf(&b, "    # %s\n", role)
		p := serverPermissions(u.Permissions)
		if p == nil {
			fmt.Fprintf(&b, "    {nkey: %q}\n", u.NKey)
			continue
		}
		fmt.Fprintf(&b, "    {nkey: %q, permissions: {\n", u.NKey)
		fmt.Fprintf(&b, "      publish: {allow: %s}\n", confList(p.Publish.Allow))
		fmt.Fprintf(&b, "      subscribe: {allow: %s}\n", confList(p.Subscribe.Allow))
		b.WriteString("    }}\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

// ClusterAuthConfig is the inside of a nats-server configuration's cluster
// block that authenticates routes with the route secret: the user and
// password routes must present, and the routes to the nodes at addrs
// (host:port), with them. Include it in the cluster block.
func ClusterAuthConfig(password string, addrs []string) (string, error) {
	var b strings.Builder
	b.WriteString("# Agent Mesh route authentication, written by `mesh creds`. Include it inside\n")
	b.WriteString("# the cluster block of nats-server.conf: cluster { name, listen, include ./cluster.conf }.\n")
	fmt.Fprintf(&b, "authorization {\n  user: %q\n  password: %q\n  timeout: 2\n}\n", identity.RouteUser, password)
	var routes []string
	for _, a := range addrs {
		u, err := url.Parse("nats-route://" + a)
		if err != nil || u.Host != a || u.Port() == "" {
			return "", fmt.Errorf("route %q: want host:port", a)
		}
		u.User = url.UserPassword(identity.RouteUser, password)
		routes = append(routes, u.String())
	}
	fmt.Fprintf(&b, "routes = %s\n", confList(routes))
	return b.String(), nil
}

func confList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
