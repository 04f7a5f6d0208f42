package natsconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Config says how a process connects to NATS.
type Config struct {
	// URL of the server (or several, comma-separated). Required.
	URL string
	// Name names the connection on the server (nats server report connections).
	Name string
	// Inbox is the prefix of the connection's inboxes, the role's own
	// ([Namespace.Inbox]). Empty means nats.go's _INBOX.
	Inbox string
	// CredsFile is a JWT user creds file, NKeyFile an nkey seed file: the
	// identity to connect with. Empty both means none (an open server).
	CredsFile, NKeyFile string
	// TLS, when not nil, is the client TLS configuration, and the server
	// must offer TLS. Nil still speaks TLS to a server that requires it,
	// with the system's roots.
	TLS *tls.Config
	// Responder says the connection answers requests, with a responder
	// identity (see [ResponderSuffix]): a publish the server refuses is
	// then a reply whose requester aimed it outside the inboxes, and is
	// logged as such.
	Responder bool
	// Logger receives disconnections, reconnections and what the wire guard
	// drops. The zero value discards them.
	Logger zerolog.Logger
}

// maxLoggedSubject bounds a subject a log line quotes.
const maxLoggedSubject = 256

// refusedPublish reports whether err is the server's refusal of a publish,
// and to which subject.
func refusedPublish(err error) (string, bool) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return "", false
	}
	_, rest, ok := strings.Cut(err.Error(), "Permissions Violation for Publish to \"")
	if !ok {
		return "", false
	}
	subj, _, _ := strings.Cut(rest, "\"")
	return subj, true
}

// Connect opens a NATS connection for a role. It keeps reconnecting for as
// long as the process lives, and retries the first connection too, so a role
// started before its server waits for it instead of failing. A protocol
// error that makes the server close the connection (a subject longer than
// its limit) is a disconnection like any other, not the end of the
// connection (see wire.go).
func Connect(cfg Config) (*nats.Conn, error) {
	if cfg.URL == "" {
		return nil, errors.New("natsconn: no server url")
	}
	log := cfg.Logger
	inbox := cfg.Inbox
	if inbox == "" {
		inbox = nats.InboxPrefix[:len(nats.InboxPrefix)-1]
	}
	dialer := &wireDialer{timeout: 2 * time.Second, tls: cfg.TLS, want: cfg.TLS != nil, inbox: inbox + ".",
		event: func(subject, what string) {
			ev := log.Warn()
			if subject != "" {
				ev = ev.Str("subject", subject)
			}
			ev.Msg(what)
		}}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.SetCustomDialer(dialer),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(true),
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info().Str("url", c.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		nats.ClosedHandler(func(c *nats.Conn) {
			// Closed by the process (a drain) leaves the last error, often a
			// permissions violation already logged; anything else is news.
			if err := c.LastError(); err != nil && !errors.Is(err, nats.ErrPermissionViolation) {
				log.Error().Err(err).Msg("nats connection closed")
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			if subj, ok := refusedPublish(err); ok && cfg.Responder {
				if len(subj) > maxLoggedSubject {
					subj = subj[:maxLoggedSubject] + "…"
				}
				log.Warn().Str("subject", subj).Msg("refused a reply aimed outside the inboxes")
				return
			}
			ev := log.Warn().Err(err)
			if s != nil {
				ev = ev.Str("subject", s.Subject)
			}
			ev.Msg("nats async error")
		}),
	}
	if cfg.Inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.Inbox))
	}
	if cfg.TLS != nil {
		// The dialer names the server it verifies after the URL's host:
		// keep host names as they are rather than resolved to addresses.
		opts = append(opts, nats.SkipHostLookup())
	}
	switch {
	case cfg.CredsFile != "" && cfg.NKeyFile != "":
		return nil, errors.New("natsconn: a creds file or an nkey seed, not both")
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nkey %s: %w", cfg.NKeyFile, err)
		}
		opts = append(opts, opt)
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.URL, err)
	}
	return nc, nil
}
