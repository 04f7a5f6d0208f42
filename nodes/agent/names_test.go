package agent

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
)

// functionNameRE is what every model API accepts as a function name
// (OpenAI and Anthropic: ^[a-zA-Z0-9_-]{1,64}$; Gemini also wants a letter
// or '_' first).
var functionNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)

func TestFunctionNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	tool := func(server, name string) mesh.ToolEntry { return mesh.ToolEntry{Server: server, Name: name} }
	tests := []struct {
		name  string
		tools []mesh.ToolEntry
		// want maps each function name to server/tool.
		want map[string]string
	}{
		{
			name:  "unique names stay",
			tools: []mesh.ToolEntry{tool("resources", "resources_list"), tool("resources", "resources_add")},
			want:  map[string]string{"resources_list": "resources/resources_list", "resources_add": "resources/resources_add"},
		},
		{
			name:  "a name on two servers is qualified",
			tools: []mesh.ToolEntry{tool("a", "search"), tool("b", "search"), tool("b", "fetch")},
			want:  map[string]string{"a__search": "a/search", "b__search": "b/search", "fetch": "b/fetch"},
		},
		{
			name:  "characters APIs refuse become underscores",
			tools: []mesh.ToolEntry{tool("fs", "read.file"), tool("fs", "héllo wörld")},
			want:  map[string]string{"read_file": "fs/read.file", "h_llo_w_rld": "fs/héllo wörld"},
		},
		{
			name:  "names that read the same once made safe are qualified",
			tools: []mesh.ToolEntry{tool("a", "get.x"), tool("b", "get_x")},
			want:  map[string]string{"a__get_x": "a/get.x", "b__get_x": "b/get_x"},
		},
		{
			name:  "a leading digit or dash gets an underscore",
			tools: []mesh.ToolEntry{tool("s", "3d-render"), tool("s", "-x")},
			want:  map[string]string{"_3d-render": "s/3d-render", "_-x": "s/-x"},
		},
		{
			name:  "an empty name still gets one",
			tools: []mesh.ToolEntry{tool("s", "")},
			want:  map[string]string{"_": "s/"},
		},
		{
			name:  "a long name is cut with a hash",
			tools: []mesh.ToolEntry{tool("s", long)},
			want:  map[string]string{strings.Repeat("x", 55) + "_" + hashOf("s", long): "s/" + long},
		},
		{
			name:  "exactly 64 characters stays",
			tools: []mesh.ToolEntry{tool("s", strings.Repeat("y", 64))},
			want:  map[string]string{strings.Repeat("y", 64): "s/" + strings.Repeat("y", 64)},
		},
		{
			name:  "long names sharing a prefix stay apart",
			tools: []mesh.ToolEntry{tool("s", long+"_a"), tool("s", long+"_b")},
			want: map[string]string{
				strings.Repeat("x", 55) + "_" + hashOf("s", long+"_a"): "s/" + long + "_a",
				strings.Repeat("x", 55) + "_" + hashOf("s", long+"_b"): "s/" + long + "_b",
			},
		},
		{
			name:  "a long qualified name is cut",
			tools: []mesh.ToolEntry{tool("a-server-with-a-rather-long-name", "list_every_resource_of_the_catalog"), tool("other", "list_every_resource_of_the_catalog")},
			want: map[string]string{
				"a-server-with-a-rather-long-name__list_every_resource_o_" + hashOf("a-server-with-a-rather-long-name", "list_every_resource_of_the_catalog"): "a-server-with-a-rather-long-name/list_every_resource_of_the_catalog",
				"other__list_every_resource_of_the_catalog": "other/list_every_resource_of_the_catalog",
			},
		},
		{
			name:  "a tool listed twice is named once",
			tools: []mesh.ToolEntry{tool("s", "ping"), tool("s", "ping")},
			want:  map[string]string{"ping": "s/ping"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for name, e := range functionNames(tt.tools) {
				got[name] = e.Server + "/" + e.Name
				if !functionNameRE.MatchString(name) {
					t.Errorf("name %q does not match %s", name, functionNameRE)
				}
			}
			if diff := diffMaps(got, tt.want); diff != "" {
				t.Errorf("FunctionNames differs (-got +want):\n%s", diff)
			}
		})
	}
}

// TestFunctionNamesProperties checks, over many random catalogs, that every
// tool gets one valid name of at most 64 characters, and that the names do
// not depend on the order of the tools.
func TestFunctionNamesProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	parts := []string{"list", "get", "resources", "a.b", "x", strings.Repeat("long", 20), "é", "-", "9"}
	word := func() string {
		var b strings.Builder
		for n := 1 + r.IntN(4); n > 0; n-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		return b.String()
	}
	for i := range 300 {
		var tools []mesh.ToolEntry
		ids := map[string]bool{}
		for n := 1 + r.IntN(12); n > 0; n-- {
			e := mesh.ToolEntry{Server: []string{"s1", "s2", strings.Repeat("srv", 30)}[r.IntN(3)], Name: word()}
			tools = append(tools, e)
			ids[e.Server+"/"+e.Name] = true
		}
		got := functionNames(tools)
		if len(got) != len(ids) {
			t.Fatalf("catalog %d: %d names for %d tools", i, len(got), len(ids))
		}
		named := map[string]bool{}
		for name, e := range got {
			if !functionNameRE.MatchString(name) {
				t.Errorf("catalog %d: name %q is not valid", i, name)
			}
			named[e.Server+"/"+e.Name] = true
		}
		if len(named) != len(ids) {
			t.Errorf("catalog %d: %d tools named, want %d", i, len(named), len(ids))
		}
		shuffled := append([]mesh.ToolEntry(nil), tools...)
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		again := functionNames(shuffled)
		for name, e := range got {
			if a, ok := again[name]; !ok || a.Server != e.Server || a.Name != e.Name {
				t.Errorf("catalog %d: name %q depends on the order of the tools", i, name)
			}
		}
	}
}

func hashOf(server, name string) string {
	n := hashedFunctionName("", server, name, 0)
	return n[len(n)-8:]
}

func diffMaps(got, want map[string]string) string {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var b strings.Builder
	for _, k := range sorted {
		g, gok := got[k]
		w, wok := want[k]
		switch {
		case gok && !wok:
			fmt.Fprintf(&b, "- %s: %s\n", k, g)
		case !gok && wok:
			fmt.Fprintf(&b, "+ %s: %s\n", k, w)
		case g != w:
			fmt.Fprintf(&b, "- %s: %s\n+ %s: %s\n", k, g, k, w)
		}
	}
	return b.String()
}
