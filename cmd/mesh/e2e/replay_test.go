package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/replay"
)

// `mesh replay` against a real `mesh up`: conversations recorded with the
// offline planner, replayed against a model behind the OpenAI-format fake
// that plants known differences.

// replayCase matches the marker of a recorded conversation's message.
var replayCase = regexp.MustCompile(`\(case (\d+)\)`)

// plantedModel answers like the offline planner for cases 0–29; for the
// others it plants one kind of difference each, five cases a kind:
// 30–34 list with other arguments (different), 35–39 a second list
// (added), 40–44 no call (missing), 45–49 a destructive resources_add after
// the list (added, and proposed: never run). Planted cases answer with a
// text of their own. Every answer reports usage.
func plantedModel() llm.Provider {
	planner := offline.New()
	usage := llm.Usage{InputTokens: 100, OutputTokens: 10}
	return llmtest.Func(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		n, results := -1, 0
		for _, m := range req.Messages {
			switch m.Role {
			case llm.RoleUser:
				if sub := replayCase.FindStringSubmatch(m.Content); sub != nil {
					n, _ = strconv.Atoi(sub[1])
				}
				results = 0
			case llm.RoleTool:
				results++
			}
		}
		call := func(name, args string) (*llm.Response, error) {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d_%d", n, results), Name: name, Arguments: json.RawMessage(args)}}, Usage: usage}, nil
		}
		plan := func() (*llm.Response, error) {
			r, err := planner.Generate(ctx, req)
			if err == nil {
				r.Usage = usage
			}
			return r, err
		}
		switch group := n - n%5; {
		case n < 30:
			return plan()
		case group == 30 && results == 0:
			return call("resources_list", `{"pattern":"^planted"}`)
		case (group == 35 || group == 45) && results == 0:
			return plan()
		case group == 35 && results == 1:
			return call("resources_list", `{"pattern":"^extra"}`)
		case group == 45 && results == 1:
			return call("resources_add", fmt.Sprintf(`{"name":"planted-%d","value":%d}`, n, n))
		}
		return &llm.Response{Text: fmt.Sprintf("Planted answer %d.", n), Usage: usage}, nil
	})
}

// Replay of 50 recorded conversations against the offline planner vs the
// OpenAI-format fake: the report counts the planted differences exactly
// (tool calls same, different, added, missing; the destructive calls
// proposed, never run), the sample server's table, the approvals and the
// call records are unchanged, the exit status follows the thresholds, the
// replay's conversations are gone, and the bridge serves the report as
// JSON and as a page Chromium loads.
func TestReplayCountsPlantedDifferences(t *testing.T) {
	t.Parallel()
	const key = "test-key-replay-Zq8yX3pL0sWv5"
	srv := llmtest.Start(t, llmtest.Config{API: llmtest.OpenAI, APIKey: key, Model: "gpt-4o-mini", Backend: plantedModel()})
	m := startMesh(t, meshOpts{})

	ids := make([]string, 50)
	for i := range ids {
		conv, out := m.firstTurn(fmt.Sprintf("list all resources (case %d)", i))
		calls := toolCalls(obj(out, "conversation"))
		if len(calls) != 1 || str(calls[0], "tool") != "resources_list" {
			t.Fatalf("recorded case %d: calls %v, want one resources_list", i, calls)
		}
		ids[i] = conv
	}
	before := m.replayWitness()

	alt := filepath.Join(t.TempDir(), "new.yaml")
	cfg := strings.Replace(defaultConfig(t), "\n  model: offline\n", "\n  model: gpt-4o-mini\n", 1)
	if err := os.WriteFile(alt, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"OPENAI_API_KEY=" + key, "OPENAI_BASE_URL=" + srv.BaseURL()}
	dir := t.TempDir()
	out, page := filepath.Join(dir, "report.json"), filepath.Join(dir, "report.html")
	args := append([]string{"replay", "--config", alt, "--out", out, "--html", page, "--concurrency", "4", "--rate", "0",
		"--max-different-calls", "5", "--max-added-calls", "10", "--max-missing-calls", "5", "--max-proposed-calls", "5",
		"--max-failed-turns", "0", "--max-changed-answers", "0.4", "--price-input", "1", "--price-output", "2"}, ids...)
	res := m.mustCLI(0, "", env, args...)
	if !strings.Contains(res.stdout, "40 same, 5 different, 10 added, 5 missing; 5 proposed") {
		t.Errorf("summary:\n%s", res)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep replay.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	want := replay.Counts{Turns: 50, SameCalls: 40, DifferentCalls: 5, AddedCalls: 10, MissingCalls: 5, ProposedCalls: 5, ChangedAnswers: 20, ComparedAnswers: 50}
	if rep.Totals != want {
		t.Errorf("totals %+v,\nwant   %+v", rep.Totals, want)
	}
	// Every model call reports 100 tokens in and 10 out: 2 calls a turn
	// that lists (or lists other), 3 for an added call, 1 for none.
	calls := 30*2 + 5*2 + 5*3 + 5*1 + 5*3
	if rep.Usage.InputTokens != 100*calls || rep.Usage.OutputTokens != 10*calls || rep.Cost == nil || math.Abs(*rep.Cost-float64(100*calls+2*10*calls)/1e6) > 1e-9 {
		t.Errorf("usage %+v, cost %v; want %d model calls' (100 in, 10 out each) at 1 and 2 a million", rep.Usage, rep.Cost, calls)
	}
	if len(rep.Conversations) != 50 || rep.Exceeded != nil {
		t.Fatalf("%d conversations, exceeded %v", len(rep.Conversations), rep.Exceeded)
	}
	for i, c := range rep.Conversations {
		kinds := []string{}
		for _, d := range c.Turns[0].Calls {
			kinds = append(kinds, d.Kind)
		}
		wantKinds := "same"
		if i >= 30 {
			wantKinds = map[int]string{30: "different", 35: "same,added", 40: "missing", 45: "same,added"}[i-i%5]
		}
		if c.Source != ids[i] || strings.Join(kinds, ",") != wantKinds {
			t.Errorf("case %d (%s): calls compared %v, want %s", i, c.Source, kinds, wantKinds)
		}
		if changed := c.Counts.ChangedAnswers == 1; changed != (i >= 30) {
			t.Errorf("case %d: answer changed %v (recorded %q, replay %q)", i, changed, c.Turns[0].Original, c.Turns[0].Replay)
		}
		if c.Usage.InputTokens == 0 || c.Latency.P50 <= 0 {
			t.Errorf("case %d: usage %+v latency %+v, want both measured", i, c.Usage, c.Latency)
		}
		if i >= 45 {
			p := c.Turns[0].Proposed
			if len(p) != 1 || p[0].Tool != "resources/resources_add" || p[0].Arguments["name"] != fmt.Sprintf("planted-%d", i) {
				t.Errorf("case %d: proposed %v, want resources_add of planted-%d", i, p, i)
			}
		}
	}
	// Nothing destructive ran, nothing was asked of an approver, the tool
	// host recorded no call that is not read-only.
	if after := m.replayWitness(); after != before {
		t.Errorf("the mesh changed: before %+v, after %+v", before, after)
	}
	for i := 45; i < 50; i++ {
		if n := m.resourceRows(fmt.Sprintf("planted-%d", i)); n != 0 {
			t.Errorf("planted-%d is in the sample server's table (%d rows)", i, n)
		}
	}
	if html, err := os.ReadFile(page); err != nil || !strings.Contains(string(html), "Replay "+rep.ID) {
		t.Errorf("--html: %v", err)
	}

	// Served by the bridge: JSON, and a page a browser loads.
	code, body := m.get("/replays/"+rep.ID, "")
	var served replay.Report
	if code != http.StatusOK || json.Unmarshal([]byte(body), &served) != nil || served.Totals != want {
		t.Errorf("GET /replays/%s: %d, totals %+v", rep.ID, code, served.Totals)
	}
	if code, body := m.get("/replays", ""); code != http.StatusOK || !strings.Contains(body, rep.ID) {
		t.Errorf("GET /replays: %d %s", code, body)
	}
	dom := chromiumDOM(t, m.url("/replays/"+rep.ID))
	for _, s := range []string{"Replay " + rep.ID, "Within the thresholds.", "<td>40</td><td>5</td><td>10</td><td>5</td><td>5</td>", "Planted answer 47."} {
		if !strings.Contains(dom, s) {
			t.Errorf("the page Chromium loaded lacks %q", s)
		}
	}

	// Over a threshold: exit 3, saying which. This run finds the mesh as
	// a cluster's node would: NATS_URL, and the identity NATS_NKEY names
	// with {role}, over the mesh context.
	cluster := append(slices.Clone(env), "NATS_URL=nats://"+m.natsAddr, "NATS_NKEY="+filepath.Join(m.dataDir, "creds", "{role}.nk"))
	res = m.mustCLI(3, "", cluster, append([]string{"replay", "--config", alt, "--max-different-calls", "4"}, ids[30:35]...)...)
	if !strings.Contains(res.stderr, "different calls: 5 > 4") {
		t.Errorf("over the threshold:\n%s", res)
	}
	// Bad input: a usage error, nothing run.
	m.mustCLI(2, "", env, "replay", "--config", alt)
	m.mustCLI(2, "", env, "replay", "--config", alt, "--max-changed-answers", "2", ids[0])
	if r := m.cli("", env, "replay", "--config", alt, "no-such-conversation"); r.code != 1 || !strings.Contains(r.stderr, "no conversation") {
		t.Errorf("an unknown conversation: %s", r)
	}
}

// replayWitness is what a replay must leave as it found it: the sample
// server's rows, the approvals, the tool calls recorded and the
// conversations (the replay's own removed).
type replayWitness struct {
	rows, approvals, calls, conversations int
}

func (m *meshProc) replayWitness() replayWitness {
	m.t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(m.dataDir, "resources.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		m.t.Fatal(err)
	}
	defer db.Close()
	var w replayWitness
	if err := db.QueryRow("SELECT count(*) FROM resources").Scan(&w.rows); err != nil {
		m.t.Fatal(err)
	}
	js, err := jetstream.New(m.adminNATS(m.t))
	if err != nil {
		m.t.Fatal(err)
	}
	count := func(bucket string) int {
		kv, err := js.KeyValue(m.t.Context(), mesh.DefaultNamespace().Bucket(bucket))
		if err != nil {
			m.t.Fatal(err)
		}
		keys, err := kv.ListKeys(m.t.Context())
		if err != nil {
			m.t.Fatal(err)
		}
		n := 0
		for range keys.Keys() {
			n++
		}
		return n
	}
	w.approvals, w.calls, w.conversations = count(mesh.BucketApprovals), count(mesh.BucketCalls), count(mesh.BucketSessions)
	return w
}

// get is a plain GET of the bridge with an Accept header.
func (m *meshProc) get(path, accept string) (int, string) {
	m.t.Helper()
	req, _ := http.NewRequest("GET", m.url(path), nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// chromiumDOM loads url in headless Chromium and returns the DOM it built.
func chromiumDOM(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath(t), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", url, err)
	}
	return string(out)
}
