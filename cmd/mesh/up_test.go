package main

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// TestUpProcs checks the GOMAXPROCS of `mesh up` and its children: half
// the host's, at least 1, and none when the operator sets GOMAXPROCS.
func TestUpProcs(t *testing.T) {
	tests := []struct {
		name     string
		procs    int
		operator string // GOMAXPROCS in the environment the children inherit
		want     int
	}{
		{name: "2 cores", procs: 2, want: 1},
		{name: "1 core", procs: 1, want: 1},
		{name: "16 cores", procs: 16, want: 8},
		{name: "5 cores", procs: 5, want: 2},
		{name: "the operator's GOMAXPROCS wins", procs: 16, operator: "3", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := upProcs(tt.procs, func(key string) string {
				if key == "GOMAXPROCS" {
					return tt.operator
				}
				return ""
			})
			if got != tt.want {
				t.Errorf("upProcs(%d) with GOMAXPROCS=%q: %d, want %d", tt.procs, tt.operator, got, tt.want)
			}
		})
	}
}

// TestUpProcessesGOMAXPROCS checks that every child of `mesh up` is
// started with the GOMAXPROCS of upProcs, and with the operator's when the
// environment sets it.
func TestUpProcessesGOMAXPROCS(t *testing.T) {
	cfg := &config.Config{}
	replicas := map[string]int{mesh.RoleToolhost: 1, mesh.RoleApprover: 1, mesh.RoleAgent: 2, mesh.RoleGroup: 1, mesh.RoleBridge: 1}
	half := strconv.Itoa(max(1, runtime.GOMAXPROCS(0)/2))
	tests := []struct {
		name    string
		environ []string
		want    string
	}{
		{name: "half the host's", environ: []string{"PATH=/bin"}, want: half},
		{name: "the operator's", environ: []string{"PATH=/bin", "GOMAXPROCS=3"}, want: "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return envValue(tt.environ, k) }
			procs := upProcesses(cfg, "nats://127.0.0.1:4222", replicas, nil, upProcs(runtime.GOMAXPROCS(0), getenv), tt.environ)
			if len(procs) != 6 {
				t.Fatalf("%d processes, want 6", len(procs))
			}
			for _, p := range procs {
				if got := envValue(p.Env, "GOMAXPROCS"); got != tt.want {
					t.Errorf("%s: started with GOMAXPROCS=%q, want %q", p.Name, got, tt.want)
				}
			}
		})
	}
}

// envValue is the value a process started with env sees for name: the
// last one set, as os/exec keeps it.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v = val
		}
	}
	return v
}

// TestUpMetricsPortsByRole: each role of `mesh up` serves its metrics at
// the port the shipped scrape configuration names, whether or not the
// roles before it run: without groups the bridge is still at base+5.
func TestUpMetricsPortsByRole(t *testing.T) {
	cfg := &config.Config{}
	cfg.Metrics.Listen = "127.0.0.1:9464"
	tests := []struct {
		name     string
		replicas map[string]int
		want     map[string]string // process name → metrics address
	}{
		{name: "every role", replicas: map[string]int{mesh.RoleToolhost: 1, mesh.RoleApprover: 1, mesh.RoleAgent: 1, mesh.RoleGroup: 1, mesh.RoleBridge: 1},
			want: map[string]string{"toolhost": "127.0.0.1:9465", "approver": "127.0.0.1:9466", "agent": "127.0.0.1:9467", "group": "127.0.0.1:9468", "bridge": "127.0.0.1:9469"}},
		{name: "no groups", replicas: map[string]int{mesh.RoleToolhost: 1, mesh.RoleApprover: 1, mesh.RoleAgent: 1, mesh.RoleBridge: 1},
			want: map[string]string{"toolhost": "127.0.0.1:9465", "approver": "127.0.0.1:9466", "agent": "127.0.0.1:9467", "bridge": "127.0.0.1:9469"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for _, p := range upProcesses(cfg, "nats://127.0.0.1:4222", tt.replicas, nil, 0, []string{"PATH=/bin"}) {
				got[p.Name] = envValue(p.Env, config.EnvMetricsAddr)
			}
			for name, want := range tt.want {
				if got[name] != want {
					t.Errorf("%s serves metrics at %q, want %q", name, got[name], want)
				}
			}
		})
	}
}

// MESH_EVENTS_MAX_AGE, over the file's mesh.events_max_age, is what the
// events stream is provisioned with.
func TestEventsMaxAgeFromTheEnvironmentIsProvisioned(t *testing.T) {
	cfg, err := config.Parse("agent.yaml", []byte("name: a\nllm:\n  model: offline\nmesh:\n  events_max_age: 48h\n"), func(k string) string {
		if k == config.EnvEventsMaxAge {
			return "6h"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := provisionConfig(cfg).EventsMaxAge; got != 6*time.Hour {
		t.Errorf("events max age provisioned %v, want 6h from MESH_EVENTS_MAX_AGE", got)
	}
}
