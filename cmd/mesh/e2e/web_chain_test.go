package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWebPageDrivesTheProxyChain: a person on Agent A's web page asks for
// something Agent B must have approved. A's page shows the approval box
// for B's call, Approve there runs it on B once, and A's answer on the
// page shows the created resource; both conversations end active.
func TestWebPageDrivesTheProxyChain(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "playwright-core")
	browser := chromiumPath(t)
	a, b := chain(t)
	dir := artifactDir(t)

	var res struct {
		webResult
		ApprovalText string `json:"approvalText"`
		ApprovalUUID string `json:"approvalUUID"`
		Reply        string `json:"reply"`
	}
	runPeer(t, node, "web-chain.mjs", 2*time.Minute, []string{
		"BASE_URL=" + a.url(""), "CHROMIUM=" + browser, "ARTIFACTS=" + dir, "TIMEOUT_MS=30000", "NAME=web-chain-1",
	}, &res, nil)
	t.Logf("screenshots in %s: %s", dir, strings.Join(baseNames(res.Screenshots), ", "))
	if res.Error != "" {
		t.Fatalf("the page did not do what a person expects; after steps %v:\n%s", res.Steps, res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	if !strings.Contains(res.ApprovalText, "resource-agent") || !strings.Contains(res.ApprovalText, "web-chain-1") {
		t.Errorf("the approval box says %q, want the sub-agent resource-agent and the resource's name", res.ApprovalText)
	}
	ap := obj(a.do(http.StatusOK, "GET", "/approvals/"+res.ApprovalUUID, nil), "approval")
	if str(ap, "remote_agent_name") != "resource-agent" || str(ap, "status") != "approved" {
		t.Errorf("the approval decided on A's page = %v, want resource-agent's proxy approval, approved", ap)
	}
	if !strings.Contains(res.Reply, "web-chain-1") {
		t.Errorf("A's answer on the page %q does not show the created resource", res.Reply)
	}
	if n := b.resourceRows("web-chain-1"); n != 1 {
		t.Errorf("rows on B = %d, want exactly 1", n)
	}
	if c := obj(a.do(http.StatusOK, "GET", "/conversations/"+res.ConversationID, nil), "conversation"); str(c, "status") != "active" {
		t.Errorf("A's conversation after the approval: %s, want active", str(c, "status"))
	}
	task := b.do(http.StatusOK, "GET", "/conversations/"+str(ap, "remote_task_id"), nil)
	if str(task, "conversation", "status") != "active" {
		t.Errorf("B's task after the approval: %s, want active", str(task, "conversation", "status"))
	}
}
