package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCLISessions: `mesh sessions` lists, shows and removes conversations
// (as the NATS admin); one that waits for an approval is removed only with
// --force, and a removed one is gone from the bridge and the events stream.
func TestCLISessions(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	conv, _ := m.firstTurn("list all resources")
	waiting := m.newConversation()
	uuid := str(m.send(waiting, "add resource web-1 with value 7"), "result", "approval", "uuid")

	r := m.mustCLI(0, "", nil, "sessions")
	for _, want := range []string{"ID", "STATUS", conv, waiting, "waiting_approval", "list all resources", "resource-manager"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sessions lacks %q:\n%s", want, r)
		}
	}
	r = m.mustCLI(0, "", nil, "sessions", "list", "--json")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("sessions list --json: %v\n%s", err, r)
	}
	if str(listed[0], "id") != waiting {
		t.Errorf("the most recently updated is %s, want %s", str(listed[0], "id"), waiting)
	}

	r = m.mustCLI(0, "", nil, "sessions", "show", waiting[:8])
	for _, want := range []string{"status        waiting_approval", "you: add resource web-1 with value 7", "[call] resources_add", "[approval needed] resources_add", uuid} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sessions show lacks %q:\n%s", want, r)
		}
	}
	r = m.mustCLI(0, "", nil, "sessions", "show", conv, "--json")
	var c map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil || str(c, "id") != conv || len(list(c, "messages")) < 3 {
		t.Fatalf("sessions show --json: %v\n%s", err, r)
	}
	m.mustCLI(1, "", nil, "sessions", "show", "00000000-0000-0000-0000-000000000000")
	if r := m.mustCLI(1, "", nil, "sessions", "show", "zz"); !strings.Contains(r.stderr, `no conversation starts with "zz"`) {
		t.Errorf("sessions show of a prefix nothing has: %s", r)
	}

	// Pointed at another data directory, the operator's commands say which
	// identity the server refused and how to give the right one, at once.
	elsewhere := "MESH_DATA_DIR=" + t.TempDir()
	for _, cmd := range [][]string{{"sessions"}, {"tools"}, {"tail", conv, "--no-follow"}} {
		start := time.Now()
		r := m.mustCLI(1, "", []string{elsewhere}, cmd...)
		for _, want := range []string{"authorization violation", "refused no credentials", "as admin", "MESH_DATA_DIR", "NATS_NKEY"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("mesh %s with another data dir does not say %q:\n%s", strings.Join(cmd, " "), want, r)
			}
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("mesh %s took %v to report the refusal, want it at once", strings.Join(cmd, " "), d)
		}
	}

	// rm: refused while an approval waits, unless --force; the conversation
	// and its events are gone.
	if r := m.mustCLI(1, "", nil, "sessions", "rm", waiting); !strings.Contains(r.stderr, "waiting_approval") {
		t.Errorf("rm of a waiting conversation: %s", r)
	}
	m.mustCLI(0, "", nil, "sessions", "rm", conv)
	if status, _ := m.try("GET", "/conversations/"+conv, nil); status != http.StatusNotFound {
		t.Errorf("GET a removed conversation: %d, want 404", status)
	}
	if r := m.mustCLI(0, "", nil, "tail", conv, "--from-start", "--no-follow"); r.stdout != "" {
		t.Errorf("a removed conversation still has events:\n%s", r.stdout)
	}
	m.mustCLI(0, "", nil, "sessions", "rm", waiting, "--force")
	if r := m.mustCLI(0, "", nil, "sessions"); !strings.Contains(r.stdout, "no conversations") {
		t.Errorf("sessions after rm: %s", r)
	}
	m.mustCLI(1, "", nil, "sessions", "rm", conv)
}

// TestCLITools: `mesh tools` lists the catalog with what calling each
// takes, calls a read-only tool, and refuses a destructive one (it needs an
// approval, through an agent), which does not run.
func TestCLITools(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	r := m.mustCLI(0, "", nil, "tools")
	for _, want := range []string{"SERVER", "resources_list    read-only", "resources_add     destructive", "resources_remove  destructive"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tools lacks %q:\n%s", want, r)
		}
	}
	r = m.mustCLI(0, "", nil, "tools", "list", "--json")
	var tools []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &tools); err != nil || len(tools) != 3 {
		t.Fatalf("tools list --json: %v\n%s", err, r)
	}

	m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"message": "add resource web-9 with value 9"})
	pending := list(m.do(http.StatusOK, "GET", "/approvals?status=pending", nil), "approvals")
	m.do(http.StatusOK, "POST", "/approvals/"+str(pending[0], "uuid"), map[string]any{"approved": true})
	r = m.mustCLI(0, "", nil, "tools", "call", "resources", "resources_list", `{"pattern": "web"}`)
	if !strings.Contains(r.stdout, `"count":1`) || !strings.Contains(r.stdout, "web-9") {
		t.Errorf("tools call resources_list: %s", r)
	}
	r = m.mustCLI(0, "", nil, "tools", "call", "resources", "resources_list", "--json")
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || !strings.Contains(str(res, "text"), "web-9") {
		t.Errorf("tools call --json: %v\n%s", err, r)
	}

	r = m.mustCLI(1, "", nil, "tools", "call", "resources", "resources_add", `{"name": "web-x", "value": 1}`)
	if !strings.Contains(r.stderr, "destructive") || !strings.Contains(r.stderr, "approves") {
		t.Errorf("a destructive call: %s", r)
	}
	if n := m.resourceRows("web-x"); n != 0 {
		t.Errorf("web-x has %d rows: the destructive call ran", n)
	}
	if r := m.mustCLI(1, "", nil, "tools", "call", "resources", "nope"); !strings.Contains(r.stderr, "no tool resources.nope") {
		t.Errorf("an unknown tool: %s", r)
	}
}
