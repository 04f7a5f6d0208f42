package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// The tests of this file attack `mesh up` with the agent's stolen identity
// (the role that runs model output, so the one a prompt injection reaches
// first) by aiming replies: on NATS a requester chooses the reply subject,
// and a responder's answer is a publish there. The mesh's promise: no reply
// changes a bucket, no destructive call runs without a person, and no
// pending approval can be swapped or destroyed.

// refusedReply waits until the mesh's log says the server refused a reply
// aimed at subject: the attack was made, and the server stopped it.
func (m *meshProc) refusedReply(subject string) {
	m.t.Helper()
	meshtest.Eventually(m.t, 15*time.Second, func() bool {
		for _, line := range strings.Split(m.logs(), "\n") {
			if strings.Contains(line, "refused a reply aimed outside the inboxes") && strings.Contains(line, `"subject":"`+subject+`"`) {
				return true
			}
		}
		return false
	}, "no responder was refused a reply aimed at %s", subject)
}

// kvRevision is the revision of key in bucket, 0 when it has none.
func kvRevision(t *testing.T, js jetstream.JetStream, bucket, key string) (uint64, []byte) {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), key)
	if err != nil {
		return 0, nil
	}
	return e.Revision(), e.Value()
}

// TestAimedRepliesSwapNoApprovalAndRunNothing is the probe's three attacks:
// a read-only tool call whose reply is aimed at a destructive tool's catalog
// entry (so that a policy would take it for harmless), an approval request
// whose reply is aimed at a real pending approval (to swap it for a sealed
// record of another call), and replies aimed at any key (to destroy a
// pending approval, or break the catalog). Nothing changes: the catalog
// entry and the approval keep their revision, GET /tools works, a policy
// refuses the destructive tool, and the person's plain {"approved": true}
// runs the call they were shown, not the attacker's.
func TestAimedRepliesSwapNoApprovalAndRunNothing(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	js, err := jetstream.New(m.adminNATS(t))
	if err != nil {
		t.Fatal(err)
	}
	// A resource the attacker wants gone, and a call waiting for a person.
	kept := m.newConversation()
	ap := m.addPending(kept, "add resource keep-me with value 1")
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
	if n := m.resourceRows("keep-me"); n != 1 {
		t.Fatalf("keep-me rows = %d, want 1", n)
	}
	conv := m.newConversation()
	pending := m.addPending(conv, "add resource shown-to-the-person with value 2")
	victim := str(pending, "uuid")
	other := str(m.addPending(m.newConversation(), "add resource another-one with value 3"), "uuid")
	const removeKey = "resources.resources_remove"
	toolRev, toolEntry := kvRevision(t, js, "mesh_tools", removeKey)
	apRev, apRecord := kvRevision(t, js, "mesh_approvals", victim)
	otherRev, otherRecord := kvRevision(t, js, "mesh_approvals", other)
	if toolRev == 0 || apRev == 0 || otherRev == 0 {
		t.Fatalf("no catalog entry (%d) or approvals (%d, %d) to attack", toolRev, apRev, otherRev)
	}

	nc := m.stolenConn(agent)
	listCall := []byte(`{"arguments":{}}`)
	// 1. A read-only call, its result aimed at the destructive tool's entry.
	if err := nc.PublishRequest("mesh.tool.resources.resources_list", "$KV.mesh_tools."+removeKey, listCall); err != nil {
		t.Fatal(err)
	}
	// 2. A sealed record of another call, aimed at the pending approval.
	swap, _ := json.Marshal(mesh.Approval{
		ConversationID: conv, Agent: "resource-manager", RunID: "r1", ToolCallID: "swap-1",
		ToolName: "resources_remove", Server: "resources", Tool: "resources_remove",
		ToolArgs: map[string]any{"pattern": ".*"}, Description: str(pending, "description"),
	})
	if err := nc.PublishRequest("mesh.approval."+mesh.NewID()+".request", "$KV.mesh_approvals."+victim, swap); err != nil {
		t.Fatal(err)
	}
	// 3. Anything at all, aimed at another approval and at the catalog.
	for _, target := range []string{"$KV.mesh_approvals." + other, "$KV.mesh_tools.resources.resources_add"} {
		if err := nc.PublishRequest("mesh.tool.resources.resources_list", target, listCall); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	m.refusedReply("$KV.mesh_tools." + removeKey)
	m.refusedReply("$KV.mesh_approvals." + victim)
	m.refusedReply("$KV.mesh_approvals." + other)
	m.refusedReply("$KV.mesh_tools.resources.resources_add")

	if rev, value := kvRevision(t, js, "mesh_tools", removeKey); rev != toolRev || !bytes.Equal(value, toolEntry) {
		t.Errorf("the catalog entry of resources_remove changed: revision %d → %d:\n%s", toolRev, rev, value)
	}
	if rev, value := kvRevision(t, js, "mesh_approvals", victim); rev != apRev || !bytes.Equal(value, apRecord) {
		t.Errorf("the pending approval changed: revision %d → %d:\n%s", apRev, rev, value)
	}
	if rev, value := kvRevision(t, js, "mesh_approvals", other); rev != otherRev || !bytes.Equal(value, otherRecord) {
		t.Errorf("the other pending approval changed: revision %d → %d:\n%s", otherRev, rev, value)
	}
	if status, _ := m.try("GET", "/approvals/"+other, nil); status != http.StatusOK {
		t.Errorf("GET /approvals/%s: %d, want the pending approval", other, status)
	}
	out := m.do(http.StatusOK, "GET", "/tools", nil)
	var remove map[string]any
	for _, tl := range list(out, "tools") {
		if str(tl, "name") == "resources_remove" {
			remove = obj(tl)
		}
	}
	if remove == nil || remove["destructiveHint"] != true {
		t.Errorf("GET /tools: resources_remove is %v, want it listed as destructive", remove)
	}
	// The agent asks for the destructive call by policy: refused.
	byPolicy, _ := json.Marshal(mesh.Approval{
		ConversationID: conv, Agent: "resource-manager", RunID: "r1", ToolCallID: "policy-1", CallID: "policy-1",
		ToolName: "resources_remove", Server: "resources", Tool: "resources_remove",
		ToolArgs: map[string]any{"pattern": ".*"}, Policy: mesh.PolicyNonDestructive,
	})
	reply, err := nc.Request("mesh.approval."+mesh.NewID()+".request", byPolicy, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if kind := reply.Header.Get("Mesh-Error-Kind"); kind != "approval_policy" {
		t.Errorf("a policy approval of resources_remove: %q %s, want refused (approval_policy)", kind, reply.Data)
	}
	// The person approves what they were shown, with no argument hash.
	got := m.do(http.StatusOK, "GET", "/approvals/"+victim, nil)
	if str(got, "approval", "tool_name") != "resources_add" || str(obj(got, "approval", "tool_args"), "name") != "shown-to-the-person" {
		t.Errorf("the approval shown is %v", obj(got, "approval"))
	}
	m.try("POST", "/approvals/"+victim, map[string]any{"approved": true})
	if n := m.resourceRows("shown-to-the-person"); n != 1 {
		t.Errorf("rows of the approved call = %d, want 1", n)
	}
	if n := m.resourceRows("keep-me"); n != 1 {
		t.Errorf("keep-me rows = %d after the attack, want 1: something removed it", n)
	}
}

// TestAimedRepliesReachNoSubjectButInboxes aims the replies of every
// service the stolen agent, monitor and bridge identities may ask (a tool
// call, an approval request, a liveness probe, a decision, a discovery
// ping) at a key of every bucket, at stream subjects and at other roles'
// subjects: no answer arrives anywhere (the admin sees every message of the
// server), and the keys aimed at stay absent. A push consumer aimed at a
// bucket (its deliver subject) stores nothing there either.
func TestAimedRepliesReachNoSubjectButInboxes(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	admin := m.adminNATS(t)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ghost := mesh.NewID() // a conversation, approval and node that do not exist
	targets := []string{
		"$KV.mesh_sessions." + ghost, "$KV.mesh_approvals." + ghost, "$KV.mesh_approvals." + mesh.ApprovalKeysPrefix + "ATTACKER",
		"$KV.mesh_tools.resources.ghost", "$KV.mesh_nodes.toolhost.ghost", "$KV.mesh_calls." + ghost, "$KV.mesh_limits.rate.p.ghost",
		"$O.mesh_files.C." + ghost, "$O.mesh_files.M." + ghost,
		"mesh.work.agent.resource-manager." + ghost, "mesh.evt." + ghost + ".RUN_FINISHED", "mesh.msg." + ghost,
		"mesh.approval." + ghost + ".decide", "mesh.session." + ghost + ".cancel", "mesh.hb.toolhost.ghost", "mesh.node.ghost.restart",
		"mesh.tool.resources.resources_remove",
	}
	var mu sync.Mutex
	seen := map[string]int{}
	tap, err := admin.Subscribe(">", func(msg *nats.Msg) {
		mu.Lock()
		seen[msg.Subject]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = tap.SetPendingLimits(-1, -1)
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	// A node to probe: the tool host's.
	var toolhostNode string
	nodes, err := js.KeyValue(t.Context(), "mesh_nodes")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := nodes.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if node, ok := strings.CutPrefix(k, "toolhost."); ok {
			toolhostNode = node
		}
	}
	if toolhostNode == "" {
		t.Fatalf("no toolhost node among %v", keys)
	}
	asks := []struct {
		role, subject string
		body          []byte
	}{
		{agent, "mesh.tool.resources.resources_list", []byte(`{"arguments":{}}`)},
		{agent, "mesh.approval." + mesh.NewID() + ".request", []byte(`{"conversation_id":"` + ghost + `","agent":"resource-manager","tool_name":"resources_add","server":"resources","tool":"resources_add","tool_args":{"name":"x","value":1}}`)},
		{monitor, "mesh.node." + toolhostNode + ".probe", nil},
		{bridge, "mesh.approval." + mesh.NewID() + ".decide", []byte(`{"approved":true}`)},
		{bridge, "$SRV.PING.mesh-tools", nil},
		{bridge, "$SRV.PING.mesh-approvals", nil},
	}
	for _, a := range asks {
		nc := m.stolenConn(a.role)
		for _, target := range targets {
			if err := nc.PublishRequest(a.subject, target, a.body); err != nil {
				t.Fatalf("%s asks %s: %v", a.role, a.subject, err)
			}
		}
		// And one answer that may go: to an inbox of the asker.
		if msg, err := nc.Request(a.subject, a.body, 15*time.Second); err != nil {
			t.Errorf("%s asks %s with its own inbox: %v", a.role, a.subject, err)
		} else if a.role == bridge && strings.Contains(a.subject, ".decide") && msg.Header.Get("Mesh-Error-Kind") == "" {
			t.Errorf("a decision on an approval that does not exist was taken: %s", msg.Data)
		}
	}
	// A push consumer of the catalog that delivers into the sessions
	// bucket: the server delivers there (to a subscriber of that very
	// subject, under the catalog's subjects, as a push consumer's messages
	// show), but no stream stores what a consumer delivers.
	delivered := mesh.NewID()
	cfg, _ := json.Marshal(map[string]any{"stream_name": "KV_mesh_tools", "config": map[string]any{
		"deliver_subject": "$KV.mesh_sessions." + delivered, "filter_subject": "$KV.mesh_tools.>", "ack_policy": "none", "deliver_policy": "all"}})
	created, err := m.stolenConn(agent).Request("$JS.API.CONSUMER.CREATE.KV_mesh_tools.thief.$KV.mesh_tools.>", cfg, 5*time.Second)
	if err != nil || bytes.Contains(created.Data, []byte(`"error"`)) {
		t.Fatalf("create the consumer: %v %s", err, created.Data)
	}
	watch, err := admin.SubscribeSync("$KV.mesh_sessions." + delivered)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := watch.NextMsg(10 * time.Second); err != nil || !strings.HasPrefix(msg.Reply, "$JS.ACK.KV_mesh_tools.thief.") {
		t.Fatalf("the consumer delivered nothing (%v): the test proves nothing about it", err)
	}
	m.refusedReply("$KV.mesh_sessions." + ghost)
	m.refusedReply("mesh.approval." + ghost + ".decide")
	// The last refused answers have been logged; let the tap catch up.
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	for _, target := range targets {
		if seen[target] > 0 {
			t.Errorf("%d messages reached %s", seen[target], target)
		}
	}
	mu.Unlock()
	for _, k := range []struct{ bucket, key string }{
		{"mesh_sessions", ghost}, {"mesh_sessions", delivered}, {"mesh_approvals", ghost}, {"mesh_approvals", mesh.ApprovalKeysPrefix + "ATTACKER"},
		{"mesh_tools", "resources.ghost"}, {"mesh_nodes", "toolhost.ghost"}, {"mesh_calls", ghost}, {"mesh_limits", "rate.p.ghost"},
	} {
		if rev, value := kvRevision(t, js, k.bucket, k.key); rev != 0 {
			t.Errorf("%s %s was written (revision %d): %s", k.bucket, k.key, rev, value)
		}
	}
	if status, _ := m.try("GET", "/tools", nil); status != http.StatusOK {
		t.Errorf("GET /tools %d after the attacks", status)
	}
}
