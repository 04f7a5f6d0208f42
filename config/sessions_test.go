package config

import (
	"fmt"
	"strings"
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

// The settings an operator changes most have variables of their own, which
// win over the file; a value that does not parse names the key and the
// variable.
func TestSettingVariablesOverrideTheFile(t *testing.T) {
	yaml := minimal + "mesh:\n  events_max_age: 48h\nsessions:\n  ttl: 72h\n  save_retry: [2s]\nmonitor:\n  interval: 2s\n"
	c, err := Parse("a.yaml", []byte(yaml), env(
		EnvEventsMaxAge, "12h", EnvSessionsTTL, "never", EnvSessionsMaxBytes, "2097152", EnvSessionsSaveRetry, "100ms, 2s,1m",
		EnvMaxActiveSessions, "250", EnvMonitorInterval, "500ms", EnvMonitorProbeTimeout, "4s"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Mesh.EventsMaxAge.Std(), c.Sessions.ExpireAfter(), c.Sessions.MaxBytes, c.Sessions.SaveRetryPauses(),
		c.Limits.MaxActiveSessions, c.Monitor.Interval.Std(), c.Monitor.ProbeTimeout.Std())
	if want := "12h0m0s 0s 2097152 [100ms 2s 1m0s] 250 500ms 4s"; got != want {
		t.Errorf("settings %s, want %s", got, want)
	}
	c, err = Parse("a.yaml", []byte(yaml), env())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Mesh.EventsMaxAge.Std(), c.Sessions.ExpireAfter(), c.Sessions.SaveRetryPauses()); got != "48h0m0s 72h0m0s [2s]" {
		t.Errorf("from the file alone: %s", got)
	}
	for _, tc := range []struct{ env, value, want string }{
		{EnvEventsMaxAge, "a day", "mesh.events_max_age (MESH_EVENTS_MAX_AGE)"},
		{EnvEventsMaxAge, "1000h", "from 1h to 720h"},
		{EnvSessionsMaxBytes, "4MB", "sessions.max_bytes (MESH_SESSIONS_MAX_BYTES)"},
		{EnvMaxActiveSessions, "many", "limits.max_active_sessions (MESH_MAX_ACTIVE_SESSIONS)"},
		{EnvSessionsSaveRetry, "1s,soon", "sessions.save_retry (MESH_SESSIONS_SAVE_RETRY)"},
		{EnvMonitorProbeTimeout, "3 s", "monitor.probe_timeout (MESH_MONITOR_PROBE_TIMEOUT)"},
	} {
		if _, err := Parse("a.yaml", []byte(minimal), env(tc.env, tc.value)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: %v, want an error saying %q", tc.env, tc.value, err, tc.want)
		}
	}
}
