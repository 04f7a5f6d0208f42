package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/identity"
)

// A mesh context says how the terminal commands reach a mesh: the bridge's
// URL, the NATS URL and the admin's identity. `mesh up` writes one in its
// data directory, so that MESH_DATA_DIR alone points every command at a
// mesh on whatever ports it runs; MESH_CONTEXT names one written by hand
// for a mesh elsewhere (a cluster). Flags and the variables that say the
// same (MESH_URL, NATS_URL, MESH_NATS_ADDR, NATS_NKEY, NATS_CREDS) win over
// it.
type meshContext struct {
	// URL is the bridge's, for chat and approve.
	URL string `json:"url,omitempty"`
	// NATSURL is the NATS server's, for tail, sessions, tools and status.
	NATSURL string `json:"nats_url,omitempty"`
	// NKey or Creds is the admin's identity file; a relative path is the
	// context file's directory's.
	NKey  string `json:"nkey,omitempty"`
	Creds string `json:"creds,omitempty"`
}

const (
	envContext = "MESH_CONTEXT"
	// contextFile is the context `mesh up` writes under its data directory.
	contextFile = "context.json"
)

// contextPath is where the context of cfg is read: $MESH_CONTEXT, else
// <data_dir>/context.json.
func contextPath(cfg *config.Config) (path string, named bool) {
	if p := os.Getenv(envContext); p != "" {
		return p, true
	}
	return filepath.Join(cfg.DataDir, contextFile), false
}

// loadContext reads the context of cfg: nil when there is none where
// `mesh up` writes it, an error when MESH_CONTEXT names a file that cannot
// be read.
func loadContext(cfg *config.Config) (*meshContext, error) {
	path, named := contextPath(cfg)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !named {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errConfig, envContext, err)
	}
	var mc meshContext
	if err := json.Unmarshal(data, &mc); err != nil {
		return nil, fmt.Errorf("%w: mesh context %s: %w", errConfig, path, err)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&mc.NKey, &mc.Creds} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return &mc, nil
}

// applyContext points cfg at the mesh its context names, where neither a
// variable nor agent.yaml says otherwise; it returns the context's bridge
// URL ("" without one).
func applyContext(cfg *config.Config) (string, error) {
	mc, err := loadContext(cfg)
	if err != nil || mc == nil {
		return "", err
	}
	if mc.NATSURL != "" && cfg.NATS.URL == "" && os.Getenv(config.EnvNATSAddr) == "" {
		cfg.NATS.URL = mc.NATSURL
	}
	if cfg.NATS.Creds == "" && cfg.NATS.NKey == "" {
		// Only the admin's: a terminal command connects as nobody else.
		cfg.NATS.Creds, cfg.NATS.NKey = mc.Creds, mc.NKey
	}
	return mc.URL, nil
}

// writeContext writes <data_dir>/context.json for a mesh whose NATS server
// is at natsURL and whose bridge listens on cfg's HTTP address.
func writeContext(cfg *config.Config, natsURL string) error {
	host, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http address %q: %w", cfg.HTTPAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	mc := meshContext{URL: "http://" + net.JoinHostPort(host, port), NATSURL: natsURL}
	id := identityOf(cfg, identity.RoleAdmin)
	for _, p := range []struct{ in, out *string }{{&id.nkey, &mc.NKey}, {&id.creds, &mc.Creds}} {
		if *p.in == "" {
			continue
		}
		abs, err := filepath.Abs(*p.in)
		if err != nil {
			return err
		}
		*p.out = abs
	}
	data, err := json.MarshalIndent(mc, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(cfg.DataDir, contextFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
