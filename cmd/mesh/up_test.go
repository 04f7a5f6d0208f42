package main

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

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
// started with the GOMAXPROCS of upProcs, and none when the operator's
// environment sets it.
func TestUpProcessesGOMAXPROCS(t *testing.T) {
	cfg := &config.Config{}
	replicas := map[string]int{mesh.RoleToolhost: 1, mesh.RoleApprover: 1, mesh.RoleAgent: 2, mesh.RoleGroup: 1, mesh.RoleBridge: 1}
	want := "GOMAXPROCS=" + strconv.Itoa(max(1, runtime.GOMAXPROCS(0)/2))
	for _, operator := range []string{"", "3"} {
		t.Setenv("GOMAXPROCS", operator)
		procs := upProcesses(cfg, "nats://127.0.0.1:4222", replicas, nil, upProcs(runtime.GOMAXPROCS(0), os.Getenv))
		if len(procs) != 6 {
			t.Fatalf("GOMAXPROCS=%q: %d processes, want 6", operator, len(procs))
		}
		for _, p := range procs {
			var got []string
			for _, kv := range p.Env {
				if strings.HasPrefix(kv, "GOMAXPROCS=") {
					got = append(got, kv)
				}
			}
			switch {
			case operator == "" && !slices.Equal(got, []string{want}):
				t.Errorf("%s: started with %q, want [%s]", p.Name, got, want)
			case operator != "" && len(got) != 0:
				t.Errorf("%s with the operator's GOMAXPROCS=%s: started with %q, want none of its own", p.Name, operator, got)
			}
		}
	}
}
