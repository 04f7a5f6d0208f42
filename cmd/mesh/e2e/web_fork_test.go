package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// webForkUser is a user message as web-fork.mjs reads it off the page.
type webForkUser struct {
	ID         string `json:"id"`
	Text       string `json:"text"`
	Branch     string `json:"branch"`
	NavLabel   string `json:"navLabel"`
	NavVisible bool   `json:"navVisible"`
	EditLabel  string `json:"editLabel"`
}

// webForkView is what the page shows at one step of web-fork.mjs.
type webForkView struct {
	Hash      string        `json:"hash"`
	Users     []webForkUser `json:"users"`
	Answers   []string      `json:"answers"`
	Tools     []string      `json:"tools"`
	Branches  string        `json:"branches"`
	RunStatus string        `json:"runStatus"`
	Focused   string        `json:"focused"`
}

// texts are the texts of the user messages shown.
func (v webForkView) texts() []string {
	var out []string
	for _, u := range v.Users {
		out = append(out, u.Text)
	}
	return out
}

// TestWebEditForksAndSwitchesBranches drives the branches of the chat page
// in headless Chromium (testdata/peers/web-fork.mjs): editing the second
// of two messages opens a branch (its own address) that keeps the first
// exchange and answers the new text; the arrows on the edited message go
// back to the original, whose answer and tool call are still there, and
// forward again by keyboard (the focus staying on an arrow); a reload
// stays on the branch; the header lists both. Editing the edited message
// again makes a third branch at the same point: 3 of 3, and back to 2 of
// 3. Over REST the original is unchanged and the branches name where
// they come from.
func TestWebEditForksAndSwitchesBranches(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	m := startMesh(t, meshOpts{})
	dir := artifactDir(t)

	var res struct {
		webResult
		Original       string      `json:"original"`
		Branch         string      `json:"branch"`
		EditorText     string      `json:"editorText"`
		Before         webForkView `json:"before"`
		AfterEscape    webForkView `json:"afterEscape"`
		OnBranch       webForkView `json:"onBranch"`
		BackOnOriginal webForkView `json:"backOnOriginal"`
		AgainOnBranch  webForkView `json:"againOnBranch"`
		AfterReload    webForkView `json:"afterReload"`
		FromList       webForkView `json:"fromList"`
		Third          string      `json:"third"`
		OnThird        webForkView `json:"onThird"`
		SecondOfThree  webForkView `json:"secondOfThree"`
		BranchList     []struct {
			ID      string `json:"id"`
			Current bool   `json:"current"`
			Text    string `json:"text"`
		} `json:"branchList"`
	}
	runPeer(t, node, "web-fork.mjs", 3*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "TIMEOUT_MS=30000", "EDITED=help",
	}, &res, nil)
	t.Logf("screenshots in %s: %s", dir, strings.Join(baseNames(res.Screenshots), ", "))
	if res.Error != "" {
		t.Fatalf("the page did not do what a person expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}

	original := []string{"hello", "list all resources"}
	edited := []string{"hello", "help"}
	same := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	same("user messages before the edit", res.Before.texts(), original)
	if res.Before.Users[1].EditLabel != "Edit this message" {
		t.Errorf("the Edit button's label is %q", res.Before.Users[1].EditLabel)
	}
	if res.EditorText != "list all resources" {
		t.Errorf("the editor opened with %q, want the message's text", res.EditorText)
	}
	same("user messages after Escape", res.AfterEscape.texts(), original)
	if res.AfterEscape.Hash != res.Original {
		t.Errorf("Escape moved the page to %s", res.AfterEscape.Hash)
	}

	// The branch: the first exchange kept (same message), the new text
	// answered, and the arrows on the edited message.
	b := res.OnBranch
	same("user messages on the branch", b.texts(), edited)
	if b.Users[0].ID != res.Before.Users[0].ID {
		t.Errorf("the branch's first message is %s, want the original's %s", b.Users[0].ID, res.Before.Users[0].ID)
	}
	if len(b.Answers) != 2 || b.Answers[0] != res.Before.Answers[0] {
		t.Errorf("answers on the branch %q, want the original's first answer kept, then one more", b.Answers)
	} else {
		checkHolds(t, "the branch's answer to help", b.Answers[1], []string{"resources_list"})
	}
	if len(b.Tools) != 0 {
		t.Errorf("tool calls on the branch: %q, want none (the list was edited away)", b.Tools)
	}
	if !b.Users[1].NavVisible || b.Users[1].NavLabel != "Branch 2 of 2 at this message" || b.Users[0].NavVisible {
		t.Errorf("branch arrows on the branch: %+v, want on the edited message only, branch 2 of 2", b.Users)
	}
	if b.Branches != "branch 2 of 2" {
		t.Errorf("the header says %q, want branch 2 of 2", b.Branches)
	}

	// Back on the original: its own second message, answer and tool call.
	o := res.BackOnOriginal
	if o.Hash != res.Original {
		t.Fatalf("the previous-branch arrow opened %s, want the original %s", o.Hash, res.Original)
	}
	same("user messages back on the original", o.texts(), original)
	same("answers back on the original", o.Answers, res.Before.Answers)
	same("tool calls back on the original", o.Tools, res.Before.Tools)
	if o.Users[1].Branch != "1/2" || o.Branches != "branch 1 of 2" {
		t.Errorf("the original shows arrows %q and header %q, want 1/2 and branch 1 of 2", o.Users[1].Branch, o.Branches)
	}

	// Forward again by keyboard, and a reload.
	for name, v := range map[string]webForkView{"again on the branch": res.AgainOnBranch, "after a reload": res.AfterReload} {
		if v.Hash != res.Branch {
			t.Errorf("%s the page shows %s, want the branch %s", name, v.Hash, res.Branch)
		}
		same("user messages "+name, v.texts(), edited)
		same("answers "+name, v.Answers, b.Answers)
	}
	// Next branch is disabled on the last branch: the focus moves to the
	// arrow that still leads somewhere.
	if res.AgainOnBranch.Focused != "Previous branch" {
		t.Errorf("after switching to the last branch by keyboard the focus is on %q, want the Previous branch arrow", res.AgainOnBranch.Focused)
	}
	if len(res.BranchList) != 2 || res.BranchList[0].ID != res.Original || res.BranchList[1].ID != res.Branch || !res.BranchList[1].Current {
		t.Errorf("the header's branch list: %+v, want the original, then the branch (current)", res.BranchList)
	}
	if res.FromList.Hash != res.Original {
		t.Errorf("the branch list opened %s, want the original", res.FromList.Hash)
	}

	// An edit of the edited message: a third branch at the same point,
	// forked from the second; the arrows count all three.
	same("user messages on the third branch", res.OnThird.texts(), []string{"hello", "hello"})
	if res.OnThird.Users[1].Branch != "3/3" || res.OnThird.Branches != "branch 3 of 3" {
		t.Errorf("the third branch shows arrows %q and header %q, want 3/3 and branch 3 of 3", res.OnThird.Users[1].Branch, res.OnThird.Branches)
	}
	if res.SecondOfThree.Hash != res.Branch || res.SecondOfThree.Users[1].Branch != "2/3" {
		t.Errorf("previous from the third branch: %s at %q, want the second branch %s at 2/3", res.SecondOfThree.Hash, res.SecondOfThree.Users[1].Branch, res.Branch)
	}

	// Over REST: the original is unchanged; the branch names it.
	conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+res.Original, nil), "conversation")
	var users []string
	for _, msg := range list(conv, "messages") {
		if str(msg, "role") == "user" {
			users = append(users, str(msg, "content"))
		}
	}
	same("the original's user messages over REST", users, original)
	branch := obj(m.do(http.StatusOK, "GET", "/conversations/"+res.Branch, nil), "conversation")
	if str(branch, "forked_from", "conversation") != res.Original {
		t.Errorf("the branch's forked_from = %v, want the original %s", obj(branch, "forked_from"), res.Original)
	}
	fam := m.do(http.StatusOK, "GET", "/conversations/"+res.Branch+"/branches", nil)
	if str(fam, "root") != res.Original || len(list(fam, "branches")) != 3 {
		t.Errorf("the family = %v, want the original as root and three conversations", fam)
	}
	third := obj(m.do(http.StatusOK, "GET", "/conversations/"+res.Third, nil), "conversation")
	if str(third, "forked_from", "conversation") != res.Branch || str(third, "forked_from", "message") != str(branch, "forked_from", "message") {
		t.Errorf("the third branch's forked_from = %v, want the second branch at the same message as %v", obj(third, "forked_from"), obj(branch, "forked_from"))
	}
}
