package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

// Tokens of the operations tests: a user who chats, an approver, a viewer.
const (
	opsUserToken     = "ops-user-token-0123456789"
	opsApproverToken = "ops-approver-token-0123456789"
	opsViewerToken   = "ops-viewer-token-0123456789"
)

var (
	asUser     = []string{"Authorization", "Bearer " + opsUserToken}
	asApprover = []string{"Authorization", "Bearer " + opsApproverToken}
	asViewer   = []string{"Authorization", "Bearer " + opsViewerToken}
)

// opsAuth is the auth section of the operations tests.
const opsAuth = `
auth:
  tokens:
    - {name: uma, token: ` + opsUserToken + `, roles: [user]}
    - {name: ada, token: ` + opsApproverToken + `, roles: [approver]}
    - {name: vic, token: ` + opsViewerToken + `, roles: [viewer]}
`

// parallelApprovalsMesh starts a mesh whose agent runs two branches in
// parallel, each through the offline planner behind a real wire format:
// add-left always adds audit-log (an approval), add-right does what the
// user asked. "add resource x …" makes two approvals in one conversation,
// "list all resources" one.
func parallelApprovalsMesh(t *testing.T) *meshProc {
	t.Helper()
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, Backend: taskBackend{offline.New()}})
	cfg := strings.Replace(defaultConfig(t), "\n  model: offline\n", "\n  model: gpt-4o-mini\n", 1) + `
agent:
  name: both
  type: parallel
  agents:
    - {name: add-left, type: llm, prompt: "Task: add resource audit-log with value 0"}
    - {name: add-right, type: llm}
` + opsAuth
	return startMesh(t, meshOpts{config: cfg, logLevel: "info", env: []string{"OPENAI_API_KEY=k", "OPENAI_BASE_URL=" + srv.BaseURL()}})
}

// pauseOn sends text in a new conversation of uma's and returns its id
// once the turn waits for want approvals.
func (m *meshProc) pauseOn(text string, want int) string {
	m.t.Helper()
	conv := m.newConversationAs(asUser)
	out := m.send(conv, text, asUser...)
	if aps := list(out, "result", "approvals"); str(out, "conversation", "status") != "waiting_approval" || len(aps) != want {
		m.t.Fatalf("%q: %v, want %d approvals waiting", text, obj(out, "result"), want)
	}
	return conv
}

// webOpsInboxResult is what web-ops-inbox.mjs prints.
type webOpsInboxResult struct {
	Error         string       `json:"error"`
	Steps         []string     `json:"steps"`
	Screenshots   []string     `json:"screenshots"`
	ConsoleErrors []string     `json:"consoleErrors"`
	NavApprovals  bool         `json:"navApprovals"`
	First         []inboxEntry `json:"first"`
	AfterDecision []inboxEntry `json:"afterDecision"`
	Decided       []struct {
		UUID   string `json:"uuid"`
		Status string `json:"status"`
		By     string `json:"by"`
		Text   string `json:"text"`
	} `json:"decided"`
	Fourth     inboxEntry `json:"fourth"`
	Reloaded   bool       `json:"reloaded"`
	AfterBulk  int        `json:"afterBulk"`
	UserNav    bool       `json:"userNav"`
	UserDenied string     `json:"userDenied"`
}

// inboxEntry is one pending approval as the page shows it.
type inboxEntry struct {
	UUID         string `json:"uuid"`
	Conversation string `json:"conversation"`
	Tool         string `json:"tool"`
	Text         string `json:"text"`
	Args         string `json:"args"`
	Waited       string `json:"waited"`
}

// TestWebOpsInboxInChromium is the approvals inbox's acceptance: Chromium,
// signed in as an approver, opens #/approvals with three pending approvals
// in two conversations (oldest first, each with its conversation, member,
// who asked, tool and arguments, and how long it has waited; screenshot),
// approves one and rejects one with a reason; the approved call ran and the
// rejected did not, and both record the approver. A fourth approval created
// meanwhile appears without a reload; the last two are rejected at once
// (several at once). A user's page offers no inbox and the API refuses it.
func TestWebOpsInboxInChromium(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	m := parallelApprovalsMesh(t)
	convA := m.pauseOn("add resource alpha-1 with value 1", 2)
	convB := m.pauseOn("list all resources", 1)
	dir := artifactDir(t)
	var convC string
	var res webOpsInboxResult
	runPeer(t, node, "web-ops-inbox.mjs", 4*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "TIMEOUT_MS=30000",
		"TOKEN=" + opsApproverToken, "USER_TOKEN=" + opsUserToken, "CONV_A=" + convA, "CONV_B=" + convB,
	}, &res, map[string]func(){
		// The page shows the inbox after the two decisions: a fourth
		// approval, in a third conversation.
		"fourth": func() { convC = m.pauseOn("list all resources", 1) },
	})
	t.Logf("screenshots in %s: %s", dir, strings.Join(baseNames(res.Screenshots), ", "))
	if res.Error != "" {
		t.Fatalf("the inbox did not do what an approver expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	if !res.NavApprovals {
		t.Error("the approver's page offers no link to the inbox")
	}

	// Three pending, oldest first: A's two (its branches) before B's.
	var convs []string
	for _, e := range res.First {
		convs = append(convs, e.Conversation)
	}
	if want := []string{convA, convA, convB}; !slices.Equal(convs, want) {
		t.Fatalf("the inbox showed approvals of %q, want A's two then B's, %q: %+v", convs, want, res.First)
	}
	var alpha, auditA, auditB inboxEntry
	for _, e := range res.First {
		if !strings.Contains(e.Text, "resources_add") || !strings.Contains(e.Text, "uma") || !strings.Contains(e.Waited, "waiting") {
			t.Errorf("item %+v: want the tool, who asked (uma) and how long it waited", e)
		}
		switch {
		case strings.Contains(e.Args, `"alpha-1"`):
			alpha = e
		case e.Conversation == convA && strings.Contains(e.Args, `"audit-log"`):
			auditA = e
		case strings.Contains(e.Args, `"audit-log"`):
			auditB = e
		}
	}
	if alpha.UUID == "" || auditA.UUID == "" || auditB.UUID == "" {
		t.Fatalf("items %+v; want alpha-1 and audit-log in A, audit-log in B", res.First)
	}
	if !strings.Contains(alpha.Text, "add-right") || !strings.Contains(auditA.Text, "add-left") || !strings.Contains(alpha.Text, "add resource alpha-1 with value 1") {
		t.Errorf("alpha-1 item %q, audit-log item %q: want the branch that asked and the message", alpha.Text, auditA.Text)
	}
	// At the end nothing waits: one approved, three rejected.
	api := m.do(http.StatusOK, "GET", "/ops/approvals", nil, asApprover...)
	if p := list(api, "pending"); len(p) != 0 {
		t.Errorf("GET /ops/approvals at the end: pending %v, want none", p)
	}
	if c := obj(api, "counts"); c["approved"] != 1.0 || c["rejected"] != 3.0 {
		t.Errorf("GET /ops/approvals at the end: counts %v, want 1 approved and 3 rejected", c)
	}
	if n := len(list(api, "decided")); n != 4 {
		t.Errorf("GET /ops/approvals at the end: %d decided, want 4", n)
	}

	// The decisions: alpha-1 approved and ran; B's audit-log rejected with
	// the reason, and nothing ran; both by ada.
	if m.resourceRows("alpha-1") != 1 || m.resourceRows("audit-log") != 0 {
		t.Errorf("rows: alpha-1 %d, audit-log %d; want 1 and 0", m.resourceRows("alpha-1"), m.resourceRows("audit-log"))
	}
	ap := obj(m.do(http.StatusOK, "GET", "/approvals/"+alpha.UUID, nil, asApprover...), "approval")
	if str(ap, "status") != "approved" || str(ap, "decision", "by") != "ada" {
		t.Errorf("alpha-1's approval: %s by %s, want approved by ada", str(ap, "status"), str(ap, "decision", "by"))
	}
	ap = obj(m.do(http.StatusOK, "GET", "/approvals/"+auditB.UUID, nil, asApprover...), "approval")
	if str(ap, "status") != "rejected" || str(ap, "decision", "by") != "ada" || str(ap, "decision", "reason") != "not during the freeze" {
		t.Errorf("B's approval: %v, want rejected by ada, not during the freeze", obj(ap, "decision"))
	}
	if len(res.AfterDecision) != 1 || res.AfterDecision[0].UUID != auditA.UUID {
		t.Errorf("after the two decisions the page shows %+v, want A's audit-log only", res.AfterDecision)
	}
	decided := map[string]string{}
	for _, d := range res.Decided {
		decided[d.UUID] = d.Status + " by " + d.By
	}
	if decided[alpha.UUID] != "approved by ada" || decided[auditB.UUID] != "rejected by ada" {
		t.Errorf("history %v, want alpha-1 approved and B's rejected, by ada", decided)
	}

	// The fourth, live; then the bulk rejection of what was left.
	if res.Reloaded || res.Fourth.Conversation != convC || !strings.Contains(res.Fourth.Args, "audit-log") {
		t.Errorf("the fourth approval: %+v (page reloaded: %v), want C's audit-log without a reload", res.Fourth, res.Reloaded)
	}
	if res.AfterBulk != 0 || m.resourceRows("audit-log") != 0 {
		t.Errorf("after rejecting the rest at once: %d shown, audit-log rows %d; want none", res.AfterBulk, m.resourceRows("audit-log"))
	}
	for _, c := range []string{convA, convB, convC} {
		conv := obj(m.do(http.StatusOK, "GET", "/conversations/"+c, nil, asUser...), "conversation")
		if st := str(conv, "status"); st == "waiting_approval" {
			t.Errorf("conversation %s still waits for an approval", c)
		}
	}

	// Only approvers and admins.
	if res.UserNav || !strings.Contains(res.UserDenied, "approvers") {
		t.Errorf("a user's page: inbox link %v, #/approvals says %q; want no link and a refusal", res.UserNav, res.UserDenied)
	}
	for _, who := range [][]string{asUser, asViewer} {
		m.do(http.StatusForbidden, "GET", "/ops/approvals", nil, who...)
		m.do(http.StatusForbidden, "GET", "/ops/approvals/events", nil, who...)
	}
	m.do(http.StatusUnauthorized, "GET", "/ops/approvals", nil)
}

// webOpsMeshResult is what web-ops-mesh.mjs prints.
type webOpsMeshResult struct {
	Error                 string   `json:"error"`
	Steps                 []string `json:"steps"`
	Screenshots           []string `json:"screenshots"`
	ConsoleErrors         []string `json:"consoleErrors"`
	Roles                 []string `json:"roles"`
	NodesUp               []string `json:"nodesUp"`
	AgentNode             string   `json:"agentNode"`
	Detection             string   `json:"detection"`
	Charts                []string `json:"charts"`
	RedAfterMS            int64    `json:"redAfterMs"`
	RedState              string   `json:"redState"`
	DownAfterMS           int64    `json:"downAfterMs"`
	QueuePending          int      `json:"queuePending"`
	AgentStateWhileQueued string   `json:"agentStateWhileQueued"`
	UpAfterMS             int64    `json:"upAfterMs"`
	SystemEvents          []string `json:"systemEvents"`
	TurnsPeak             float64  `json:"turnsPeak"`
}

// TestWebOpsMeshInChromium is the mesh view's acceptance: Chromium on
// #/mesh while the test kills the agent process (the supervisor waits 10 s
// before it starts it again): the node turns red within the detection
// time (plus one sample of the view), a message sent meanwhile shows
// pending in the agent's work queue (and the API says the same of the real
// stream), and the node turns green after the restart, the turn leaves
// the queue and the turns chart moves. Screenshots in the artifacts.
func TestWebOpsMeshInChromium(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	m := startMesh(t, meshOpts{config: slowRestarts(t), logLevel: "info"})
	conv := m.newConversation()
	dir := artifactDir(t)
	var answer func(time.Duration, string) map[string]any
	var res webOpsMeshResult
	runPeer(t, node, "web-ops-mesh.mjs", 4*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "TIMEOUT_MS=20000",
	}, &res, map[string]func(){
		"kill-agent": func() {
			if err := killPID(m.childPID("agent")); err != nil {
				t.Fatalf("kill the agent: %v", err)
			}
		},
		"queue-turn": func() { answer = m.sendLater(conv, "list all resources") },
		"queue-seen": m.checkQueuedWhileAgentDown,
	})
	t.Logf("screenshots in %s: %s", dir, strings.Join(baseNames(res.Screenshots), ", "))
	t.Logf("the agent's node red after %d ms (%s), marked down after %d ms, green again after %d ms", res.RedAfterMS, res.RedState, res.DownAfterMS, res.UpAfterMS)
	if res.Error != "" {
		t.Fatalf("the mesh view did not do what an operator expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	for _, role := range []string{"agent", "approver", "bridge", "monitor", "toolhost"} {
		if !slices.Contains(res.Roles, role) {
			t.Errorf("roles shown %v, want %s among them", res.Roles, role)
		}
	}
	if len(res.Charts) != 4 || !strings.Contains(res.Detection, "2.5 s") {
		t.Errorf("charts %v, detection %q; want four charts and 2.5 s", res.Charts, res.Detection)
	}
	// Detection: 2 missed beats of 1 s and half an interval; the view
	// samples once a second, and the page needs a moment to draw.
	if limit := int64(2500 + 1000 + 1500); res.RedAfterMS > limit {
		t.Errorf("the agent's node turned red after %d ms, want within %d ms", res.RedAfterMS, limit)
	}
	if res.QueuePending < 1 || (res.AgentStateWhileQueued != "down" && res.AgentStateWhileQueued != "late") {
		t.Errorf("while the agent was down the queue showed %d pending, the node %s", res.QueuePending, res.AgentStateWhileQueued)
	}
	if !slices.Contains(res.SystemEvents, "node_down:"+res.AgentNode) {
		t.Errorf("mesh events shown %v, want node_down of %s", res.SystemEvents, res.AgentNode)
	}
	if res.TurnsPeak <= 0 {
		t.Errorf("the turns chart never moved")
	}
	out := answer(60*time.Second, "the turn queued while the agent was down never finished")
	if str(out, "conversation", "status") != "active" || len(toolCalls(obj(out, "conversation"))) != 1 {
		t.Errorf("the queued turn: %v, want it run once the agent came back", obj(out, "result"))
	}
}

// checkQueuedWhileAgentDown checks GET /ops/mesh against the real state
// while the agent that pid was is dead and its turn waits: no agent
// process runs, the stream holds one item for the agent, and the view says
// so, with the node red.
func (m *meshProc) checkQueuedWhileAgentDown() {
	m.t.Helper()
	m.mu.Lock()
	up := m.cmd.Process.Pid
	m.mu.Unlock()
	for _, p := range descendants(up) {
		if args := cmdline(p); len(args) >= 2 && args[1] == "agent" {
			m.t.Errorf("an agent process (%d) runs again already; the queue is no longer checked without one", p)
			return
		}
	}
	view := m.do(http.StatusOK, "GET", "/ops/mesh", nil)
	var q map[string]any
	for _, e := range list(view, "queues") {
		if str(e, "role") == "agent" && str(e, "name") == "resource-manager" {
			q = obj(e)
		}
	}
	// The real stream: one item on the agent's work subjects.
	js, err := jetstream.New(m.adminNATS(m.t))
	if err != nil {
		m.t.Fatal(err)
	}
	inStream := storedOn(m.t, js, "MESH_WORK", "mesh.work.agent.resource-manager.*")
	// One pending, none worked on.
	if inStream != 1 {
		m.t.Errorf("the stream holds %d item(s) of resource-manager, want 1", inStream)
	}
	if q == nil {
		m.t.Error("no queue of resource-manager in the view")
	} else {
		if q["messages"] != float64(inStream) {
			m.t.Errorf("queue of resource-manager: %v messages, the stream holds %d", q["messages"], inStream)
		}
		if q["pending"] != 1.0 || q["working"] != 0.0 {
			m.t.Errorf("queue of resource-manager: %v pending, %v working; want 1 and 0", q["pending"], q["working"])
		}
		checkStrs(m.t, "queue of resource-manager", q, map[string]string{"consumer": "agent_resource-manager"})
	}
	for _, n := range list(view, "nodes") {
		if str(n, "role") == "agent" && str(n, "state") != "down" && obj(n)["late"] != true {
			m.t.Errorf("agent node %v while its process is dead, want down or late", n)
		}
	}
}
