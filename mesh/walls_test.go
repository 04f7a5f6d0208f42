package mesh_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The walls between the module's packages (ARCHITECTURE.md, package map).
// A package may import, within the module:
//
//	config            mesh/llm/modelspec only: the model types it fills
//	mesh/...          the rooms of mesh below them (meshRooms)
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
// no role or bridge; config imports nothing of the mesh but the model types
// it fills. A package in none of these places fails the test until it is
// given one here.
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
		room := "mesh"
		if len(parts) > 1 {
			room = "mesh/" + parts[1]
		}
		// A package that meshRooms names stands in a room of its own,
		// apart from its parent's (mesh/llm/modelspec from mesh/llm).
		if len(parts) > 2 {
			if _, own := meshRooms[strings.Join(parts[:3], "/")]; own {
				room = strings.Join(parts[:3], "/")
			}
		}
		return place{kind: kMesh, unit: room}, true
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

// meshRooms are the packages of mesh/ by job, each with what its whole
// dependency closure may hold within the module. The shared contracts
// (mesh) import nothing; each job imports the contracts and the few rooms
// it builds on. A room is mesh/<name> and what lies below it, unless a
// package below is a room of its own here.
var meshRooms = map[string][]string{
	"mesh":            nil,
	"mesh/internal":   nil,
	"mesh/telemetry":  nil,
	"mesh/memory":     nil,
	"mesh/natsconn":   nil,
	"mesh/limits":     nil,
	"mesh/identity":   {"mesh"},
	"mesh/role":       {"mesh"},
	"mesh/replay":     {"mesh"},
	"mesh/bus":        {"mesh", "mesh/telemetry"},
	"mesh/workloop":   {"mesh", "mesh/telemetry"},
	"mesh/store":      {"mesh", "mesh/telemetry", "mesh/memory", "mesh/internal"},
	"mesh/natsserver": {"mesh", "mesh/identity", "mesh/natsconn"},
	"mesh/a2a":        {"mesh/telemetry"},
	"mesh/llm":        {"mesh/llm/modelspec", "mesh/telemetry", "mesh/internal"},
	"mesh/meshtest":   {"mesh/..."},
	// The model types config fills: a leaf, so that config depends on
	// nothing else of the mesh.
	"mesh/llm/modelspec": nil,
	// The factory of providers from a configuration: the one package of
	// the model clients that takes the whole configuration.
	"mesh/llm/models": {"config", "mesh/llm", "mesh/llm/modelspec", "mesh/telemetry", "mesh/internal"},
}

// configRooms are the rooms of mesh/ that config may import: the types it
// fills from the file and the environment, which import nothing.
var configRooms = []string{"mesh/llm/modelspec"}

// wall returns why from may not import to, or "" when it may; test says
// the import is made by from's tests only.
func wall(from, to place, test bool) string {
	if from.unit != "" && from.unit == to.unit {
		return "" // within one role, protocol or command
	}
	if test && (from.kind == kBridge || from.kind == kShared || from.kind == kProtocol) && (to.kind == kRole || strings.HasPrefix(to.kind, "bridge")) {
		return "" // a bridge test fixture wires roles and routes, as cmd does
	}
	if test && from.kind == kMesh && to.kind == kMesh {
		return "" // a test of one room starts a server, a store, what it needs
	}
	switch from.kind {
	case kConfig:
		if to.kind == kMesh && slices.Contains(configRooms, to.unit) {
			return ""
		}
		if to.kind != kConfig {
			return "config imports nothing of the mesh but the model types it fills (configRooms): it only reads and checks the configuration"
		}
	case kMesh:
		if to.kind != kConfig && to.kind != kMesh {
			return "mesh imports no role, bridge, heartbeat or cmd package: it holds the contracts they share"
		}
		allowed, known := meshRooms[from.unit]
		if !known {
			return "the room " + from.unit + " is not in meshRooms: say what it may import"
		}
		target := to.unit
		if to.kind == kConfig {
			target = kConfig
		}
		if !slices.Contains(allowed, target) && !slices.Contains(allowed, "mesh/...") {
			return from.unit + " may import only " + strings.Join(allowed, ", ") + " (meshRooms): it has one job"
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
	Dir          string
	GoFiles      []string
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
		{"mesh", "config", false, false},
		{"mesh", "mesh/store", false, false},
		{"mesh/store", "mesh", false, true},
		{"mesh/store", "mesh/identity", false, false},
		{"mesh/identity", "mesh/store", false, false},
		{"mesh/natsserver", "mesh/identity", false, true},
		{"mesh/bus", "mesh/store", false, false},
		{"mesh/workloop", "mesh/bus", false, false},
		{"mesh/llm", "mesh", false, false},
		{"mesh/llm", "config", false, false},
		{"mesh/llm/offline", "config", false, false},
		{"mesh/llm/llmtest", "config", true, false},
		{"mesh/llm/models", "config", false, true},
		{"mesh/llm/models", "mesh/llm", false, true},
		{"mesh/llm", "mesh/llm/models", false, false},
		{"mesh/llm/offline", "mesh/llm", false, true},
		{"mesh/meshtest", "mesh", false, true},
		{"mesh/meshtest", "mesh/store", false, true},
		{"mesh/store", "mesh/natsserver", true, true},
		{"mesh/store", "nodes/agent", true, false},
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
		{"config", "mesh/llm/modelspec", false, true},
		{"config", "mesh/llm", false, false},
		{"mesh/llm/modelspec", "config", false, false},
		{"mesh/llm/modelspec", "mesh/llm", false, false},
		{"mesh/llm", "mesh/llm/modelspec", false, true},
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

// Who reads the environment and files, and why. Settings come from config:
// the environment is read by config, and by the commands, which own the
// process and give a role what it needs of it (a tool host the
// environment its MCP servers' are drawn from). A file is read by the
// package that owns what it holds, at a path config gives.
var (
	envReaders = map[string]string{
		"config": "the settings of the environment (MESH_*, NATS_*, ${VAR} in the configuration)",
		"cmd":    "the commands own the process: GOGC, GOMAXPROCS, the environment of the children of mesh up",
	}
	fileReaders = map[string]string{
		"config":         "the configuration file",
		"cmd":            "the commands own the process: data directory, credentials files, profiles, logs",
		"mesh/identity":  "the seeds, the signing keys and the route secret of the credentials directory",
		"mesh/memory":    "/proc/self/smaps: what the process maps, to give memory back",
		"mesh/meshtest":  "helpers of tests: golden files, the ports the kernel gives",
		"bridge/auth":    "the stream key and a JWKS file",
		"nodes/toolhost": "an MCP server's command, looked for on disk",
	}
	envCalls  = []string{"Getenv", "LookupEnv", "Environ", "Setenv", "Unsetenv", "Clearenv", "ExpandEnv"}
	fileCalls = []string{"ReadFile", "Open", "OpenFile", "Create", "CreateTemp", "WriteFile", "ReadDir", "Mkdir", "MkdirAll",
		"MkdirTemp", "Remove", "RemoveAll", "Rename", "Stat", "Lstat", "Chmod", "Chown", "Symlink", "Readlink", "Truncate", "DirFS"}
)

// readerRoom is the key of envReaders and fileReaders a package falls
// under: cmd for every command, else its own path (a mesh room for its
// sub-packages).
func readerRoom(rel string) string {
	p, _ := placeOf(rel)
	switch {
	case p.kind == kCmd:
		return "cmd"
	case p.kind == kMesh:
		return p.unit
	}
	return rel
}

// TestFilesAndEnvironment finds every call of the os package that reads
// the environment or a file in the module's non-test code, and fails on
// one made where envReaders or fileReaders do not say why.
func TestFilesAndEnvironment(t *testing.T) {
	module, pkgs := modulePackages(t)
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		room := readerRoom(rel)
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			for _, call := range osCalls(t, path) {
				switch {
				case slices.Contains(envCalls, call.name) && envReaders[room] == "":
					t.Errorf("%s: os.%s reads the environment in %s: only config and the commands do (envReaders)", call.pos, call.name, rel)
				case slices.Contains(fileCalls, call.name) && fileReaders[room] == "":
					t.Errorf("%s: os.%s touches a file in %s, which owns none (fileReaders)", call.pos, call.name, rel)
				}
			}
		}
	}
}

type osCall struct{ name, pos string }

// osCalls are the calls os.<Name>(…) of a Go file, with the os package
// imported under its name.
func osCalls(t *testing.T, path string) []osCall {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	imported := false
	for _, im := range f.Imports {
		if im.Path.Value == `"os"` && (im.Name == nil || im.Name.Name == "os") {
			imported = true
		}
	}
	if !imported {
		return nil
	}
	var out []osCall
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" {
			out = append(out, osCall{sel.Sel.Name, fset.Position(call.Pos()).String()})
		}
		return true
	})
	return out
}

// The rule finds what it is written for: a package that reads the
// environment, or a file, without a reason.
func TestFilesAndEnvironmentRule(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.go")
	src := "package x\n\nimport \"os\"\n\nfunc f() { _ = os.Getenv(\"HOME\"); _, _ = os.ReadFile(\"k\"); _ = os.Args }\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range osCalls(t, path) {
		names = append(names, c.name)
	}
	if !slices.Equal(names, []string{"Getenv", "ReadFile"}) {
		t.Errorf("calls found: %v, want Getenv and ReadFile", names)
	}
	for rel, want := range map[string][2]bool{
		"config": {true, true}, "cmd/mesh": {true, true}, "cmd/mcp-resources": {true, true},
		"mesh/identity": {false, true}, "mesh/store": {false, false}, "nodes/agent": {false, false},
		"bridge/auth": {false, true}, "bridge/core": {false, false}, "nodes/toolhost": {false, true},
	} {
		room := readerRoom(rel)
		if got := [2]bool{envReaders[room] != "", fileReaders[room] != ""}; got != want {
			t.Errorf("%s: reads the environment, files = %v, want %v", rel, got, want)
		}
	}
}
