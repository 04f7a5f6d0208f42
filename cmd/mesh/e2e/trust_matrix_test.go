package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// The test of this file tries the whole bus: every identity `mesh creds`
// writes, with a raw nats.go connection, against every subject family of
// the namespace (publish, subscribe, and replies aimed at every bucket
// key, stream subject and other role's subject, the JetStream API
// included), on the embedded server (`mesh nats`) and on a plain
// nats-server configured from `mesh creds`, and compares what the server
// allowed with the permission table in code.

// matrixSubjects are the subjects every identity tries: pub are literal
// subjects to publish to (and to aim a reply at), sub adds the wildcards a
// thief would subscribe with.
func matrixSubjects(ns mesh.Namespace) (pub, sub []string) {
	const api = "$JS.API."
	p := ns.Prefix()
	add := func(s ...string) { pub = append(pub, s...) }
	// The mesh's own subjects.
	for _, r := range append(identity.Roles(), "other") {
		add(p+".work."+r+".x.c1", p+".hb."+r+".n1")
	}
	for _, ev := range []mesh.EventType{mesh.EventRunStarted, mesh.EventRunFinished, mesh.EventRunError, mesh.EventCustom, mesh.EventTextMessageContent, mesh.EventToolCallResult} {
		add(p + ".evt.c1." + string(ev))
	}
	add(p+".evt."+mesh.SystemSession+"."+string(mesh.EventCustom),
		p+".tool.resources.resources_add", p+".tool.resources.resources_list",
		p+".approval.0d8c3b0e-6a57-4e2f-9c44-6f1d1c2b3a40.decide", p+".approval.0d8c3b0e-6a57-4e2f-9c44-6f1d1c2b3a40.request",
		p+".node.n1.probe", p+".node.n1.restart", p+".session.c1.cancel", p+".msg.c1",
		"other.work.agent.x.c1", "other.tool.resources.resources_add")
	// Buckets: their keys, the API that reads, watches and changes them.
	keys := map[string][]string{
		mesh.BucketSessions:  {"c1"},
		mesh.BucketApprovals: {"a1", mesh.ApprovalKeysPrefix + "K"},
		mesh.BucketTools:     {"resources.resources_add"},
		mesh.BucketCalls:     {"k1", mesh.SubAgentCallKey("k1")},
		mesh.BucketLimits:    {"rate.p.abc"},
		mesh.BucketUsage:     {"2026-12-07.abc"},
	}
	for _, r := range identity.Roles() {
		keys[mesh.BucketNodes] = append(keys[mesh.BucketNodes], r+".n1")
	}
	for _, b := range []string{mesh.BucketSessions, mesh.BucketApprovals, mesh.BucketTools, mesh.BucketNodes, mesh.BucketCalls, mesh.BucketLimits, mesh.BucketUsage} {
		bucket := ns.Bucket(b)
		stream := "KV_" + bucket
		for _, k := range keys[b] {
			add("$KV."+bucket+"."+k, api+"DIRECT.GET."+stream+".$KV."+bucket+"."+k, api+"CONSUMER.CREATE."+stream+".w1.$KV."+bucket+"."+k)
		}
		add(api+"STREAM.INFO."+stream, api+"STREAM.PURGE."+stream, api+"STREAM.DELETE."+stream, api+"STREAM.UPDATE."+stream,
			api+"STREAM.MSG.GET."+stream, api+"DIRECT.GET."+stream, api+"CONSUMER.CREATE."+stream+".w1", api+"CONSUMER.DELETE."+stream+".w1",
			"$JS.FC."+stream+".w1.1", "$JS.ACK."+stream+".w1.1.1.1.1700000000000000000.0")
	}
	// Streams and the object store.
	files := ns.Bucket(mesh.BucketFiles)
	for _, s := range []struct{ stream, filter string }{
		{ns.Stream(mesh.StreamEvents), p + ".evt.>"},
		{ns.Stream(mesh.StreamWork), p + ".work.agent.*.*"},
		{ns.Stream(mesh.StreamMessages), p + ".msg.*"},
		{"OBJ_" + files, "$O." + files + ".C.>"},
	} {
		add(api+"STREAM.INFO."+s.stream, api+"STREAM.PURGE."+s.stream, api+"STREAM.DELETE."+s.stream, api+"STREAM.UPDATE."+s.stream,
			api+"STREAM.MSG.GET."+s.stream, api+"DIRECT.GET."+s.stream, api+"CONSUMER.CREATE."+s.stream+".x",
			api+"CONSUMER.CREATE."+s.stream+".x."+s.filter, api+"CONSUMER.DURABLE.CREATE."+s.stream+".x",
			api+"CONSUMER.INFO."+s.stream+".x", api+"CONSUMER.MSG.NEXT."+s.stream+".x", api+"CONSUMER.DELETE."+s.stream+".x",
			api+"CONSUMER.LIST."+s.stream, "$JS.ACK."+s.stream+".x.1.1.1.1700000000000000000.0", "$JS.FC."+s.stream+".x.1")
	}
	add(api+"CONSUMER.CREATE."+ns.Stream(mesh.StreamWork)+".x."+p+".work.group.*.*",
		"$O."+files+".C.f1", "$O."+files+".M.f1", api+"DIRECT.GET.OBJ_"+files+".$O."+files+".M.f1",
		api+"STREAM.CREATE.THIEF", api+"STREAM.LIST", api+"INFO", "$SYS.REQ.SERVER.PING")
	// Services, discovery, and every inbox.
	add("$SRV.PING", "$SRV.PING."+mesh.ToolServiceName, "$SRV.INFO."+mesh.ToolServiceName, "$SRV.STATS.mesh-approvals.x")
	for _, id := range identity.Identities() {
		add(ns.Inbox(id)+".x.y", ns.Inbox(id)+".x")
	}
	add("_INBOX.x", "_INBOX.x.y", "_INBOX.other.agent.x.y")
	sub = append(slices.Clone(pub), ">", p+".>", p+".evt.>", p+".work.>", p+".tool.>", p+".approval.*.decide", p+".hb.>",
		"$KV.>", "$JS.API.>", "$JS.ACK.>", "_INBOX.>", "_INBOX.*", "_INBOX.*.*", "$SRV.>", "$O.>")
	return pub, sub
}

// probeConn is a raw connection of one identity that records every
// subject the server refused it, by operation.
type probeConn struct {
	nc *nats.Conn
	mu sync.Mutex
	// refused["publish"|"subscription"] are the subjects the server refused.
	refused map[string]map[string]bool
}

func (pc *probeConn) handle(_ *nats.Conn, _ *nats.Subscription, err error) {
	msg := err.Error()
	for _, op := range []string{"Publish", "Subscription"} {
		_, rest, ok := strings.Cut(msg, "Permissions Violation for "+op+" to \"")
		if !ok {
			continue
		}
		subj, _, _ := strings.Cut(rest, "\"")
		pc.mu.Lock()
		pc.refused[strings.ToLower(op)][subj] = true
		pc.mu.Unlock()
	}
}

func (pc *probeConn) wasRefused(op, subject string) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.refused[op][subject]
}

func dialIdentity(t *testing.T, url, credsDir, name string) (*probeConn, error) {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(filepath.Join(credsDir, name+".nk"))
	if err != nil {
		t.Fatal(err)
	}
	pc := &probeConn{refused: map[string]map[string]bool{"publish": {}, "subscription": {}}}
	opts := []nats.Option{opt, nats.Name("matrix-" + name), nats.ErrorHandler(pc.handle), nats.Timeout(5 * time.Second)}
	if name != identity.RoleAdmin {
		opts = append(opts, nats.CustomInboxPrefix(mesh.DefaultNamespace().Inbox(name)))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	pc.nc = nc
	return pc, nil
}

// settle waits until the server has answered everything sent on pc (the
// flush's PONG comes after every refusal) and the error handler, which
// runs on its own goroutine, has seen the refusals of want.
func (pc *probeConn) settle(t *testing.T, op string, want []string) {
	t.Helper()
	if err := pc.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, func() bool {
		return !slices.ContainsFunc(want, func(s string) bool { return !pc.wasRefused(op, s) })
	}, "the refusals the table expects did not all come")
	// Refusals the table does not expect arrive just as late: one more
	// round trip gives the handler their turn too.
	_ = pc.nc.Flush()
	time.Sleep(50 * time.Millisecond)
}

// literal is a subject that pattern matches: each wildcard made a token.
func literal(pattern string) string {
	return strings.NewReplacer("*", "x", ">", "x.y").Replace(pattern)
}

// TestNATSIdentitySubjectMatrix: every identity × every subject family, on
// both servers; what the server allows is exactly what the permission table
// says, no identity that serves requests may publish outside an inbox, and
// a reply aimed anywhere but an inbox reaches nothing.
func TestNATSIdentitySubjectMatrix(t *testing.T) {
	t.Parallel()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		// `mesh nats`, with the identities `mesh creds` wrote.
		c := startCluster(t, 1, false, defaultConfig(t))
		identityMatrix(t, c.urls()[0], c.credsDir)
	})
	t.Run("nats-server", func(t *testing.T) {
		t.Parallel()
		url, creds := startPlainNATS(t)
		identityMatrix(t, url, creds)
	})
}

// startPlainNATS runs one plain nats-server (built from the module) that
// includes the auth.conf `mesh creds` wrote, provisions it with `mesh
// provision` as the admin, and returns its URL and the credentials.
func startPlainNATS(t *testing.T) (url, credsDir string) {
	t.Helper()
	dir := t.TempDir()
	credsDir = filepath.Join(dir, "creds")
	env := append(os.Environ(), "MESH_CONFIG=../../../config/agent.yaml", "MESH_DATA_DIR="+filepath.Join(dir, "data"),
		"NATS_CREDS=", "NATS_NKEY=", "NATS_RESPONDER_CREDS=", "NATS_RESPONDER_NKEY=", "MESH_NATS_AUTH=", "MESH_LOG_FORMAT=json")
	creds := exec.Command(filepath.Join(binDir, "mesh"), "creds", "--dir", credsDir)
	creds.Env = env
	if out, err := creds.CombinedOutput(); err != nil {
		t.Fatalf("mesh creds: %v\n%s", err, out)
	}
	if err := buildNATSServer(); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	conf := fmt.Sprintf("listen: %s\nmax_payload: 8MB\nmax_control_line: 4KB\njetstream {\n  store_dir: %q\n}\ninclude ./creds/auth.conf\n",
		addr, filepath.Join(dir, "jetstream"))
	if err := os.WriteFile(filepath.Join(dir, "nats-server.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &clusterProc{t: t, name: "nats-server", logPath: filepath.Join(dir, "nats-server.log"),
		args: []string{filepath.Join(binDir, "nats-server"), "-c", filepath.Join(dir, "nats-server.conf")}}
	p.start()
	t.Cleanup(func() {
		p.stop(false)
		if t.Failed() {
			t.Logf("nats-server log:\n%s", tail(p.logs(), 40))
		}
	})
	url = "nats://" + addr
	prov := exec.Command(filepath.Join(binDir, "mesh"), "provision")
	prov.Env = append(env, "NATS_URL="+url, "NATS_NKEY="+filepath.Join(credsDir, identity.RoleAdmin+".nk"))
	if out, err := prov.CombinedOutput(); err != nil {
		t.Fatalf("mesh provision: %v\n%s", err, out)
	}
	return url, credsDir
}

func identityMatrix(t *testing.T, url, credsDir string) {
	ns := mesh.DefaultNamespace()
	seeds, err := filepath.Glob(filepath.Join(credsDir, "*.nk"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range seeds {
		names = append(names, strings.TrimSuffix(filepath.Base(s), ".nk"))
	}
	// `mesh creds` writes every identity of the table, and the leaf's.
	for _, want := range append(identity.Identities(), identity.RoleAdmin, identity.RoleLeaf) {
		if !slices.Contains(names, want) {
			t.Errorf("mesh creds wrote no seed for %s (it wrote %v)", want, names)
		}
	}
	pubs, subs := matrixSubjects(ns)
	admin, err := dialIdentity(t, url, credsDir, identity.RoleAdmin)
	if err != nil {
		t.Fatalf("the admin cannot connect: %v", err)
	}
	for _, name := range names {
		if name == identity.RoleAdmin {
			continue
		}
		t.Run(name, func(t *testing.T) {
			if name == identity.RoleLeaf {
				// A leaf node's identity, admitted on the leaf node port only.
				if pc, err := dialIdentity(t, url, credsDir, name); err == nil {
					pc.nc.Close()
					t.Error("the leaf identity connected as a client")
				}
				return
			}
			p, ok := identity.PermissionsOf(ns, name)
			if !ok {
				t.Fatalf("mesh creds wrote %s, which the table does not know", name)
			}
			pc, err := dialIdentity(t, url, credsDir, name)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			var wantRefused []string
			for _, s := range subs {
				if _, err := pc.nc.SubscribeSync(s); err != nil {
					t.Fatalf("subscribe %s: %v", s, err)
				}
				if !p.CanSubscribe(s) {
					wantRefused = append(wantRefused, s)
				}
			}
			pc.settle(t, "subscription", wantRefused)
			for _, s := range subs {
				if got, want := !pc.wasRefused("subscription", s), p.CanSubscribe(s); got != want {
					t.Errorf("subscribe %s: the server allows it: %v, the table: %v", s, got, want)
				}
			}
			wantRefused = nil
			for _, s := range pubs {
				if err := pc.nc.Publish(s, nil); err != nil {
					t.Fatalf("publish %s: %v", s, err)
				}
				if !p.CanPublish(s) {
					wantRefused = append(wantRefused, s)
				}
			}
			pc.settle(t, "publish", wantRefused)
			serves := slices.ContainsFunc(p.Grants, func(g identity.Grant) bool { return g.Kind == identity.GrantServe })
			for _, s := range pubs {
				allowed := !pc.wasRefused("publish", s)
				if want := p.CanPublish(s); allowed != want {
					t.Errorf("publish %s: the server allows it: %v, the table: %v", s, allowed, want)
				}
				// Whoever receives others' requests answers to inboxes only.
				if serves && allowed && !strings.HasPrefix(s, "_INBOX.") {
					t.Errorf("%s serves requests and may publish to %s: a requester could aim a reply there", name, s)
				}
			}
		})
	}
	// Replies aimed everywhere: each responder, on a raw connection of its
	// own identity, answers whatever it receives; each role that may ask it
	// sends it a request per target subject. Only inboxes get an answer.
	answer := []byte(`{"answered":true}`)
	received := map[string]bool{}
	var mu sync.Mutex
	tap, err := admin.nc.Subscribe(">", func(m *nats.Msg) {
		if bytes.Equal(m.Data, answer) {
			mu.Lock()
			received[m.Subject] = true
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = tap.SetPendingLimits(-1, -1)
	for _, role := range identity.Roles() {
		rp, _ := identity.PermissionsOf(ns, identity.Responder(role))
		responder, err := dialIdentity(t, url, credsDir, identity.Responder(role))
		if err != nil {
			t.Fatal(err)
		}
		var served []string
		for _, g := range rp.Grants {
			if g.Kind != identity.GrantServe {
				continue
			}
			served = append(served, g.Subject)
			if _, err := responder.nc.Subscribe(g.Subject, func(m *nats.Msg) { _ = m.Respond(answer) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := responder.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, caller := range identity.Roles() {
			cp, _ := identity.PermissionsOf(ns, caller)
			for _, g := range cp.Grants {
				i := slices.IndexFunc(served, func(s string) bool { return g.Kind == identity.GrantRequest && identity.SubjectsOverlap(s, g.Subject) })
				if i < 0 {
					continue
				}
				subject := literal(g.Subject)
				if !identity.SubjectMatches(served[i], subject) {
					subject = literal(served[i])
				}
				rc, err := dialIdentity(t, url, credsDir, caller)
				if err != nil {
					t.Fatal(err)
				}
				for _, target := range pubs {
					if err := rc.nc.PublishRequest(subject, target, []byte(`{}`)); err != nil {
						t.Fatalf("%s requests %s: %v", caller, subject, err)
					}
				}
				if err := rc.nc.Flush(); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s asked %s on %s with a reply aimed at each of %d subjects", caller, identity.Responder(role), subject, len(pubs))
			}
		}
		if err := responder.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// The last answers reach the admin's tap after the responders' flushes.
	_ = admin.nc.Flush()
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	var reached []string
	for _, target := range pubs {
		if received[target] && !strings.HasPrefix(target, "_INBOX.") {
			reached = append(reached, target)
		}
	}
	if len(reached) > 0 {
		t.Errorf("replies reached subjects that are no inbox: %s", strings.Join(reached, ", "))
	}
	// And some did reach the inboxes they were allowed to: the answers
	// went out at all.
	if !received[fmt.Sprintf("%s.x.y", ns.Inbox(mesh.RoleMonitor))] {
		t.Errorf("no answer reached the monitor's inbox: the responders did not answer")
	}
}
