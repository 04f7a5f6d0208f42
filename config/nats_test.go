package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The cluster, leaf node and replication settings come from the file, and
// each of them from the environment too (containers set variables, not files).
func TestNATSClusterSettings(t *testing.T) {
	file := minimal + `nats:
  server_name: n1
  replicas: 3
  creds_dir: /etc/mesh/creds
  cluster: {name: prod, listen: "0.0.0.0:6222", routes: ["nats-1:6222", "nats-route://nats-2:6222"]}
  leafnodes: {listen: "0.0.0.0:7422"}
`
	c, err := Parse("a.yaml", []byte(file), env())
	if err != nil {
		t.Fatal(err)
	}
	n := c.NATS
	if n.ServerName != "n1" {
		t.Errorf("from the file: server name = %q, want n1", n.ServerName)
	}
	if n.Replicas != 3 {
		t.Errorf("from the file: replicas = %d, want 3", n.Replicas)
	}
	if got := c.CredsDir(); got != "/etc/mesh/creds" {
		t.Errorf("from the file: creds dir = %q, want /etc/mesh/creds", got)
	}
	if n.Cluster.Name != "prod" {
		t.Errorf("from the file: cluster name = %q, want prod", n.Cluster.Name)
	}
	if n.Cluster.Listen != "0.0.0.0:6222" {
		t.Errorf("from the file: cluster listen = %q, want 0.0.0.0:6222", n.Cluster.Listen)
	}
	if want := []string{"nats-1:6222", "nats-route://nats-2:6222"}; !slices.Equal(n.Cluster.Routes, want) {
		t.Errorf("from the file: cluster routes = %q, want %q", n.Cluster.Routes, want)
	}
	if n.LeafNodes.Listen != "0.0.0.0:7422" {
		t.Errorf("from the file: leaf nodes listen = %q, want 0.0.0.0:7422", n.LeafNodes.Listen)
	}
	if n.LeafNodes.Edge() {
		t.Errorf("from the file: LeafNodes.Edge() = true with no remotes, want false: %+v", n.LeafNodes)
	}
	c, err = Parse("a.yaml", []byte(minimal), env(
		EnvNATSServerName, "edge-1", EnvNATSReplicas, "1", EnvNATSCredsDir, "/c",
		EnvNATSLeafRemotes, "hub-1:7422, nats-leaf://hub-2:7422", EnvNATSLeafListen, "127.0.0.1:7422", EnvNATSMonitorAddr, "127.0.0.1:8222"))
	if err != nil {
		t.Fatal(err)
	}
	n = c.NATS
	if n.ServerName != "edge-1" {
		t.Errorf("from the environment: server name = %q, want edge-1", n.ServerName)
	}
	if n.Replicas != 1 {
		t.Errorf("from the environment: replicas = %d, want 1", n.Replicas)
	}
	if got := c.CredsDir(); got != "/c" {
		t.Errorf("from the environment: creds dir = %q, want /c", got)
	}
	if !n.LeafNodes.Edge() {
		t.Errorf("from the environment: LeafNodes.Edge() = false with remotes, want true: %+v", n.LeafNodes)
	}
	if n.MonitorListen != "127.0.0.1:8222" {
		t.Errorf("from the environment: monitor listen = %q, want 127.0.0.1:8222", n.MonitorListen)
	}
	if want := []string{"hub-1:7422", "nats-leaf://hub-2:7422"}; !slices.Equal(n.LeafNodes.Remotes, want) {
		t.Errorf("from the environment: leaf remotes = %q, want %q", n.LeafNodes.Remotes, want)
	}
	if n.Cluster.Enabled() {
		t.Errorf("from the environment: Cluster.Enabled() = true with no cluster set, want false: %+v", n.Cluster)
	}
	c, err = Parse("a.yaml", []byte(minimal), env(EnvNATSClusterName, "c", EnvNATSClusterListen, "127.0.0.1:6222",
		EnvNATSRoutes, "a:1,b:2", EnvNATSServerName, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.NATS.Cluster; n.Name != "c" || n.Listen != "127.0.0.1:6222" || !slices.Equal(n.Routes, []string{"a:1", "b:2"}) {
		t.Errorf("cluster from the environment: %+v", n)
	}
}

// A bad cluster setting stops startup naming the field and its variable.
func TestNATSClusterErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		env        []string
		field      string
	}{
		{"replicas", "nats: {replicas: 7}\n", nil, "nats.replicas (MESH_NATS_REPLICAS)"},
		{"replicas env", "", []string{EnvNATSReplicas, "three"}, "nats.replicas (MESH_NATS_REPLICAS)"},
		{"routes without listen", "nats: {cluster: {routes: [a:1]}}\n", nil, "nats.cluster.routes (MESH_NATS_ROUTES)"},
		{"cluster without name", "nats: {cluster: {listen: 127.0.0.1:6222}}\n", nil, "nats.server_name (MESH_NATS_SERVER_NAME)"},
		{"cluster listen", "nats: {server_name: a, cluster: {listen: nowhere}}\n", nil, "nats.cluster.listen (MESH_NATS_CLUSTER_LISTEN)"},
		{"route with a password", "nats: {server_name: a, cluster: {listen: 127.0.0.1:6222, routes: ['nats-route://u:p@b:6222']}}\n", nil, "nats.cluster.routes (MESH_NATS_ROUTES)"},
		{"route without port", "", []string{EnvNATSServerName, "a", EnvNATSClusterListen, "127.0.0.1:6222", EnvNATSRoutes, "b"}, "nats.cluster.routes (MESH_NATS_ROUTES)"},
		{"leaf scheme", "", []string{EnvNATSLeafRemotes, "http://hub:7422"}, "nats.leafnodes.remotes (MESH_NATS_LEAF_REMOTES)"},
		{"edge in a cluster", "nats: {server_name: a, cluster: {listen: 127.0.0.1:6222}, leafnodes: {remotes: [hub:7422]}}\n", nil, "nats.leafnodes.remotes (MESH_NATS_LEAF_REMOTES)"},
		{"server name", "nats: {server_name: 'a b'}\n", nil, "nats.server_name (MESH_NATS_SERVER_NAME)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("a.yaml", []byte(minimal+tt.yaml), env(tt.env...))
			var ce *Error
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("err = %v, want an error of field %s", err, tt.field)
			}
			if !strings.Contains(err.Error(), "a.yaml") {
				t.Errorf("%v does not name the file", err)
			}
		})
	}
}
