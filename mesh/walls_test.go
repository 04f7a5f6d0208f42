package mesh_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The walls between the module's packages (ARCHITECTURE.md, package map).
// A package may import, within the module:
//
//	config            nothing
//	mesh/...          config, mesh/...
//	heartbeat         config, mesh/...
//	nodes/<role>/...  config, mesh/..., heartbeat, its own role's packages
//	bridge            config, mesh/..., bridge/... (it wires the protocols)
//	bridge/core/...,  config, mesh/..., bridge/core/..., bridge/sse, bridge/auth
//	bridge/sse,
//	bridge/auth
//	bridge/<proto>/.. config, mesh/..., bridge/core/..., bridge/sse, bridge/auth, its own
//	                  protocol's packages (rest, agui, a2a, web, docs)
//	cmd/<command>     anything but another command: only cmd wires roles
//
// So mesh imports no role, bridge, heartbeat or cmd package; no role imports
// another role or the bridge; the bridge imports no role; heartbeat imports
// no role or bridge; config imports nothing of the mesh. A package in none of
// these places fails the test until it is given one here.
//
// What a package's non-test files import is checked over its whole
// dependency closure (go list's Deps). What its tests import besides is
// checked too, one edge at a time, by the same rules, for one exception: the
// bridge's tests may import roles and other bridge packages, since their
// fixtures wire an agent, an approver and the REST routes in process as cmd
// does. A library's tests that reached up into a role would make the library
// depend on it in all but the binary, which is what the walls are for.

// place is where a package stands: its kind and, for roles, bridge
// protocols and commands, which one.
type place struct{ kind, unit string }

const (
	kConfig    = "config"
	kMesh      = "mesh"
	kHeartbeat = "heartbeat"
	kRole      = "role"
	kBridge    = "bridge" // the package that wires the protocols
	kShared    = "bridge-shared"
	kProtocol  = "bridge-protocol"
	kCmd       = "cmd"
)

// placeOf places a module-relative package path; ok is false for a package
// the walls do not know.
func placeOf(rel string) (place, bool) {
	parts := strings.Split(rel, "/")
	switch parts[0] {
	case "config":
		return place{kind: kConfig}, true
	case "mesh":
		return place{kind: kMesh}, true
	case "heartbeat":
		return place{kind: kHeartbeat}, true
	case "nodes":
		if len(parts) > 1 {
			return place{kind: kRole, unit: "nodes/" + parts[1]}, true
		}
	case "bridge":
		switch {
		case len(parts) == 1:
			return place{kind: kBridge}, true
		case parts[1] == "core" || parts[1] == "sse" || parts[1] == "auth":
			return place{kind: kShared}, true
		default:
			return place{kind: kProtocol, unit: "bridge/" + parts[1]}, true
		}
	case "cmd":
		if len(parts) > 1 {
			return place{kind: kCmd, unit: "cmd/" + parts[1]}, true
		}
	}
	return place{}, false
}

// wall returns why from may not import to, or "" when it may; test says
// the import is made by from's tests only.
func wall(from, to place, test bool) string {
	if from.unit != "" && from.unit == to.unit {
		return "" // within one role, protocol or command
	}
	if test && (from.kind == kBridge || from.kind == kShared || from.kind == kProtocol) && (to.kind == kRole || strings.HasPrefix(to.kind, "bridge")) {
		return "" // a bridge test fixture wires roles and routes, as cmd does
	}
	switch from.kind {
	case kConfig:
		if to.kind != kConfig {
			return "config imports nothing of the mesh: it only reads and checks the configuration"
		}
	case kMesh:
		if to.kind != kConfig && to.kind != kMesh {
			return "mesh imports no role, bridge, heartbeat or cmd package: it holds the contracts they share"
		}
	case kHeartbeat:
		if to.kind != kConfig && to.kind != kMesh {
			return "heartbeat imports no role, bridge or cmd package: every process sends it"
		}
	case kRole:
		switch to.kind {
		case kConfig, kMesh, kHeartbeat:
		case kRole:
			return "no role imports another role: what two roles need goes to mesh/..."
		default:
			return "a role imports no bridge or cmd package: only cmd wires roles"
		}
	case kBridge, kShared, kProtocol:
		switch to.kind {
		case kConfig, kMesh:
		case kRole, kCmd, kHeartbeat:
			return "the bridge imports no role, heartbeat or cmd package: it finds the roles through NATS"
		case kShared:
		case kBridge:
			return "only cmd imports the bridge package that wires the protocols"
		case kProtocol:
			if from.kind != kBridge {
				return "a bridge protocol package imports no other one: what they share goes to bridge/core"
			}
		}
	case kCmd:
		if to.kind == kCmd {
			return "a command imports no other command"
		}
	}
	return ""
}

// listed is what the test reads of `go list -json`.
type listed struct {
	ImportPath   string
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
	DepsErrors   []*struct{ Err string }
}

// modulePackages lists every package of the module.
func modulePackages(t *testing.T) (module string, pkgs map[string]*listed) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("go env GOMOD: %v %s", err, out)
	}
	root := filepath.Dir(string(bytes.TrimSpace(out)))
	modOut, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module = string(bytes.TrimSpace(modOut))
	cmd := exec.Command("go", "list", "-e", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	pkgs = map[string]*listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		for _, e := range p.DepsErrors {
			t.Errorf("%s: %s", p.ImportPath, e.Err)
		}
		pkgs[p.ImportPath] = &p
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package")
	}
	return module, pkgs
}

// path is the shortest chain of imports from one package to another.
func path(pkgs map[string]*listed, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var chain []string
			for p := to; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		if p := pkgs[cur]; p != nil {
			for _, next := range p.Imports {
				if _, seen := prev[next]; !seen {
					prev[next] = cur
					queue = append(queue, next)
				}
			}
		}
	}
	return []string{from, "…", to}
}

func TestWalls(t *testing.T) {
	module, pkgs := modulePackages(t)
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := pkgs[name]
		from, _ := rel(name)
		fp, ok := placeOf(from)
		if !ok {
			t.Errorf("%s is in no place of the walls: give it one in walls_test.go and ARCHITECTURE.md", from)
			continue
		}
		check := func(imp string, test bool) {
			to, ok := rel(imp)
			if !ok || to == from {
				return
			}
			tp, ok := placeOf(to)
			if !ok {
				return // reported as a package of its own
			}
			why := wall(fp, tp, test)
			if why == "" {
				return
			}
			if test {
				t.Errorf("the tests of %s import %s: %s", from, to, why)
				return
			}
			chain := path(pkgs, name, imp)
			for i, c := range chain {
				chain[i], _ = rel(c)
			}
			t.Errorf("%s imports %s (%s): %s", from, to, strings.Join(chain, " → "), why)
		}
		for _, dep := range p.Deps {
			check(dep, false)
		}
		for _, imp := range append(slices.Clone(p.TestImports), p.XTestImports...) {
			if !slices.Contains(p.Deps, imp) {
				check(imp, true)
			}
		}
	}
}

// TestWallsRules pins the rules themselves, so that a change to them is a
// change of this table too.
func TestWallsRules(t *testing.T) {
	tests := []struct {
		from, to string
		test     bool
		want     bool // allowed
	}{
		{"mesh", "config", false, true},
		{"mesh/llm", "mesh", false, true},
		{"mesh/meshtest", "mesh", false, true},
		{"mesh", "nodes/agent", false, false},
		{"mesh/llm", "nodes/group", false, false},
		{"mesh", "bridge/core", false, false},
		{"mesh", "heartbeat", false, false},
		{"mesh", "cmd/mesh", false, false},
		{"mesh", "nodes/agent", true, false},
		{"heartbeat", "mesh", false, true},
		{"heartbeat", "nodes/monitor", false, false},
		{"heartbeat", "bridge", false, false},
		{"config", "mesh", false, false},
		{"nodes/monitor", "heartbeat", false, true},
		{"nodes/agent", "mesh/llm", false, true},
		{"nodes/group", "nodes/agent", false, false},
		{"nodes/group", "nodes/agent", true, false},
		{"nodes/agent", "bridge/core", false, false},
		{"nodes/agent", "cmd/mesh", false, false},
		{"bridge", "bridge/agui", false, true},
		{"bridge/agui", "bridge/core", false, true},
		{"bridge/a2a", "bridge/sse", false, true},
		{"bridge/agui", "bridge/rest", false, false},
		{"bridge/agui", "bridge/rest", true, true},
		{"bridge/core", "bridge/agui", false, false},
		{"bridge/agui", "bridge", false, false},
		{"bridge/agui", "nodes/agent", false, false},
		{"bridge/agui", "nodes/agent", true, true},
		{"bridge/core", "heartbeat", false, false},
		{"cmd/mesh", "nodes/agent", false, true},
		{"cmd/mesh", "bridge", false, true},
		{"cmd/mesh", "cmd/mcp-resources", false, false},
	}
	for _, tt := range tests {
		from, ok1 := placeOf(tt.from)
		to, ok2 := placeOf(tt.to)
		if !ok1 || !ok2 {
			t.Fatalf("%s or %s has no place", tt.from, tt.to)
		}
		why := wall(from, to, tt.test)
		if got := why == ""; got != tt.want {
			t.Errorf("%s → %s (test %v): allowed = %v, want %v (%s)", tt.from, tt.to, tt.test, got, tt.want, why)
		}
	}
	if _, ok := placeOf("internal/x"); ok {
		t.Error("a package outside the known places was placed")
	}
}
