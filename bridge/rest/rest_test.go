package rest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
	"github.com/agentmesh/agentmesh/mesh/role"
)

// restServer serves the REST routes over a core with no agent: every turn
// stays queued.
func restServer(t *testing.T, wait time.Duration) *httptest.Server {
	t.Helper()
	m := meshtest.New(t)
	c, err := core.New(core.Config{Node: role.Node{NC: m.NC, JS: m.JS}, Resources: m.Resources, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	mux := http.NewServeMux()
	Register(mux, Config{Core: c, WaitTimeout: wait})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// After the wait limit, the answer says how to follow the run: its id, its
// status (queued: no agent took it up) and its events URL. The
// conversation shows the queued message and refuses another.
func TestAcceptedAnswerTellsHowToFollowTheRun(t *testing.T) {
	srv := restServer(t, 300*time.Millisecond)
	status, out := post(t, srv.URL+"/conversations", `{}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, out)
	}
	conv, _ := out["conversation"].(map[string]any)
	id, _ := conv["id"].(string)
	status, out = post(t, srv.URL+"/conversations/"+id+"/messages", `{"message": "hello"}`)
	if status != http.StatusAccepted {
		t.Fatalf("send: %d %v, want 202", status, out)
	}
	runID, _ := out["run_id"].(string)
	if runID == "" || out["conversation_id"] != id || out["status"] != string(mesh.StatusQueued) {
		t.Errorf("202 body: run_id %q, conversation_id %v, status %v; want the run, %s, queued", runID, out["conversation_id"], out["status"], id)
	}
	if u, _ := out["events_url"].(string); !strings.HasPrefix(u, "/conversations/"+id+"/events?after=") {
		t.Errorf("events_url = %q, want /conversations/%s/events?after=<seq>", u, id)
	}
	c, _ := out["conversation"].(map[string]any)
	q, _ := c["queued_turn"].(map[string]any)
	if c["status"] != string(mesh.StatusQueued) || q["id"] != runID || q["message"] != "hello" {
		t.Errorf("conversation: status %v, queued_turn %v; want queued, the run and its message", c["status"], q)
	}
	status, out = post(t, srv.URL+"/conversations/"+id+"/messages", `{"message": "again"}`)
	if status != http.StatusConflict || out["code"] != mesh.ErrTurnInProgress.Kind() {
		t.Errorf("second message: %d %v, want 409 turn_in_progress", status, out)
	}
	resp, err := http.Get(srv.URL + "/conversations")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Conversations []mesh.ConversationSummary `json:"conversations"`
		Summary       map[string]int             `json:"summary"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Summary["queued"] != 1 || len(list.Conversations) != 1 || list.Conversations[0].QueuedTurn == nil {
		t.Errorf("list: summary %v, conversations %+v; want one queued", list.Summary, list.Conversations)
	}
}
