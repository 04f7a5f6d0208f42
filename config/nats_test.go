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
	if n.ServerName != "n1" || n.Replicas != 3 || c.CredsDir() != "/etc/mesh/creds" || n.Cluster.Name != "prod" || n.Cluster.Listen != "0.0.0.0:6222" ||
		!slices.Equal(n.Cluster.Routes, []string{"nats-1:6222", "nats-route://nats-2:6222"}) || n.LeafNodes.Listen != "0.0.0.0:7422" || n.LeafNodes.Edge() {
		t.Errorf("from the file: %+v", n)
	}
	c, err = Parse("a.yaml", []byte(minimal), env(
		EnvNATSServerName, "edge-1", EnvNATSReplicas, "1", EnvNATSCredsDir, "/c",
		EnvNATSLeafRemotes, "hub-1:7422, nats-leaf://hub-2:7422", EnvNATSLeafListen, "127.0.0.1:7422", EnvNATSMonitorAddr, "127.0.0.1:8222"))
	if err != nil {
		t.Fatal(err)
	}
	n = c.NATS
	if n.ServerName != "edge-1" || n.Replicas != 1 || c.CredsDir() != "/c" || !n.LeafNodes.Edge() || n.MonitorListen != "127.0.0.1:8222" ||
		!slices.Equal(n.LeafNodes.Remotes, []string{"hub-1:7422", "nats-leaf://hub-2:7422"}) || n.Cluster.Enabled() {
		t.Errorf("from the environment: %+v", n)
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
