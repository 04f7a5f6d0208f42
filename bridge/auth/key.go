package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// EnsureStreamKey reads the stream-token key at path, or, when there is
// none, creates one: 32 random bytes, hex, mode 0600 in a directory made
// with mode 0700. Bridges sharing the data directory (`mesh up
// --replicas bridge=2`) or the file (a mounted secret) agree on it; the
// file appears whole or not at all, so a replica racing another reads the
// winner's key.
func EnsureStreamKey(path string) ([]byte, error) {
	key, err := readStreamKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("stream key dir: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("stream key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".stream-key-*")
	if err != nil {
		return nil, fmt.Errorf("stream key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o600)
	}
	if werr != nil {
		return nil, fmt.Errorf("stream key: %w", werr)
	}
	// Link fails when the name exists: another process made it first.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("stream key: %w", err)
	}
	return readStreamKey(path)
}

func readStreamKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key := bytes.TrimSpace(data)
	if len(key) < 32 {
		// Never quote the file: it is a secret.
		return nil, fmt.Errorf("stream key %s: shorter than 32 bytes", path)
	}
	return key, nil
}
