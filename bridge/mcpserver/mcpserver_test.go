package mcpserver

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
)

func TestOfferedIsWhatTheConfigurationChooses(t *testing.T) {
	catalog := []mesh.ToolEntry{{Server: "fs", Name: "read"}, {Server: "fs", Name: "write"}, {Server: "db", Name: "query"}}
	names := func(es []mesh.ToolEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, GatewayToolName(e))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		choose *[]string
		want   []string
	}{
		{"unset: all", nil, []string{"fs.read", "fs.write", "db.query"}},
		{"empty: none", &[]string{}, nil},
		{"a server and a tool", &[]string{"db", "fs.read"}, []string{"fs.read", "db.query"}},
		{"unknown names: none", &[]string{"web", "fs.delete"}, nil},
	} {
		if got := names(offered(catalog, tc.choose)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
