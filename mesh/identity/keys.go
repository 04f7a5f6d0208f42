package identity

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
)

// ErrNoSigningKey reports that the approver's seed file does not exist.
var ErrNoSigningKey = errors.New("identity: approver signing key not found")

// LoadSigningKey reads the approver's signing key: a file holding an nkey
// seed ("SO…", as [EnsureSigningKey] writes it; any nkey seed that signs is
// taken). A missing file is [ErrNoSigningKey].
func LoadSigningKey(path string) (nkeys.KeyPair, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoSigningKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(data))
	if err != nil {
		// Never quote the file: it is a secret.
		return nil, fmt.Errorf("signing key %s: not an nkey seed: %w", path, err)
	}
	if _, err := kp.Sign([]byte("probe")); err != nil {
		return nil, fmt.Errorf("signing key %s: cannot sign: %w", path, err)
	}
	return kp, nil
}

// EnsureSigningKey loads the signing key at path, or, when there is none,
// creates one: an operator nkey (it signs, and is no NATS user identity),
// its seed written with mode 0600 in a directory made with mode 0700.
// created says it was made now.
func EnsureSigningKey(path string) (kp nkeys.KeyPair, created bool, err error) {
	kp, err = LoadSigningKey(path)
	if !errors.Is(err, ErrNoSigningKey) {
		return kp, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("signing key dir: %w", err)
	}
	kp, err = nkeys.CreateOperator()
	if err != nil {
		return nil, false, fmt.Errorf("create signing key: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, false, fmt.Errorf("create signing key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process made it first: use that one.
		kp, err = LoadSigningKey(path)
		return kp, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("write signing key: %w", err)
	}
	_, werr := f.Write(append(seed, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return nil, false, fmt.Errorf("write signing key: %w", werr)
	}
	return kp, true, nil
}

// PublicKey is kp's public key, or "" for a key pair that has none.
func PublicKey(kp nkeys.KeyPair) string {
	if kp == nil {
		return ""
	}
	pub, _ := kp.PublicKey()
	return pub
}
