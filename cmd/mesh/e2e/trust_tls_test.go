package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// With nats.tls, the embedded server takes TLS only and every role speaks
// it: a turn runs; a client without TLS cannot connect, one with TLS and
// the admin identity can.
func TestNATSOverTLS(t *testing.T) {
	t.Parallel()
	certs := t.TempDir()
	ca, cert, key := writeTestCerts(t, certs)
	m := startMesh(t, meshOpts{config: defaultConfig(t) + "\nnats:\n  tls:\n    ca: " + ca + "\n    cert: " + cert + "\n    key: " + key + "\n"})
	m.firstTurn("list all resources")
	if nc, err := nats.Connect("nats://"+m.natsAddr, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Error("a client without TLS connected")
	}
	seed, err := nats.NkeyOptionFromSeed(filepath.Join(m.dataDir, "creds", "admin.nk"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("tls://"+m.natsAddr, seed, nats.RootCAs(ca))
	if err != nil {
		t.Fatalf("admin over TLS: %v", err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Error("the connection is not TLS")
	}
	if _, err := nc.Request("$SRV.PING.mesh-tools", nil, 5*time.Second); err != nil {
		t.Errorf("ping the toolhosts over TLS: %v", err)
	}
}

// writeTestCerts writes a CA and a certificate for 127.0.0.1 signed by it.
func writeTestCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mesh e2e CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caTmpl, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(leafKey)
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, block := range map[string]*pem.Block{
		ca: {Type: "CERTIFICATE", Bytes: caDER}, cert: {Type: "CERTIFICATE", Bytes: leafDER}, key: {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
		t.Fatal(err)
	}
	return ca, cert, key
}
