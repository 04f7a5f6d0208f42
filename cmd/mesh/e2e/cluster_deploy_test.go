package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentmesh/agentmesh/mesh"
)

// No containers run here: the compose file, the manifests and the
// Dockerfile are checked against the real binary instead. Every command
// they run must be a subcommand `mesh help` lists, with flags that
// subcommand's own flag set takes, and every variable they set one the
// binary reads (`mesh help` names them) or the image's agent.yaml uses.

// meshCLI is what the binary says it accepts.
type meshCLI struct {
	commands map[string]bool
	env      map[string]bool
}

func readMeshCLI(t *testing.T) meshCLI {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "mesh"), "help").Output()
	if err != nil {
		t.Fatalf("mesh help: %v", err)
	}
	cli := meshCLI{commands: map[string]bool{}, env: map[string]bool{}}
	inCommands := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "Available Commands:":
			inCommands = true
		case inCommands && strings.HasPrefix(line, "  "):
			cli.commands[strings.Fields(line)[0]] = true
		case inCommands && line == "":
			inCommands = false
		}
	}
	for _, v := range regexp.MustCompile(`\b(?:MESH|NATS)_[A-Z_]+|\b[A-Z]+_API_KEY\b`).FindAllString(string(out), -1) {
		cli.env[v] = true
	}
	// The image's agent.yaml reads its secrets from ${NAME}.
	conf, err := os.ReadFile("../../../deploy/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Z_]+)\}`).FindAllStringSubmatch(string(conf), -1) {
		cli.env[m[1]] = true
	}
	for _, c := range []string{"agent", "creds"} {
		if !cli.commands[c] {
			t.Fatalf("mesh help lists commands %v, want %s among them", slices.Sorted(maps.Keys(cli.commands)), c)
		}
	}
	for _, v := range []string{"MESH_NATS_ROUTES", "MESH_HEALTH_ADDR"} {
		if !cli.env[v] {
			t.Fatalf("mesh help lists variables %v, want %s among them", slices.Sorted(maps.Keys(cli.env)), v)
		}
	}
	return cli
}

// checkCommand fails t unless args is a subcommand with flags it takes.
func (cli meshCLI) checkCommand(t *testing.T, where string, args []string) {
	t.Helper()
	if len(args) == 0 || !cli.commands[args[0]] {
		t.Errorf("%s: command %q is not a mesh subcommand (%v)", where, args, slices.Sorted(maps.Keys(cli.commands)))
		return
	}
	var flags []string
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") {
			flags = append(flags, strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-"))
		}
	}
	if len(flags) == 0 {
		return
	}
	// Only a command with flags gets --help: the others would start.
	cmd := exec.Command(filepath.Join(binDir, "mesh"), args[0], "--help")
	cmd.Env = append(os.Environ(), "MESH_CONFIG=../../../deploy/agent.yaml")
	out, _ := cmd.CombinedOutput()
	for _, f := range flags {
		if !strings.Contains(string(out), "  -"+f+" ") {
			t.Errorf("%s: mesh %s takes no flag -%s:\n%s", where, args[0], f, out)
		}
	}
}

func (cli meshCLI) checkEnv(t *testing.T, where string, names []string) {
	t.Helper()
	for _, n := range names {
		if !cli.env[n] {
			t.Errorf("%s: variable %s is not one the mesh binary reads", where, n)
		}
	}
}

// roleServices are the roles every deployment runs, beside NATS.
var roleServices = []string{"bridge", "agent", "toolhost", "approver", "monitor"}

func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	root, _ := filepath.Abs("../../..")
	return loader.LoadWithContext(t.Context(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yaml")}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("agentmesh", true) })
}

// TestClusterDeployCompose loads docker-compose.yaml with the Compose
// specification's own loader and checks it against the binary: 3 NATS
// nodes as a cluster with JetStream volumes and routes between them, the
// roles (2 agents, 2 tool hosts), health checks on /ready through the
// binary's own healthcheck, credentials written once and mounted where the
// image looks for them, and HTTP tokens required.
func TestClusterDeployCompose(t *testing.T) {
	t.Parallel()
	cli := readMeshCLI(t)
	if _, err := loadCompose(t, nil); err == nil || !strings.Contains(err.Error(), "MESH_USER_TOKEN") {
		t.Errorf("the compose file loads without the bridge's tokens: %v", err)
	}
	p, err := loadCompose(t, envFile(t, "../../../deploy/compose.env.example"))
	if err != nil {
		t.Fatalf("compose-go: %v", err)
	}
	want := []string{"agent-1", "agent-2", "approver", "bridge", "creds", "monitor", "nats-1", "nats-2", "nats-3", "toolhost-1", "toolhost-2"}
	if got := slices.Sorted(maps.Keys(p.Services)); !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	credsDir := imageEnv(t)["MESH_NATS_CREDS_DIR"]
	var routes []string
	for name, s := range p.Services {
		where := "service " + name
		cli.checkCommand(t, where, s.Command)
		cli.checkEnv(t, where, slices.Collect(maps.Keys(s.Environment)))
		if s.Build == nil || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s: not built from deploy/Dockerfile: %+v", where, s.Build)
		}
		if !mounts(s.Volumes, "creds", credsDir) {
			t.Errorf("%s: the creds volume is not at %s", where, credsDir)
		}
		if name != "creds" {
			if d, ok := s.DependsOn["creds"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("%s: does not wait for the credentials: %+v", where, s.DependsOn)
			}
		}
		env := func(k string) string {
			if v := s.Environment[k]; v != nil {
				return *v
			}
			return ""
		}
		switch role := strings.TrimRight(name, "-0123456789"); {
		case role == "nats":
			if env("MESH_NATS_SERVER_NAME") != name || env("MESH_NATS_REPLICAS") != "3" || env("MESH_NATS_CLUSTER_LISTEN") == "" {
				t.Errorf("%s: not a named cluster node with R3: %v", where, s.Environment)
			}
			routes = append(routes, env("MESH_NATS_ROUTES"))
			if !mounts(s.Volumes, name, "/var/lib/mesh/data") {
				t.Errorf("%s: no volume for its JetStream store", where)
			}
			checkHealthcheck(t, where, s.HealthCheck, env("MESH_NATS_MONITOR_ADDR"), "/healthz")
		case role == "creds":
			if s.Command[0] != "creds" {
				t.Errorf("%s: runs %v", where, s.Command)
			}
		case slices.Contains(roleServices, role):
			if s.Command[0] != role {
				t.Errorf("%s runs %v", where, s.Command)
			}
			if !strings.Contains(env("NATS_URL"), "nats-1:4222") || strings.Count(env("NATS_URL"), ",") != 2 {
				t.Errorf("%s: NATS_URL %q does not list the three nodes", where, env("NATS_URL"))
			}
			for _, n := range []string{"nats-1", "nats-2", "nats-3"} {
				if s.DependsOn[n].Condition != types.ServiceConditionHealthy {
					t.Errorf("%s: does not wait for %s to be healthy", where, n)
				}
			}
			addr := env("MESH_HEALTH_ADDR")
			if role == "bridge" {
				addr = env("MESH_HTTP_ADDR")
			}
			checkHealthcheck(t, where, s.HealthCheck, addr, "/ready")
		default:
			t.Errorf("%s: unexpected", where)
		}
	}
	for _, r := range routes {
		if r != "nats-1:6222,nats-2:6222,nats-3:6222" {
			t.Errorf("routes %q do not name the three nodes", r)
		}
	}
}

// mounts reports whether vols mount the named volume at target.
func mounts(vols []types.ServiceVolumeConfig, source, target string) bool {
	for _, v := range vols {
		if v.Type == types.VolumeTypeVolume && v.Source == source && v.Target == target {
			return true
		}
	}
	return false
}

// checkHealthcheck wants the binary's healthcheck of path on the port of addr.
func checkHealthcheck(t *testing.T, where string, h *types.HealthCheckConfig, addr, path string) {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: listen address %q: %v", where, addr, err)
		return
	}
	want := []string{"CMD", "/usr/local/bin/mesh", "healthcheck", "http://127.0.0.1:" + port + path}
	switch {
	case h == nil:
		t.Errorf("%s: no health check, want %v", where, want)
	case len(h.Test) != 4:
		t.Errorf("%s: health check %q, want 4 words %q", where, h.Test, want)
	case !slices.Equal(h.Test[:3], want[:3]):
		t.Errorf("%s: health check runs %q, want %q", where, h.Test[:3], want[:3])
	case !strings.HasPrefix(h.Test[3], want[3]):
		t.Errorf("%s: health check of %q, want %q", where, h.Test[3], want[3])
	}
}

// imageEnv is the ENV of deploy/Dockerfile's final stage.
func imageEnv(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	for k, v := range dockerfile(t).env {
		env[k] = v
	}
	return env
}

type dockerStage struct {
	from, user string
	entrypoint []string
	cmd        []string
	env        map[string]string
	lines      []string
}

// dockerfile reads deploy/Dockerfile's final stage (continuation lines
// joined).
func dockerfile(t *testing.T) dockerStage {
	t.Helper()
	data, err := os.ReadFile("../../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var st dockerStage
	var all []string
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		all = append(all, line)
		instr, rest, _ := strings.Cut(line, " ")
		switch instr {
		case "FROM":
			st = dockerStage{from: rest, env: map[string]string{}}
		case "USER":
			st.user = rest
		case "ENTRYPOINT":
			_ = json.Unmarshal([]byte(rest), &st.entrypoint)
		case "CMD":
			_ = json.Unmarshal([]byte(rest), &st.cmd)
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					st.env[k] = v
				}
			}
		}
		st.lines = append(st.lines, line)
	}
	st.lines = all
	return st
}

// TestClusterDeployImage checks the Dockerfile: a multi-stage build of a
// static binary into a small non-root image whose entrypoint is that
// binary, with the sample MCP server beside it; and runs the binary the
// entrypoint names with `version`, and its configuration (the image's
// agent.yaml) through a real command.
func TestClusterDeployImage(t *testing.T) {
	t.Parallel()
	st := dockerfile(t)
	cli := readMeshCLI(t)
	if !strings.Contains(st.from, "distroless/static") || !strings.Contains(st.from, "nonroot") {
		t.Errorf("final stage FROM %s, want distroless/static:nonroot", st.from)
	}
	if st.user != "65532:65532" {
		t.Errorf("USER %q, want the nonroot user", st.user)
	}
	if !slices.Equal(st.entrypoint, []string{"/usr/local/bin/mesh"}) || len(st.cmd) == 0 {
		t.Fatalf("ENTRYPOINT %v CMD %v", st.entrypoint, st.cmd)
	}
	cli.checkCommand(t, "CMD", st.cmd)
	cli.checkEnv(t, "ENV", slices.Collect(maps.Keys(st.env)))
	text := strings.Join(st.lines, "\n")
	for _, want := range []string{
		"CGO_ENABLED=0 go build", "-o /out/mesh ./cmd/mesh", `CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/mcp-resources ./cmd/mcp-resources`,
		"COPY --from=build /out/mesh /out/mcp-resources /usr/local/bin/", "COPY deploy/agent.yaml " + st.env["MESH_CONFIG"],
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// What the entrypoint runs: the binary built from ./cmd/mesh.
	// It names its release, the commit it was built from and the format
	// of what it stores.
	out, err := exec.Command(filepath.Join(binDir, "mesh"), "version").CombinedOutput()
	if want := fmt.Sprintf("mesh %s (commit %s, stored format %d)\n", mesh.Release, testCommit, mesh.StoreFormat); err != nil || string(out) != want {
		t.Errorf("mesh version: %v %q, want %q", err, out, want)
	}
	// The image's configuration loads, and `mesh creds` (the compose
	// file's first service) writes what the manifests' Secret holds.
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "mesh"), "creds", "--dir", dir)
	cmd.Env = append(os.Environ(), "MESH_CONFIG=../../../deploy/agent.yaml", "MESH_DATA_DIR="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mesh creds with the image's agent.yaml: %v\n%s", err, out)
	}
}

// credsFiles are the files `mesh creds` writes that roles and servers read.
func credsFiles(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "mesh"), "creds", "--dir", dir)
	cmd.Env = append(os.Environ(), "MESH_CONFIG=../../../deploy/agent.yaml", "MESH_DATA_DIR="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mesh creds: %v\n%s", err, out)
	}
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".nk") || strings.HasSuffix(n, ".secret") {
			out = append(out, n)
		}
	}
	return out
}

// kustomization is the part of kustomize's file the layout uses; unknown
// fields fail the strict decoding.
type kustomization struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Namespace  string            `json:"namespace,omitempty"`
	Labels     []json.RawMessage `json:"labels,omitempty"`
	Resources  []string          `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path string `json:"path"`
	} `json:"patches,omitempty"`
}

// k8sObjects decodes every document of the manifests strictly into its
// Kubernetes API type, by kind.
type k8sObjects struct {
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	secrets      map[string]*corev1.Secret
	ingresses    map[string]*networkingv1.Ingress
	budgets      map[string]*policyv1.PodDisruptionBudget
	namespaces   map[string]*corev1.Namespace
}

func decodeManifests(t *testing.T, dir string, files []string) k8sObjects {
	t.Helper()
	o := k8sObjects{deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		services: map[string]*corev1.Service{}, secrets: map[string]*corev1.Secret{}, ingresses: map[string]*networkingv1.Ingress{},
		namespaces: map[string]*corev1.Namespace{}, budgets: map[string]*policyv1.PodDisruptionBudget{}}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			where := fmt.Sprintf("%s document %d", f, i+1)
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind == "" {
				t.Errorf("%s: no kind: %v", where, err)
				continue
			}
			var dst any
			switch meta.Kind {
			case "Deployment":
				d := &appsv1.Deployment{}
				o.deployments[meta.Metadata.Name], dst = d, d
			case "StatefulSet":
				s := &appsv1.StatefulSet{}
				o.statefulSets[meta.Metadata.Name], dst = s, s
			case "Service":
				s := &corev1.Service{}
				o.services[meta.Metadata.Name], dst = s, s
			case "Secret":
				s := &corev1.Secret{}
				o.secrets[meta.Metadata.Name], dst = s, s
			case "Ingress":
				s := &networkingv1.Ingress{}
				o.ingresses[meta.Metadata.Name], dst = s, s
			case "Namespace":
				s := &corev1.Namespace{}
				o.namespaces[meta.Metadata.Name], dst = s, s
			case "PodDisruptionBudget":
				s := &policyv1.PodDisruptionBudget{}
				o.budgets[meta.Metadata.Name], dst = s, s
			default:
				t.Errorf("%s: kind %s is not checked", where, meta.Kind)
				continue
			}
			if err := yaml.UnmarshalStrict([]byte(doc), dst); err != nil {
				t.Errorf("%s (%s %s): %v", where, meta.Kind, meta.Metadata.Name, err)
			}
		}
	}
	return o
}

// TestClusterDeployBuildAll checks that `make build-all` names the six
// platforms (Linux, macOS and Windows on amd64 and arm64) and that the
// binary cross-compiles for one that is not this machine's (windows/amd64,
// as make build-all does it).
func TestClusterDeployBuildAll(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a cross-compilation takes a while")
	}
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PLATFORMS\s*:=\s*(.+)$`).FindSubmatch(mk)
	want := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64", "windows/arm64"}
	if m == nil || !slices.Equal(slices.Sorted(slices.Values(strings.Fields(string(m[1])))), want) {
		t.Fatalf("Makefile PLATFORMS = %q, want %v", m, want)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(t.TempDir(), "mesh.exe"), "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=windows", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mesh for windows/amd64: %v\n%s", err, out)
	}
}

// TestMakeCheckRunsLintThenTests checks that `make check`, the one command
// to run before sending a change, runs the linters and the whole suite.
func TestMakeCheckRunsLintThenTests(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not on PATH")
	}
	cmd := exec.Command("make", "-n", "check")
	cmd.Dir = "../../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n check: %v\n%s", err, out)
	}
	plan := string(out)
	steps := []string{"gofmt -l", "go mod tidy -diff", "go vet ./...", "staticcheck", "go test -race", "go test -race -count=1"}
	at := 0
	for _, step := range steps {
		i := strings.Index(plan[at:], step)
		if i < 0 {
			t.Fatalf("make check does not run %q after the steps before it; it runs:\n%s", step, plan)
		}
		at += i + len(step)
	}
}
