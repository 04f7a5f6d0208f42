package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/natsserver"
)

// The tests of this file attack `mesh up` over NATS as an outsider would:
// raw nats.go connections, with no credentials, with unknown ones, and with
// each role's stolen seed.

// A client without credentials, or with an nkey the server does not know,
// cannot connect; the admin identity that `mesh up` prints can.
func TestNATSRefusesClientsWithoutCredentials(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	url := "nats://" + m.natsAddr
	if nc, err := nats.Connect(url, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("error %v, want an authorization violation", err)
	}
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	if nc, err := nats.Connect(url, nats.Timeout(2*time.Second), nats.Nkey(pub, kp.Sign)); err == nil {
		nc.Close()
		t.Fatal("a client with an unknown nkey connected")
	}
	// The seeds are the data dir's, mode 0600, in a 0700 directory.
	dir := filepath.Join(m.dataDir, "creds")
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("creds dir: %v %v, want mode 0700", fi, err)
	}
	for _, role := range append(identity.Identities(), identity.RoleAdmin) {
		if fi, err := os.Stat(filepath.Join(dir, role+".nk")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("seed of %s: %v %v, want mode 0600", role, fi, err)
		}
	}
	// mesh up says how to use the nats CLI as the admin; that works.
	hint := "--nkey " + filepath.Join(dir, "admin.nk")
	if !strings.Contains(m.logs(), hint) {
		t.Errorf("the log does not show the nats CLI with %q", hint)
	}
	nc := m.adminNATS(t)
	if _, err := nc.Request("$SRV.PING.mesh-approvals", nil, 5*time.Second); err != nil {
		t.Errorf("the admin cannot ping the approvers: %v", err)
	}
}

// An open server only when asked for, and the log says so.
func TestNATSAuthNoneIsOpenAndSaysSo(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{env: []string{"MESH_NATS_AUTH=none"}})
	nc, err := nats.Connect("nats://"+m.natsAddr, nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("nats.auth none: %v", err)
	}
	nc.Close()
	if !strings.Contains(m.logs(), "nats.auth is none") {
		t.Error("the log does not say that the NATS server is open")
	}
	m.firstTurn("list all resources")
}

// roleConn connects as role with its seed under m's data dir, as an
// attacker who stole it would, with the role's own inbox (the only one it
// may subscribe to). Async errors are collected.
type roleConn struct {
	nc   *nats.Conn
	mu   sync.Mutex
	errs []string
}

func connectRole(t testing.TB, m *meshProc, role string) *roleConn {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(filepath.Join(m.dataDir, "creds", role+".nk"))
	if err != nil {
		t.Fatal(err)
	}
	rc := &roleConn{}
	nc, err := nats.Connect("nats://"+m.natsAddr, opt, nats.Name("attacker-"+role),
		nats.CustomInboxPrefix(mesh.DefaultNamespace().Inbox(role)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			rc.mu.Lock()
			rc.errs = append(rc.errs, err.Error())
			rc.mu.Unlock()
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	rc.nc = nc
	return rc
}

// denied reports whether the server refused an operation on subject.
func (rc *roleConn) denied(subject string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, e := range rc.errs {
		if strings.Contains(e, "Permissions Violation") && strings.Contains(e, `to "`+subject+`"`) {
			return true
		}
	}
	return false
}

// deniedSubscription reports whether the server refused a subscription to
// subject.
func (rc *roleConn) deniedSubscription(subject string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.ContainsFunc(rc.errs, func(e string) bool { return strings.Contains(e, `Subscription to "`+subject+`"`) })
}

// action is one thing a role might try: do sends it, subject is what the
// server's refusal names.
type action struct {
	name    string
	subject string
	do      func(nc *nats.Conn) error
	// allowed are the roles whose job it is (admin always may).
	allowed []string
}

func pubAction(name, subject string, allowed ...string) action {
	return action{name, subject, func(nc *nats.Conn) error { return nc.Publish(subject, []byte(`{"approved":true}`)) }, allowed}
}

func subAction(name, subject string, allowed ...string) action {
	return action{name, subject, func(nc *nats.Conn) error { _, err := nc.SubscribeSync(subject); return err }, allowed}
}

// reqAction sends a request (a JetStream API call, a tool call …).
func reqAction(name, subject string, allowed ...string) action {
	return action{name, subject, func(nc *nats.Conn) error { return nc.PublishRequest(subject, nc.NewRespInbox(), []byte(`{}`)) }, allowed}
}

// kvActions are a get, a put and a delete of a key of bucket.
func kvActions(bucket, key string, get, put []string) []action {
	b := "mesh_" + bucket
	subj := "$KV." + b + "." + key
	del := action{"delete " + b, subj, func(nc *nats.Conn) error {
		m := nats.NewMsg(subj)
		m.Header.Set("KV-Operation", "DEL")
		return nc.PublishMsg(m)
	}, put}
	return []action{
		reqAction("get "+b, "$JS.API.DIRECT.GET.KV_"+b+".$KV."+b+"."+key, get...),
		pubAction("put "+b, subj, put...),
		del,
	}
}

const (
	agent, toolhost, approver, group, bridge, monitor, replayer = mesh.RoleAgent, mesh.RoleToolhost, mesh.RoleApprover, mesh.RoleGroup, mesh.RoleBridge, mesh.RoleMonitor, mesh.RoleReplay
)

// responders are the responder identities of every role.
func responders() []string {
	var out []string
	for _, r := range identity.Roles() {
		out = append(out, identity.Responder(r))
	}
	return out
}

// trustActions is what the threat model forbids, role by role: every row
// is tried by every role, and refused to every role it does not list.
func trustActions() []action {
	ap := "mesh.approval.0d8c3b0e-6a57-4e2f-9c44-6f1d1c2b3a40."
	acts := []action{
		pubAction("decide an approval", ap+"decide", bridge),
		reqAction("decide an approval by request", ap+"decide", bridge),
		subAction("read decisions", "mesh.approval.*.decide", identity.Responder(approver)),
		reqAction("ask for an approval", ap+"request", agent),
		subAction("read approval requests", "mesh.approval.*.request", identity.Responder(approver)),
		// Only the admin has an earlier release's unsealed approval sealed.
		reqAction("have an approval sealed", ap+"reseal"),
		subAction("read reseal requests", "mesh.approval.*.reseal", identity.Responder(approver)),
		// A replay calls tools, but can get no approval a tool host would
		// run one that is not read-only with (rows above and below).
		reqAction("call a destructive tool", "mesh.tool.resources.resources_add", agent, replayer),
		reqAction("call a read-only tool", "mesh.tool.resources.resources_list", agent, replayer),
		subAction("serve tools", "mesh.tool.>", identity.Responder(toolhost)),
		// A role answers only with its responder identity.
		subAction("serve probes", "mesh.node.*.probe", responders()...),
		subAction("read work raw", "mesh.work.>"),
		subAction("read an agent's work raw", "mesh.work.agent.resource-manager.*"),
		reqAction("consume an agent's work", "$JS.API.CONSUMER.CREATE.MESH_WORK.thief.mesh.work.agent.resource-manager.*", agent),
		reqAction("consume all work", "$JS.API.CONSUMER.CREATE.MESH_WORK.thief.mesh.work.>"),
		reqAction("consume work unfiltered", "$JS.API.CONSUMER.CREATE.MESH_WORK.thief"),
		// The bridge's run consumer has several filters, which its create
		// subject cannot name: allowed on MESH_EVENTS, which it may read
		// whole, as a replay may (it reads its conversations' events to
		// remove them one at a time).
		reqAction("consume events unfiltered", "$JS.API.CONSUMER.CREATE.MESH_EVENTS.thief", bridge, replayer),
		reqAction("consume work (legacy durable)", "$JS.API.CONSUMER.DURABLE.CREATE.MESH_WORK.thief"),
		// The bridge checks that a queued turn it published is still there.
		reqAction("get work by sequence", "$JS.API.STREAM.MSG.GET.MESH_WORK", bridge),
		reqAction("get work directly", "$JS.API.DIRECT.GET.MESH_WORK"),
		reqAction("delete the work stream", "$JS.API.STREAM.DELETE.MESH_WORK"),
		// The bridge purges a deleted conversation's events for an admin
		// (DELETE /conversations/{id}?purge=true): that stream only.
		reqAction("purge the events", "$JS.API.STREAM.PURGE.MESH_EVENTS", bridge, replayer),
		reqAction("delete an event", "$JS.API.STREAM.MSG.DELETE.MESH_EVENTS", bridge, replayer),
		reqAction("delete a work item", "$JS.API.STREAM.MSG.DELETE.MESH_WORK"),
		reqAction("delete a conversation's head by sequence", "$JS.API.STREAM.MSG.DELETE.KV_mesh_sessions"),
		reqAction("purge the work", "$JS.API.STREAM.PURGE.MESH_WORK"),
		reqAction("purge the sessions bucket", "$JS.API.STREAM.PURGE.KV_mesh_sessions"),
		reqAction("delete the approvals bucket", "$JS.API.STREAM.DELETE.KV_mesh_approvals"),
		reqAction("change the sessions bucket", "$JS.API.STREAM.UPDATE.KV_mesh_sessions"),
		reqAction("create a stream", "$JS.API.STREAM.CREATE.THIEF"),
		reqAction("delete a work consumer", "$JS.API.CONSUMER.DELETE.MESH_WORK.agent_resource-manager"),
		// The bridge's ops API lists the work consumers' state (no message).
		reqAction("list the work consumers", "$JS.API.CONSUMER.LIST.MESH_WORK", bridge),
		// Acks: of the work queue only by its consumers; the deliveries of
		// a stream a role follows or watches ask for none (AckNone).
		pubAction("ack an agent's work", "$JS.ACK.MESH_WORK.agent_resource-manager.1.7.7.1700000000000000000.0", agent, group, replayer),
		pubAction("ack a delivery of the sessions", "$JS.ACK.KV_mesh_sessions.w1.1.7.7.1700000000000000000.0"),
		pubAction("ack a delivery of the events", "$JS.ACK.MESH_EVENTS.f1.1.7.7.1700000000000000000.0"),
		pubAction("enqueue a turn", "mesh.work.agent.resource-manager.c1", agent, group, approver, bridge),
		// The bridge ends and announces the turns it queued (run_queued, a
		// queued turn cancelled, lost or not taken).
		pubAction("publish a run's end", "mesh.evt.c1.RUN_FINISHED", agent, group, bridge, replayer),
		pubAction("publish a custom event", "mesh.evt.c1.CUSTOM", agent, group, approver, bridge, replayer),
		subAction("read every event raw", "mesh.evt.>"),
		subAction("read run ends raw", "mesh.evt.*.RUN_FINISHED"),
		subAction("read everything", ">"),
		subAction("read every inbox", "_INBOX.>"),
		pubAction("beat as an agent", "mesh.hb.agent.n1", agent),
		subAction("read heartbeats", "mesh.hb.>", monitor),
		pubAction("restart a node", "mesh.node.n1.restart", monitor),
		reqAction("probe a node", "mesh.node.n1.probe", monitor),
		pubAction("cancel a run", "mesh.session.c1.cancel", agent, bridge),
		// The message log: the roles that keep conversations append and
		// read it by direct get; only the bridge purges it (for an admin).
		pubAction("append a message", "mesh.msg.c1", agent, group, bridge, replayer),
		reqAction("get messages directly", "$JS.API.DIRECT.GET.MESH_MESSAGES", agent, group, bridge, replayer),
		reqAction("purge the messages", "$JS.API.STREAM.PURGE.MESH_MESSAGES", bridge, replayer),
		reqAction("delete a message", "$JS.API.STREAM.MSG.DELETE.MESH_MESSAGES", bridge, replayer),
		// The bridge follows the log (what its direct gets read anyway),
		// so that the records of the turns it answers are at hand.
		reqAction("follow the messages", "$JS.API.CONSUMER.CREATE.MESH_MESSAGES.f1.mesh.msg.*", bridge, replayer),
		pubAction("ack a delivery of the messages", "$JS.ACK.MESH_MESSAGES.f1.1.7.7.1700000000000000000.0"),
		// Files: the bridge stores them, the agent and the bridge read them,
		// none but the admin purges the store.
		pubAction("store a file's chunk", "$O.mesh_files.C.abc", bridge),
		pubAction("name a stored file", "$O.mesh_files.M.abc", bridge),
		reqAction("get a file directly", "$JS.API.DIRECT.GET.OBJ_mesh_files.$O.mesh_files.M.abc", agent, bridge),
		reqAction("purge the files", "$JS.API.STREAM.PURGE.OBJ_mesh_files"),
	}
	for _, role := range identity.Roles() {
		acts = append(acts, subAction("read "+role+"'s replies", mesh.DefaultNamespace().Inbox(role)+".>", role))
	}
	acts = append(acts, kvActions("sessions", "c1", []string{agent, group, bridge, replayer}, []string{agent, group, bridge, replayer})...)
	acts = append(acts, kvActions("replays", "r1", []string{bridge, replayer}, []string{replayer})...)
	acts = append(acts, kvActions("approvals", "a1", []string{agent, approver, bridge}, []string{approver})...)
	acts = append(acts, kvActions("approvals", mesh.ApprovalKeysPrefix+"ABC", []string{agent, toolhost, approver, bridge}, []string{approver})...)
	acts = append(acts, kvActions("tools", "resources.resources_add", []string{agent, toolhost, approver, bridge, replayer}, []string{toolhost})...)
	acts = append(acts, kvActions("calls", "k1", []string{toolhost}, []string{toolhost})...)
	acts = append(acts, kvActions("calls", mesh.SubAgentCallKey("k1"), []string{agent, toolhost}, []string{agent, toolhost})...)
	acts = append(acts, kvActions("nodes", "approver.n1", []string{bridge, monitor}, []string{approver, monitor})...)
	acts = append(acts, kvActions("limits", "rate.p.abc", []string{bridge}, []string{bridge})...)
	return acts
}

// Every role × every forbidden action: the server refuses it. A few of the
// role's own actions pass, so the refusals are not a broken connection's.
func TestNATSRolePermissions(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	acts := trustActions()
	for _, role := range identity.Identities() {
		t.Run(role, func(t *testing.T) {
			rc := connectRole(t, m, role)
			var refused []string
			for _, a := range acts {
				if slices.Contains(a.allowed, role) {
					continue
				}
				if err := a.do(rc.nc); err != nil {
					t.Errorf("%s: %v", a.name, err)
					continue
				}
				refused = append(refused, a.subject)
			}
			if err := rc.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			// The refusals come before the flush's PONG; their handlers run
			// on nats.go's own goroutine: give them a moment.
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if !slices.ContainsFunc(refused, func(s string) bool { return !rc.denied(s) }) {
					break
				}
			}
			for _, a := range acts {
				if !slices.Contains(a.allowed, role) && !rc.denied(a.subject) {
					t.Errorf("%s may %s (%s)", role, a.name, a.subject)
				}
			}
			// What the role does for a living passes: a responder serves
			// probes, a role asks what its job needs.
			if strings.HasSuffix(role, identity.ResponderSuffix) {
				if _, err := rc.nc.SubscribeSync("mesh.node.n1.probe"); err != nil {
					t.Fatal(err)
				}
				if err := rc.nc.Flush(); err != nil || rc.deniedSubscription("mesh.node.n1.probe") {
					t.Errorf("%s cannot serve probes: %v", role, err)
				}
				return
			}
			own := map[string]string{
				agent:    "$JS.API.DIRECT.GET.KV_mesh_sessions.$KV.mesh_sessions.c1",
				toolhost: "$JS.API.STREAM.INFO.KV_mesh_tools",
				approver: "$JS.API.DIRECT.GET.KV_mesh_approvals.$KV.mesh_approvals.a1",
				group:    "$JS.API.DIRECT.GET.KV_mesh_sessions.$KV.mesh_sessions.c1",
				bridge:   "$JS.API.STREAM.INFO.MESH_EVENTS",
				monitor:  "$JS.API.DIRECT.GET.KV_mesh_nodes.$KV.mesh_nodes.agent.x",
				replayer: "$JS.API.DIRECT.GET.KV_mesh_replays.$KV.mesh_replays.r1",
			}[role]
			if _, err := rc.nc.Request(own, nil, 5*time.Second); err != nil || rc.denied(own) {
				t.Errorf("%s cannot do its job: %s: %v", role, own, err)
			}
		})
	}
	// The roles' own connections were never refused (checkLogLines), and
	// the mesh still works.
	m.firstTurn("list all resources")
	if status, _ := m.try("GET", "/ready", nil); status != http.StatusOK {
		t.Errorf("/ready %d after the attacks", status)
	}
}

// The table the e2e rows follow and the table in code agree: a row the
// server refused is one the table does not grant, and the other way round.
func TestNATSActionsMatchThePermissionTable(t *testing.T) {
	t.Parallel()
	for _, a := range trustActions() {
		for _, role := range identity.Identities() {
			p, _ := identity.PermissionsOf(mesh.DefaultNamespace(), role)
			can := p.CanPublish(a.subject)
			if strings.HasPrefix(a.name, "read") || strings.HasPrefix(a.name, "serve") {
				can = p.CanSubscribe(a.subject)
			}
			if want := slices.Contains(a.allowed, role); can != want {
				t.Errorf("%s: the table lets %s: %v, the test expects %v", a.name, role, can, want)
			}
		}
	}
}

// On an external server with identities (here a NATS the test runs, with
// the mesh's permissions), `mesh provision` creates the streams and buckets
// as the admin, and a role started by hand with its own seed binds them; a
// role without a known identity exits, saying why.
func TestExternalNATSProvisionThenBind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	creds := filepath.Join(dir, "data", "creds")
	roles := append(identity.Identities(), identity.RoleAdmin)
	keys, err := identity.EnsureSeeds(creds, roles)
	if err != nil {
		t.Fatal(err)
	}
	var users []natsserver.User
	for _, role := range roles {
		p, _ := identity.PermissionsOf(mesh.DefaultNamespace(), role)
		users = append(users, natsserver.User{NKey: keys[role], Permissions: &p})
	}
	srv, err := natsserver.Start(natsserver.Config{Listen: freeAddr(t), StoreDir: filepath.Join(dir, "js"), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	run := func(timeout time.Duration, args []string, env ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "mesh"), args...)
		cmd.Env = append(os.Environ(), "MESH_CONFIG=../../../config/agent.yaml", "MESH_DATA_DIR="+filepath.Join(dir, "data"),
			"NATS_URL="+srv.ClientURL(), "NATS_CREDS=", "NATS_NKEY=", "MESH_LOG_FORMAT=json")
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(30*time.Second, []string{"provision"}); err != nil {
		t.Fatalf("mesh provision: %v\n%s", err, out)
	}
	nc := adminConn(t, srv.ClientURL(), filepath.Join(dir, "data"))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(t.Context(), "mesh_approvals"); err != nil {
		t.Fatalf("mesh provision did not create the buckets: %v", err)
	}
	// The approver binds with its own seed (the data dir's) and serves.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	approver := exec.CommandContext(ctx, filepath.Join(binDir, "mesh"), "approver")
	approver.Env = append(os.Environ(), "MESH_CONFIG=../../../config/agent.yaml", "MESH_DATA_DIR="+filepath.Join(dir, "data"),
		"NATS_URL="+srv.ClientURL(), "NATS_CREDS=", "NATS_NKEY=", "MESH_LOG_FORMAT=json")
	if err := approver.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = approver.Wait() }()
	meshtest.Eventually(t, 30*time.Second, func() bool {
		_, err := nc.Request("$SRV.PING.mesh-approvals", nil, time.Second)
		return err == nil
	}, "the approver started by hand does not answer")
	// Without an identity the server knows, a role says why and exits.
	out, err := run(30*time.Second, []string{"toolhost"}, "MESH_DATA_DIR="+filepath.Join(dir, "elsewhere"))
	if err == nil || !strings.Contains(out, "Authorization Violation") {
		t.Errorf("a toolhost without an identity: %v\n%s", err, out)
	}
}
