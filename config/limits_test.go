package config

import (
	"errors"
	"strings"
	"testing"
)

func TestLimitsSettings(t *testing.T) {
	tokens := "auth:\n  tokens:\n    - {name: alice, token: alice-token-0123456789, roles: [user]}\n"
	tests := []struct {
		name    string
		yaml    string
		on      bool
		wantErr string
	}{
		{name: "off without auth", yaml: minimal},
		{name: "on with auth", yaml: minimal + tokens, on: true},
		{name: "on when asked", yaml: minimal + "limits:\n  enabled: true\n", on: true},
		{name: "off when asked", yaml: minimal + tokens + "limits:\n  enabled: false\n"},
		{name: "no limit", yaml: minimal + "limits:\n  requests_per_minute: -1\n  max_active_sessions: -1\n"},
		{name: "below -1", yaml: minimal + "limits:\n  conversations_per_principal: -2\n", wantErr: "limits.conversations_per_principal"},
		{name: "too many", yaml: minimal + "limits:\n  max_active_sessions: 10001\n", wantErr: "limits.max_active_sessions"},
		{name: "bad proxy", yaml: minimal + "limits:\n  trusted_proxies: [10.0.0.0/33]\n", wantErr: "limits.trusted_proxies"},
		{name: "window", yaml: minimal + "limits:\n  window: 10s\n"},
		{name: "window too short", yaml: minimal + "limits:\n  window: 500ms\n", wantErr: "limits.window"},
		{name: "window too long", yaml: minimal + "limits:\n  window: 48h\n", wantErr: "limits.window"},
		{name: "proxies", yaml: minimal + "limits:\n  trusted_proxies: [10.0.0.0/8, 192.0.2.1, \"2001:db8::/32\"]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parseCase(t, tt.yaml, tt.wantErr)
			if c == nil {
				return
			}
			if c.LimitsOn() != tt.on {
				t.Errorf("LimitsOn() = %v, want %v", c.LimitsOn(), tt.on)
			}
		})
	}
	if Limit(0, 100) != 100 || Limit(-1, 100) != 0 || Limit(7, 100) != 7 {
		t.Error("Limit: 0 is the default, -1 none, else the number")
	}
	nets, err := (&Limits{TrustedProxies: []string{"192.0.2.1", "10.0.0.0/8"}}).ProxyNets()
	if err != nil {
		t.Fatalf("ProxyNets: %v", err)
	}
	if len(nets) != 2 {
		t.Fatalf("ProxyNets = %v, want 2 networks", nets)
	}
	if !nets[0].Contains([]byte{192, 0, 2, 1}) {
		t.Errorf("ProxyNets[0] = %v, want it to hold 192.0.2.1", nets[0])
	}
	if nets[0].Contains([]byte{192, 0, 2, 2}) {
		t.Errorf("ProxyNets[0] = %v, want a single address, not holding 192.0.2.2", nets[0])
	}
	if !nets[1].Contains([]byte{10, 9, 8, 7}) {
		t.Errorf("ProxyNets[1] = %v, want it to hold 10.9.8.7", nets[1])
	}
}

// parseCase parses yaml for a table case: nil when it was refused naming
// wantErr (a *config.Error), fatal when it was refused otherwise or not
// refused as wanted.
func parseCase(t *testing.T, yaml, wantErr string) *Config {
	t.Helper()
	c, err := Parse("agent.yaml", []byte(yaml), env())
	var ce *Error
	switch {
	case wantErr != "":
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one naming %s", err, wantErr)
		}
		return nil
	case err != nil:
		t.Fatal(err)
	}
	return c
}
