package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestRegenerateAndFeedback drives the user actions on answers against the
// real binary: over REST with hand-made requests (the refusals too), over
// AG-UI with the official client and the `ws` package, and on the web
// page in Chromium.
func TestRegenerateAndFeedback(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{logLevel: "info"})
	t.Run("rest", func(t *testing.T) { testActionsREST(t, m) })
	t.Run("agui", func(t *testing.T) { testActionsAGUI(t, m) })
	t.Run("web", func(t *testing.T) { testActionsWeb(t, m) })
	t.Run("dialects", func(t *testing.T) { testActionsDialects(t, m) })
}

// aisdkRegenerateResult is what aisdk-regenerate.mjs prints.
type aisdkRegenerateResult struct {
	ChatID      string      `json:"chatId"`
	Errors      []string    `json:"errors"`
	Status      string      `json:"status"`
	Sent        []chatEntry `json:"sent"`
	Regenerated []chatEntry `json:"regenerated"`
}

type chatEntry struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	Text  string   `json:"text"`
	Parts []string `json:"parts"`
}

// testActionsDialects: useChat's regenerate() (the `ai` package's own
// chat) and the dotted dialect's {"action": "regenerate"}.
func testActionsDialects(t *testing.T, m *meshProc) {
	node := nodeWith(t, "ai")
	var res aisdkRegenerateResult
	runPeer(t, node, "aisdk-regenerate.mjs", time.Minute, []string{"MESH_URL=" + m.url("")}, &res, nil)
	if len(res.Errors) > 0 || res.Status != "ready" {
		t.Errorf("the ai package's chat: status %q, errors %v", res.Status, res.Errors)
	}
	// The user message and a new assistant message.
	if len(res.Sent) != 2 {
		t.Fatalf("chat after sending: %d messages, want 2: %+v", len(res.Sent), res.Sent)
	}
	if len(res.Regenerated) != 2 {
		t.Fatalf("chat after regenerate(): %d messages, want 2: %+v", len(res.Regenerated), res.Regenerated)
	}
	if got := res.Regenerated[1]; got.Role != "assistant" {
		t.Fatalf("chat after regenerate(): last message by %q, want assistant", got.Role)
	}
	if got := res.Regenerated[1]; !strings.Contains(got.Text, "resource") {
		t.Fatalf("chat after regenerate(): last message %q, want it to speak of a resource", got.Text)
	}
	if res.Regenerated[1].ID == res.Sent[1].ID {
		t.Fatalf("chat after regenerate(): the assistant message is the old one, %s", res.Sent[1].ID)
	}
	conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+res.ChatID, nil), "conversation")
	if countRole(conv, "user") != 1 || len(obj(conv, "superseded")) == 0 {
		t.Errorf("the chat's conversation after regenerate(): %d user messages, superseded %v", countRole(conv, "user"), obj(conv, "superseded"))
	}

	// The dotted dialect: the stream of the regenerated answer.
	before := len(obj(conv, "superseded"))
	status, body := m.stream("POST", "/api/conversation", map[string]any{"action": "regenerate", "sessionId": res.ChatID})
	if status != http.StatusOK || !strings.Contains(body, `"type":"message.start"`) || !strings.Contains(body, `"type":"activity.end"`) {
		t.Errorf("dotted regenerate: %d %s", status, body)
	}
	conv = obj(m.do(http.StatusOK, "GET", "/conversations/"+res.ChatID, nil), "conversation")
	if countRole(conv, "user") != 1 || len(obj(conv, "superseded")) <= before {
		t.Errorf("after the dotted regenerate: %d user messages, superseded %v (was %d)", countRole(conv, "user"), obj(conv, "superseded"), before)
	}
	if status, body := m.stream("POST", "/api/conversation", map[string]any{"action": "regenerate"}); status != http.StatusBadRequest {
		t.Errorf("dotted regenerate without a sessionId: %d %s, want 400", status, body)
	}
}

// stream posts body and reads the whole answer (an event stream that ends
// with its run).
func (m *meshProc) stream(method, path string, body any) (int, string) {
	m.t.Helper()
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, m.url(path), bytes.NewReader(data))
	if err != nil {
		m.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(m.t.Context(), time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// afterLastUser lists the messages after the last user message.
func afterLastUser(conv map[string]any) []map[string]any {
	msgs := list(conv, "messages")
	var out []map[string]any
	for _, v := range msgs {
		m, _ := v.(map[string]any)
		if str(m, "role") == "user" {
			out = nil
			continue
		}
		out = append(out, m)
	}
	return out
}

func countRole(conv map[string]any, role string) int {
	n := 0
	for _, v := range list(conv, "messages") {
		if str(v, "role") == role {
			n++
		}
	}
	return n
}

// lastAnswer is the id of the last assistant message with text.
func lastAnswer(conv map[string]any) string {
	msgs := list(conv, "messages")
	for i := len(msgs) - 1; i >= 0; i-- {
		if str(msgs[i], "role") == "assistant" && str(msgs[i], "content") != "" {
			return str(msgs[i], "id")
		}
	}
	return ""
}

func testActionsREST(t *testing.T, m *meshProc) {
	out := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"message": "list all resources"})
	id := str(out, "conversation", "id")
	old := afterLastUser(obj(out, "conversation"))
	if len(old) < 2 {
		t.Fatalf("first answer %v: want a tool call and a reply", old)
	}

	// Regenerate: the answer of POST …/messages, a new answer after the
	// same user message; the old one kept, superseded by the new turn.
	out = m.do(http.StatusOK, "POST", "/conversations/"+id+"/regenerate", map[string]any{})
	conv := obj(out, "conversation")
	if r := str(out, "result", "response"); !strings.Contains(r, "resource") {
		t.Errorf("regenerated response %q, want the resources reported", r)
	}
	if n := countRole(conv, "user"); n != 1 {
		t.Errorf("%d user messages after a regenerate, want 1", n)
	}
	sup := obj(conv, "superseded")
	by := ""
	for _, m := range old {
		b := str(sup, str(m, "id"))
		if b == "" || by != "" && b != by {
			t.Errorf("old message %s superseded by %q (superseded %v), want the regenerate's turn", str(m, "id"), b, sup)
		}
		by = b
	}
	fresh := afterLastUser(conv)[len(old):]
	if len(fresh) < 2 {
		t.Fatalf("messages after the user's: %d old, %d new; want a whole new answer", len(old), len(fresh))
	}
	for _, m := range fresh {
		if str(sup, str(m, "id")) != "" || str(m, "turn_id") != by {
			t.Errorf("new message %v: want it of turn %s and not superseded", m, by)
		}
	}
	answer := lastAnswer(conv)

	// The next turn goes on after the regenerated answer.
	m.do(http.StatusOK, "POST", "/conversations/"+id+"/messages", map[string]any{"message": "list all resources"})
	got := m.do(http.StatusOK, "GET", "/conversations/"+id, nil)
	if s := obj(got, "conversation", "superseded"); len(s) != len(old) {
		t.Errorf("superseded after the next turn: %v, want the %d old messages only", s, len(old))
	}

	// Feedback: one per principal per message, the latest wins.
	fb := m.do(http.StatusOK, "POST", "/conversations/"+id+"/messages/"+answer+"/feedback", map[string]any{"rating": "like", "comment": "good"})
	if str(fb, "feedback", "rating") != "like" || str(fb, "feedback", "by") != "anonymous" || str(fb, "feedback", "message_id") != answer {
		t.Errorf("feedback answer %v", fb)
	}
	m.do(http.StatusOK, "POST", "/conversations/"+id+"/messages/"+answer+"/feedback", map[string]any{"rating": "dislike"})
	got = m.do(http.StatusOK, "GET", "/conversations/"+id, nil)
	stored := list(obj(got, "conversation", "feedback"), answer)
	if len(stored) != 1 || str(stored[0], "rating") != "dislike" || str(stored[0], "comment") != "" {
		t.Errorf("stored feedback on %s: %v, want the latest (dislike) only", answer, stored)
	}
	evs := customs(readEvents(t, m, id), "feedback")
	if len(evs) != 2 {
		t.Errorf("%d CUSTOM feedback events, want 2: %v", len(evs), evs)
	} else {
		checkStrs(t, "first CUSTOM feedback event", evs[0], map[string]string{"messageId": answer, "rating": "like", "comment": "good"})
		checkStrs(t, "second CUSTOM feedback event", evs[1], map[string]string{"rating": "dislike", "by": "anonymous"})
	}

	// Refusals.
	empty := str(m.do(http.StatusCreated, "POST", "/conversations", map[string]any{}), "conversation", "id")
	paused := m.do(http.StatusCreated, "POST", "/conversations", map[string]any{"message": "add resource regen-1 with value 2"})
	pausedID := str(paused, "conversation", "id")
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		code       string
	}{
		{"regenerate without a user message", "/conversations/" + empty + "/regenerate", nil, 409, "nothing_to_regenerate"},
		{"regenerate while an approval waits", "/conversations/" + pausedID + "/regenerate", map[string]any{}, 409, "waiting_approval"},
		{"regenerate of no conversation", "/conversations/" + uuid.NewString() + "/regenerate", map[string]any{}, 404, "session_not_found"},
		{"feedback on no message", "/conversations/" + id + "/messages/no-such-message/feedback", map[string]any{"rating": "like"}, 404, "message_not_found"},
		{"feedback in no conversation", "/conversations/" + uuid.NewString() + "/messages/" + answer + "/feedback", map[string]any{"rating": "like"}, 404, "session_not_found"},
		{"feedback with a bad rating", "/conversations/" + id + "/messages/" + answer + "/feedback", map[string]any{"rating": "meh"}, 400, "bad_request"},
		{"feedback without a rating", "/conversations/" + id + "/messages/" + answer + "/feedback", map[string]any{"comment": "x"}, 400, "bad_request"},
		{"feedback with a comment too long", "/conversations/" + id + "/messages/" + answer + "/feedback", map[string]any{"rating": "like", "comment": strings.Repeat("x", 1001)}, 400, "bad_request"},
	} {
		status, body := m.try("POST", c.path, c.body)
		if status != c.status || str(body, "code") != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.name, status, body, c.status, c.code)
		}
	}
	if !waitingApproval(paused) {
		t.Errorf("the approval turn did not pause: %v", paused)
	}

	// Counted by rating.
	resp, err := http.Get(m.url("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`mesh_feedback_total{rating="like"} 1`, `mesh_feedback_total{rating="dislike"} 1`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func waitingApproval(out map[string]any) bool {
	w, _ := obj(out, "result")["waiting_approval"].(bool)
	return w
}

// aguiActionsResult is what agui-actions.mjs prints.
type aguiActionsResult struct {
	Answer string `json:"answer"`
	Runs   []struct {
		Name      string `json:"name"`
		Error     string `json:"error"`
		RunFailed string `json:"runFailed"`
		Events    []string
		Customs   []struct {
			Name  string         `json:"name"`
			Value map[string]any `json:"value"`
		} `json:"customs"`
		Outcome     string        `json:"outcome"`
		NewMessages []aguiMessage `json:"newMessages"`
	} `json:"runs"`
	WS struct {
		Opened      string           `json:"opened"`
		Frames      []string         `json:"frames"`
		Events      []map[string]any `json:"events"`
		RunError    map[string]any   `json:"runError"`
		VerifyError string           `json:"verifyError"`
		Answer      string           `json:"answer"`
		Feedback    map[string]any   `json:"feedback"`
		Unknown     map[string]any   `json:"unknown"`
	} `json:"ws"`
}

func testActionsAGUI(t *testing.T, m *meshProc) {
	node := nodeWith(t, "@ag-ui/client", "ws")
	thread := uuid.NewString()
	var res aguiActionsResult
	runPeer(t, node, "agui-actions.mjs", 2*time.Minute, []string{"MESH_URL=" + m.url(""), "THREAD_ID=" + thread}, &res, nil)
	if len(res.Runs) != 4 {
		t.Fatalf("runs %+v, want first, regenerate, feedback, badFeedback", res.Runs)
	}
	for _, r := range res.Runs[:3] {
		if r.Error != "" || r.RunFailed != "" || r.Outcome != "success" {
			t.Errorf("the official client's %s run: outcome %q, error %s %s; events %v", r.Name, r.Outcome, r.Error, r.RunFailed, r.Events)
		}
	}
	regen, feedback, bad := res.Runs[1], res.Runs[2], res.Runs[3]
	if reply(regen.NewMessages) == "" || res.Answer == "" {
		t.Errorf("regenerate run's new messages %+v: want a new answer", regen.NewMessages)
	}
	if want := []string{"RUN_STARTED", "CUSTOM", "RUN_FINISHED"}; !slices.Equal(feedback.Events, want) {
		t.Errorf("feedback run events %v, want %v", feedback.Events, want)
	}
	if len(feedback.Customs) != 1 {
		t.Errorf("feedback run: %d CUSTOM events, want 1: %+v", len(feedback.Customs), feedback.Customs)
	} else {
		if c := feedback.Customs[0]; c.Name != "feedback" {
			t.Errorf("feedback run's CUSTOM event %q, want feedback", c.Name)
		}
		checkStrs(t, "feedback run's CUSTOM value", feedback.Customs[0].Value, map[string]string{"messageId": res.Answer, "rating": "like", "comment": "ag-ui says yes"})
	}
	if bad.Error == "" && bad.RunFailed == "" {
		t.Errorf("a feedback with rating meh was accepted: events %v", bad.Events)
	}

	ws := res.WS
	if ws.Opened != "connection_open" {
		t.Errorf("the socket's first frame is %q, want connection_open", ws.Opened)
	}
	if ws.RunError != nil {
		t.Errorf("socket regenerate: error %v", ws.RunError)
	}
	if ws.VerifyError != "" {
		t.Errorf("socket regenerate: verifyEvents %q", ws.VerifyError)
	}
	if len(ws.Events) == 0 {
		t.Error("socket regenerate: no events")
	} else {
		if got := str(ws.Events[0], "type"); got != "RUN_STARTED" {
			t.Errorf("socket regenerate: first event %s, want RUN_STARTED", got)
		}
		if got := str(ws.Events[len(ws.Events)-1], "type"); got != "RUN_FINISHED" {
			t.Errorf("socket regenerate: last event %s, want RUN_FINISHED", got)
		}
	}
	if fb := ws.Feedback; str(fb, "type") != "events" {
		t.Errorf("socket feedback frame %v, want type events", fb)
	} else if evs := list(fb, "events"); len(evs) != 1 {
		t.Errorf("socket feedback frame holds %d events, want 1: %v", len(evs), fb)
	} else {
		if got := str(evs[0], "name"); got != "feedback" {
			t.Errorf("socket feedback frame's event %q, want feedback", got)
		}
		checkStrs(t, "socket feedback frame's event value", obj(evs[0], "value"), map[string]string{"messageId": ws.Answer, "rating": "dislike"})
	}
	if u := ws.Unknown; str(u, "type") != "error" || str(u, "code") != "message_not_found" {
		t.Errorf("socket feedback on no message answered %v, want an error frame message_not_found", u)
	}

	// What the server holds: three answers to one user message, the two
	// first superseded; the ratings of the last two.
	conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+thread, nil), "conversation")
	sup := obj(conv, "superseded")
	// The AG-UI answer superseded, the socket's not.
	if n := countRole(conv, "user"); n != 1 {
		t.Errorf("after two regenerates: %d user messages, want 1", n)
	}
	if sup[res.Answer] == nil {
		t.Errorf("after two regenerates: the AG-UI answer %s is not superseded: %v", res.Answer, sup)
	}
	if ws.Answer == "" {
		t.Error("after two regenerates: the socket gave no answer")
	} else if sup[ws.Answer] != nil {
		t.Errorf("after two regenerates: the socket's answer %s is superseded: %v", ws.Answer, sup)
	}
	if ws.Answer == res.Answer {
		t.Errorf("after two regenerates: the socket's answer is the AG-UI one, %s", ws.Answer)
	}
	fbs := obj(conv, "feedback")
	if str(list(fbs, res.Answer)[0], "rating") != "like" || str(list(fbs, ws.Answer)[0], "rating") != "dislike" {
		t.Errorf("stored feedback %v", fbs)
	}
}

// webActionsResult is what web-actions.mjs prints.
type webActionsResult struct {
	Error          string     `json:"error"`
	Steps          []string   `json:"steps"`
	Screenshots    []string   `json:"screenshots"`
	ConsoleErrors  []string   `json:"consoleErrors"`
	ConversationID string     `json:"conversationId"`
	Answer         string     `json:"answer"`
	Before         webAnswers `json:"before"`
	After          webAnswers `json:"after"`
	Reloaded       webAnswers `json:"reloaded"`
}

// webAnswers is what the page shows of a conversation's answers.
type webAnswers struct {
	Answers []struct {
		ID         string `json:"id"`
		Superseded bool   `json:"superseded"`
		Opacity    string `json:"opacity"`
		Like       string `json:"like"`
		Dislike    string `json:"dislike"`
		Regenerate bool   `json:"regenerate"`
	} `json:"answers"`
	SupersededTools int    `json:"supersededTools"`
	Users           int    `json:"users"`
	RunStatus       string `json:"runStatus"`
}

func testActionsWeb(t *testing.T, m *meshProc) {
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	dir := artifactDir(t)
	var res webActionsResult
	runPeer(t, node, "web-actions.mjs", 2*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "TIMEOUT_MS=20000",
	}, &res, nil)
	t.Logf("screenshots in %s: %s", dir, strings.Join(baseNames(res.Screenshots), ", "))
	if res.Error != "" {
		t.Fatalf("the page did not do what a person expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	// Before: one answer, liked, with Regenerate.
	if b := res.Before; len(b.Answers) != 1 {
		t.Errorf("before regenerating: %d answers, want 1: %+v", len(b.Answers), b.Answers)
	} else {
		a := b.Answers[0]
		if a.Like != "true" || a.Dislike != "false" {
			t.Errorf("the answer before regenerating: like %s, dislike %s; want it liked", a.Like, a.Dislike)
		}
		if !a.Regenerate {
			t.Error("the answer before regenerating has no Regenerate")
		}
		if a.Superseded {
			t.Error("the answer before regenerating is superseded")
		}
	}
	for name, p := range map[string]webAnswers{"after regenerating": res.After, "after a reload": res.Reloaded} {
		// The old answer dimmed without Regenerate (its tool calls too), the
		// new one with it, one user message, idle.
		if len(p.Answers) != 2 {
			t.Errorf("%s: %d answers, want 2: %+v", name, len(p.Answers), p.Answers)
		} else {
			old, answer := p.Answers[0], p.Answers[1]
			if !old.Superseded {
				t.Errorf("%s: the old answer is not superseded", name)
			}
			if old.Opacity == "1" {
				t.Errorf("%s: the old answer is not dimmed (opacity 1)", name)
			}
			if old.Regenerate {
				t.Errorf("%s: the old answer still has Regenerate", name)
			}
			if answer.Superseded {
				t.Errorf("%s: the new answer is superseded", name)
			}
			if !answer.Regenerate {
				t.Errorf("%s: the new answer has no Regenerate", name)
			}
		}
		if p.Users != 1 {
			t.Errorf("%s: %d user messages, want 1", name, p.Users)
		}
		if p.SupersededTools == 0 {
			t.Errorf("%s: no superseded tool call shown, want the old answer's", name)
		}
		if p.RunStatus != "idle" {
			t.Errorf("%s: run status %q, want idle", name, p.RunStatus)
		}
	}
	if a := res.Reloaded.Answers; len(a) == 2 && (a[0].Like != "true" || a[1].Dislike != "true") {
		t.Errorf("ratings after a reload: %+v; want the old answer liked and the new one disliked", a)
	}
	conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+res.ConversationID, nil), "conversation")
	fbs := obj(conv, "feedback")
	if len(fbs) != 2 || str(list(fbs, res.Answer)[0], "rating") != "dislike" {
		t.Errorf("feedback stored from the page: %v", fbs)
	}
}

// testActionsOwnership: regenerate and feedback are the owner's (and
// admins'): another user gets 404 as for any path to the conversation, a
// viewer 403; each principal's rating is kept apart.
func testActionsOwnership(t *testing.T, m *authMesh, conv string) {
	_, got := m.call(t, "user", "GET", "/conversations/"+conv, nil)
	answer := lastAnswer(obj(got, "conversation"))
	if answer == "" {
		t.Fatalf("conversation %s has no answer: %v", conv, got)
	}
	feedback := "/conversations/" + conv + "/messages/" + answer + "/feedback"
	for _, c := range []struct {
		caller, path string
		body         any
		want         int
	}{
		{"bob", "/conversations/" + conv + "/regenerate", map[string]any{}, http.StatusNotFound},
		{"bob", feedback, map[string]any{"rating": "dislike"}, http.StatusNotFound},
		{"viewer", "/conversations/" + conv + "/regenerate", map[string]any{}, http.StatusForbidden},
		{"viewer", feedback, map[string]any{"rating": "dislike"}, http.StatusForbidden},
		{"user", feedback, map[string]any{"rating": "like"}, http.StatusOK},
		{"admin", feedback, map[string]any{"rating": "dislike", "comment": "seen by an admin"}, http.StatusOK},
		{"user", "/conversations/" + conv + "/regenerate", map[string]any{}, http.StatusOK},
	} {
		if status, out := m.call(t, c.caller, "POST", c.path, c.body); status != c.want {
			t.Errorf("POST %s as %s: %d %v, want %d", c.path, c.caller, status, out, c.want)
		}
	}
	_, got = m.call(t, "user", "GET", "/conversations/"+conv, nil)
	by := map[string]string{}
	for _, f := range list(obj(got, "conversation", "feedback"), answer) {
		by[str(f, "by")] = str(f, "rating")
	}
	if len(by) != 2 || by["ursula"] != "like" || by["bob"] != "" {
		t.Errorf("feedback on %s by principal: %v, want ursula's like and the admin's dislike only", answer, by)
	}
	if s := str(obj(got, "conversation", "superseded"), answer); s == "" {
		t.Errorf("ursula's regenerate did not supersede %s: %v", answer, obj(got, "conversation", "superseded"))
	}
}
