package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/natsconn"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// natsIdentity is what a process connects to NATS with: a JWT creds file or
// an nkey seed file, or nothing (an open server).
type natsIdentity struct {
	role        string
	creds, nkey string
}

func (id natsIdentity) none() bool { return id.creds == "" && id.nkey == "" }

// provisions reports whether the process creates the streams and buckets
// (the admin, or anyone on an open server) rather than binding them.
func (id natsIdentity) provisions() bool { return id.none() || id.role == identity.RoleAdmin }

// identityOf finds role's credentials: NATS_CREDS or nats.creds, NATS_NKEY
// or nats.nkey ({role} replaced), else the role's file under
// <data_dir>/creds (<role>.creds, else <role>.nk), else none. An embedded
// server with nats.auth none is open: no file is looked for.
func identityOf(cfg *config.Config, role string) natsIdentity {
	id := natsIdentity{role: role}
	switch {
	case cfg.NATS.Creds != "":
		id.creds = identity.ExpandRole(cfg.NATS.Creds, role)
	case cfg.NATS.NKey != "":
		id.nkey = identity.ExpandRole(cfg.NATS.NKey, role)
	case cfg.EmbeddedNATS() && cfg.NATS.Auth == config.NATSAuthNone:
	case fileExists(identity.CredsFile(cfg.CredsDir(), role)):
		id.creds = identity.CredsFile(cfg.CredsDir(), role)
	case fileExists(identity.SeedFile(cfg.CredsDir(), role)):
		id.nkey = identity.SeedFile(cfg.CredsDir(), role)
	}
	return id
}

// responderIdentityOf finds the identity role answers requests with:
// nats.responder_creds or nats.responder_nkey ({role} replaced by the
// role's name); else, beside the role's own identity file, the file of the
// same pattern ({role} replaced by <role>-responder) or, for a file named
// otherwise, <role>-responder.creds or .nk in its directory; else that file
// under <data_dir>/creds; else the role's own identity (an open server, or
// one whose permissions let the role answer with it).
func responderIdentityOf(cfg *config.Config, role string) natsIdentity {
	name := identity.Responder(role)
	n := cfg.NATS
	switch {
	case n.ResponderCreds != "":
		return natsIdentity{role: name, creds: identity.ExpandRole(n.ResponderCreds, role)}
	case n.ResponderNKey != "":
		return natsIdentity{role: name, nkey: identity.ExpandRole(n.ResponderNKey, role)}
	case cfg.EmbeddedNATS() && n.Auth == config.NATSAuthNone:
		return identityOf(cfg, role)
	}
	for _, own := range []struct {
		path, ext string
		creds     bool
	}{{n.Creds, ".creds", true}, {n.NKey, ".nk", false}} {
		if own.path == "" {
			continue
		}
		p := filepath.Join(filepath.Dir(own.path), name+own.ext)
		if strings.Contains(own.path, "{role}") {
			p = identity.ExpandRole(own.path, name)
		}
		if fileExists(p) {
			if own.creds {
				return natsIdentity{role: name, creds: p}
			}
			return natsIdentity{role: name, nkey: p}
		}
	}
	if p := identity.CredsFile(cfg.CredsDir(), name); fileExists(p) {
		return natsIdentity{role: name, creds: p}
	}
	if p := identity.SeedFile(cfg.CredsDir(), name); fileExists(p) {
		return natsIdentity{role: name, nkey: p}
	}
	return identityOf(cfg, role)
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// refusedIdentity says, for a connection the server refused, which
// identity was tried and how to give the right one.
func refusedIdentity(cfg *config.Config, id natsIdentity) string {
	tried := "no credentials (none under " + cfg.CredsDir() + ")"
	switch {
	case id.creds != "":
		tried = "the credentials file " + id.creds
	case id.nkey != "":
		tried = "the nkey seed " + id.nkey
	}
	return fmt.Sprintf("the NATS server at %s refused %s as %s; point MESH_DATA_DIR at the data directory of the mesh it serves (its context.json and identities), or MESH_CONTEXT at a context file for it, or give the %s identity with NATS_NKEY or NATS_CREDS",
		natsURL(cfg), tried, id.role, id.role)
}

// natsTLS is the client TLS configuration of nats.tls, nil without one.
func natsTLS(cfg *config.Config) (*tls.Config, error) {
	files := identity.TLSFiles(cfg.NATS.TLS)
	if files.Empty() {
		return nil, nil
	}
	c, err := files.Client()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	return c, nil
}

// connectAs connects to the mesh's NATS server as role (a role of
// identity.Roles, or identity.RoleAdmin), with the role's own inbox.
func connectAs(cfg *config.Config, ns mesh.Namespace, role, name string, log zerolog.Logger) (*nats.Conn, natsIdentity, error) {
	return connectWith(cfg, ns, identityOf(cfg, role), name, log)
}

// connectWith connects with identity id, whose inbox is its own.
func connectWith(cfg *config.Config, ns mesh.Namespace, id natsIdentity, name string, log zerolog.Logger) (*nats.Conn, natsIdentity, error) {
	role := id.role
	tlsCfg, err := natsTLS(cfg)
	if err != nil {
		return nil, id, err
	}
	inbox := ""
	if role != identity.RoleAdmin {
		inbox = ns.Inbox(role)
	}
	nc, err := natsconn.Connect(natsconn.Config{
		URL: natsURL(cfg), Name: name, Inbox: inbox, CredsFile: id.creds, NKeyFile: id.nkey, TLS: tlsCfg,
		Responder: strings.HasSuffix(role, identity.ResponderSuffix), Logger: log,
	})
	return nc, id, err
}

// embeddedUsers are the identities of the embedded server: each role's,
// each role's responder's and the admin's nkey, generated under
// <data_dir>/creds when missing, with their permissions. None with
// nats.auth none.
func embeddedUsers(cfg *config.Config, ns mesh.Namespace) ([]natsserver.User, error) {
	if cfg.NATS.Auth == config.NATSAuthNone {
		return nil, nil
	}
	roles := append(identity.Identities(), identity.RoleAdmin)
	keys, err := identity.EnsureSeeds(cfg.CredsDir(), roles)
	if err != nil {
		return nil, err
	}
	users := make([]natsserver.User, 0, len(roles))
	for _, role := range roles {
		p, _ := identity.PermissionsOf(ns, role)
		users = append(users, natsserver.User{NKey: keys[role], Permissions: &p})
	}
	return users, nil
}

// provisionAsAdmin creates or updates the streams and buckets with the
// admin identity (or none, on an open server), so that roles, which may
// only bind, find them.
func provisionAsAdmin(ctx context.Context, cfg *config.Config, ns mesh.Namespace, log zerolog.Logger) error {
	nc, _, err := connectAs(cfg, ns, identity.RoleAdmin, "mesh-provision", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	res, err := store.ProvisionRetry(ctx, js, ns, provisionConfig(cfg), func(err error) {
		log.Warn().Err(err).Str("url", natsURL(cfg)).Msg("waiting for NATS to provision")
	})
	if err == nil && res.MovedWork > 0 {
		log.Info().Int("items", res.MovedWork).Msg("moved the work items an older release queued to this release's subjects")
	}
	if errors.Is(err, store.ErrReplicas) {
		// nats.replicas and the streams disagree: a restart cannot fix it.
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	return err
}

// runProvision creates or updates the streams and buckets as the admin:
// on an external server, where no `mesh up` or `mesh nats` does it, and
// roles with identities of their own may only bind.
func runProvision(ctx context.Context, cfg *config.Config, _ []string) error {
	base, err := newLogger(cfg)
	if err != nil {
		return err
	}
	log := base.With().Str("role", identity.RoleAdmin).Logger()
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := provisionAsAdmin(ctx, cfg, ns, log); err != nil {
		return err
	}
	log.Info().Str("url", natsURL(cfg)).Msg("provisioned")
	return nil
}

// childIdentityEnv gives a child of `mesh up` its role's identities, its
// own and its responder's: the generated seeds on the embedded server, the
// files under <data_dir>/creds on an external one (else what the
// environment says).
func childIdentityEnv(cfg *config.Config, role string) []string {
	if cfg.EmbeddedNATS() {
		if cfg.NATS.Auth == config.NATSAuthNone {
			return nil
		}
		return []string{
			config.EnvNATSNKey + "=" + identity.SeedFile(cfg.CredsDir(), role),
			config.EnvNATSResponderNKey + "=" + identity.SeedFile(cfg.CredsDir(), identity.Responder(role)),
		}
	}
	var env []string
	for _, id := range []struct{ name, creds, nkey string }{
		{role, config.EnvNATSCreds, config.EnvNATSNKey},
		{identity.Responder(role), config.EnvNATSResponderCreds, config.EnvNATSResponderNKey},
	} {
		if p := identity.CredsFile(cfg.CredsDir(), id.name); fileExists(p) {
			env = append(env, id.creds+"="+p)
		} else if p := identity.SeedFile(cfg.CredsDir(), id.name); fileExists(p) {
			env = append(env, id.nkey+"="+p)
		}
	}
	return env
}

// cliHint is how to use the admin identity with the nats CLI.
func cliHint(cfg *config.Config, url string) string {
	args := []string{"nats", "--server", url}
	id := identityOf(cfg, identity.RoleAdmin)
	switch {
	case id.creds != "":
		args = append(args, "--creds", id.creds)
	case id.nkey != "":
		args = append(args, "--nkey", id.nkey)
	}
	if cfg.NATS.TLS.CA != "" {
		args = append(args, "--tlsca", cfg.NATS.TLS.CA)
	}
	return strings.Join(args, " ")
}
