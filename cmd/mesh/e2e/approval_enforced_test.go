package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// The tests in this file attack approvals as a process on the NATS port
// would: with a plain nats.go connection that sends what it likes, not
// through the mesh's own client code: the tool host must run nothing
// destructive without the approver's signed approval of that exact call.

// stolenConn is a plain NATS connection with the stolen identity of role:
// the agent's may publish on tool subjects, as an attacker who took an
// agent's (or a tool host's) credentials would.
func (m *meshProc) stolenConn(role string) *nats.Conn {
	m.t.Helper()
	return connectRole(m.t, m, role).nc
}

// rawReply is what a raw tool request got: the error kind and status of
// an error reply, or the result text.
type rawReply struct {
	kind, status, text string
}

// rawToolCall sends body (JSON) on mesh.tool.<server>.<tool> as it is.
func rawToolCall(t *testing.T, nc *nats.Conn, server, tool string, body map[string]any) rawReply {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request("mesh.tool."+server+"."+tool, data, 30*time.Second)
	if err != nil {
		t.Fatalf("request mesh.tool.%s.%s: %v", server, tool, err)
	}
	if msg.Header.Get("Nats-Service-Error-Code") != "" {
		return rawReply{kind: msg.Header.Get("Mesh-Error-Kind"), status: msg.Header.Get("Nats-Service-Error-Code"), text: msg.Header.Get("Nats-Service-Error")}
	}
	var res struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(msg.Data, &res); err != nil {
		t.Fatalf("reply %s: %v", msg.Data, err)
	}
	return rawReply{text: res.Text}
}

// wantRefused fails t unless r is a refusal of kind.
func wantRefused(t *testing.T, what string, r rawReply, kind string) {
	t.Helper()
	if r.kind != kind || r.status != "403" {
		t.Errorf("%s: got %+v, want a 403 %s refusal", what, r, kind)
	}
}

// statementOf reads an approval's signed decision through REST.
func (m *meshProc) statementOf(uuid string) map[string]any {
	m.t.Helper()
	ap := m.do(http.StatusOK, "GET", "/approvals/"+uuid, nil)
	st := obj(ap, "approval", "decision", "statement")
	if str(st, "sig") == "" {
		m.t.Fatalf("approval %s has no signed statement: %v", uuid, ap)
	}
	return st
}

// clone copies a decoded JSON object (one level deep suffices here).
func clone(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = x
	}
	return out
}

// forged is st signed again by a key the mesh does not know.
func forged(t *testing.T, st map[string]any) map[string]any {
	t.Helper()
	kp, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	out := clone(st)
	delete(out, "sig")
	out["key"] = pub
	in, _ := json.Marshal(out) // map keys sorted, as the canonical form has them
	sig, err := kp.Sign(in)
	if err != nil {
		t.Fatal(err)
	}
	out["sig"] = base64.RawURLEncoding.EncodeToString(sig)
	return out
}

// TestDestructiveToolRefusesEveryCallButTheApprovedOne attacks the sample
// server's resources_add from the NATS port: without a signature, with the
// signature of another call, for changed arguments, with a bad or foreign
// signature, with a rejected decision. Nothing runs; the approved call runs
// exactly once however often it is sent.
func TestDestructiveToolRefusesEveryCallButTheApprovedOne(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	nc := m.stolenConn(mesh.RoleAgent)
	args := map[string]any{"name": "intruder", "value": 1}
	wantRefused(t, "no approval", rawToolCall(t, nc, "resources", "resources_add", map[string]any{"call_id": "evil-1", "arguments": args}), "approval_required")
	wantRefused(t, "an approval that is no statement", rawToolCall(t, nc, "resources", "resources_add", map[string]any{"call_id": "evil-1", "arguments": args, "approval": map[string]any{"decision": "approved"}}), "approval_invalid")

	// A real approval, decided by a person through REST.
	conv := m.newConversation()
	ap := m.addPending(conv, "add resource guarded with value 5")
	id := str(ap, "uuid")
	m.do(http.StatusOK, "POST", "/approvals/"+id, map[string]any{"approved": true, "args_hash": str(ap, "args_hash")})
	if n := m.resourceRows("guarded"); n != 1 {
		t.Fatalf("rows of the approved resource = %d, want 1", n)
	}
	st := m.statementOf(id)
	approvedArgs := obj(ap, "tool_args")
	checkStrs(t, "statement", st, map[string]string{"call_id": id, "decision": "approved", "tool": "resources_add", "args_hash": str(ap, "args_hash")})

	badSig := clone(st)
	badSig["by"] = "mallory"
	for _, tt := range []struct {
		name string
		body map[string]any
		kind string
	}{
		{"the approval of another call", map[string]any{"call_id": "evil-2", "arguments": approvedArgs, "approval": st}, "approval_invalid"},
		{"changed arguments", map[string]any{"call_id": id, "arguments": args, "approval": st}, "approval_invalid"},
		{"changed value only", map[string]any{"call_id": id, "arguments": map[string]any{"name": "guarded", "value": 6}, "approval": st}, "approval_invalid"},
		{"a statement changed after signing", map[string]any{"call_id": id, "arguments": approvedArgs, "approval": badSig}, "approval_invalid"},
		{"a key the mesh does not know", map[string]any{"call_id": "evil-3", "arguments": args, "approval": forged(t, map[string]any{
			"type": "agentmesh.approval.v1", "approval_id": "evil-3", "call_id": "evil-3", "server": "resources", "tool": "resources_add",
			"args_hash": "sha256:" + strings.Repeat("0", 64), "decision": "approved", "by": "mallory", "at": time.Now().UTC().Format(time.RFC3339Nano),
		})}, "approval_invalid"},
	} {
		wantRefused(t, tt.name, rawToolCall(t, nc, "resources", "resources_add", tt.body), tt.kind)
	}

	// The approved call sent again, twice: its first result, not a run.
	for i := range 2 {
		r := rawToolCall(t, nc, "resources", "resources_add", map[string]any{"call_id": id, "arguments": approvedArgs, "approval": st})
		if r.kind != "" || !strings.Contains(r.text, "guarded") {
			t.Errorf("replay %d of the approved call: %+v, want its first result", i+1, r)
		}
	}

	// A rejected decision runs nothing.
	conv2 := m.newConversation()
	ap2 := m.addPending(conv2, "add resource refused-one with value 9")
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap2, "uuid"), map[string]any{"approved": false})
	rejected := m.statementOf(str(ap2, "uuid"))
	wantRefused(t, "a rejected decision", rawToolCall(t, nc, "resources", "resources_add",
		map[string]any{"call_id": str(ap2, "uuid"), "arguments": obj(ap2, "tool_args"), "approval": rejected}), "approval_invalid")

	for name, want := range map[string]int{"intruder": 0, "guarded": 1, "refused-one": 0} {
		if n := m.resourceRows(name); n != want {
			t.Errorf("rows named %s = %d, want %d", name, n, want)
		}
	}
}

// TestRewrittenApprovalArgumentsNeverRun rewrites a pending approval's
// arguments in the approvals bucket after the person read them, then
// approves: the approver refuses to sign, and nothing runs.
func TestRewrittenApprovalArgumentsNeverRun(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	// The agent's credentials may only read approvals; the admin's may
	// write anything: the rewrite below uses the strongest there are.
	if agentJS, err := jetstream.New(m.stolenConn(mesh.RoleAgent)); err != nil {
		t.Fatal(err)
	} else if akv, err := agentJS.KeyValue(t.Context(), "mesh_approvals"); err != nil {
		t.Fatal(err)
	} else if _, err := akv.Put(t.Context(), "forged", []byte(`{}`)); err == nil {
		t.Error("an agent's credentials wrote the approvals bucket")
	}
	js, err := jetstream.New(m.adminNATS(t))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), "mesh_approvals")
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(id string, edit func(map[string]any)) {
		t.Helper()
		e, err := kv.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			t.Fatal(err)
		}
		edit(rec)
		data, _ := json.Marshal(rec)
		if _, err := kv.Put(t.Context(), id, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		edit func(map[string]any)
	}{
		{"arguments", func(r map[string]any) { r["tool_args"] = map[string]any{"name": "rewritten", "value": 666} }},
		{"arguments and their hash", func(r map[string]any) {
			r["tool_args"] = map[string]any{"name": "rewritten", "value": 666}
			r["args_hash"] = "sha256:" + strings.Repeat("ab", 32)
			obj(r, "seal")["args_hash"] = r["args_hash"]
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conv := m.newConversation()
			ap := m.addPending(conv, "add resource honest with value 1")
			id := str(ap, "uuid")
			rewrite(id, tt.edit)
			out := m.do(http.StatusConflict, "POST", "/approvals/"+id, map[string]any{"approved": true})
			if str(out, "code") != "approval_tampered" {
				t.Errorf("approving a rewritten approval: %v, want approval_tampered", out)
			}
			// What the person saw, sent with the decision, is refused too.
			out = m.do(http.StatusConflict, "POST", "/approvals/"+id, map[string]any{"approved": true, "args_hash": str(ap, "args_hash")})
			if code := str(out, "code"); code != "approval_tampered" && code != "approval_args_changed" {
				t.Errorf("approving with the hash shown: %v", out)
			}
			// It can be rejected, so the conversation goes on.
			m.do(http.StatusOK, "POST", "/approvals/"+id, map[string]any{"approved": false})
			for _, name := range []string{"rewritten", "honest"} {
				if n := m.resourceRows(name); n != 0 {
					t.Errorf("rows named %s = %d, want 0", name, n)
				}
			}
		})
	}
}

// TestNPMFilesystemServerWritesOnlyWhatWasApproved hosts the npm
// @modelcontextprotocol/server-filesystem and attacks its write_file: only
// the approved call writes, once.
func TestNPMFilesystemServerWritesOnlyWhatWasApproved(t *testing.T) {
	t.Parallel()
	nodeWith(t, "@modelcontextprotocol/server-filesystem")
	script, err := filepath.Abs(filepath.Join(peersDir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	files, _ = filepath.EvalSymlinks(files)
	cfg := defaultConfig(t) + "  - name: files\n    command: node\n    args: [\"" + script + "\", \"" + files + "\"]\n"
	m := startMesh(t, meshOpts{config: cfg})
	nc := m.stolenConn(mesh.RoleAgent)
	waitServed(t, nc, "files", "write_file")

	target := filepath.Join(files, "approved.txt")
	args := map[string]any{"path": target, "content": "approved content"}
	wantRefused(t, "write_file without approval", rawToolCall(t, nc, "files", "write_file", map[string]any{"call_id": "w-1", "arguments": args}), "approval_required")
	if _, err := os.Stat(target); err == nil {
		t.Fatal("write_file ran without an approval")
	}

	// A person approves exactly this call: the agent asks the approver (on
	// its subject, as the agent role does), a person decides through REST.
	conv := m.newConversation()
	id := "8d4c29a4-5a0e-4c47-9a51-" + "0123456789ab"
	ask, _ := json.Marshal(map[string]any{"conversation_id": conv, "agent": "resource-manager", "run_id": "r", "tool_call_id": "c",
		"tool_name": "write_file", "server": "files", "tool": "write_file", "tool_args": args, "description": "write approved.txt"})
	reply, err := nc.Request("mesh.approval."+id+".request", ask, 10*time.Second)
	if err != nil || reply.Header.Get("Nats-Service-Error") != "" {
		t.Fatalf("ask the approver: %v %v", err, reply.Header)
	}
	// The resume finds no run waiting for it, so the answer is 202.
	if status, out := m.try("POST", "/approvals/"+id, map[string]any{"approved": true}); status != http.StatusOK && status != http.StatusAccepted {
		t.Fatalf("approve: %d %v", status, out)
	}
	st := m.statementOf(id)

	other := filepath.Join(files, "other.txt")
	wantRefused(t, "another path", rawToolCall(t, nc, "files", "write_file",
		map[string]any{"call_id": id, "arguments": map[string]any{"path": other, "content": "approved content"}, "approval": st}), "approval_invalid")
	wantRefused(t, "other content", rawToolCall(t, nc, "files", "write_file",
		map[string]any{"call_id": id, "arguments": map[string]any{"path": target, "content": "evil"}, "approval": st}), "approval_invalid")
	wantRefused(t, "another call id", rawToolCall(t, nc, "files", "write_file",
		map[string]any{"call_id": "w-2", "arguments": args, "approval": st}), "approval_invalid")

	r := rawToolCall(t, nc, "files", "write_file", map[string]any{"call_id": id, "arguments": args, "approval": st})
	if r.kind != "" {
		t.Fatalf("the approved call: %+v", r)
	}
	data, err := os.ReadFile(target)
	if err != nil || string(data) != "approved content" {
		t.Fatalf("approved.txt = %q, %v", data, err)
	}
	// Sent again, it does not run again: the file removed stays removed.
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	if r := rawToolCall(t, nc, "files", "write_file", map[string]any{"call_id": id, "arguments": args, "approval": st}); r.kind != "" {
		t.Errorf("the approved call sent again: %+v, want its first result", r)
	}
	for _, p := range []string{target, other} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists: a call ran that should not have", filepath.Base(p))
		}
	}
}

// waitServed waits until a tool host answers on server's tool (a refusal
// is an answer).
func waitServed(t *testing.T, nc *nats.Conn, server, tool string) {
	t.Helper()
	meshtest.Eventually(t, 90*time.Second, func() bool {
		msg, err := nc.Request("mesh.tool."+server+"."+tool, []byte(`{}`), 5*time.Second)
		return err == nil && msg.Header.Get("Mesh-Error-Kind") != "tool_unavailable"
	}, "no tool host serves %s.%s", server, tool)
}
