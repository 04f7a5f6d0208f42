package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A data directory that mesh up makes is its owner's only: the directory
// and the JetStream store 0700, nothing in the store readable by others,
// and the keys and the mesh context 0600, the keys in a 0700 directory
// (TestNATSRolePermissions checks the identities under creds/).
func TestDataDirectoryIsItsOwnersOnly(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	m.firstTurn("list all resources")
	mode := func(path string) fs.FileMode {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	for _, dir := range []string{m.dataDir, filepath.Join(m.dataDir, "jetstream"), filepath.Join(m.dataDir, "keys")} {
		if got := mode(dir); got != 0o700 {
			t.Errorf("%s: mode %v, want 0700", dir, got)
		}
	}
	keys, _ := filepath.Glob(filepath.Join(m.dataDir, "keys", "*"))
	if len(keys) == 0 {
		t.Error("no files in keys")
	}
	for _, f := range keys {
		if got := mode(f); got != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, got)
		}
	}
	if got := mode(filepath.Join(m.dataDir, "context.json")); got != 0o600 {
		t.Errorf("context.json: mode %v, want 0600", got)
	}
	n := 0
	err := filepath.WalkDir(filepath.Join(m.dataDir, "jetstream"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n++
		if info, err := d.Info(); err == nil && info.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s: mode %v, readable by others", path, info.Mode().Perm())
		}
		return nil
	})
	if err != nil || n < 10 {
		t.Errorf("walk the store: %v, %d entries", err, n)
	}
}
