package identity

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nats-io/nkeys"
)

// SeedFile is the path of role's nkey seed in dir: <dir>/<role>.nk.
func SeedFile(dir, role string) string { return filepath.Join(dir, role+".nk") }

// CredsFile is the path of role's JWT creds file in dir: <dir>/<role>.creds
// (for an external server whose operator issued them).
func CredsFile(dir, role string) string { return filepath.Join(dir, role+".creds") }

// EnsureSeeds makes sure dir (mode 0700) holds an nkey seed (mode 0600) for
// each role, generating the missing ones, and returns each role's public
// key.
func EnsureSeeds(dir string, roles []string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creds dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil && !errors.Is(err, syscall.EROFS) {
		return nil, fmt.Errorf("creds dir: %w", err)
	}
	keys := map[string]string{}
	for _, role := range roles {
		path := SeedFile(dir, role)
		kp, err := readSeed(path)
		if errors.Is(err, os.ErrNotExist) {
			kp, err = writeSeed(path)
		}
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		keys[role] = pub
	}
	return keys, nil
}

func readSeed(path string) (nkeys.KeyPair, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		// A read-only mount (a Kubernetes Secret readable by the pod's
		// group) cannot be tightened: its mode is the mount's business.
		if err := os.Chmod(path, 0o600); err != nil && !errors.Is(err, syscall.EROFS) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(data))
	if err != nil {
		return nil, fmt.Errorf("%s: not an nkey seed: %w", path, err)
	}
	return kp, nil
}

func writeSeed(path string) (nkeys.KeyPair, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("generate %s: %w", path, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("generate %s: %w", path, err)
	}
	// O_EXCL: two processes generating at once keep the first one's seed.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return readSeed(path)
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(append(seed, '\n'))
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return kp, nil
}

// PublicKeyOf returns the public key of the nkey seed in path.
func PublicKeyOf(path string) (string, error) {
	kp, err := readSeed(path)
	if err != nil {
		return "", err
	}
	return kp.PublicKey()
}

// TLSFiles are the PEM files of TLS to NATS: CA verifies the other side,
// Cert and Key are this side's certificate (the server's, or a client
// certificate).
type TLSFiles struct {
	CA, Cert, Key string
}

// Empty reports whether no file is set.
func (f TLSFiles) Empty() bool { return f.CA == "" && f.Cert == "" && f.Key == "" }

// Client is the TLS configuration of a client: the CA as root (the
// system's when empty), the certificate when set.
func (f TLSFiles) Client() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := certPool(f.CA)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if f.Cert != "" || f.Key != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("nats tls: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Server is the TLS configuration of the embedded server's listener: its
// certificate. Clients prove who they are with nkeys, not certificates:
// none is asked for (a role given the same files presents none).
func (f TLSFiles) Server() (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("nats tls: the embedded server needs cert and key")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("nats tls: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

func certPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("nats tls: %s holds no PEM certificate", path)
	}
	return pool, nil
}

// ExpandRole replaces {role} in a credentials path with role, so that one
// setting names every role's file (e.g. /etc/mesh/{role}.creds).
func ExpandRole(path, role string) string { return strings.ReplaceAll(path, "{role}", role) }
