package identity

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The secrets of a cluster, beside the roles' seeds in the credentials
// directory: every server of the cluster (and every edge) must have the
// same ones, so that one directory, written once by `mesh creds`, is
// copied to each machine.
const (
	// RouteUser is the user routes between a cluster's servers present,
	// with the password of RouteSecretFile.
	RouteUser = "mesh-route"
	// RoleLeaf names the identity an edge's server connects to a central
	// cluster's leaf node port with (<creds dir>/leaf.nk).
	RoleLeaf = "leaf"
)

// RouteSecretFile is the path of the route password in dir: <dir>/route.secret.
func RouteSecretFile(dir string) string { return filepath.Join(dir, "route.secret") }

// EnsureSecret returns the secret in path, generating 32 random bytes
// (base64url, mode 0600) when the file is missing. Two processes
// generating at once keep the first one's.
func EnsureSecret(path string) (string, error) {
	if data, err := os.ReadFile(path); err == nil {
		s := strings.TrimSpace(string(data))
		if len(s) < 16 {
			return "", fmt.Errorf("%s: a secret of %d characters is too short (16 at least)", path, len(s))
		}
		return s, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("secret dir: %w", err)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	secret := base64.RawURLEncoding.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return EnsureSecret(path)
	}
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.WriteString(secret + "\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return secret, nil
}
