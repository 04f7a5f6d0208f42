package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/natsconn"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Files go through the object store under the roles' own permissions: the
// bridge stores and reads, the agent reads and may not store; a read
// checks the digest the message names.
func TestFileStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ns := mesh.DefaultNamespace()
	roles := []string{mesh.RoleBridge, mesh.RoleAgent, identity.RoleAdmin}
	keys, err := identity.EnsureSeeds(filepath.Join(dir, "creds"), roles)
	if err != nil {
		t.Fatal(err)
	}
	var users []natsserver.User
	for _, role := range roles {
		u := natsserver.User{NKey: keys[role]}
		if role != identity.RoleAdmin {
			p, _ := identity.PermissionsOf(ns, role)
			u.Permissions = &p
		}
		users = append(users, u)
	}
	srv, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "js"), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	js := func(role string) jetstream.JetStream {
		nc, err := natsconn.Connect(natsconn.Config{URL: srv.ClientURL(), Name: role, Inbox: ns.Inbox(role),
			NKeyFile: identity.SeedFile(filepath.Join(dir, "creds"), role)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	admin := js(identity.RoleAdmin)
	if _, err := store.Provision(t.Context(), admin, ns, store.ProvisionConfig{FilesMaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// Files go after files.max_age: the store's age limit.
	if st, err := admin.Stream(t.Context(), "OBJ_mesh_files"); err != nil || st.CachedInfo().Config.MaxAge != time.Hour {
		t.Fatalf("the object store's stream: %v, %+v", err, st)
	}
	bind := func(role string) *store.FileStore {
		p, _ := identity.PermissionsOf(ns, role)
		r, err := store.Bind(t.Context(), js(role), ns, store.Uses{Buckets: p.Buckets, Streams: p.Streams, Objects: p.Objects})
		if err != nil || r.Files == nil {
			t.Fatalf("%s binds: %v, files %v", role, err, r)
		}
		return r.Files
	}
	bridge, agent := bind(mesh.RoleBridge), bind(mesh.RoleAgent)

	data := make([]byte, 300<<10) // three chunks of the object store
	_, _ = rand.Read(data)
	conv := mesh.NewID()
	f, err := bridge.Put(t.Context(), conv, mesh.File{Name: "cat.png", MediaType: "image/png"}, data)
	if err != nil {
		t.Fatal(err)
	}
	if mesh.CheckID(f.ID) != nil || f.Size != int64(len(data)) || len(f.SHA256) != 64 {
		t.Fatalf("stored file %+v", f)
	}
	for name, fs := range map[string]*store.FileStore{"bridge": bridge, "agent": agent} {
		got, stored, err := fs.Get(t.Context(), conv, f)
		if err != nil || !bytes.Equal(got, data) || stored.MediaType != "image/png" {
			t.Errorf("%s reads %d bytes (%v), %+v, want the %d stored", name, len(got), err, stored, len(data))
		}
	}
	// The file belongs to its conversation: another one does not find it.
	if _, _, err := bridge.Get(t.Context(), mesh.NewID(), f); !errors.Is(err, mesh.ErrFileNotFound) {
		t.Errorf("another conversation's read: %v, want file_not_found", err)
	}
	bad := f
	bad.SHA256 = f.SHA256[:63] + "0"
	if bad.SHA256 == f.SHA256 {
		bad.SHA256 = f.SHA256[:63] + "1"
	}
	if _, _, err := agent.Get(t.Context(), conv, bad); err == nil {
		t.Error("a digest that differs was not refused")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := agent.Put(ctx, conv, mesh.File{MediaType: "image/png"}, data[:10]); err == nil {
		t.Error("the agent stored a file")
	}
}
