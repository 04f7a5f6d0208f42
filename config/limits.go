package config

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// Defaults of [Limits]: 100 requests a minute per principal, 1,000 per
// client IP, 2 concurrent conversations per principal and 100 active
// conversations in the whole mesh. They let a person chat at ease while one
// caller cannot take the mesh's agents for itself.
const (
	DefaultRequestsPerMinute         = 100
	DefaultIPRequestsPerMinute       = 1000
	DefaultConversationsPerPrincipal = 2
	DefaultMaxActiveSessions         = 100
	DefaultStreamsPerPrincipal       = 10
	// MaxActiveSessionsLimit bounds limits.max_active_sessions and
	// limits.conversations_per_principal.
	MaxActiveSessionsLimit = 10000
)

// Limits are what the bridge lets one caller, and the mesh as a whole, do
// at once. The budgets and the counts of active conversations live in NATS
// (the mesh_limits bucket), so that they hold across every bridge of the
// mesh; a refusal is 429 (a rate) or 503 (a capacity) with Retry-After and
// resetAt.
//
// For each number, zero means its default and -1 means no limit.
type Limits struct {
	// Enabled turns the limits on or off. Absent means on when auth is
	// configured and off without it: `make run` on a laptop serves one
	// user, on loopback, as the anonymous admin.
	Enabled *bool `yaml:"enabled"`
	// RequestsPerMinute is each principal's budget of requests (a token
	// bucket of that size, refilled over a minute). Zero means 100. With
	// authentication off, every client is the anonymous principal: its
	// budget is then kept per client IP, as if each IP were a principal.
	RequestsPerMinute int `yaml:"requests_per_minute"`
	// IPRequestsPerMinute is each client IP's budget, whoever it
	// authenticates as. Zero means 1000.
	IPRequestsPerMinute int `yaml:"ip_requests_per_minute"`
	// ConversationsPerPrincipal bounds the active conversations of one
	// principal: those with a turn queued, running or waiting for an
	// approval. Zero means 2.
	ConversationsPerPrincipal int `yaml:"conversations_per_principal"`
	// MaxActiveSessions bounds the active conversations of the whole mesh
	// (503 with Retry-After: 60 past it). Zero means 100; at most 10000.
	MaxActiveSessions int `yaml:"max_active_sessions"`
	// StreamsPerPrincipal bounds one principal's concurrent streams (SSE,
	// WebSocket) on one bridge, besides http.max_streams for all of them.
	// Zero means 10.
	StreamsPerPrincipal int `yaml:"streams_per_principal"`
	// Window is the time over which requests_per_minute and
	// ip_requests_per_minute are counted (and their budgets refill): with
	// 10s, requests_per_minute: 20 allows 20 requests in any 10 s. Zero
	// means a minute; between 1s and 24h.
	Window Duration `yaml:"window"`
	// TrustedProxies are the addresses or CIDR ranges of the proxies whose
	// X-Forwarded-For the bridge believes: the client IP is then the last
	// address of that header not itself a trusted proxy. Empty means the
	// TCP peer is always the client.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// LimitsOn reports whether the bridge enforces [Limits]: limits.enabled,
// else whether auth is configured.
func (c *Config) LimitsOn() bool {
	if c.Limits.Enabled != nil {
		return *c.Limits.Enabled
	}
	return c.Auth.Enabled()
}

// Limit is a configured number of [Limits] with its default applied: 0
// when there is no limit.
func Limit(n, def int) int {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return def
	}
	return n
}

// ProxyNets parses limits.trusted_proxies: an address is a range of one.
func (l *Limits) ProxyNets() ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, s := range l.TrustedProxies {
		if !strings.Contains(s, "/") {
			ip := net.ParseIP(s)
			if ip == nil {
				return nil, fmt.Errorf("%q is not an IP address or CIDR range, such as 10.0.0.0/8", s)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address or CIDR range, such as 10.0.0.0/8", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func (l *Limits) validate() *fieldErr {
	for name, n := range map[string]int{"requests_per_minute": l.RequestsPerMinute, "ip_requests_per_minute": l.IPRequestsPerMinute,
		"conversations_per_principal": l.ConversationsPerPrincipal, "max_active_sessions": l.MaxActiveSessions, "streams_per_principal": l.StreamsPerPrincipal} {
		if n < -1 {
			return &fieldErr{"limits." + name, fmt.Sprintf("%d: use -1 (no limit), 0 (the default) or more", n)}
		}
	}
	// A set of active conversations is one value of mesh_limits (about
	// 50 bytes an entry): it must stay well under the 1 MiB a message holds.
	if l.MaxActiveSessions > MaxActiveSessionsLimit || l.ConversationsPerPrincipal > MaxActiveSessionsLimit {
		return &fieldErr{"limits.max_active_sessions", fmt.Sprintf("at most %d, and so conversations_per_principal", MaxActiveSessionsLimit)}
	}
	if w := l.Window.Std(); w != 0 && (w < time.Second || w > 24*time.Hour) {
		return &fieldErr{"limits.window", fmt.Sprintf("%s: use a duration between 1s and 24h (0: a minute)", w)}
	}
	if _, err := l.ProxyNets(); err != nil {
		return &fieldErr{"limits.trusted_proxies", err.Error()}
	}
	return nil
}
