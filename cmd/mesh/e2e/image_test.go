package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// imageUID is the user the image runs as (distroless's nonroot).
const imageUID = 65532

// TestImageRunsAsItsUser runs what the image holds the way the image runs
// it: the file system laid out as the Dockerfile lays it (the binaries in
// /usr/local/bin, deploy/agent.yaml at MESH_CONFIG, the volumes'
// directories owned by the image's user, the credentials' one 0700), its
// ENTRYPOINT and CMD with its ENV, as its user 65532 rather than root. The
// mesh becomes ready, a user lists the sample server's resources, and the
// data it writes is the image user's. No container engine runs on the test
// machine, so the image itself is not built: its base image adds nothing a
// static binary needs, and TestClusterDeployImage checks the build lines.
func TestImageRunsAsItsUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if ciRun() {
			t.Fatal("this test runs the mesh as the image's user, which needs root; CI runs as root")
		}
		t.Skip("running the mesh as the image's user needs root")
	}
	st := dockerfile(t)
	root := t.TempDir()
	// The test's temporary directories are root's only: the image's user
	// must be able to reach its file system.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	at := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	bin := at("/usr/local/bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"mesh", "mcp-resources"} {
		data, err := os.ReadFile(filepath.Join(binDir, b))
		if err == nil {
			err = os.WriteFile(filepath.Join(bin, b), data, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// COPY deploy/agent.yaml <MESH_CONFIG>, and the volumes' directories
	// (RUN mkdir …, COPY --chown=65532:65532).
	config := st.env["MESH_CONFIG"]
	data, err := os.ReadFile("../../../deploy/agent.yaml")
	if err == nil {
		err = os.MkdirAll(filepath.Dir(at(config)), 0o755)
	}
	if err == nil {
		err = os.WriteFile(at(config), data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	home := at("/home/nonroot")
	for dir, mode := range map[string]os.FileMode{st.env["MESH_DATA_DIR"]: 0o755, st.env["MESH_NATS_CREDS_DIR"]: 0o700, "/home/nonroot": 0o700} {
		if err := os.MkdirAll(at(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for p := at(dir); strings.HasPrefix(p, at("/var/lib/mesh")) || p == home; p = filepath.Dir(p) {
			if err := os.Chown(p, imageUID, imageUID); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(at(dir), mode); err != nil {
			t.Fatal(err)
		}
	}

	m := &meshProc{t: t, dir: t.TempDir(), httpAddr: freeAddr(t), natsAddr: freeAddr(t)}
	m.logPath = filepath.Join(m.dir, "mesh.log")
	tokens := map[string]string{"MESH_USER_TOKEN": "image-user-token-0123456789", "MESH_APPROVER_TOKEN": "image-approver-token-0123456789",
		"MESH_ADMIN_TOKEN": "image-admin-token-0123456789", "MESH_STREAM_KEY": "image-stream-key-0123456789abcdef0123"}
	// The image's ENV, its paths under root; what a deployment adds (the
	// tokens, the addresses a test needs free).
	env := []string{"PATH=" + bin, "HOME=" + home, "NATS_URL=", "NATS_CREDS=", "NATS_NKEY=", testMCPEnv + "=",
		"MESH_HTTP_ADDR=" + m.httpAddr, "MESH_NATS_ADDR=" + m.natsAddr, "MESH_LOG_LEVEL=info"}
	for k, v := range st.env {
		if strings.HasPrefix(v, "/") {
			v = at(v)
		}
		env = append(env, k+"="+v)
	}
	for k, v := range tokens {
		env = append(env, k+"="+v)
	}
	if gorace := os.Getenv("GORACE"); gorace != "" {
		env = append(env, "GORACE="+gorace)
	}
	lp := newLogPipe(t, m.logPath)
	cmd := exec.Command(at(st.entrypoint[0]), st.cmd...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = meshProcAttr()
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: imageUID, Gid: imageUID}
	if err := lp.start(cmd); err != nil {
		t.Fatal(err)
	}
	m.cmd, m.log = cmd, lp
	t.Cleanup(func() {
		m.stop()
		checkLogLines(t, m.logPath)
	})
	m.waitReady()

	status, out := m.try("POST", "/conversations", map[string]any{"message": "list all resources"}, "Authorization", "Bearer "+tokens["MESH_USER_TOKEN"])
	if status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("a turn on the image's mesh: %d %v\n%s", status, out, tail(m.logs(), 40))
	}
	if answer := str(out, "result", "response"); !strings.Contains(strings.ToLower(answer), "resource") {
		t.Errorf("the turn's answer %v does not come from resources_list", out)
	}
	// What the mesh and the sample server stored is the image user's.
	var foreign []string
	_ = filepath.WalkDir(at(st.env["MESH_DATA_DIR"]), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if s, ok := info.Sys().(*syscall.Stat_t); ok && s.Uid != imageUID {
				foreign = append(foreign, p)
			}
		}
		return nil
	})
	if len(foreign) > 0 {
		t.Errorf("files in the data volume not owned by the image's user: %v", foreign)
	}
	if _, err := os.Stat(filepath.Join(at(st.env["MESH_DATA_DIR"]), "resources.db")); err != nil {
		t.Errorf("the sample server's database in the data volume: %v", err)
	}
}
