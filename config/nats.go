package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Environment variables of the nats section that containers set (every
// field of a cluster node, a leaf node and replication).
const (
	EnvNATSServerName    = "MESH_NATS_SERVER_NAME"
	EnvNATSCredsDir      = "MESH_NATS_CREDS_DIR"
	EnvNATSReplicas      = "MESH_NATS_REPLICAS"
	EnvNATSClusterName   = "MESH_NATS_CLUSTER_NAME"
	EnvNATSClusterListen = "MESH_NATS_CLUSTER_LISTEN"
	EnvNATSRoutes        = "MESH_NATS_ROUTES"
	EnvNATSLeafListen    = "MESH_NATS_LEAF_LISTEN"
	EnvNATSLeafRemotes   = "MESH_NATS_LEAF_REMOTES"
	EnvNATSMonitorAddr   = "MESH_NATS_MONITOR_ADDR"
	// EnvNATSResponderCreds and EnvNATSResponderNKey set
	// nats.responder_creds and nats.responder_nkey.
	EnvNATSResponderCreds = "NATS_RESPONDER_CREDS"
	EnvNATSResponderNKey  = "NATS_RESPONDER_NKEY"
)

// MaxReplicas is the largest replication factor JetStream takes.
const MaxReplicas = 5

// NATS says where the server is and how each role proves who it is.
type NATS struct {
	// URL of an existing server; empty means the embedded one. Several
	// servers of one cluster are comma-separated: a role connects to any of
	// them and reconnects to any other (and to the servers the cluster
	// announces).
	URL string `yaml:"url"`
	// Listen is the embedded server's address. Empty means 127.0.0.1:4222.
	Listen string `yaml:"listen"`
	// MaxPayload of the embedded server. Zero means 8 MiB.
	MaxPayload int32 `yaml:"max_payload"`
	// MaxMemoryMB is the memory, in MiB, that the process running the
	// embedded server (`mesh up`, `mesh nats`) keeps to while its live heap
	// leaves room: Go's memory limit, under which the collector works
	// harder and gives memory back to the system, rising with the live heap
	// beyond that (memory.Limit); and the bound of JetStream's memory
	// store. Zero means 96; -1 sets neither.
	MaxMemoryMB int `yaml:"max_memory_mb"`
	// Auth is how the embedded server admits clients: "nkeys" (the
	// default: every role and the admin with an nkey of its own, generated
	// under <data_dir>/creds, and the role's permissions) or "none" (an open
	// server: anyone who reaches the port may do anything).
	Auth string `yaml:"auth"`
	// Creds is a JWT creds file and NKey an nkey seed file to connect with
	// (NATS_CREDS, NATS_NKEY); "{role}" in them is replaced by the role's
	// name. Empty both means the role's file under <data_dir>/creds
	// (<role>.creds, else <role>.nk), when there is one.
	Creds string `yaml:"creds"`
	NKey  string `yaml:"nkey"`
	// ResponderCreds and ResponderNKey are the identity a role answers
	// requests with (NATS_RESPONDER_CREDS, NATS_RESPONDER_NKEY; "{role}"
	// replaced by the role's name): its services and its liveness probes
	// go out on a connection of their own, whose identity may publish
	// nothing but answers to inboxes. Empty both means the file beside
	// Creds or NKey (their pattern with "{role}" replaced by
	// <role>-responder, or <role>-responder.creds or .nk in their
	// directory), else that file under <data_dir>/creds, else the role's
	// own identity.
	ResponderCreds string `yaml:"responder_creds"`
	ResponderNKey  string `yaml:"responder_nkey"`
	// CredsDir is where the mesh's identities live (MESH_NATS_CREDS_DIR):
	// the nkey seeds of every role and the admin, the cluster's route
	// secret and the leaf identity. The servers of one cluster share it
	// (`mesh creds` writes it). Empty means <data_dir>/creds.
	CredsDir string `yaml:"creds_dir"`
	// TLS secures the connections to NATS: ca verifies the server, cert and
	// key are a client certificate (and the embedded server's certificate,
	// whose listener then takes TLS only).
	TLS NATSTLS `yaml:"tls"`

	// MonitorListen is host:port of the embedded server's monitoring
	// endpoint (MESH_NATS_MONITOR_ADDR): /healthz for probes, /varz,
	// /jsz … Empty means none.
	MonitorListen string `yaml:"monitor_listen"`
	// ServerName names the embedded server (MESH_NATS_SERVER_NAME); every
	// server of a cluster needs its own. Empty means "mesh".
	ServerName string `yaml:"server_name"`
	// Cluster makes the embedded server one node of a JetStream cluster.
	Cluster NATSCluster `yaml:"cluster"`
	// LeafNodes accepts leaf nodes (listen) or makes the embedded server a
	// leaf node of a central cluster (remotes).
	LeafNodes NATSLeafNodes `yaml:"leafnodes"`
	// Replicas is the replication factor of the streams and buckets that
	// provisioning creates (MESH_NATS_REPLICAS, 1 to 5). Zero means: those
	// that exist keep theirs, new ones get 3 on a cluster and 1 on a single
	// server. A stream that exists with another count than the one set here
	// stops provisioning with an error that says so.
	Replicas int `yaml:"replicas"`
	// FailoverWait bounds how long an operation on a stream or bucket
	// waits out a leader election, when a node of the cluster is lost,
	// before the request it serves fails as unavailable (503). Zero means
	// 20 s ([DefaultFailoverWait]); negative, no waiting at all.
	FailoverWait Duration `yaml:"failover_wait"`
}

// DefaultFailoverWait is nats.failover_wait's default. nats-server's
// followers call an election 4 to 9 s after their leader's last
// heartbeat, and a campaign takes up to 0.8 s: 20 s covers that twice
// over (the meta group's election, then a stream's), with a client's
// reconnection to another node on top.
const DefaultFailoverWait = 20 * time.Second

// FailoverBound is how long an operation waits out a leader election: 0
// for none.
func (n NATS) FailoverBound() time.Duration {
	if n.FailoverWait < 0 {
		return 0
	}
	return n.FailoverWait.Or(DefaultFailoverWait)
}

// NATSCluster is the embedded server's place in a cluster.
type NATSCluster struct {
	// Name of the cluster (MESH_NATS_CLUSTER_NAME), the same on every node.
	// Empty means "mesh" when Listen is set.
	Name string `yaml:"name"`
	// Listen is host:port for the routes of the other nodes
	// (MESH_NATS_CLUSTER_LISTEN). Empty means no cluster.
	Listen string `yaml:"listen"`
	// Routes are the other nodes' route addresses, host:port or
	// nats-route://host:port (MESH_NATS_ROUTES, comma-separated); a node
	// may list itself. Routes authenticate with the route secret of the
	// credentials directory.
	Routes []string `yaml:"routes"`
}

// Enabled reports whether the embedded server is a cluster node.
func (c NATSCluster) Enabled() bool { return c.Listen != "" }

// NATSLeafNodes are the embedded server's leaf node connections.
type NATSLeafNodes struct {
	// Listen is host:port where edge servers connect as leaf nodes
	// (MESH_NATS_LEAF_LISTEN), with the leaf identity of the credentials
	// directory. Empty means none.
	Listen string `yaml:"listen"`
	// Remotes are the central servers' leaf node addresses, host:port or
	// nats-leaf://host:port (MESH_NATS_LEAF_REMOTES, comma-separated): set,
	// the embedded server is an edge, a leaf node of that cluster, and runs
	// no JetStream of its own: the central cluster holds every stream and
	// bucket, and the edge's roles reach them through the link.
	Remotes []string `yaml:"remotes"`
}

// Edge reports whether the embedded server is a leaf node of another cluster.
func (l NATSLeafNodes) Edge() bool { return len(l.Remotes) > 0 }

// Values of nats.auth.
const (
	NATSAuthNKeys = "nkeys"
	NATSAuthNone  = "none"
)

// NATSTLS are the PEM files of TLS to NATS.
type NATSTLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Empty reports whether no TLS file is set.
func (t NATSTLS) Empty() bool { return t.CA == "" && t.Cert == "" && t.Key == "" }

// applyNATSEnv reads the nats section's cluster, leaf node, responder
// identity and replication variables.
func (c *Config) applyNATSEnv(getenv func(string) string) error {
	n := &c.NATS
	for _, v := range []struct {
		env string
		dst *string
	}{
		{EnvNATSServerName, &n.ServerName}, {EnvNATSCredsDir, &n.CredsDir},
		{EnvNATSClusterName, &n.Cluster.Name}, {EnvNATSClusterListen, &n.Cluster.Listen},
		{EnvNATSLeafListen, &n.LeafNodes.Listen}, {EnvNATSMonitorAddr, &n.MonitorListen},
	} {
		if s := getenv(v.env); s != "" {
			*v.dst = s
		}
	}
	if s := getenv(EnvNATSResponderCreds); s != "" {
		n.ResponderCreds, n.ResponderNKey = s, ""
	}
	if s := getenv(EnvNATSResponderNKey); s != "" {
		n.ResponderNKey, n.ResponderCreds = s, ""
	}
	if s := getenv(EnvNATSRoutes); s != "" {
		n.Cluster.Routes = splitList(s)
	}
	if s := getenv(EnvNATSLeafRemotes); s != "" {
		n.LeafNodes.Remotes = splitList(s)
	}
	if s := getenv(EnvNATSReplicas); s != "" {
		r, err := strconv.Atoi(s)
		if err != nil {
			return &Error{File: c.Path, Field: "nats.replicas (" + EnvNATSReplicas + ")", Want: fmt.Sprintf("%q is not a number of replicas (1-%d)", s, MaxReplicas)}
		}
		n.Replicas = r
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// checkNATS checks the cluster, leaf node and replication settings.
func (c *Config) checkNATS() *fieldErr {
	n := c.NATS
	if n.Replicas < 0 || n.Replicas > MaxReplicas {
		return &fieldErr{"nats.replicas (" + EnvNATSReplicas + ")", fmt.Sprintf("%d: use 1 to %d (0: 3 on a cluster, 1 on a single server)", n.Replicas, MaxReplicas)}
	}
	if n.ServerName != "" && !nameRE.MatchString(n.ServerName) {
		return &fieldErr{"nats.server_name (" + EnvNATSServerName + ")", fmt.Sprintf("%q is not %s", n.ServerName, nameWant)}
	}
	if n.Cluster.Name != "" && !nameRE.MatchString(n.Cluster.Name) {
		return &fieldErr{"nats.cluster.name (" + EnvNATSClusterName + ")", fmt.Sprintf("%q is not %s", n.Cluster.Name, nameWant)}
	}
	if !c.EmbeddedNATS() {
		return nil
	}
	addrs := []struct {
		field, addr string
	}{
		{"nats.cluster.listen (" + EnvNATSClusterListen + ")", n.Cluster.Listen},
		{"nats.leafnodes.listen (" + EnvNATSLeafListen + ")", n.LeafNodes.Listen},
		{"nats.monitor_listen (" + EnvNATSMonitorAddr + ")", n.MonitorListen},
	}
	for _, a := range addrs {
		if a.addr == "" {
			continue
		}
		if _, p, err := net.SplitHostPort(a.addr); err != nil || !validPort(p) {
			return &fieldErr{a.field, fmt.Sprintf("%q is not host:port", a.addr)}
		}
	}
	if len(n.Cluster.Routes) > 0 && !n.Cluster.Enabled() {
		return &fieldErr{"nats.cluster.routes (" + EnvNATSRoutes + ")", "need nats.cluster.listen: a node routes to others from its own cluster port"}
	}
	if n.Cluster.Enabled() && n.ServerName == "" {
		return &fieldErr{"nats.server_name (" + EnvNATSServerName + ")", "is required on a cluster node: every server of a cluster needs a name of its own"}
	}
	for _, r := range n.Cluster.Routes {
		if _, err := RouteURL(r, "nats-route"); err != nil {
			return &fieldErr{"nats.cluster.routes (" + EnvNATSRoutes + ")", err.Error()}
		}
	}
	for _, r := range n.LeafNodes.Remotes {
		if _, err := RouteURL(r, "nats-leaf"); err != nil {
			return &fieldErr{"nats.leafnodes.remotes (" + EnvNATSLeafRemotes + ")", err.Error()}
		}
	}
	if n.LeafNodes.Edge() && n.Cluster.Enabled() {
		return &fieldErr{"nats.leafnodes.remotes (" + EnvNATSLeafRemotes + ")", "an edge (a leaf node) is a single server: it takes no nats.cluster"}
	}
	return nil
}

// RouteURL is addr (host:port, or a URL of scheme) as a URL of scheme:
// nats-route for a cluster's routes, nats-leaf for leaf node remotes (a
// nats:// or tls:// URL is kept). Credentials in it are refused: the mesh
// adds its own.
func RouteURL(addr, scheme string) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		addr = scheme + "://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || u.Port() == "" || !validPort(u.Port()) {
		return nil, fmt.Errorf("%q is not host:port or %s://host:port", addr, scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s: no credentials in the address: the mesh authenticates with the credentials directory's secrets", u.Redacted())
	}
	switch u.Scheme {
	case scheme, "nats", "tls":
	default:
		return nil, fmt.Errorf("%q: scheme %s, want %s", addr, u.Scheme, scheme)
	}
	return u, nil
}

// DefaultNATSMaxMemoryMB is nats.max_memory_mb's default.
const DefaultNATSMaxMemoryMB = 96

// MaxMemory is nats.max_memory_mb in bytes; 0 when unbounded.
func (n NATS) MaxMemory() int64 {
	switch {
	case n.MaxMemoryMB < 0:
		return 0
	case n.MaxMemoryMB == 0:
		return DefaultNATSMaxMemoryMB << 20
	}
	return int64(n.MaxMemoryMB) << 20
}
