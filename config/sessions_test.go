package config

import (
	"testing"
	"time"
)

func TestSessionsTTL(t *testing.T) {
	for _, c := range []struct {
		yaml      string
		ttl, kept time.Duration
	}{
		{"", DefaultSessionTTL, DefaultExpiredKept},
		{"sessions:\n  ttl: never\n", 0, DefaultExpiredKept},
		{"sessions:\n  ttl: -1s\n", 0, DefaultExpiredKept},
		{"sessions:\n  ttl: 1h\n  expired_kept: 10m\n", time.Hour, 10 * time.Minute},
		{"sessions:\n  ttl: 0\n", DefaultSessionTTL, DefaultExpiredKept},
		// The default is cut to a shorter TTL: the marker ages out with it.
		{"sessions:\n  ttl: 2h\n", 2 * time.Hour, 2 * time.Hour},
		{"sessions:\n  ttl: 3s\n  expired_kept: 3s\n", 3 * time.Second, 3 * time.Second},
	} {
		cfg, err := Parse("agent.yaml", []byte("name: a\nllm:\n  model: offline\n"+c.yaml), func(string) string { return "" })
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if got := cfg.Sessions.ExpireAfter(); got != c.ttl {
			t.Errorf("%q: ttl %v, want %v", c.yaml, got, c.ttl)
		}
		if got := cfg.Sessions.KeptExpired(); got != c.kept {
			t.Errorf("%q: expired_kept %v, want %v", c.yaml, got, c.kept)
		}
	}
}

func TestSessionsTTLBounds(t *testing.T) {
	for _, y := range []string{"sessions:\n  expired_kept: 500ms\n", "sessions:\n  ttl: 10ms\n", "sessions:\n  ttl: 3s\n  expired_kept: 12s\n"} {
		if _, err := Parse("agent.yaml", []byte("name: a\nllm:\n  model: offline\n"+y), func(string) string { return "" }); err == nil {
			t.Errorf("%q accepted", y)
		}
	}
}
