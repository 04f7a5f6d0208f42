package mesh

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// ServerConfig configures the embedded NATS server.
type ServerConfig struct {
	// Listen is host:port for clients. Empty means 127.0.0.1:4222; port 0
	// picks a free port (see [Server.ClientURL]).
	Listen string
	// StoreDir is where JetStream keeps its files. Required.
	StoreDir string
	// MaxPayload is the largest message the server accepts. Zero means 8 MiB,
	// room for a 1 MB session with its history of messages.
	MaxPayload int32
	// MaxMemory, when positive, bounds the memory of this process in bytes
	// (Go's soft memory limit, debug.SetMemoryLimit: the whole process,
	// whatever else it runs) and JetStream's memory store.
	MaxMemory int64
	// Name is the server's name. Empty means "mesh".
	Name string
	// Users are the identities the server accepts. Empty means an open
	// server: any client connects and may do anything.
	Users []ServerUser
	// TLS, when not nil, secures the listener (clients must use TLS).
	TLS *tls.Config
	// Logger receives the server's notices, warnings and errors. The zero
	// value discards them.
	Logger zerolog.Logger
}

// ServerUser is an identity of the embedded server: an nkey user with the
// permissions of a role (nil: everything, the admin).
type ServerUser struct {
	// NKey is the user's public key (U…).
	NKey        string
	Permissions *Permissions
}

// DefaultMaxPayload is the embedded server's default max payload.
const DefaultMaxPayload = 8 << 20

// Server is an embedded NATS server with JetStream.
type Server struct {
	ns       *server.Server
	shutdown sync.Once
}

// StartServer starts an embedded server and waits until it takes clients.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("mesh: embedded server needs a store directory")
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
	host, portText, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("mesh: listen address %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("mesh: listen address %q: bad port", cfg.Listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else {
		// The server only logs a failed listen and then never gets ready:
		// find out now, with a clear error, rather than after a timeout.
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("mesh: embedded server cannot listen on %s: %w", cfg.Listen, err)
		}
		_ = l.Close()
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		MaxPayload: cfg.MaxPayload,
		// The line limit the wire guard of Connect keeps to (wire.go).
		MaxControlLine: maxControlLine,
		// MaxPending must hold at least one max-size message per client.
		MaxPending: int64(cfg.MaxPayload) * 8,
		NoSigs:     true,
	}
	if cfg.MaxMemory > 0 {
		opts.JetStreamMaxMemory = cfg.MaxMemory
		debug.SetMemoryLimit(cfg.MaxMemory)
	}
	for _, u := range cfg.Users {
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: serverPermissions(u.Permissions)})
	}
	if cfg.TLS != nil {
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, cfg.TLS, 2
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("mesh: embedded server: %w", err)
	}
	ns.SetLoggerV2(serverLogger{cfg.Logger}, false, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("mesh: embedded server on %s did not start", cfg.Listen)
	}
	return &Server{ns: ns}, nil
}

// serverPermissions are p as the server takes them; nil is everything.
func serverPermissions(p *Permissions) *server.Permissions {
	if p == nil || p.Role == RoleAdmin {
		return nil
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(p.Publish)},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(p.Subscribe)},
		Response:  &server.ResponsePermission{MaxMsgs: p.ResponseMax, Expires: p.ResponseTTL},
	}
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
