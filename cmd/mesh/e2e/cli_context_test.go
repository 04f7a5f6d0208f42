package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The terminal commands reach a mesh on any ports from its data directory
// alone (the context `mesh up` writes there), or from a context file
// written by hand elsewhere (MESH_CONTEXT), its identity path relative to
// it; a MESH_CONTEXT that cannot be read says so.
func TestCLIReachesAMeshFromItsContext(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{logLevel: "info"})
	conv := str(m.do(201, "POST", "/conversations", map[string]any{"message": "list all resources"}), "conversation", "id")
	// Neither the bridge's nor the NATS server's address: the defaults
	// (8080, 4222) are not this mesh's.
	onlyDataDir := []string{"MESH_HTTP_ADDR=", "MESH_NATS_ADDR="}
	check := func(how string, env []string) {
		t.Helper()
		if r := m.mustCLI(0, "", env, "sessions"); !strings.Contains(r.stdout, conv) {
			t.Errorf("%s: mesh sessions does not list %s:\n%s", how, conv, r)
		}
		if r := m.mustCLI(0, "", env, "status"); !strings.Contains(r.stdout, "bridge") {
			t.Errorf("%s: mesh status lists no bridge:\n%s", how, r)
		}
		m.mustCLI(0, "", env, "approve") // the bridge's GET /approvals
	}
	check("MESH_DATA_DIR", onlyDataDir)

	dir := t.TempDir()
	seed, err := os.ReadFile(filepath.Join(m.dataDir, "creds", "admin.nk"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.nk"), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	ctxFile, _ := json.Marshal(map[string]string{"url": m.url(""), "nats_url": "nats://" + m.natsAddr, "nkey": "admin.nk"})
	if err := os.WriteFile(filepath.Join(dir, "prod.json"), ctxFile, 0o600); err != nil {
		t.Fatal(err)
	}
	check("MESH_CONTEXT", append(onlyDataDir, "MESH_DATA_DIR="+t.TempDir(), "MESH_CONTEXT="+filepath.Join(dir, "prod.json")))

	r := m.cli("", append(onlyDataDir, "MESH_CONTEXT="+filepath.Join(dir, "missing.json")), "sessions")
	if r.code == 0 || !strings.Contains(r.stderr, "MESH_CONTEXT") {
		t.Errorf("a MESH_CONTEXT that is not there: want an error naming it, got\n%s", r)
	}
}
