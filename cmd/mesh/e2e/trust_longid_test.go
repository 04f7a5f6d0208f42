package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// Twenty requests in a row whose ids are 4,015 characters long (subjects
// and keys past the NATS server's 4 KiB line limit) leave the mesh
// healthy: no role loses its NATS connection for good, none is restarted,
// no degradation, and a turn runs after them. The bridge does not validate
// ids here (that is the HTTP edge's job): this is the NATS connection
// surviving what reaches it.
func TestLongIDsLeaveTheMeshHealthy(t *testing.T) {
	m := startMesh(t, meshOpts{})
	pids := map[string]int{}
	for _, role := range []string{"bridge", "agent", "toolhost", "approver"} {
		pids[role] = m.childPID(role)
	}
	long := strings.Repeat("a", 4015)
	// Decisions first: the approver's handler of a refused one waits out
	// its KV timeout (5 s), done long before the test stops the mesh.
	requests := []struct{ method, path, body string }{
		{"POST", "/approvals/" + long, `{"approved":true}`},
		{"GET", "/conversations/" + long, ""},
		{"POST", "/conversations/" + long + "/messages", `{"message":"hello"}`},
		{"POST", "/conversations/" + long + "/cancel", `{}`},
		{"GET", "/conversations/" + long + "/events", ""},
		{"GET", "/approvals/" + long, ""},
		{"POST", "/agui", `{"threadId":"` + long + `","runId":"r-1","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`},
		{"POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"` + long + `"}}`},
		{"POST", "/api/chat", `{"message":"hi","sessionId":"` + long + `"}`},
		{"POST", "/api/conversation", `{"message":"hi","sessionId":"` + long + `"}`},
	}
	client := &http.Client{Timeout: time.Second}
	statuses := map[int]int{}
	for i := range 20 {
		r := requests[i%len(requests)]
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		req, err := http.NewRequestWithContext(ctx, r.method, m.url(r.path), strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err == nil {
			statuses[resp.StatusCode]++
			_ = resp.Body.Close()
		} else {
			statuses[0]++ // no answer within 1 s: the request is cut, the bridge lives on
		}
		cancel()
	}
	t.Logf("answers to the long ids, by status (0: none within 1 s): %v", statuses)

	meshtest.Eventually(t, 30*time.Second, func() bool {
		status, _ := m.try("GET", "/ready", nil)
		return status == http.StatusOK
	}, "the mesh is not ready after the long ids")
	_, health := m.try("GET", "/health", nil)
	if str(health, "status") != "healthy" || health["degradation"] != nil {
		t.Errorf("health after the long ids: %v", health)
	}
	for role, pid := range pids {
		if now := m.childPID(role); now != pid {
			t.Errorf("the %s was restarted (pid %d, now %d)", role, pid, now)
		}
	}
	logs := m.logs()
	for _, bad := range []string{"nats connection closed", `"node_down"`, "exited; restarting"} {
		if strings.Contains(logs, bad) {
			t.Errorf("the log says %q", bad)
		}
	}
	// What the bridge did: it did not send the lines; it never lost its
	// connection for good.
	t.Logf("wire guard: %d subjects not sent, %d reconnects after a refused line",
		strings.Count(logs, "did not send a subject longer than the server takes"),
		strings.Count(logs, "refused a protocol line longer than its limit"))
	m.send(m.newConversation(), "list all resources")
}
