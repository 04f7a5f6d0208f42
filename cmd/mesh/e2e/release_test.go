package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// A data directory a newer release wrote is refused at start, before
// anything serves, with a message naming both stored formats; the data is
// left as it was.
func TestUpRefusesADataDirectoryOfANewerFormat(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	m.firstTurn("list all resources")
	js, err := jetstream.New(m.adminNATS(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), "KV_mesh_sessions")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Metadata = map[string]string{store.FormatKey: fmt.Sprint(mesh.StoreFormat + 1)}
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	m.stop()

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "mesh"), "up")
	cmd.Env = m.cliEnv()
	cmd.SysProcAttr = meshProcAttr()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mesh up on a newer data directory did not stop:\n%s", out)
	}
	want := fmt.Sprintf("holds stored format %d, and this mesh (%s) reads format %d", mesh.StoreFormat+1, mesh.Release, mesh.StoreFormat)
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("mesh up on a newer data directory: %v, want a refusal saying %q:\n%s", err, want, out)
	}
	if strings.Contains(string(out), `"message":"bridge listening"`) {
		t.Errorf("the bridge served before the refusal:\n%s", out)
	}
}
