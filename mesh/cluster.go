package mesh

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The secrets of a cluster, beside the roles' seeds in the credentials
// directory: every server of the cluster (and every edge) must have the
// same ones, so that one directory, written once by `mesh creds`, is
// copied to each machine.
const (
	// RouteUser is the user routes between a cluster's servers present,
	// with the password of RouteSecretFile.
	RouteUser = "mesh-route"
	// RoleLeaf names the identity an edge's server connects to a central
	// cluster's leaf node port with (<creds dir>/leaf.nk).
	RoleLeaf = "leaf"
)

// RouteSecretFile is the path of the route password in dir: <dir>/route.secret.
func RouteSecretFile(dir string) string { return filepath.Join(dir, "route.secret") }

// EnsureSecret returns the secret in path, generating 32 random bytes
// (base64url, mode 0600) when the file is missing. Two processes
// generating at once keep the first one's.
func EnsureSecret(path string) (string, error) {
	if data, err := os.ReadFile(path); err == nil {
		s := strings.TrimSpace(string(data))
		if len(s) < 16 {
			return "", fmt.Errorf("%s: a secret of %d characters is too short (16 at least)", path, len(s))
		}
		return s, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("secret dir: %w", err)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	secret := base64.RawURLEncoding.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return EnsureSecret(path)
	}
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.WriteString(secret + "\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return secret, nil
}

// ServerAuthConfig is the authorization block of a nats-server
// configuration file that admits users with their permissions, exactly as
// the embedded server does: a plain nats-server (or a cluster of them)
// includes it to serve the mesh (`include ./auth.conf` at the top level).
func ServerAuthConfig(users []ServerUser) string {
	var b strings.Builder
	b.WriteString("# Agent Mesh identities and their permissions (ARCHITECTURE.md, Identities and\n")
	b.WriteString("# permissions), written by `mesh creds`. Include it at the top level of nats-server.conf.\n")
	b.WriteString("authorization {\n  users = [\n")
	for _, u := range users {
		role := RoleAdmin
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
	fmt.Fprintf(&b, "authorization {\n  user: %q\n  password: %q\n  timeout: 2\n}\n", RouteUser, password)
	var routes []string
	for _, a := range addrs {
		u, err := url.Parse("nats-route://" + a)
		if err != nil || u.Host != a || u.Port() == "" {
			return "", fmt.Errorf("route %q: want host:port", a)
		}
		u.User = url.UserPassword(RouteUser, password)
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
