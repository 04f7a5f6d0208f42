package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// TestResponderIdentityOf checks where a role finds the identity it answers
// requests with: the responder setting, then beside its own identity file,
// then the credentials directory, then its own identity.
func TestResponderIdentityOf(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds")
	secrets := filepath.Join(dir, "secrets")
	for _, p := range []string{
		filepath.Join(creds, "agent.nk"), filepath.Join(creds, "agent-responder.nk"),
		filepath.Join(creds, "bridge.nk"),
		filepath.Join(secrets, "agent.nk"), filepath.Join(secrets, "agent-responder.nk"),
		filepath.Join(secrets, "toolhost.creds"), filepath.Join(secrets, "toolhost-responder.creds"),
		filepath.Join(secrets, "seed"),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		role string
		nats config.NATS
		want natsIdentity
	}{
		{"the responder setting, {role} replaced by the role", mesh.RoleAgent,
			config.NATS{URL: "nats://x", NKey: filepath.Join(secrets, "agent.nk"), ResponderNKey: "/etc/mesh/{role}.answers.nk"},
			natsIdentity{role: "agent-responder", nkey: "/etc/mesh/agent.answers.nk"}},
		{"a creds file setting", mesh.RoleAgent,
			config.NATS{URL: "nats://x", ResponderCreds: "/etc/mesh/r.creds"},
			natsIdentity{role: "agent-responder", creds: "/etc/mesh/r.creds"}},
		{"the role's pattern, {role} replaced by the responder", mesh.RoleAgent,
			config.NATS{URL: "nats://x", NKey: filepath.Join(secrets, "{role}.nk")},
			natsIdentity{role: "agent-responder", nkey: filepath.Join(secrets, "agent-responder.nk")}},
		{"beside the role's own file", mesh.RoleAgent,
			config.NATS{URL: "nats://x", NKey: filepath.Join(secrets, "agent.nk")},
			natsIdentity{role: "agent-responder", nkey: filepath.Join(secrets, "agent-responder.nk")}},
		{"beside a creds file", mesh.RoleToolhost,
			config.NATS{URL: "nats://x", Creds: filepath.Join(secrets, "toolhost.creds")},
			natsIdentity{role: "toolhost-responder", creds: filepath.Join(secrets, "toolhost-responder.creds")}},
		{"the credentials directory", mesh.RoleAgent,
			config.NATS{URL: "nats://x", CredsDir: creds},
			natsIdentity{role: "agent-responder", nkey: filepath.Join(creds, "agent-responder.nk")}},
		{"none found: the role's own", mesh.RoleBridge,
			config.NATS{URL: "nats://x", CredsDir: creds},
			natsIdentity{role: "bridge", nkey: filepath.Join(creds, "bridge.nk")}},
		{"none found beside a file named otherwise: that file", mesh.RoleGroup,
			config.NATS{URL: "nats://x", CredsDir: creds, NKey: filepath.Join(secrets, "seed")},
			natsIdentity{role: "group", nkey: filepath.Join(secrets, "seed")}},
		{"an open embedded server: none", mesh.RoleAgent,
			config.NATS{Auth: config.NATSAuthNone, CredsDir: creds},
			natsIdentity{role: "agent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Process: config.Process{DataDir: dir, NATS: tt.nats}}
			if got := responderIdentityOf(cfg, tt.role); got != tt.want {
				t.Errorf("responderIdentityOf(%s) = %+v, want %+v", tt.role, got, tt.want)
			}
		})
	}
}
