package identity

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSigningKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	path := filepath.Join(dir, "approver.nk")
	if _, err := LoadSigningKey(path); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("LoadSigningKey of a missing file = %v, want ErrNoSigningKey", err)
	}
	kp, created, err := EnsureSigningKey(path)
	if err != nil || !created {
		t.Fatalf("EnsureSigningKey = %v, created %v", err, created)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	again, created, err := EnsureSigningKey(path)
	if err != nil || created || PublicKey(again) != PublicKey(kp) {
		t.Errorf("second EnsureSigningKey: %v, created %v, key %s want %s", err, created, PublicKey(again), PublicKey(kp))
	}
	if err := os.WriteFile(path, []byte("not a seed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigningKey(path); err == nil {
		t.Error("a file without a seed loaded")
	}
}
