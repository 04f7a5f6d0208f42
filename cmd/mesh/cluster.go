package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
)

// topology is the embedded server's cluster and leaf node configuration
// from nats.cluster and nats.leafnodes, with the secrets of the
// credentials directory (generated when missing): the route password, and
// the leaf identity's key (its public key where leaf nodes connect, its
// seed where the server is an edge).
func topology(cfg *config.Config) (natsserver.ClusterConfig, natsserver.LeafConfig, error) {
	var c natsserver.ClusterConfig
	var l natsserver.LeafConfig
	n := cfg.NATS
	if n.Cluster.Enabled() {
		secret, err := identity.EnsureSecret(identity.RouteSecretFile(cfg.CredsDir()))
		if err != nil {
			return c, l, fmt.Errorf("%w: route secret: %w", errConfig, err)
		}
		c = natsserver.ClusterConfig{Name: n.Cluster.Name, Listen: n.Cluster.Listen, User: identity.RouteUser, Password: secret}
		for _, r := range n.Cluster.Routes {
			u, err := config.RouteURL(r, "nats-route")
			if err != nil {
				return c, l, fmt.Errorf("%w: nats.cluster.routes: %w", errConfig, err)
			}
			c.Routes = append(c.Routes, u)
		}
	}
	if n.LeafNodes.Listen == "" && !n.LeafNodes.Edge() {
		return c, l, nil
	}
	keys, err := identity.EnsureSeeds(cfg.CredsDir(), []string{identity.RoleLeaf})
	if err != nil {
		return c, l, err
	}
	l.Listen, l.NKey = n.LeafNodes.Listen, keys[identity.RoleLeaf]
	if n.LeafNodes.Edge() {
		seed, err := os.ReadFile(identity.SeedFile(cfg.CredsDir(), identity.RoleLeaf))
		if err != nil {
			return c, l, err
		}
		l.Seed = strings.TrimSpace(string(seed))
		for _, r := range n.LeafNodes.Remotes {
			u, err := config.RouteURL(r, "nats-leaf")
			if err != nil {
				return c, l, fmt.Errorf("%w: nats.leafnodes.remotes: %w", errConfig, err)
			}
			l.Remotes = append(l.Remotes, u)
		}
	}
	return c, l, nil
}

// runCreds writes the mesh's identities to the credentials directory (or
// --dir), keeping those already there: the nkey seed of every role, the
// admin and the leaf identity, the route secret, and for a plain
// nats-server auth.conf (the users and their permissions) and, with
// --routes, cluster.conf (the route authentication and routes). Every
// server of a cluster, and every role, then uses the same directory.
func runCreds(_ context.Context, cfg *config.Config, args []string) error {
	fs := flag.NewFlagSet("creds", flag.ContinueOnError)
	dir := fs.String("dir", cfg.CredsDir(), "the credentials directory to write")
	routes := fs.String("routes", "", "cluster.conf's routes: the nodes' route addresses, e.g. nats-1:6222,nats-2:6222,nats-3:6222")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	c := *cfg
	c.NATS.CredsDir = *dir
	c.NATS.Auth = config.NATSAuthNKeys
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return err
	}
	users, err := embeddedUsers(&c, ns)
	if err != nil {
		return err
	}
	if _, err := identity.EnsureSeeds(*dir, []string{identity.RoleLeaf}); err != nil {
		return err
	}
	secret, err := identity.EnsureSecret(identity.RouteSecretFile(*dir))
	if err != nil {
		return err
	}
	files := map[string]string{"auth.conf": natsserver.AuthConfig(users)}
	if *routes != "" {
		conf, err := natsserver.ClusterAuthConfig(secret, strings.Split(*routes, ","))
		if err != nil {
			return fmt.Errorf("%w: --routes: %w", errConfig, err)
		}
		files["cluster.conf"] = conf
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(*dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	fmt.Printf("mesh creds: %s holds the seeds of %s and %s, %s and %s\n", *dir,
		strings.Join(append(identity.Identities(), identity.RoleAdmin), ", "), identity.RoleLeaf,
		filepath.Base(identity.RouteSecretFile(*dir)), strings.Join(slices.Sorted(maps.Keys(files)), ", "))
	return nil
}
