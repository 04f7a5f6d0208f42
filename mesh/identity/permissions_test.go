package identity_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

var update = flag.Bool("update", false, "rewrite testdata/permissions.md")

// TestPermissionsTable pins the permission table: its markdown rendering is
// testdata/permissions.md (go test ./mesh/identity -run TestPermissionsTable -update
// rewrites it; ARCHITECTURE.md carries the same table).
func TestPermissionsTable(t *testing.T) {
	got := identity.PermissionsMarkdown(mesh.DefaultNamespace())
	meshtest.Golden(t, filepath.Join("testdata", "permissions.md"), got, *update)
	if testing.Verbose() {
		t.Log("\n" + got)
	}
}

// TestPermissionsHold checks the rules the threat model names against the
// table (the e2e tests check them against the server).
func TestPermissionsHold(t *testing.T) {
	ns := mesh.DefaultNamespace()
	perms := map[string]identity.Permissions{}
	identities := append(identity.Identities(), identity.RoleAdmin)
	for _, role := range identities {
		p, ok := identity.PermissionsOf(ns, role)
		if !ok {
			t.Fatalf("no permissions for %s", role)
		}
		perms[role] = p
	}
	for _, name := range []string{"nobody", "nobody" + identity.ResponderSuffix, identity.Responder(identity.RoleAdmin), identity.RoleLeaf} {
		if _, ok := identity.PermissionsOf(ns, name); ok {
			t.Errorf("%s has permissions", name)
		}
	}
	streams := map[string]string{ns.Stream(mesh.StreamWork): ns.WorkAll(), ns.Stream(mesh.StreamEvents): ns.EventsAll()}
	approval := "mesh.approval.0f0e0d0c-1111-2222-3333-444455556666."
	for _, c := range []struct {
		rule    string
		subject string
		pub     bool // publish (else read: subscribe or consume)
		allowed []string
	}{
		{"only the bridge (and admin) decides approvals", approval + "decide", true, []string{mesh.RoleBridge, identity.RoleAdmin}},
		{"only approvers' responders see decisions", approval + "decide", false, []string{identity.Responder(mesh.RoleApprover), identity.RoleAdmin}},
		{"only approvers' responders see approval requests", approval + "request", false, []string{identity.Responder(mesh.RoleApprover), identity.RoleAdmin}},
		{"only the agent asks for approvals", approval + "request", true, []string{mesh.RoleAgent, identity.RoleAdmin}},
		{"only toolhosts' responders receive tool calls", "mesh.tool.resources.resources_add", false, []string{identity.Responder(mesh.RoleToolhost), identity.RoleAdmin}},
		// A replay calls tools too: the tool host runs one that is not
		// read-only only with a signed statement, which a replay cannot get.
		{"only agents and replays call tools", "mesh.tool.resources.resources_add", true, []string{mesh.RoleAgent, mesh.RoleReplay, identity.RoleAdmin}},
		{"a replay asks for no approval", approval + "request", true, []string{mesh.RoleAgent, identity.RoleAdmin}},
		{"a replay reads no approval", "$JS.API.DIRECT.GET.KV_mesh_approvals.$KV.mesh_approvals.a1", true, []string{mesh.RoleAgent, mesh.RoleApprover, mesh.RoleBridge, identity.RoleAdmin}},
		{"a replay reads no call record", "$JS.API.DIRECT.GET.KV_mesh_calls.$KV.mesh_calls.c1", true, []string{mesh.RoleToolhost, identity.RoleAdmin}},
		{"only replays read their work", "mesh.work.replay.replay-r1.c1", false, []string{mesh.RoleReplay, mesh.RoleBridge, identity.RoleAdmin}},
		{"only replays write their reports", "$KV.mesh_replays.r1", true, []string{mesh.RoleReplay, identity.RoleAdmin}},
		// The bridge reads work items only to see whether one it queued is
		// still there; it published them and holds the tokens they carry.
		{"only agents (and the bridge) read work", "mesh.work.agent.resource-manager.c1", false, []string{mesh.RoleAgent, mesh.RoleBridge, identity.RoleAdmin}},
		{"only groups (and the bridge) read group work", "mesh.work.group.panel.c1", false, []string{mesh.RoleGroup, mesh.RoleBridge, identity.RoleAdmin}},
		// Only a work queue's consumers ack; followers and watchers ack
		// nothing.
		{"nobody acks a delivery of the events", "$JS.ACK.MESH_EVENTS.f1.1.5.5.1700000000000000000.0", true, []string{identity.RoleAdmin}},
		{"only agents, groups and replays ack their work", "$JS.ACK.MESH_WORK.resource-manager.1.5.5.1700000000000000000.0", true, []string{mesh.RoleAgent, mesh.RoleGroup, mesh.RoleReplay, identity.RoleAdmin}},
		{"only agents, groups and replays ack their work (v2 form)", "$JS.ACK.hub.ACC.MESH_WORK.resource-manager.1.5.5.1700000000000000000.0.x", true, []string{mesh.RoleAgent, mesh.RoleGroup, mesh.RoleReplay, identity.RoleAdmin}},
		{"only the admin deletes a stream", "$JS.API.STREAM.DELETE.MESH_WORK", true, []string{identity.RoleAdmin}},
		// The bridge purges a deleted conversation's events for an admin's
		// DELETE ?purge=true, a replay its own conversations' after its
		// report: the events stream only.
		{"only the admin, the bridge and replays purge the events stream", "$JS.API.STREAM.PURGE.MESH_EVENTS", true, []string{mesh.RoleBridge, mesh.RoleReplay, identity.RoleAdmin}},
		{"only the admin purges the work stream", "$JS.API.STREAM.PURGE.MESH_WORK", true, []string{identity.RoleAdmin}},
		{"those who purge the events delete them one at a time", "$JS.API.STREAM.MSG.DELETE.MESH_EVENTS", true, []string{mesh.RoleBridge, mesh.RoleReplay, identity.RoleAdmin}},
		{"only the admin deletes a work item", "$JS.API.STREAM.MSG.DELETE.MESH_WORK", true, []string{identity.RoleAdmin}},
		{"only the admin purges a bucket's stream", "$JS.API.STREAM.PURGE.KV_mesh_sessions", true, []string{identity.RoleAdmin}},
		{"only the admin purges the approvals", "$JS.API.STREAM.PURGE.KV_mesh_approvals", true, []string{identity.RoleAdmin}},
		{"only the admin creates a stream", "$JS.API.STREAM.CREATE.X", true, []string{identity.RoleAdmin}},
		{"only the admin reads work by sequence", "$JS.API.DIRECT.GET.MESH_WORK", true, []string{identity.RoleAdmin}},
		{"only the admin and the bridge (its queued turns) read work by sequence", "$JS.API.STREAM.MSG.GET.MESH_WORK", true, []string{mesh.RoleBridge, identity.RoleAdmin}},
		{"only roles that need them read sessions", "$JS.API.DIRECT.GET.KV_mesh_sessions.$KV.mesh_sessions.c1", true, []string{mesh.RoleAgent, mesh.RoleGroup, mesh.RoleBridge, mesh.RoleReplay, identity.RoleAdmin}},
		{"only the agent heartbeats as agent", "mesh.hb.agent.n1", true, []string{mesh.RoleAgent, identity.RoleAdmin}},
		{"only the agent writes its node key", "$KV.mesh_nodes.agent.n1", true, []string{mesh.RoleAgent, mesh.RoleMonitor, identity.RoleAdmin}},
		{"only the monitor reads heartbeats", "mesh.hb.agent.n1", false, []string{mesh.RoleMonitor, identity.RoleAdmin}},
		{"only the monitor restarts nodes", "mesh.node.n1.restart", true, []string{mesh.RoleMonitor, identity.RoleAdmin}},
		{"nobody reads another role's replies", "_INBOX.mesh.agent.abc", false, []string{mesh.RoleAgent, identity.RoleAdmin}},
		{"only the approver writes approvals", "$KV.mesh_approvals.a1", true, []string{mesh.RoleApprover, identity.RoleAdmin}},
		{"only the approver publishes its keys", "$KV.mesh_approvals." + mesh.ApprovalKeysPrefix + "K", true, []string{mesh.RoleApprover, identity.RoleAdmin}},
		{"only tool hosts write tool call records", "$KV.mesh_calls.c1", true, []string{mesh.RoleToolhost, identity.RoleAdmin}},
		{"agents write their sub-agent call records", "$KV.mesh_calls." + mesh.SubAgentCallKey("c1"), true, []string{mesh.RoleAgent, mesh.RoleToolhost, identity.RoleAdmin}},
		{"only bridges spend request budgets", "$KV.mesh_limits." + limits.Key(limits.RatePrincipal, "alice"), true, []string{mesh.RoleBridge, identity.RoleAdmin}},
		{"only bridges store files", "$O.mesh_files.C.abc", true, []string{mesh.RoleBridge, identity.RoleAdmin}},
		{"only bridges name stored files", "$O.mesh_files.M.abc", true, []string{mesh.RoleBridge, identity.RoleAdmin}},
		{"only agents and bridges read files", "$JS.API.DIRECT.GET.OBJ_mesh_files.$O.mesh_files.M.abc", true, []string{mesh.RoleAgent, mesh.RoleBridge, identity.RoleAdmin}},
		{"only agents and bridges follow file chunks", "$JS.API.CONSUMER.CREATE.OBJ_mesh_files.x.$O.mesh_files.C.abc", true, []string{mesh.RoleAgent, mesh.RoleBridge, identity.RoleAdmin}},
		{"only the admin purges the files", "$JS.API.STREAM.PURGE.OBJ_mesh_files", true, []string{identity.RoleAdmin}},
		{"only agents write the daily spend", "$KV.mesh_usage.2026-12-07.abc", true, []string{mesh.RoleAgent, identity.RoleAdmin}},
		{"only agents and bridges read the daily spend", "$JS.API.DIRECT.GET.KV_mesh_usage.$KV.mesh_usage.2026-12-07.abc", true, []string{mesh.RoleAgent, mesh.RoleBridge, identity.RoleAdmin}},
		{"only bridges read the limits", "$JS.API.DIRECT.GET.KV_mesh_limits.$KV.mesh_limits." + limits.ActiveAll, true, []string{mesh.RoleBridge, identity.RoleAdmin}},
	} {
		var got []string
		for _, role := range identities {
			p := perms[role]
			if c.pub && p.CanPublish(c.subject) || !c.pub && p.CanRead(c.subject, streams) {
				got = append(got, role)
			}
		}
		if !slices.Equal(sorted(got), sorted(c.allowed)) {
			t.Errorf("%s: %s allowed to %v, want %v", c.rule, c.subject, got, c.allowed)
		}
	}
	// A reply is a publish to the subject the requester chose: an identity
	// that receives requests of others may publish nothing but answers to
	// inboxes, and only those of the roles that may ask it and of
	// operators' clients.
	for _, name := range identities {
		p := perms[name]
		if name == identity.RoleAdmin || !slices.ContainsFunc(p.Grants, func(g identity.Grant) bool { return g.Kind == identity.GrantServe }) {
			continue
		}
		for _, pub := range p.Publish {
			if !strings.HasPrefix(pub, "_INBOX.") {
				t.Errorf("%s serves requests and may publish to %s, which is no inbox", name, pub)
			}
			for _, other := range identity.Roles() {
				inbox := ns.Inbox(other) + ".x.y"
				if identity.SubjectMatches(pub, inbox) && !calls(t, ns, other, name) {
					t.Errorf("%s may answer into %s's inbox (%s), but %s asks it nothing", name, other, pub, other)
				}
			}
		}
	}
	for _, role := range identity.Roles() {
		if w := perms[role].CanPublish("$KV.mesh_approvals.x"); w != (role == mesh.RoleApprover || role == mesh.RoleAgent && agentStillWritesApprovals(t)) {
			t.Errorf("%s may write mesh_approvals: %v", role, w)
		}
	}
}

// calls reports whether role may request something that responder
// subscribes to.
func calls(t *testing.T, ns mesh.Namespace, role, responder string) bool {
	t.Helper()
	rp, _ := identity.PermissionsOf(ns, role)
	sp, _ := identity.PermissionsOf(ns, responder)
	for _, g := range rp.Grants {
		if g.Kind != identity.GrantRequest {
			continue
		}
		for _, sub := range sp.Subscribe {
			if identity.SubjectsOverlap(g.Subject, sub) {
				return true
			}
		}
	}
	return false
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// agentStillWritesApprovals reports whether the agent's code still writes
// approvals itself, the one grant the table keeps until the approver
// records them: the table and the code must change together.
func agentStillWritesApprovals(t *testing.T) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "nodes", "agent", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("agent sources: %v", err)
	}
	create := regexp.MustCompile(`approvals\.Create\(`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if create.Match(data) {
			return true
		}
	}
	return false
}

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"mesh.evt.>", "mesh.evt.a.RUN_STARTED", true},
		{"mesh.evt.>", "mesh.evt", false},
		{"mesh.evt.*.CUSTOM", "mesh.evt.a.CUSTOM", true},
		{"mesh.evt.*.CUSTOM", "mesh.evt.a.b.CUSTOM", false},
		{"mesh.work.agent.*", "mesh.work.agent.>", false},
		{"mesh.work.agent.*", "mesh.work.agent.*", true},
		{"a.b", "a.b", true},
		{"a.b", "a.b.c", false},
		{"", "a", false},
	} {
		if got := identity.SubjectMatches(c.pattern, c.subject); got != c.want {
			t.Errorf("SubjectMatches(%q, %q) = %v, want %v", c.pattern, c.subject, got, c.want)
		}
	}
}

func TestSubjectsOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"$SRV.PING.mesh-tools", "$SRV.*.mesh-tools", true},
		{"$SRV.PING.mesh-tools", "$SRV.*", false},
		{"mesh.tool.>", "mesh.tool.resources.resources_add", true},
		{"mesh.tool.>", "mesh.tool", false},
		{"mesh.node.*.probe", "mesh.node.n1.probe", true},
		{"mesh.node.*.probe", "mesh.node.*.restart", false},
		{"mesh.approval.*.request", "mesh.approval.*.decide", false},
		{"_INBOX.*.*", "_INBOX.mesh.agent.>", false},
		{"_INBOX.*.*", "_INBOX.mesh.agent", true},
		{">", "a", true},
		{"a.*.c", "a.b.*", true},
		{"", "a", false},
	} {
		for _, ab := range [][2]string{{c.a, c.b}, {c.b, c.a}} {
			if got := identity.SubjectsOverlap(ab[0], ab[1]); got != c.want {
				t.Errorf("SubjectsOverlap(%q, %q) = %v, want %v", ab[0], ab[1], got, c.want)
			}
		}
	}
}

// ARCHITECTURE.md's summary of the permissions is the first table of
// testdata/permissions.md, word for word: the document cannot drift from
// the code.
func TestArchitectureCarriesThePermissionsTable(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "permissions.md"))
	if err != nil {
		t.Fatal(err)
	}
	summary, _, _ := strings.Cut(string(golden), "\n\n")
	doc, err := os.ReadFile(filepath.Join("..", "..", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), summary) {
		t.Errorf("ARCHITECTURE.md does not carry the summary table of testdata/permissions.md; copy it there:\n%s", summary)
	}
}
