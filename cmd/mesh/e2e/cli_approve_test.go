package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCLIApproveRecordsWhoDecided: `mesh approve` with HTTP authentication
// on lists the pending approvals oldest first with who asked and what,
// shows one, decides as the token's principal (whatever the CLI would
// claim), and a second approver's decision says who decided first and
// exits 1.
func TestCLIApproveRecordsWhoDecided(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{config: authCLIConfig(t)})
	alice, ops, kim := []string{"MESH_TOKEN=" + aliceToken}, []string{"MESH_TOKEN=" + opsToken}, []string{"MESH_TOKEN=" + kimToken}

	var convs, uuids []string
	for _, name := range []string{"web-1", "web-2"} {
		out := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"message": "add resource " + name + " with value 7"}, bearer(aliceToken)...)
		if !strings.Contains(str(out, "result", "approval", "uuid"), "-") {
			t.Fatalf("no approval: %v", out)
		}
		convs = append(convs, str(out, "conversation", "id"))
		uuids = append(uuids, str(out, "result", "approval", "uuid"))
	}

	// A user may not decide.
	if r := m.mustCLI(1, "", alice, "approve", "yes", uuids[0]); !strings.Contains(r.stderr, "may not") {
		t.Errorf("a user's decision: %s", r)
	}
	if r := m.mustCLI(1, "", nil, "approve", "list"); !strings.Contains(r.stderr, "MESH_TOKEN") {
		t.Errorf("no token: %s", r)
	}

	// The list, oldest first, with who asked and what.
	r := m.mustCLI(0, "", ops, "approve", "list", "--json")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("approve list --json: %v\n%s", err, r)
	}
	if str(listed[0], "uuid") != uuids[0] || str(listed[1], "uuid") != uuids[1] {
		t.Errorf("listed %s, %s; want %v, oldest first", str(listed[0], "uuid"), str(listed[1], "uuid"), uuids)
	}
	r = m.mustCLI(0, "", ops, "approve")
	for _, want := range []string{"ASKED BY", uuids[0], "resource-manager", convs[0], "resources.resources_add", `{"name":"web-1","value":7}`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("approve (list) lacks %q:\n%s", want, r)
		}
	}
	if strings.Index(r.stdout, uuids[0]) > strings.Index(r.stdout, uuids[1]) {
		t.Errorf("the older approval is not first:\n%s", r.stdout)
	}
	// A table at a terminal shows 8 runes of an id: that prefix names it.
	r = m.mustCLI(0, "", ops, "approve", "show", uuids[0][:8])
	for _, want := range []string{"status        pending", "resources.resources_add", `"name": "web-1"`, convs[0]} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("approve show lacks %q:\n%s", want, r)
		}
	}

	// ops approves: the record, the result and the row say ops.
	r = m.mustCLI(0, "", ops, "approve", "yes", uuids[0][:8])
	if !strings.Contains(r.stdout, "approved by ops") {
		t.Errorf("approve yes: %s", r)
	}
	ap := m.do(http.StatusOK, "GET", "/approvals/"+uuids[0], nil, bearer(opsToken)...)
	if by := str(ap, "approval", "decision", "by"); by != "ops" {
		t.Errorf("decision.by = %q, want ops", by)
	}
	if by := decidedBy(m, convs[0], bearer(aliceToken)); by != "ops" {
		t.Errorf("the conversation's result says decided_by %q, want ops", by)
	}
	if n := m.resourceRows("web-1"); n != 1 {
		t.Errorf("web-1 has %d rows, want 1", n)
	}

	// kim comes second: told who decided, exit 1, nothing changes.
	r = m.mustCLI(1, "", kim, "approve", "yes", uuids[0])
	if !strings.Contains(r.stderr, "already approved by ops") {
		t.Errorf("a second decision: %s", r)
	}
	if by := str(m.do(http.StatusOK, "GET", "/approvals/"+uuids[0], nil, bearer(opsToken)...), "approval", "decision", "by"); by != "ops" {
		t.Errorf("after kim's try decision.by = %q", by)
	}

	// kim rejects the other with a reason; ops is then too late.
	r = m.mustCLI(0, "", kim, "approve", "no", uuids[1], "--reason", "not today")
	if !strings.Contains(r.stdout, "rejected by kim") || !strings.Contains(r.stdout, "not today") {
		t.Errorf("approve no: %s", r)
	}
	d := obj(m.do(http.StatusOK, "GET", "/approvals/"+uuids[1], nil, bearer(opsToken)...), "approval", "decision")
	if str(d, "by") != "kim" || str(d, "reason") != "not today" || d["approved"] != false {
		t.Errorf("decision = %v, want kim's rejection with its reason", d)
	}
	r = m.mustCLI(1, "", ops, "approve", "no", uuids[1], "--json")
	if !strings.Contains(r.stderr, "already rejected by kim") || !strings.Contains(r.stdout, `"status": "rejected"`) {
		t.Errorf("a late rejection: %s", r)
	}
	if n := m.resourceRows("web-2"); n != 0 {
		t.Errorf("web-2 has %d rows, want none", n)
	}
	if r := m.mustCLI(0, "", ops, "approve", "list"); !strings.Contains(r.stdout, "no pending approvals") {
		t.Errorf("approve list after both: %s", r)
	}
	m.mustCLI(1, "", ops, "approve", "show", "00000000-0000-0000-0000-000000000000")
}
