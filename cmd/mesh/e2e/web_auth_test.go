package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// webAuthResult is what web-auth.mjs prints.
type webAuthResult struct {
	Error              string   `json:"error"`
	Steps              []string `json:"steps"`
	Screenshots        []string `json:"screenshots"`
	ConsoleErrors      []string `json:"consoleErrors"`
	StreamURLs         []string `json:"streamURLs"`
	PromptWithoutToken string   `json:"promptWithoutToken"`
	ListedWithoutToken int      `json:"listedWithoutToken"`
	WrongTokenError    string   `json:"wrongTokenError"`
	Who                string   `json:"who"`
	StoredToken        bool     `json:"storedToken"`
	ConversationID     string   `json:"conversationId"`
	PromptAfterReload  bool     `json:"promptAfterReload"`
	StoredAfterSignOut *string  `json:"storedAfterSignOut"`
}

// TestWebAuthInChromium drives the web page of a mesh with authentication
// on in headless Chromium (testdata/peers/web-auth.mjs): without a token it
// shows the sign-in prompt and nothing of the mesh (screenshot
// signin-prompt.png); a wrong token is refused; with a token it streams a
// turn (the EventSource carries a stream token, never the token itself),
// shows and approves an approval, stays signed in across a reload, and
// signs out.
func TestWebAuthInChromium(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	const token = "web-user-approver-token-0123"
	cfg := defaultConfig(t) + fmt.Sprintf("\nauth:\n  tokens:\n    - {name: wendy, token: %s, roles: [user, approver]}\n", token)
	m := startMesh(t, meshOpts{config: cfg, logLevel: "info"})
	dir := artifactDir(t)
	var res webAuthResult
	runPeer(t, node, "web-auth.mjs", 3*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "TOKEN=" + token, "TIMEOUT_MS=20000",
	}, &res, nil)
	t.Logf("screenshots in %s: %s", dir, strings.Join(baseNames(res.Screenshots), ", "))
	if res.Error != "" {
		t.Fatalf("the page did not do what a person expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	if !strings.Contains(res.PromptWithoutToken, "Sign in") || res.ListedWithoutToken != 0 {
		t.Errorf("without a token the page shows %q and lists %d conversations; want the sign-in prompt and nothing", res.PromptWithoutToken, res.ListedWithoutToken)
	}
	if !strings.Contains(res.WrongTokenError, "not accepted") {
		t.Errorf("a wrong token: the prompt says %q", res.WrongTokenError)
	}
	if !strings.Contains(res.Who, "wendy") || !res.StoredToken {
		t.Errorf("signed in: %q, token kept %v", res.Who, res.StoredToken)
	}
	if len(res.StreamURLs) == 0 {
		t.Error("the page opened no event stream")
	}
	for _, u := range res.StreamURLs {
		if !strings.Contains(u, "access_token=mst1.") || strings.Contains(u, token) {
			t.Errorf("event stream URL %s: want a stream token, never the token itself", u)
		}
	}
	if n := m.resourceRows("web-auth"); n != 1 {
		t.Errorf("rows named web-auth = %d, want 1 (the approved call ran once)", n)
	}
	if res.PromptAfterReload {
		t.Error("after a reload the page asks for the token again")
	}
	if res.StoredAfterSignOut != nil {
		t.Errorf("after signing out the token is still stored")
	}
	conv := obj(m.do(200, "GET", "/conversations/"+res.ConversationID, nil, "Authorization", "Bearer "+token), "conversation")
	if str(conv, "owner") != "wendy" {
		t.Errorf("the page's conversation is owned by %q, want wendy", str(conv, "owner"))
	}
	if strings.Contains(m.logs(), token) || strings.Contains(m.logs(), "mst1.") {
		t.Error("a token appears in the mesh's logs")
	}
}
