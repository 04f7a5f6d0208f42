package toolhost

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/config"
)

// TestCommandEnv checks the environment of a server's command: what a
// program needs to run, then the server's env section; nothing else of the
// toolhost's.
func TestCommandEnv(t *testing.T) {
	// The toolhost's environment under `mesh up`: its NATS identity, the
	// variable it holds for the items server's section, and what any
	// process has.
	toolhost := []string{
		"PATH=/usr/bin", "HOME=/home/op", "USER=op", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TMPDIR=/tmp", "GOMAXPROCS=1",
		"NATS_URL=nats://127.0.0.1:4222", "NATS_NKEY=/data/creds/toolhost.nk", "MESH_NODE_ID=h-toolhost-1",
		"MESH_APPROVER_PUBLIC_KEYS=UKEY", "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer otel-secret",
		"ITEMS_TOKEN=items-token", "OPENAI_API_KEY=sk-openai", "AWS_SECRET_ACCESS_KEY=aws-secret",
	}
	basics := []string{"PATH=/usr/bin", "HOME=/home/op", "USER=op", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TMPDIR=/tmp", "GOMAXPROCS=1"}
	tests := []struct {
		name    string
		environ []string
		env     map[string]string
		want    []string
	}{
		{
			name:    "no env section: the basics alone",
			environ: toolhost,
			want:    basics,
		},
		{
			name:    "the env section, by name, after the basics",
			environ: toolhost,
			env:     map[string]string{"ITEMS_TOKEN": "items-token", "ITEMS_MODE": "ro"},
			want:    append(slices.Clone(basics), "ITEMS_MODE=ro", "ITEMS_TOKEN=items-token"),
		},
		{
			name:    "the env section's value wins, being last",
			environ: toolhost,
			env:     map[string]string{"PATH": "/opt/items/bin"},
			want:    append(slices.Clone(basics), "PATH=/opt/items/bin"),
		},
		{
			name:    "the profile directory passes, for the sample server",
			environ: []string{"PATH=/usr/bin", config.EnvProfile + "=/tmp/prof", "MESH_LOG_LEVEL=debug"},
			want:    []string{"PATH=/usr/bin", config.EnvProfile + "=/tmp/prof"},
		},
		{
			name:    "an empty environment stays empty, not nil",
			environ: []string{"AWS_SECRET_ACCESS_KEY=aws-secret"},
			want:    []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := commandEnv(config.MCPServer{Name: "items", Command: "items-server", Env: tt.env}, tt.environ)
			if got == nil {
				t.Fatal("commandEnv is nil: os/exec would give the server the toolhost's whole environment")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("commandEnv:\n got  %q\n want %q", got, tt.want)
			}
		})
	}
}
