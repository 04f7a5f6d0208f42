package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// bridgeHTTPLines returns the bridge's http log lines, one per request.
func (m *meshProc) bridgeHTTPLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(m.logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["role"] == "bridge" && line["message"] == "http" {
			out = append(out, line)
		}
	}
	return out
}

// TestEveryRequestOfAConversationLogsItsSID: the bridge's http line of
// every request that reaches a conversation (create, send, read, decide)
// carries the conversation id and its sid although the client never sent
// X-Session-ID; a request about no conversation logs the sid its caller
// sent.
func TestEveryRequestOfAConversationLogsItsSID(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	created := m.do(http.StatusCreated, "POST", "/conversations", nil)
	conv, sid := str(created, "conversation", "id"), str(created, "conversation", "session_id")
	m.send(conv, "list all resources")
	m.do(http.StatusOK, "GET", "/conversations/"+conv, nil)
	ap := m.addPending(conv, "add resource logged with value 4")
	m.do(http.StatusOK, "POST", "/approvals/"+str(ap, "uuid"), map[string]any{"approved": true})
	m.do(http.StatusOK, "GET", "/health", nil, "X-Session-ID", "c0ffee02")

	want := []struct{ method, path string }{
		{"POST", "/conversations"},
		{"POST", "/conversations/" + conv + "/messages"},
		{"GET", "/conversations/" + conv},
		{"POST", "/conversations/" + conv + "/messages"},
		{"POST", "/approvals/" + str(ap, "uuid")},
	}
	var lines []map[string]any
	meshtest.Eventually(t, 10*time.Second, func() bool {
		lines = m.bridgeHTTPLines()
		found := 0
		for _, l := range lines {
			if l["path"] == "/health" && l["sid"] == "c0ffee02" {
				found++
			}
		}
		return found > 0 && len(matching(lines, want[0].method, want[0].path)) > 0 && len(matching(lines, "POST", want[4].path)) > 0
	}, "the bridge logged no http line of the health check and the approval")
	for _, w := range want {
		got := matching(lines, w.method, w.path)
		if len(got) == 0 {
			t.Errorf("no http line of %s %s", w.method, w.path)
		}
		for _, l := range got {
			if l["sid"] != sid || l["session"] != conv {
				t.Errorf("http line of %s %s: sid %v, session %v, want sid %s, session %s", w.method, w.path, l["sid"], l["session"], sid, conv)
			}
		}
	}
}

// matching are the http lines of method and path (the create's path is
// exact: it is also the prefix of every conversation's).
func matching(lines []map[string]any, method, path string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["method"] == method && l["path"] == path {
			out = append(out, l)
		}
	}
	return out
}
