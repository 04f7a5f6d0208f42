package natsconn_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/natsconn"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
)

// connect is natsconn.Connect with the role inbox of agents, closed at the end.
func connect(t *testing.T, cfg natsconn.Config) *nats.Conn {
	t.Helper()
	if cfg.Inbox == "" {
		cfg.Inbox = mesh.DefaultNamespace().Inbox(mesh.RoleAgent)
	}
	nc, err := natsconn.Connect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	meshtest.Eventually(t, 5*time.Second, nc.IsConnected, "not connected to %s", cfg.URL)
	return nc
}

// A subject longer than the server takes is not sent: the connection stays
// up and serves the next request (a plain nats.go connection is closed for
// good by the same publish).
func TestConnectSurvivesLongSubject(t *testing.T) {
	m := meshtest.New(t)
	nc := connect(t, natsconn.Config{URL: m.Server.ClientURL(), Name: "t"})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), m.NS.Bucket(mesh.BucketSessions))
	if err != nil {
		t.Fatal(err)
	}
	// An id of 4,015 characters: the key's direct get is a line of more
	// than 4 KiB, the publish of a cancel with a longer one too.
	long := strings.Repeat("a", 4015)
	longer := strings.Repeat("a", 4100)
	for range 3 {
		if err := nc.Publish("mesh.session."+longer+".cancel", nil); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := kv.Get(t.Context(), long)
		if !errors.Is(err, nats.ErrNoResponders) || time.Since(start) > time.Second {
			t.Fatalf("get of a too long key: %v after %v, want no responders at once", err, time.Since(start))
		}
	}
	if _, err := kv.Put(t.Context(), "short", []byte("ok")); err != nil {
		t.Fatalf("put after long subjects: %v", err)
	}
	if nc.Stats().Reconnects != 0 || !nc.IsConnected() {
		t.Errorf("reconnects = %d, connected %v; want the connection untouched", nc.Stats().Reconnects, nc.IsConnected())
	}

	plain := meshtest.Conn(t, m.Server.ClientURL())
	_ = plain.Publish("mesh.session."+longer+".cancel", nil)
	_ = plain.Flush()
	meshtest.Eventually(t, 5*time.Second, plain.IsClosed, "a plain connection was not closed by the server: the test proves nothing")
}

// A server with a lower control line limit refuses a line the guard sent:
// the connection reconnects instead of closing.
func TestConnectReconnectsAfterProtocolError(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, MaxControlLine: 1024}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server did not start")
	}
	t.Cleanup(ns.Shutdown)
	nc := connect(t, natsconn.Config{URL: ns.ClientURL(), Name: "t"})
	if err := nc.Publish("x."+strings.Repeat("b", 2000), nil); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	meshtest.Eventually(t, 10*time.Second, func() bool { return nc.Stats().Reconnects >= 1 && nc.IsConnected() },
		"no reconnect after the server refused a line (status %v, last error %v)", nc.Status(), nc.LastError())
	sub, err := nc.SubscribeSync("y")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("y", []byte("after")); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "after" {
		t.Fatalf("after the reconnect: %v, %v", msg, err)
	}
}

// A consumer whose deliver subject is a role's request subject (the server
// does not check a deliver subject against its creator's permissions)
// delivers nothing to a guarded connection; its own watches work.
func TestConnectDropsMessagesPushedOutsideItsInbox(t *testing.T) {
	m := meshtest.New(t)
	nc := connect(t, natsconn.Config{URL: m.Server.ClientURL(), Name: "victim"})
	guarded, err := nc.SubscribeSync("mesh.approval.a1.decide")
	if err != nil {
		t.Fatal(err)
	}
	plain := meshtest.Conn(t, m.Server.ClientURL())
	control, err := plain.SubscribeSync("mesh.approval.a1.decide")
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	_ = plain.Flush()
	if _, err := m.Tools.Put(t.Context(), "x.a1", []byte(`{"approved":true}`)); err != nil {
		t.Fatal(err)
	}
	_, err = m.JS.CreateConsumer(t.Context(), "KV_"+m.NS.Bucket(mesh.BucketTools), jetstream.ConsumerConfig{
		FilterSubject: "$KV." + m.NS.Bucket(mesh.BucketTools) + ".x.a1", DeliverSubject: "mesh.approval.a1.decide", AckPolicy: jetstream.AckNonePolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := control.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the plain connection got no pushed message: the test proves nothing (%v)", err)
	} else if !strings.HasPrefix(msg.Reply, "$JS.ACK.") {
		t.Fatalf("pushed message reply %q", msg.Reply)
	}
	if msg, err := guarded.NextMsg(500 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("the guarded connection got %v (%v), want nothing", msg, err)
	}
	// Its own consumers deliver to its inbox and pass.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), m.NS.Bucket(mesh.BucketTools))
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(t.Context(), "x.*")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	select {
	case e := <-w.Updates():
		if e == nil || e.Key() != "x.a1" {
			t.Fatalf("watch got %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the guarded connection's own watch got nothing")
	}
}

// Identities and TLS on the embedded server: an nkey with permissions over
// TLS; no connection without an identity, or without TLS.
func TestConnectNKeyOverTLS(t *testing.T) {
	dir := t.TempDir()
	files := writeTLS(t, dir)
	keys, err := identity.EnsureSeeds(filepath.Join(dir, "creds"), []string{mesh.RoleBridge, identity.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{mesh.RoleBridge, identity.RoleAdmin} {
		fi, err := os.Stat(identity.SeedFile(filepath.Join(dir, "creds"), role))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("seed of %s: %v, mode %v; want 0600", role, err, fi.Mode())
		}
	}
	again, err := identity.EnsureSeeds(filepath.Join(dir, "creds"), []string{mesh.RoleBridge})
	if err != nil || again[mesh.RoleBridge] != keys[mesh.RoleBridge] {
		t.Fatalf("seeds were not kept: %v %v", again, err)
	}
	serverTLS, err := files.Server()
	if err != nil {
		t.Fatal(err)
	}
	perms, _ := identity.PermissionsOf(mesh.DefaultNamespace(), mesh.RoleBridge)
	srv, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "js"), TLS: serverTLS,
		Users: []natsserver.User{{NKey: keys[mesh.RoleBridge], Permissions: &perms}, {NKey: keys[identity.RoleAdmin]}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	clientTLS, err := files.Client()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var denied []string
	cfg := natsconn.Config{URL: srv.ClientURL(), Name: "bridge", Inbox: mesh.DefaultNamespace().Inbox(mesh.RoleBridge),
		NKeyFile: identity.SeedFile(filepath.Join(dir, "creds"), mesh.RoleBridge), TLS: clientTLS}
	nc := connect(t, cfg)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		denied = append(denied, err.Error())
		mu.Unlock()
	})
	if !nc.TLSRequired() {
		t.Error("the connection does not say TLS")
	}
	if _, err := nc.SubscribeSync("mesh.node.*.restart"); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.SubscribeSync("mesh.tool.>"); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	refused := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(denied)
	}
	meshtest.Eventually(t, 5*time.Second, func() bool { return len(refused()) > 0 }, "no permission error")
	if d := refused(); len(d) != 1 || !strings.Contains(d[0], `Subscription to "mesh.tool.>"`) {
		t.Errorf("permission errors %v, want one for mesh.tool.>", d)
	}

	for name, bad := range map[string]natsconn.Config{
		"no identity": {URL: srv.ClientURL(), TLS: clientTLS},
		"unknown key": {URL: srv.ClientURL(), TLS: clientTLS, NKeyFile: writeSeed(t, dir)},
	} {
		if ok := tryConnect(bad); ok {
			t.Errorf("%s: connected", name)
		}
	}
	if _, err := nats.Connect(srv.ClientURL(), nats.Timeout(time.Second)); err == nil {
		t.Error("connected without TLS")
	}
}

// tryConnect reports whether cfg connects within a few seconds.
func tryConnect(cfg natsconn.Config) bool {
	nc, err := natsconn.Connect(cfg)
	if err != nil {
		return false
	}
	defer nc.Close()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if nc.IsConnected() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func writeSeed(t *testing.T, dir string) string {
	t.Helper()
	other := filepath.Join(dir, "other")
	if _, err := identity.EnsureSeeds(other, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	return identity.SeedFile(other, "x")
}

// writeTLS writes a CA and a server certificate for 127.0.0.1.
func writeTLS(t *testing.T, dir string) identity.TLSFiles {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mesh test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	f := identity.TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	for path, block := range map[string]*pem.Block{
		f.CA: {Type: "CERTIFICATE", Bytes: caDER}, f.Cert: {Type: "CERTIFICATE", Bytes: leafDER}, f.Key: {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
