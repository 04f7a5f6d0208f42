package natsserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// The auth.conf `mesh creds` writes gives a plain nats-server exactly the
// users and permissions of the embedded server, and cluster.conf the route
// credentials, both ways.
func TestServerAuthConfigMatchesTheEmbeddedServer(t *testing.T) {
	ns, _ := mesh.NewNamespace("mesh")
	dir := t.TempDir()
	roles := append(identity.Roles(), identity.RoleAdmin)
	keys, err := identity.EnsureSeeds(filepath.Join(dir, "creds"), roles)
	if err != nil {
		t.Fatal(err)
	}
	var users []natsserver.User
	for _, role := range roles {
		p, _ := identity.PermissionsOf(ns, role)
		users = append(users, natsserver.User{NKey: keys[role], Permissions: &p})
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("auth.conf", natsserver.AuthConfig(users))
	cluster, err := natsserver.ClusterAuthConfig("s3cret-s3cret-s3cret", []string{"nats-1:6222", "nats-2:6222"})
	if err != nil {
		t.Fatal(err)
	}
	write("cluster.conf", cluster)
	write("nats.conf", "server_name: n1\nport: 4222\ninclude ./auth.conf\ncluster {\n  name: mesh\n  listen: 0.0.0.0:6222\n  include ./cluster.conf\n}\n")
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("nats-server does not take the files: %v", err)
	}
	if len(opts.Nkeys) != len(roles) {
		t.Fatalf("%d users, want %d", len(opts.Nkeys), len(roles))
	}
	for i, u := range opts.Nkeys {
		want := natsserver.ServerPermissionsForTest(users[i].Permissions)
		if u.Nkey != keys[roles[i]] {
			t.Errorf("user %d: key %s, want %s's", i, u.Nkey, roles[i])
		}
		if !reflect.DeepEqual(u.Permissions, want) {
			t.Errorf("%s: permissions from the file\n%+v\nwant\n%+v", roles[i], describe(u.Permissions), describe(want))
		}
	}
	if opts.Cluster.Username != identity.RouteUser || opts.Cluster.Password != "s3cret-s3cret-s3cret" || len(opts.Routes) != 2 {
		t.Fatalf("cluster: %+v, routes %v", opts.Cluster, opts.Routes)
	}
	for _, r := range opts.Routes {
		if p, _ := r.User.Password(); r.User.Username() != identity.RouteUser || p != "s3cret-s3cret-s3cret" {
			t.Errorf("route %s does not carry the route credentials", r.Redacted())
		}
	}
}

func describe(p *server.Permissions) string {
	if p == nil {
		return "everything"
	}
	return fmt.Sprintf("pub %v sub %v resp %+v", p.Publish, p.Subscribe, p.Response)
}

// On a single server, existing streams keep their replica count when
// none is set, and a count that differs stops provisioning with an error
// that names the stream and both counts instead of a server error.
func TestProvisionReplicasOnASingleServer(t *testing.T) {
	m := meshtest.New(t)
	ctx := t.Context()
	info, err := m.Resources.Events.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 1 {
		t.Fatalf("a single server's stream has %d replicas", info.Config.Replicas)
	}
	if _, err := store.Provision(ctx, m.JS, m.NS, store.ProvisionConfig{}); err != nil {
		t.Fatalf("provision again without a count: %v", err)
	}
	_, err = store.Provision(ctx, m.JS, m.NS, store.ProvisionConfig{Replicas: 3})
	var re *store.ReplicasError
	if !errors.Is(err, store.ErrReplicas) {
		t.Fatalf("provision R3 over R1: err = %v, want store.ErrReplicas", err)
	}
	if !errors.As(err, &re) {
		t.Fatalf("provision R3 over R1: err = %v (%T), want a *store.ReplicasError", err, err)
	}
	if re.Stream != "MESH_EVENTS" {
		t.Fatalf("provision R3 over R1: ReplicasError.Stream = %q, want MESH_EVENTS", re.Stream)
	}
	if re.Have != 1 {
		t.Fatalf("provision R3 over R1: ReplicasError.Have = %d, want 1", re.Have)
	}
	if re.Want != 3 {
		t.Fatalf("provision R3 over R1: ReplicasError.Want = %d, want 3", re.Want)
	}
	if !strings.Contains(err.Error(), "nats.replicas") || !strings.Contains(err.Error(), "--replicas 3") {
		t.Errorf("the error does not say what to do: %v", err)
	}
	// ProvisionRetry gives up at once: waiting does not change a count.
	start := time.Now()
	if _, err := store.ProvisionRetry(ctx, m.JS, m.NS, store.ProvisionConfig{Replicas: 3}, nil); !errors.Is(err, store.ErrReplicas) || time.Since(start) > 5*time.Second {
		t.Errorf("ProvisionRetry: %v after %s", err, time.Since(start))
	}
}

// freePorts finds n free loopback ports (meshtest.FreeAddr).
func freePorts(t *testing.T, n int) []string {
	var out []string
	for range n {
		out = append(out, meshtest.FreeAddr(t))
	}
	return out
}

// Three embedded servers form a JetStream cluster with authenticated
// routes; provisioning without a count makes every stream and bucket R3,
// which survive the loss of a server; a route without the secret is
// refused.
func TestEmbeddedClusterReplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to form")
	}
	clients, routes := freePorts(t, 3), freePorts(t, 3)
	var routeURLs []*url.URL
	for _, r := range routes {
		routeURLs = append(routeURLs, &url.URL{Scheme: "nats-route", Host: r})
	}
	servers := make([]*natsserver.Server, 3)
	for i := range servers {
		s, err := natsserver.Start(natsserver.Config{
			Listen: clients[i], StoreDir: t.TempDir(), Name: fmt.Sprintf("n%d", i+1),
			Cluster: natsserver.ClusterConfig{Name: "test", Listen: routes[i], Routes: routeURLs, User: identity.RouteUser, Password: "a-route-secret-of-some-length"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Shutdown)
		servers[i] = s
	}
	nc := meshtest.Conn(t, strings.Join([]string{servers[0].ClientURL(), servers[1].ClientURL(), servers[2].ClientURL()}, ","))
	js, _ := jetstream.New(nc)
	ns, _ := mesh.NewNamespace("mesh")
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	res, err := store.ProvisionRetry(ctx, js, ns, store.ProvisionConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"MESH_EVENTS", "MESH_WORK", "KV_mesh_sessions", "KV_mesh_approvals", "KV_mesh_tools", "KV_mesh_nodes", "KV_mesh_calls"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("%s has %d replicas, want 3", name, r)
		}
	}
	if _, err := res.Sessions.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	// The server the connection uses goes; the others keep the data. Its
	// address is read once: the connection moves to another server while
	// this one shuts down, and that one must stay (a quorum of two).
	connected := "nats://" + nc.ConnectedAddr()
	down := 0
	for i, s := range servers {
		if s.ClientURL() == connected {
			s.Shutdown()
			servers[i] = nil
			down++
		}
	}
	if down != 1 {
		t.Fatalf("%d servers shut down, want 1: only the connection's (%s) goes", down, connected)
	}
	var last error
	defer func() {
		if t.Failed() {
			t.Logf("the bucket's last answer: %v", last)
		}
	}()
	// Each try has a deadline of its own, as a role's requests have: a
	// request sent while the client reconnects, or to a stream still
	// electing its leader, may never be answered.
	meshtest.Eventually(t, 100*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		e, err := res.Sessions.Get(ctx, "k")
		if err != nil || string(e.Value()) != "v1" {
			last = fmt.Errorf("get: %v", err)
			return false
		}
		_, err = res.Sessions.Put(ctx, "k", []byte("v2"))
		last = fmt.Errorf("put: %v", err)
		return err == nil
	}, "the bucket does not answer after a server's loss")

	// A server with the wrong route secret never joins.
	rogue, err := natsserver.Start(natsserver.Config{
		Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Name: "rogue",
		Cluster: natsserver.ClusterConfig{Name: "test", Listen: "127.0.0.1:0", Routes: routeURLs, User: identity.RouteUser, Password: "not-the-route-secret-at-all"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Shutdown()
	// It keeps trying: for two seconds, no server of the cluster takes it
	// as a route. (The rogue's own count is no proof either way: it adds a
	// route when the other side's INFO arrives, before that side checks
	// the secret of its CONNECT and closes it.)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, s := range servers {
			if s != nil && slices.Contains(s.RouteNamesForTest(), "rogue") {
				t.Fatalf("a server of the cluster has a route with the rogue server: %v", s.RouteNamesForTest())
			}
		}
	}
	for _, s := range servers {
		if s != nil && s.NumRoutesForTest() == 0 {
			t.Error("a server of the cluster has no routes either: the check above proves nothing")
		}
	}
}
