package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
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
func (id natsIdentity) provisions() bool { return id.none() || id.role == mesh.RoleAdmin }

// identityOf finds role's credentials: NATS_CREDS or nats.creds, NATS_NKEY
// or nats.nkey ({role} replaced), else the role's file under
// <data_dir>/creds (<role>.creds, else <role>.nk), else none. An embedded
// server with nats.auth none is open: no file is looked for.
func identityOf(cfg *config.Config, role string) natsIdentity {
	id := natsIdentity{role: role}
	switch {
	case cfg.NATS.Creds != "":
		id.creds = mesh.ExpandRole(cfg.NATS.Creds, role)
	case cfg.NATS.NKey != "":
		id.nkey = mesh.ExpandRole(cfg.NATS.NKey, role)
	case cfg.EmbeddedNATS() && cfg.NATS.Auth == config.NATSAuthNone:
	case fileExists(mesh.CredsFile(cfg.CredsDir(), role)):
		id.creds = mesh.CredsFile(cfg.CredsDir(), role)
	case fileExists(mesh.SeedFile(cfg.CredsDir(), role)):
		id.nkey = mesh.SeedFile(cfg.CredsDir(), role)
	}
	return id
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// natsTLS is the client TLS configuration of nats.tls, nil without one.
func natsTLS(cfg *config.Config) (*tls.Config, error) {
	files := mesh.TLSFiles(cfg.NATS.TLS)
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
// mesh.IdentityRoles, or mesh.RoleAdmin), with the role's own inbox.
func connectAs(cfg *config.Config, ns mesh.Namespace, role, name string, log zerolog.Logger) (*nats.Conn, natsIdentity, error) {
	id := identityOf(cfg, role)
	tlsCfg, err := natsTLS(cfg)
	if err != nil {
		return nil, id, err
	}
	inbox := ""
	if role != mesh.RoleAdmin {
		inbox = ns.Inbox(role)
	}
	nc, err := mesh.Connect(mesh.ConnectConfig{
		URL: natsURL(cfg), Name: name, Inbox: inbox, CredsFile: id.creds, NKeyFile: id.nkey, TLS: tlsCfg, Logger: log,
	})
	return nc, id, err
}

// embeddedUsers are the identities of the embedded server: each role's and
// the admin's nkey, generated under <data_dir>/creds when missing, with
// their permissions. None with nats.auth none.
func embeddedUsers(cfg *config.Config, ns mesh.Namespace) ([]mesh.ServerUser, error) {
	if cfg.NATS.Auth == config.NATSAuthNone {
		return nil, nil
	}
	roles := append(append([]string(nil), mesh.IdentityRoles...), mesh.RoleAdmin)
	keys, err := mesh.EnsureSeeds(cfg.CredsDir(), roles)
	if err != nil {
		return nil, err
	}
	users := make([]mesh.ServerUser, 0, len(roles))
	for _, role := range roles {
		p, _ := ns.Permissions(role)
		users = append(users, mesh.ServerUser{NKey: keys[role], Permissions: &p})
	}
	return users, nil
}

// provisionAsAdmin creates or updates the streams and buckets with the
// admin identity (or none, on an open server), so that roles, which may
// only bind, find them.
func provisionAsAdmin(ctx context.Context, cfg *config.Config, ns mesh.Namespace, log zerolog.Logger) error {
	nc, _, err := connectAs(cfg, ns, mesh.RoleAdmin, "mesh-provision", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	_, err = mesh.ProvisionRetry(ctx, js, ns, provisionConfig(cfg), func(err error) {
		log.Warn().Err(err).Str("url", natsURL(cfg)).Msg("waiting for NATS to provision")
	})
	if errors.Is(err, mesh.ErrReplicas) {
		// nats.replicas and the streams disagree: a restart cannot fix it.
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	return err
}

// runProvision creates or updates the streams and buckets as the admin:
// on an external server, where no `mesh up` or `mesh nats` does it, and
// roles with identities of their own may only bind.
func runProvision(ctx context.Context, cfg *config.Config, _ []string) error {
	log := newLogger(cfg).With().Str("role", mesh.RoleAdmin).Logger()
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

// childIdentityEnv gives a child of `mesh up` its role's identity: the
// generated seed on the embedded server, the role's file under
// <data_dir>/creds on an external one (else what the environment says).
func childIdentityEnv(cfg *config.Config, role string) []string {
	if cfg.EmbeddedNATS() {
		if cfg.NATS.Auth == config.NATSAuthNone {
			return nil
		}
		return []string{config.EnvNATSNKey + "=" + mesh.SeedFile(cfg.CredsDir(), role)}
	}
	if p := mesh.CredsFile(cfg.CredsDir(), role); fileExists(p) {
		return []string{config.EnvNATSCreds + "=" + p}
	}
	if p := mesh.SeedFile(cfg.CredsDir(), role); fileExists(p) {
		return []string{config.EnvNATSNKey + "=" + p}
	}
	return nil
}

// cliHint is how to use the admin identity with the nats CLI.
func cliHint(cfg *config.Config, url string) string {
	args := []string{"nats", "--server", url}
	id := identityOf(cfg, mesh.RoleAdmin)
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
