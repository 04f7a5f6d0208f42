package a2a

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	wire "github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

var update = flag.Bool("update", false, "rewrite the golden exchanges in testdata/*.txt")

// transcript is what a golden file holds: requests and their answers,
// normalized so that it is the same each run.
type transcript struct {
	t *testing.T
	f *fixture
	b strings.Builder
}

// post sends one request and records it and its answer (JSON or SSE).
func (tr *transcript) post(version, body string) string {
	tr.t.Helper()
	resp := tr.f.do(tr.t.Context(), version, body)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tr.t.Fatal(err)
	}
	hdr := ""
	if version != "" {
		hdr = " (A2A-Version: " + version + ")"
	}
	fmt.Fprintf(&tr.b, "### POST /a2a%s\n%s\n### %d %s\n", hdr, body, resp.StatusCode, resp.Header.Get("Content-Type"))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		tr.b.Write(data)
	} else {
		tr.b.WriteString(indent(data))
	}
	return string(data)
}

func (tr *transcript) get(path string) {
	tr.t.Helper()
	resp, err := tr.f.srv.Client().Get(tr.f.srv.URL + path)
	if err != nil {
		tr.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	fmt.Fprintf(&tr.b, "### GET %s\n### %d %s\n%s", path, resp.StatusCode, resp.Header.Get("Content-Type"), indent(data))
}

func indent(data []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, bytes.TrimSpace(data), "", "  ") != nil {
		return string(data)
	}
	return out.String() + "\n"
}

var timeRE = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`)

// golden compares the normalized transcript with testdata/name, or writes
// it with -update.
func (tr *transcript) golden(name string) {
	tr.t.Helper()
	got := strings.ReplaceAll(tr.b.String(), tr.f.srv.URL, "http://<bridge>")
	got = timeRE.ReplaceAllString(meshtest.NumberUUIDs(got), `"<time>"`)
	meshtest.Golden(tr.t, filepath.Join("testdata", name), got, *update)
}

// taskIDIn finds the task id of an answer (JSON or the first SSE event).
func taskIDIn(t *testing.T, answer string) string {
	t.Helper()
	if d, ok := strings.CutPrefix(answer, "data: "); ok {
		answer, _, _ = strings.Cut(d, "\n")
	}
	var r struct {
		Result struct {
			ID   string `json:"id"`
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(answer), &r); err != nil {
		t.Fatalf("answer %s: %v", answer, err)
	}
	if r.Result.ID != "" {
		return r.Result.ID
	}
	return r.Result.Task.ID
}

// TestGolden03 records an exchange of a 0.3 client: the card, a send that
// completes, a stream that pauses for approval, the approval by message,
// a get, an unknown task.
func TestGolden03(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tr := &transcript{t: t, f: f}
	tr.get(wire.CardPath)
	tr.post("", send03(1, wire.MethodSend, "list all resources", ""))
	id := taskIDIn(t, tr.post("", send03(2, wire.MethodStream, "add resource golden with value 7", "")))
	tr.post("", send03(3, wire.MethodSend, "approved", id))
	tr.post("", rpc(4, wire.MethodGet, fmt.Sprintf(`{"id":%q,"historyLength":2}`, id)))
	tr.post("", rpc(5, wire.MethodGet, `{"id":"no-such-task"}`))
	tr.golden("exchange_03.txt")
}

// TestGolden10 records the same exchange in 1.0, with ListTasks and a
// version the agent does not speak.
func TestGolden10(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tr := &transcript{t: t, f: f}
	tr.post("1.0", send10(1, wire.MethodSendMessage, "list all resources", ""))
	id := taskIDIn(t, tr.post("1.0", send10(2, wire.MethodSendStreamingMessage, "add resource golden with value 7", "")))
	tr.post("1.0", send10(3, wire.MethodSendMessage, "yes", id))
	tr.post("1.0", rpc(4, wire.MethodGetTask, fmt.Sprintf(`{"id":%q,"historyLength":2}`, id)))
	tr.post("1.0", rpc(5, wire.MethodListTasks, fmt.Sprintf(`{"contextId":%q,"includeArtifacts":true}`, id)))
	tr.post("1.0", rpc(6, wire.MethodGetTask, `{"id":"no-such-task"}`))
	tr.post("1.1", rpc(7, wire.MethodGetTask, fmt.Sprintf(`{"id":%q}`, id)))
	tr.golden("exchange_10.txt")
}
