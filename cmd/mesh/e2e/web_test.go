package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromiumPath finds the browser playwright-core drives: $CHROMIUM, else
// Debian's chromium on PATH. It never downloads one.
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			needPeer(t, "CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	needPeer(t, "chromium is not installed (apt-get install chromium)")
	return ""
}

// artifactDir is where a test leaves files for people to look at (git
// ignores it): $MESH_TEST_ARTIFACTS/<test>, else testdata/artifacts/<test>.
// It is emptied first, so it holds only the last run's files.
func artifactDir(t testing.TB) string {
	t.Helper()
	root := os.Getenv("MESH_TEST_ARTIFACTS")
	if root == "" {
		root = filepath.Join("testdata", "artifacts")
	}
	dir, err := filepath.Abs(filepath.Join(root, t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// webResult is what web-chat.mjs prints.
type webResult struct {
	Error          string   `json:"error"`
	Steps          []string `json:"steps"`
	Screenshots    []string `json:"screenshots"`
	ConsoleErrors  []string `json:"consoleErrors"`
	ConversationID string   `json:"conversationId"`
	// ListedElsewhere counts the conversations the list showed waiting for
	// approval once another was paused over REST; DecidedElsewhereMs is how
	// long after its decision was sent the list stopped showing it so.
	ListedElsewhere    int `json:"listedElsewhere"`
	DecidedElsewhereMs int `json:"decidedElsewhereMs"`
	// PatchFailures are the RFC 6902 examples the page's JSON Patch got wrong.
	PatchFailures []string `json:"patchFailures"`
	ListReply     webReply `json:"listReply"`
	// Times are the messages' timestamps after the list (ISO, the label
	// shown, the content the style sheet draws); Copied what Copy put on
	// the clipboard from the list's answer.
	Times []struct {
		ISO   string `json:"iso"`
		Label string `json:"label"`
		Shown string `json:"shown"`
	} `json:"times"`
	Copied         string `json:"copied"`
	ListToolResult string `json:"listToolResult"`
	ApprovalText   string `json:"approvalText"`
	// SendDisabledWhileWaiting: the send button while an approval is pending.
	SendDisabledWhileWaiting bool     `json:"sendDisabledWhileWaiting"`
	AddReply                 webReply `json:"addReply"`
	AddToolResult            string   `json:"addToolResult"`
	AfterApproval            webPage  `json:"afterApproval"`
	AfterReload              webPage  `json:"afterReload"`
	// Reconnecting is the indicator the page showed while its bridge was
	// down; AfterReconnect the page after a turn sent once it reconnected.
	Reconnecting   string  `json:"reconnecting"`
	AfterReconnect webPage `json:"afterReconnect"`
	// ReconnectTexts are the indicator's texts while the bridge was away;
	// RetryDelays the page's waits before retries 0–6 and 20, in ms.
	ReconnectTexts []string `json:"reconnectTexts"`
	RetryDelays    []int    `json:"retryDelays"`
	Phone          struct {
		ScrollWidth     int  `json:"scrollWidth"`
		InnerWidth      int  `json:"innerWidth"`
		SidebarVisible  bool `json:"sidebarVisible"`
		ComposerVisible bool `json:"composerVisible"`
	} `json:"phone"`
}

// webReply is an assistant message as the page shows it: Source "stream"
// for one that streamed in from the events, Chunks its TEXT_MESSAGE_CONTENT
// events.
type webReply struct {
	Text      string `json:"text"`
	Streaming string `json:"streaming"`
	Chunks    int    `json:"chunks"`
	Source    string `json:"source"`
}

// webPage sums up what the page shows.
type webPage struct {
	Users              []string `json:"users"`
	Replies            int      `json:"replies"`
	Notices            int      `json:"notices"`
	Tools              []string `json:"tools"`
	ApprovalVisible    bool     `json:"approvalVisible"`
	RunStatus          string   `json:"runStatus"`
	ActiveConversation *string  `json:"activeConversation"`
	Hash               string   `json:"hash"`
}

// check reports how the page differs from one that shows users' messages,
// tools' calls (name:status) and replies answers, in that order, and is
// idle. name says when the page was read.
func (p webPage) check(t *testing.T, name string, users, tools []string, replies int) {
	t.Helper()
	if strings.Join(p.Users, "|") != strings.Join(users, "|") {
		t.Errorf("%s the page shows user messages %q, want %q", name, p.Users, users)
	}
	if strings.Join(p.Tools, "|") != strings.Join(tools, "|") {
		t.Errorf("%s the page shows tool calls %q, want %q", name, p.Tools, tools)
	}
	if p.Replies != replies {
		t.Errorf("%s the page shows %d replies, want %d", name, p.Replies, replies)
	}
	if p.RunStatus != "idle" {
		t.Errorf("%s the page's run status is %q, want idle", name, p.RunStatus)
	}
}

// TestWebChatInChromium drives the chat page of the real binary in headless
// Debian Chromium as a person would (testdata/peers/web-chat.mjs): a new
// conversation, "list all resources" (the reply streams in, the tool call
// succeeds), "add resource web-1 with value 7" (the approval box, Approve,
// the result), a reload that shows the same conversation with nothing
// twice, the death of its bridge (a "reconnecting…" indicator, then the
// stream resumed and one more turn shown once), and the page at phone width. Screenshots are left in the artifact
// directory the test logs.
func TestWebChatInChromium(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	m := startMesh(t, meshOpts{logLevel: "info"})
	dir := artifactDir(t)

	var (
		res       webResult
		elsewhere string
		decided   = make(chan string, 1)
		decision  string
	)
	runPeer(t, node, "web-chat.mjs", 3*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "TIMEOUT_MS=20000",
	}, &res, map[string]func(){
		"pause-elsewhere": func() {
			out := m.send(str(m.do(http.StatusCreated, "POST", "/conversations", nil), "conversation", "id"), "add resource elsewhere-1 with value 1")
			if aps := list(out, "result", "approvals"); len(aps) != 1 {
				t.Fatalf("the other conversation did not pause on one approval: %v", obj(out, "result"))
			}
			elsewhere = str(list(out, "result", "approvals")[0], "uuid")
		},
		// Started, not waited for: the decision's answer comes after the
		// resumed turn, and the page measures from the start.
		"decide-elsewhere": func() {
			go func() {
				status, body := m.try("POST", "/approvals/"+elsewhere, map[string]any{"approved": true})
				decided <- fmt.Sprint(status, " ", body)
			}()
		},
		// The page is open on the conversation: its event stream breaks,
		// and `mesh up` starts a new bridge.
		"kill-bridge": func() {
			// The decision made elsewhere answers (after its resumed turn)
			// before its bridge goes.
			decision = <-decided
			if err := killPID(m.childPID("bridge")); err != nil {
				t.Fatalf("kill the bridge: %v", err)
			}
		},
	})
	t.Logf("screenshots in %s: %s", dir, strings.Join(baseNames(res.Screenshots), ", "))
	if res.Error != "" {
		t.Fatalf("the page did not do what a person expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}

	// A decision made elsewhere reached the page's list, with no reload.
	if !strings.HasPrefix(decision, "200 ") {
		t.Errorf("deciding the other conversation's approval: %s", decision)
	}
	if res.ListedElsewhere != 1 {
		t.Errorf("the list showed %d conversations waiting for approval after another was paused elsewhere, want 1", res.ListedElsewhere)
	}
	t.Logf("the list showed the decision made elsewhere %d ms after it was sent", res.DecidedElsewhereMs)

	if res.PatchFailures == nil || len(res.PatchFailures) > 0 {
		t.Errorf("the page's JSON Patch (STATE_DELTA) fails RFC 6902 examples: %q", res.PatchFailures)
	}

	// The tool turn streamed in.
	// A complete reply about resources, streamed from the events.
	if r := res.ListReply; r.Source != "stream" || r.Chunks < 1 {
		t.Errorf("reply to the list from %q in %d chunks, want it streamed from the events", r.Source, r.Chunks)
	}
	if r := res.ListReply; r.Streaming != "false" {
		t.Errorf("reply to the list still streaming (%q), want it complete", r.Streaming)
	}
	checkHolds(t, "reply to the list", res.ListReply.Text, []string{"resources"})
	if res.Copied != res.ListReply.Text {
		t.Errorf("Copy put %q on the clipboard, want the answer %q", res.Copied, res.ListReply.Text)
	}
	if len(res.Times) < 2 {
		t.Errorf("messages after the list: %+v, want the question and the answer", res.Times)
	}
	for i, tm := range res.Times {
		at, err := time.Parse(time.RFC3339, tm.ISO)
		if err != nil || time.Since(at) > 10*time.Minute || time.Until(at) > time.Minute {
			t.Errorf("message %d written at %q, want a time of this test", i, tm.ISO)
		}
		if tm.Label == "" || tm.Shown != `"`+tm.Label+`"` {
			t.Errorf("message %d shows %s, want its time %q", i, tm.Shown, tm.Label)
		}
	}
	if !strings.Contains(res.ListToolResult, `"count"`) {
		t.Errorf("resources_list result shown = %q", res.ListToolResult)
	}

	// The approval turn.
	if !strings.Contains(res.ApprovalText, "resources_add") || !strings.Contains(res.ApprovalText, "web-1") {
		t.Errorf("approval box = %q, want resources_add and its arguments", res.ApprovalText)
	}
	if !res.SendDisabledWhileWaiting {
		t.Errorf("the send button is enabled while an approval is pending")
	}
	if res.AddReply.Source != "stream" || res.AddReply.Chunks < 1 || !strings.Contains(res.AddReply.Text, "web-1") {
		t.Errorf("reply after approval = %+v, want a streamed reply mentioning web-1", res.AddReply)
	}
	if !strings.Contains(res.AddToolResult, `"web-1"`) {
		t.Errorf("resources_add result shown = %q", res.AddToolResult)
	}
	if n := m.resourceRows("web-1"); n != 1 {
		t.Errorf("rows named web-1 = %d, want 1", n)
	}

	// The same conversation live and after a reload: nothing missing, nothing twice.
	wantUsers := []string{"list all resources", "add resource web-1 with value 7"}
	wantTools := []string{"resources_list:success", "resources_add:success"}
	for name, p := range map[string]webPage{"after the approval": res.AfterApproval, "after a reload": res.AfterReload} {
		p.check(t, name, wantUsers, wantTools, 2)
		if p.Notices != 1 {
			t.Errorf("%s the page shows %d notices, want 1", name, p.Notices)
		}
		if p.ApprovalVisible {
			t.Errorf("%s the page shows the approval box, want none", name)
		}
		if p.Hash != "#"+res.ConversationID {
			t.Errorf("%s the page's location hash is %q, want #%s", name, p.Hash, res.ConversationID)
		}
	}
	if a := res.AfterReload.ActiveConversation; a == nil || *a != "list all resources" {
		t.Errorf("after a reload the list's open conversation is %v, want the one titled \"list all resources\"", a)
	}

	// The bridge died and came back: the page said so, followed the stream
	// again from its last event, and shows the next turn once.
	if !strings.Contains(res.Reconnecting, "reconnecting") {
		t.Errorf("while the bridge was down the page showed %q, want a reconnecting indicator", res.Reconnecting)
	}
	// The page's backoff: 1, 2, 4, 8 … s, at most 30 s; the indicator
	// counts the same waits, from 1 s.
	if fmt.Sprint(res.RetryDelays) != "[1000 2000 4000 8000 16000 30000 30000 30000]" {
		t.Errorf("the page's retry delays = %v, want 1, 2, 4, 8, 16 s then 30 s", res.RetryDelays)
	}
	t.Logf("while the bridge was away the page showed %q", res.ReconnectTexts)
	for i, text := range res.ReconnectTexts {
		if want := fmt.Sprintf("reconnecting in %d s…", min(1<<i, 30)); text != want {
			t.Errorf("indicator text %d while the bridge was away = %q, want %q (all: %q)", i, text, want, res.ReconnectTexts)
			break
		}
	}
	if len(res.ReconnectTexts) == 0 {
		t.Errorf("the indicator showed no wait while the bridge was away")
	}
	p := res.AfterReconnect
	wantUsers = append(wantUsers, "list all resources")
	wantTools = append(wantTools, "resources_list:success")
	p.check(t, "after the bridge restarted and one more turn", wantUsers, wantTools, 3)
	conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+res.ConversationID, nil), "conversation")
	if str(conv, "status") != "active" || len(toolCalls(conv)) != len(wantTools) || len(messagesOf(conv, "user")) != len(wantUsers) {
		t.Errorf("conversation %s: status %s, %d tool calls, %d user messages; want active with %d and %d",
			res.ConversationID, str(conv, "status"), len(toolCalls(conv)), len(messagesOf(conv, "user")), len(wantTools), len(wantUsers))
	}

	// Phone width: no horizontal scrolling, the list folded away, the composer on screen.
	if p := res.Phone; p.ScrollWidth > p.InnerWidth || p.SidebarVisible || !p.ComposerVisible {
		t.Errorf("at phone width: %+v; want no overflow, the sidebar hidden, the composer visible", p)
	}
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}
