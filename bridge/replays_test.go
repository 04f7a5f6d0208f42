package bridge

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/replay"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// The stored report of a replay is served to admins only, by a plain HTTP
// client: as JSON, or as its page when the request accepts text/html; the
// list names it; a user gets 403; an unknown id 404 replay_not_found.
func TestReplayReportsServedToAdmins(t *testing.T) {
	t.Parallel()
	b, srv := scopedBridge(t)
	rep := &replay.Report{ID: "20260102t030405-abcdef", StartedAt: time.Now().UTC(), FinishedAt: time.Now().UTC(), Model: "openai:gpt-4o-mini", Config: "new.yaml",
		Selection: "1 recorded conversations", StandIn: `{"not_run":"replay"}`, Thresholds: replay.NoThresholds(),
		Conversations: []replay.ConversationReport{{Source: "c1", Conversation: "replay-x-c0", Turns: []replay.TurnReport{
			replay.CompareTurn(0, &replay.Turn{User: "list all resources", Answer: "There are <b>2</b>.", Calls: []replay.Call{{Tool: "resources/resources_list"}}},
				&replay.Turn{User: "list all resources", Answer: "Two.", Calls: []replay.Call{{Tool: "resources/resources_list", Arguments: map[string]any{"limit": 5.0}}}}, true),
		}}}}
	rep.Conversations[0].Finish(nil)
	rep.Finish()
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.NewReplayStore(b.cfg.Resources.Replays).Put(t.Context(), rep.ID, data); err != nil {
		t.Fatal(err)
	}
	get := func(path, token, accept string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}
	const root, alice = "root-token-0123456789", "alice-token-0123456789"

	code, ctype, body := get("/replays/"+rep.ID, root, "")
	var got replay.Report
	if code != http.StatusOK || !strings.HasPrefix(ctype, "application/json") || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("GET /replays/%s as admin: %d %s %s", rep.ID, code, ctype, body)
	}
	if got.Totals.DifferentCalls != 1 || got.Totals.ChangedAnswers != 1 || got.ID != rep.ID {
		t.Errorf("report served: totals %+v, id %s; want 1 different call, 1 changed answer", got.Totals, got.ID)
	}
	code, ctype, body = get("/replays/"+rep.ID, root, "text/html,application/xhtml+xml")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("GET /replays/%s as a browser: %d %s", rep.ID, code, ctype)
	}
	for _, want := range []string{"Replay " + rep.ID, `class="different"`, "There are &lt;b&gt;2&lt;/b&gt;.", "Two.", `{&#34;limit&#34;:5}`} {
		if !strings.Contains(body, want) {
			t.Errorf("the report's page lacks %q", want)
		}
	}
	code, _, body = get("/replays", root, "")
	if code != http.StatusOK || !strings.Contains(body, `"id":"`+rep.ID+`"`) {
		t.Errorf("GET /replays as admin: %d %s", code, body)
	}
	code, _, body = get("/replays", root, "text/html")
	if code != http.StatusOK || !strings.Contains(body, `href="/replays/`+rep.ID+`"`) {
		t.Errorf("GET /replays as a browser: %d %s", code, body)
	}
	for _, path := range []string{"/replays", "/replays/" + rep.ID} {
		if code, _, body := get(path, alice, "text/html"); code != http.StatusForbidden || strings.Contains(body, "list all resources") {
			t.Errorf("GET %s as a user: %d %s, want 403 and nothing of the report", path, code, body)
		}
		if code, _, _ := get(path, "", ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", path, code)
		}
	}
	code, _, body = get("/replays/no-such-replay", root, "")
	if code != http.StatusNotFound || !strings.Contains(body, mesh.ErrReplayNotFound.Kind()) {
		t.Errorf("GET /replays/no-such-replay: %d %s, want 404 %s", code, body, mesh.ErrReplayNotFound.Kind())
	}
	code, _, _ = get("/replays/bad.id", root, "")
	if code != http.StatusNotFound {
		t.Errorf("GET /replays/bad.id: %d, want 404", code)
	}
}
