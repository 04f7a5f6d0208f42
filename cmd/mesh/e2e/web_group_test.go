package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// webGroupConfig is the default agent and a group of three inline members
// that answer in turn, three turns a message (offline model, no key).
const webGroupConfig = `
groups:
  - name: team
    description: Three resource clerks
    strategy: round_robin
    max_turns: 3
    participants:
      - {agent: alice, description: lists resources, prompt: "You are Alice, a resource clerk."}
      - {agent: bob, description: checks resources, prompt: "You are Bob, a resource clerk."}
      - {agent: carol, description: reports resources, prompt: "You are Carol, a resource clerk."}
`

// webGroupResult is what web-group.mjs prints.
type webGroupResult struct {
	Error         string   `json:"error"`
	Steps         []string `json:"steps"`
	Screenshots   []string `json:"screenshots"`
	ConsoleErrors []string `json:"consoleErrors"`
	// Options are the choices next to "New conversation", DefaultTarget
	// the one chosen when the page opens, TargetLabel the select's label.
	Options       []string `json:"options"`
	DefaultTarget string   `json:"defaultTarget"`
	TargetLabel   string   `json:"targetLabel"`
	WelcomeTitle  string   `json:"welcomeTitle"`
	TargetHint    string   `json:"targetHint"`
	Placeholder   string   `json:"placeholder"`
	// AgentPick is the page with the agent alice chosen in the picker.
	AgentPick struct {
		WelcomeTitle string `json:"welcomeTitle"`
		TargetHint   string `json:"targetHint"`
		Placeholder  string `json:"placeholder"`
	} `json:"agentPick"`

	ConversationID string `json:"conversationId"`
	// ListedAs is what the conversation list says of the new chat.
	ListedAs string `json:"listedAs"`
	// Live is the chat once the round ended, Reloaded the same after a
	// reload (from the history and the replayed events).
	Live     webGroupChat `json:"live"`
	Reloaded webGroupChat `json:"reloaded"`
	// Seen is every state the page showed while the round ran.
	Seen struct {
		Speaking []struct {
			Speaker string `json:"speaker"`
			Text    string `json:"text"`
			Role    string `json:"role"`
			Live    string `json:"live"`
		} `json:"speaking"`
		RunStatus []string `json:"runStatus"`
	} `json:"seen"`
	// FromURL: the page opened with ?group=team and a message sent.
	FromURL struct {
		WelcomeTitle   string       `json:"welcomeTitle"`
		Chat           webGroupChat `json:"chat"`
		ConversationID string       `json:"conversationId"`
	} `json:"fromURL"`
}

// webGroupChat sums up what the page shows of a group chat.
type webGroupChat struct {
	Replies []struct {
		Author     string `json:"author"`
		DataAuthor string `json:"dataAuthor"`
		Avatar     string `json:"avatar"`
		Text       string `json:"text"`
		Source     string `json:"source"`
		Chunks     int    `json:"chunks"`
	} `json:"replies"`
	Tools []string `json:"tools"`
	Ended []struct {
		Reason string `json:"reason"`
		Text   string `json:"text"`
	} `json:"ended"`
	Skipped         int    `json:"skipped"`
	Order           string `json:"order"`
	SpeakingVisible bool   `json:"speakingVisible"`
	RunStatus       string `json:"runStatus"`
	Meta            string `json:"meta"`
	Hash            string `json:"hash"`
}

// authors are the labels of the chat's answers, as "label/data-author/avatar".
func (c webGroupChat) authors() []string {
	var out []string
	for _, r := range c.Replies {
		out = append(out, r.Author+"/"+r.DataAuthor+"/"+r.Avatar)
	}
	return out
}

// check reports what differs from a finished round of alice, bob and carol
// in conv, each answer from source.
func (c webGroupChat) check(t *testing.T, name, conv, source string) {
	t.Helper()
	wantAuthors := []string{"alice/alice/A", "bob/bob/B", "carol/carol/C"}
	if got := c.authors(); !slices.Equal(got, wantAuthors) {
		t.Errorf("%s: answers labelled %q, want %q", name, got, wantAuthors)
	}
	for i, r := range c.Replies {
		if r.Source != source || !strings.Contains(r.Text, "resources") || (source == "stream" && r.Chunks < 1) {
			t.Errorf("%s: answer %d = %+v, want a complete answer about resources from the %s", name, i, r, source)
		}
	}
	wantTools := []string{"alice:resources_list:success", "bob:resources_list:success", "carol:resources_list:success"}
	if !slices.Equal(c.Tools, wantTools) {
		t.Errorf("%s: tool calls %q, want %q", name, c.Tools, wantTools)
	}
	// Shown once, max_turns, saying the turn limit was reached after 3 turns.
	if len(c.Ended) != 1 {
		t.Errorf("%s: end of the round shown %d times, want once: %+v", name, len(c.Ended), c.Ended)
	} else {
		if c.Ended[0].Reason != "max_turns" {
			t.Errorf("%s: end of the round for %q, want max_turns", name, c.Ended[0].Reason)
		}
		checkHolds(t, name+": end of the round", c.Ended[0].Text, []string{"turn limit", "3 turns"})
	}
	if c.Order != "utatatae" || c.Skipped != 0 {
		t.Errorf("%s: the log is %q (u user, t tool, a answer, e end, s skipped), want utatatae", name, c.Order)
	}
	if c.SpeakingVisible {
		t.Errorf("%s: the speaking indicator is shown, want it hidden", name)
	}
	if c.RunStatus != "idle" {
		t.Errorf("%s: run status %q, want idle", name, c.RunStatus)
	}
	if c.Hash != "#"+conv {
		t.Errorf("%s: location hash %q, want #%s", name, c.Hash, conv)
	}
	if want := "group team · alice, bob, carol · round robin"; !strings.HasPrefix(c.Meta, want) {
		t.Errorf("%s: header %q, want the group and its members, %q", name, c.Meta, want)
	}
}

// TestWebGroupChatInChromium drives the chat page of the real binary with a
// group chat in headless Debian Chromium (testdata/peers/web-group.mjs): the
// group offered next to "New conversation", a chat of it started from the
// page, "list all resources" answered by alice, bob and carol in turn, each
// answer and tool call labelled with its member live and after a reload, a
// "speaking" indicator naming each member and why while the round ran, the
// reason the round ended; then ?group=team in the address. Screenshots are
// left in the artifact directory the test logs.
func TestWebGroupChatInChromium(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	m := startMesh(t, meshOpts{config: defaultConfig(t) + webGroupConfig, logLevel: "info"})
	dir := artifactDir(t)

	var res webGroupResult
	runPeer(t, node, "web-group.mjs", 2*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "GROUP=team", "TIMEOUT_MS=20000",
	}, &res, nil)
	t.Logf("screenshots in %s: %s", dir, strings.Join(baseNames(res.Screenshots), ", "))
	if res.Error != "" {
		t.Fatalf("the page did not do what a person expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}

	// The choice next to "New conversation": the agent unless one picks the group.
	// The agent picker: every agent of the directory with its live status
	// (the members defined inline are agents the mesh serves), then the group.
	if want := []string{"the agent (resource-manager · online)", "alice · online", "bob · online", "carol · online", "group team (3 agents)"}; !slices.Equal(res.Options, want) || res.DefaultTarget != "" || res.TargetLabel != "With" {
		t.Errorf("new conversation target: options %q (default %q, label %q), want %q, the agent by default, labelled", res.Options, res.DefaultTarget, res.TargetLabel, want)
	}
	if p := res.AgentPick; p.WelcomeTitle != "What should alice do?" || !strings.HasPrefix(p.TargetHint, "lists resources Online:") || p.Placeholder != "Message alice…" {
		t.Errorf("with the agent alice chosen: %+v; want alice named, its description and its free workers", p)
	}
	if !strings.Contains(res.WelcomeTitle, "group team") || !strings.Contains(res.TargetHint, "alice, bob, carol") || res.Placeholder != "Message the group…" {
		t.Errorf("with the group chosen: welcome %q, hint %q, placeholder %q; want the group and its members named", res.WelcomeTitle, res.TargetHint, res.Placeholder)
	}

	// Who spoke, live and after a reload.
	res.Live.check(t, "live", res.ConversationID, "stream")
	res.Reloaded.check(t, "after a reload", res.ConversationID, "history")

	// Who was speaking while the round ran, and why.
	var spoke []string
	for _, s := range res.Seen.Speaking {
		t.Logf("speaking indicator showed %q (%s)", s.Text, s.Speaker)
		if s.Speaker != "" {
			spoke = append(spoke, s.Speaker)
			if !strings.Contains(s.Text, s.Speaker+" is speaking") || !strings.Contains(s.Text, "round robin") || !strings.Contains(s.Text, "in turn") {
				t.Errorf("speaking indicator %q, want %q with the strategy and its reason", s.Text, s.Speaker+" is speaking")
			}
		}
		if s.Role != "status" || s.Live != "polite" {
			t.Errorf("speaking indicator is role=%q aria-live=%q, want a polite status", s.Role, s.Live)
		}
	}
	if !slices.Equal(spoke, []string{"alice", "bob", "carol"}) {
		t.Errorf("speaking indicator named %q, want alice, bob, carol in turn", spoke)
	}
	t.Logf("run status showed %q", res.Seen.RunStatus)
	for _, who := range []string{"alice", "bob", "carol"} {
		if !slices.Contains(res.Seen.RunStatus, "running · "+who) {
			t.Errorf("run status showed %q, want %q among them", res.Seen.RunStatus, "running · "+who)
		}
	}

	if res.ListedAs != "group team" {
		t.Errorf("the conversation list shows the new chat as %q, want \"group team\"", res.ListedAs)
	}
	// The conversations are group chats of team.
	for _, id := range []string{res.ConversationID, res.FromURL.ConversationID} {
		conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+id, nil), "conversation")
		if str(conv, "group", "name") != "team" || str(conv, "group", "ended") != "max_turns" {
			t.Errorf("conversation %s: group %v, want team ended by max_turns", id, obj(conv, "group"))
		}
	}

	// ?group=team chooses the group; the first message starts its chat.
	if !strings.Contains(res.FromURL.WelcomeTitle, "group team") {
		t.Errorf("with ?group=team the welcome says %q", res.FromURL.WelcomeTitle)
	}
	if res.FromURL.ConversationID == res.ConversationID {
		t.Errorf("?group=team reopened %s instead of starting a chat", res.ConversationID)
	}
	res.FromURL.Chat.check(t, "?group=team", res.FromURL.ConversationID, "stream")
}
