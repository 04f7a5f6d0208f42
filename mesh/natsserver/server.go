package natsserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/natsconn"
)

// Config configures the embedded NATS server.
type Config struct {
	// Listen is host:port for clients. Empty means 127.0.0.1:4222; port 0
	// picks a free port (see [Server.ClientURL]).
	Listen string
	// StoreDir is where JetStream keeps its files. Required.
	StoreDir string
	// MaxPayload is the largest message the server accepts. Zero means 8 MiB,
	// room for a 1 MB session with its history of messages.
	MaxPayload int32
	// MaxMemory, when positive, bounds JetStream's memory store in bytes.
	// The process's own memory limit is its command's (memory.Limit).
	MaxMemory int64
	// Name is the server's name. Empty means "mesh".
	Name string
	// Users are the identities the server accepts. Empty means an open
	// server: any client connects and may do anything.
	Users []User
	// TLS, when not nil, secures the listener (clients must use TLS).
	TLS *tls.Config
	// Cluster, when its Listen is set, makes the server a node of a
	// JetStream cluster (Name then must be the node's own).
	Cluster ClusterConfig
	// LeafNodes accepts leaf nodes, or connects to a central cluster as one.
	LeafNodes LeafConfig
	// MonitorListen is host:port of the monitoring endpoint (/healthz,
	// /varz, /jsz …). Empty means none.
	MonitorListen string
	// Logger receives the server's notices, warnings and errors. The zero
	// value discards them.
	Logger zerolog.Logger
}

// User is an identity of the embedded server: an nkey user with the
// permissions of a role (nil: everything, the admin).
type User struct {
	// NKey is the user's public key (U…).
	NKey        string
	Permissions *identity.Permissions
}

// ClusterConfig is a server's place in a cluster.
type ClusterConfig struct {
	// Name of the cluster, the same on every node. Empty means "mesh".
	Name string
	// Listen is host:port for routes from the other nodes; port 0 picks a
	// free one (see [Server.ClusterAddr]). Empty means no cluster.
	Listen string
	// Routes are the nodes to connect to (nats-route://host:port); the
	// server adds the route credentials. A node may list itself.
	Routes []*url.URL
	// User and Password authenticate routes both ways: the server accepts
	// only routes that present them and presents them to the nodes it
	// connects to. Empty means routes without authentication.
	User, Password string
}

// LeafConfig are a server's leaf node connections.
type LeafConfig struct {
	// Listen is host:port where leaf nodes connect. Empty means none.
	Listen string
	// NKey is the public key leaf nodes must connect with (a leaf node then
	// joins the clients' account with no permissions of its own: its own
	// server checks its clients). Empty means any leaf node.
	NKey string
	// Remotes, when set, make the server a leaf node of the servers they
	// name (nats-leaf://host:port); it then runs no JetStream of its own, so
	// that its clients reach the central cluster's streams through the link.
	Remotes []*url.URL
	// Seed is the nkey seed the server connects to its remotes with.
	Seed string
	// Domain is the JetStream domain of the central cluster: a hub's own
	// (set where it takes leaf nodes), the one an edge's clients reach. A
	// server forwards no JetStream request of the plain $JS.API and $KV
	// subjects over a leaf node link, so an edge maps its clients' to the
	// hub's domain ($JS.<domain>.API…), and roles keep their subjects and
	// permissions. Empty means "mesh".
	Domain string
}

// DefaultDomain is the JetStream domain of a mesh with leaf nodes.
const DefaultDomain = "mesh"

// DefaultMaxPayload is the embedded server's default max payload.
const DefaultMaxPayload = 8 << 20

// Server is an embedded NATS server with JetStream.
type Server struct {
	ns       *server.Server
	shutdown sync.Once
}

// Start starts an embedded server and waits until it takes clients.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("natsserver: needs a store directory")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:4222"
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.Name == "" {
		cfg.Name = "mesh"
	}
	host, port, err := listenAddr("listen", cfg.Listen)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       host,
		Port:       port,
		// An edge (a leaf node) keeps no state: the central cluster's
		// JetStream answers its clients through the link.
		JetStream:  len(cfg.LeafNodes.Remotes) == 0,
		StoreDir:   cfg.StoreDir,
		MaxPayload: cfg.MaxPayload,
		// The line limit the wire guard of Connect keeps to (wire.go).
		MaxControlLine: natsconn.MaxControlLine,
		// MaxPending must hold at least one max-size message per client.
		MaxPending: int64(cfg.MaxPayload) * 8,
		NoSigs:     true,
	}
	if cfg.MaxMemory > 0 {
		opts.JetStreamMaxMemory = cfg.MaxMemory
	}
	for _, u := range cfg.Users {
		perms := serverPermissions(u.Permissions)
		if perms != nil && len(cfg.LeafNodes.Remotes) > 0 {
			// The server checks a publish after mapping its subject.
			perms.Publish.Allow = append(perms.Publish.Allow, cfg.LeafNodes.hubSubjects(perms.Publish.Allow)...)
		}
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: perms})
	}
	if cfg.TLS != nil {
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, cfg.TLS, 2
	}
	if err := cfg.clusterOptions(opts); err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: %w", err)
	}
	if err := cfg.LeafNodes.mapToHub(ns); err != nil {
		return nil, err
	}
	ns.SetLoggerV2(serverLogger{cfg.Logger}, false, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("natsserver: the server on %s did not start", cfg.Listen)
	}
	return &Server{ns: ns}, nil
}

// serverPermissions are p as the server takes them; nil is everything.
func serverPermissions(p *identity.Permissions) *server.Permissions {
	if p == nil || p.Role == identity.RoleAdmin {
		return nil
	}
	// No allow_responses: a reply is a publish like any other, allowed by
	// Publish or refused (see ResponderSuffix).
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(p.Publish)},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(p.Subscribe)},
	}
}

// listenAddr splits a listen address, with port 0 as the server's random
// port. The server only logs a failed listen and then never gets ready:
// a port taken is found now, with a clear error, rather than after a timeout.
func listenAddr(what, addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("mesh: %s address %q: %w", what, addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("mesh: %s address %q: bad port", what, addr)
	}
	if port == 0 {
		return host, server.RANDOM_PORT, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", 0, fmt.Errorf("natsserver: cannot listen on %s (%s): %w", addr, what, err)
	}
	_ = l.Close()
	return host, port, nil
}

// clusterOptions sets the cluster and leaf node options of opts.
func (cfg Config) clusterOptions(opts *server.Options) error {
	if c := cfg.Cluster; c.Listen != "" {
		host, port, err := listenAddr("cluster", c.Listen)
		if err != nil {
			return err
		}
		if c.Name == "" {
			c.Name = "mesh"
		}
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: port, Username: c.User, Password: c.Password}
		for _, r := range c.Routes {
			u := *r
			if c.User != "" {
				u.User = url.UserPassword(c.User, c.Password)
			}
			opts.Routes = append(opts.Routes, &u)
		}
	}
	if cfg.MonitorListen != "" {
		host, port, err := listenAddr("monitor", cfg.MonitorListen)
		if err != nil {
			return err
		}
		opts.HTTPHost, opts.HTTPPort = host, port
	}
	l := cfg.LeafNodes
	if l.Listen != "" {
		host, port, err := listenAddr("leafnodes", l.Listen)
		if err != nil {
			return err
		}
		opts.LeafNode.Host, opts.LeafNode.Port, opts.LeafNode.Nkey = host, port, l.NKey
		// Edges connect to the addresses they are given (a hub behind a
		// load balancer or NAT), not to the ones its servers would announce.
		opts.LeafNode.NoAdvertise = true
	}
	if len(l.Remotes) > 0 {
		opts.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: l.Remotes, Nkey: l.Seed}}
	}
	if l.Listen != "" && opts.JetStream {
		opts.JetStreamDomain = l.domain()
	}
	return nil
}

func (l LeafConfig) domain() string {
	if l.Domain == "" {
		return DefaultDomain
	}
	return l.Domain
}

// hubMappings are the subject mappings of an edge: its clients' JetStream
// and KV subjects to the hub's domain.
func (l LeafConfig) hubMappings() map[string]string {
	d := l.domain()
	return map[string]string{"$JS.API.": "$JS." + d + ".API.", "$KV.": "$JS." + d + ".API.$KV."}
}

// hubSubjects are the subjects of allow as an edge maps them.
func (l LeafConfig) hubSubjects(allow []string) []string {
	var out []string
	for _, subj := range allow {
		for src, dst := range l.hubMappings() {
			if strings.HasPrefix(subj, src) {
				out = append(out, dst+strings.TrimPrefix(subj, src))
			}
		}
	}
	return out
}

// mapToHub maps an edge's JetStream and KV subjects to the hub's domain.
func (l LeafConfig) mapToHub(ns *server.Server) error {
	if len(l.Remotes) == 0 {
		return nil
	}
	for src, dst := range l.hubMappings() {
		if err := ns.GlobalAccount().AddMapping(src+">", dst+">"); err != nil {
			return fmt.Errorf("natsserver: map %s to the hub's domain: %w", src, err)
		}
	}
	return nil
}

// ClusterAddr is the address of the cluster's route listener, "" without one.
func (s *Server) ClusterAddr() string {
	if a := s.ns.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// ClientURL is the URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Shutdown stops the server and waits until it has stopped. It is idempotent.
func (s *Server) Shutdown() {
	s.shutdown.Do(func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	})
}

// Running reports whether the server still runs.
func (s *Server) Running() bool { return s.ns.Running() }

// serverLogger adapts zerolog to the server's logger interface.
type serverLogger struct{ l zerolog.Logger }

func (s serverLogger) Noticef(format string, v ...any) { s.l.Debug().Msgf(format, v...) }
func (s serverLogger) Warnf(format string, v ...any)   { s.l.Warn().Msgf(format, v...) }
func (s serverLogger) Fatalf(format string, v ...any)  { s.l.Error().Msgf(format, v...) }
func (s serverLogger) Errorf(format string, v ...any)  { s.l.Error().Msgf(format, v...) }
func (s serverLogger) Debugf(format string, v ...any)  { s.l.Trace().Msgf(format, v...) }
func (s serverLogger) Tracef(format string, v ...any)  { s.l.Trace().Msgf(format, v...) }
