package agui

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/bridge/core/coretest"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

var update = flag.Bool("update", false, "rewrite the golden streams in testdata/*.sse")

// transcript is what a golden file holds: requests, the headers and events
// of their answers, normalized so that it is the same each run.
type transcript struct {
	t *testing.T
	b strings.Builder
}

func (tr *transcript) request(method, path, body string) {
	fmt.Fprintf(&tr.b, "### %s %s\n### %s\n", method, path, body)
}

// stream records a streamed answer: its status, headers and body.
func (tr *transcript) stream(resp *http.Response, body string) {
	fmt.Fprintf(&tr.b, "### %d", resp.StatusCode)
	for _, k := range []string{"Content-Type", "Cache-Control", "Connection", "X-Accel-Buffering", headerConversationID} {
		if v := resp.Header.Get(k); v != "" {
			fmt.Fprintf(&tr.b, " %s: %s;", k, v)
		}
	}
	tr.b.WriteString("\n")
	tr.b.WriteString(body)
}

func (tr *transcript) note(format string, args ...any) {
	fmt.Fprintf(&tr.b, "### "+format+"\n", args...)
}

var (
	uuidRE      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timestampRE = regexp.MustCompile(`"(timestamp|executionTime|durationMs)":\d+`)
	timeRE      = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`)
	seqRE       = regexp.MustCompile(`(?m)^id: \d+$`)
	// The approver's key and signature differ each run (a fresh key).
	signatureRE = regexp.MustCompile(`"(key|sig)":"[A-Za-z0-9_-]+"`)
)

// normalize replaces what differs from run to run: UUIDs (numbered in the
// order they first appear, so that the same id keeps its name), times,
// timestamps, execution times, stream sequences and approval signatures.
func normalize(s string) string {
	s = meshtest.NumberUUIDs(s)
	s = timestampRE.ReplaceAllString(s, `"$1":0`)
	s = timeRE.ReplaceAllString(s, `"<time>"`)
	s = signatureRE.ReplaceAllString(s, `"$1":"<$1>"`)
	return seqRE.ReplaceAllString(s, "id: <seq>")
}

// golden compares the normalized transcript with testdata/name, or writes
// it with -update.
func (tr *transcript) golden(name string) {
	tr.t.Helper()
	meshtest.Golden(tr.t, filepath.Join("testdata", name), normalize(tr.b.String()), *update)
}

// checkFraming checks what every dialect stream shares: events framed by
// "\n\n", and for the dialects no "id:" or "event:" lines.
func checkFraming(t *testing.T, body string, ids bool) {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Errorf("stream does not end with a blank line: %q", body[max(0, len(body)-40):])
	}
	for _, block := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "data: "):
			case ids && strings.HasPrefix(line, "id: "):
			case strings.HasPrefix(line, ": "):
			default:
				t.Errorf("unexpected line %q", line)
			}
		}
	}
}

// pendingApproval is the approval a conversation waits for.
func (f *fixture) pendingApproval(conv string) string {
	f.t.Helper()
	c := f.conversation(conv)
	if c.Status != mesh.StatusWaitingApproval || c.PendingApproval == nil {
		f.t.Fatalf("conversation %s: status %s, want waiting_approval", conv, c.Status)
	}
	return c.PendingApproval.UUID
}

func TestGoldenDotted(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	coretest.WaitForTools(f.t, f.core)

	t.Run("tools", func(t *testing.T) {
		tr := &transcript{t: t}
		body := `{"message":"list all resources"}`
		tr.request("POST", "/api/conversation", body)
		resp, stream := f.stream("/api/conversation", body)
		tr.stream(resp, joinContent(t, stream))
		checkFraming(t, stream, false)
		checkDotted(t, stream)
		if id := resp.Header.Get(headerConversationID); !uuidRE.MatchString(id) {
			t.Errorf("X-Conversation-Id %q: want a new conversation id", id)
		}
		tr.golden("dotted_tools.sse")
	})

	t.Run("approval", func(t *testing.T) {
		tr := &transcript{t: t}
		const conv = "golden-dotted-approval"
		body := `{"message":"add resource web-1 with value 7","sessionId":"` + conv + `"}`
		tr.request("POST", "/api/conversation", body)
		resp, stream := f.stream("/api/conversation", body)
		tr.stream(resp, joinContent(t, stream))
		checkFraming(t, stream, false)
		checkDotted(t, stream)

		uuid := f.pendingApproval(conv)
		if !strings.Contains(stream, `"type":"approval.requested"`) || !strings.Contains(stream, uuid) {
			t.Errorf("stream has no approval.requested for %s", uuid)
		}
		tr.request("POST", "/approvals/"+uuid, `{"approved": true}`)
		res := f.decide(uuid, true)
		tr.note("result: outcome %s, response %q", res.Outcome, res.Response)

		body = `{"message":"list all resources","sessionId":"` + conv + `"}`
		tr.request("POST", "/api/conversation", body)
		resp, stream = f.stream("/api/conversation", body)
		tr.stream(resp, joinContent(t, stream))
		if !strings.Contains(stream, `"name":"web-1"`) {
			t.Errorf("the approved resource is not listed:\n%s", stream)
		}
		tr.golden("dotted_approval.sse")
	})
}

// checkDotted checks what the dotted dialect promises of every event: a
// type and a millisecond timestamp.
// joinContent joins each message's message.content events into the first
// of them, with a comment line saying how many there were: cut into 5 to
// 20 characters, an id in the text would not be whole for normalize to
// number it. checkDotted checks the chunks themselves.
func joinContent(t *testing.T, stream string) string {
	t.Helper()
	var b strings.Builder
	var first, joined, msg string
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		content, _ := json.Marshal(joined)
		fmt.Fprintf(&b, ": %d chunks joined by the test\n%s%s}\n\n", n, first, content)
		n, joined = 0, ""
	}
	for _, block := range strings.SplitAfter(stream, "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSuffix(block, "\n\n"), "data: ")
		ev := map[string]any{}
		if ok && json.Unmarshal([]byte(data), &ev) == nil && ev["type"] == "message.content" {
			if n > 0 && ev["messageId"] != msg {
				flush()
			}
			if n == 0 {
				msg, _ = ev["messageId"].(string)
				first = "data: " + data[:strings.Index(data, `"content":`)+len(`"content":`)]
			}
			joined += ev["content"].(string)
			n++
			continue
		}
		flush()
		b.WriteString(block)
	}
	flush()
	return b.String()
}

func checkDotted(t *testing.T, stream string) {
	t.Helper()
	checkSchema(t, "DottedEvent", sseEvents(t, stream))
	checkTextChunks(t, stream, dottedChunks, "message.content", "content")
	for _, data := range sseEvents(t, stream) {
		ev := decode(t, data)
		ts, _ := ev["timestamp"].(float64)
		if ev["type"] == "" || ts < 1e12 {
			t.Errorf("event without type or millisecond timestamp: %s", data)
		}
	}
}

func TestGoldenSimple(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	coretest.WaitForTools(f.t, f.core)

	t.Run("tools", func(t *testing.T) {
		tr := &transcript{t: t}
		body := `{"message":"list all resources"}`
		tr.request("POST", "/api/chat", body)
		resp, stream := f.stream("/api/chat", body)
		tr.stream(resp, stream)
		checkFraming(t, stream, false)
		checkSimpleText(t, stream)
		tr.golden("simple_tools.sse")
	})

	t.Run("approval", func(t *testing.T) {
		tr := &transcript{t: t}
		const conv = "golden-simple-approval"
		body := `{"messages":[{"role":"user","content":"add resource web-1 with value 7"}],"conversationId":"` + conv + `"}`
		tr.request("POST", "/api/chat", body)
		resp, stream := f.stream("/api/chat", body)
		tr.stream(resp, stream)
		checkFraming(t, stream, false)
		checkSimpleText(t, stream)

		uuid := f.pendingApproval(conv)
		tr.request("POST", "/approvals/"+uuid, `{"approved": true}`)
		res := f.decide(uuid, true)
		tr.note("result: outcome %s, response %q", res.Outcome, res.Response)

		body = `{"message":"list all resources","conversationId":"` + conv + `"}`
		tr.request("POST", "/api/chat", body)
		resp, stream = f.stream("/api/chat", body)
		tr.stream(resp, stream)
		checkSimpleText(t, stream)
		tr.golden("simple_approval.sse")
	})
}

// checkSimpleText checks the events of a simple stream against their
// schema, and its text chunks: 20 to 50 characters, but for the last of
// each message.
func checkSimpleText(t *testing.T, stream string) {
	t.Helper()
	checkSchema(t, "SimpleEvent", sseEvents(t, stream))
	checkTextChunks(t, stream, simpleChunks, "text", "delta")
}

// checkTextChunks checks the chunks of each message of a stream against
// size: the events of type typ, their text in field.
func checkTextChunks(t *testing.T, stream string, size chunkSize, typ, field string) {
	t.Helper()
	var chunks []string
	check := func() {
		for i, c := range chunks {
			n := len([]rune(c))
			if n > size.max || (n < size.min && i < len(chunks)-1) {
				t.Errorf("chunk %d of %d has %d characters: %q", i+1, len(chunks), n, c)
			}
		}
		chunks = nil
	}
	for _, data := range sseEvents(t, stream) {
		ev := decode(t, data)
		if ev["type"] == typ {
			chunks = append(chunks, ev[field].(string))
			continue
		}
		check()
	}
	check()
}

func TestGoldenOfficial(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	coretest.WaitForTools(f.t, f.core)

	t.Run("tools", func(t *testing.T) {
		tr := &transcript{t: t}
		body := `{"threadId":"golden-agui-tools","runId":"run-tools-1","messages":[{"id":"m1","role":"user","content":"list all resources"}],"tools":[],"context":[],"forwardedProps":{}}`
		tr.request("POST", "/agui", body)
		resp, stream := f.stream("/agui", body)
		tr.stream(resp, stream)
		checkFraming(t, stream, true)
		tr.golden("agui_tools.sse")
	})

	t.Run("approval", func(t *testing.T) {
		tr := &transcript{t: t}
		const thread = "golden-agui-approval"
		body := `{"threadId":"` + thread + `","runId":"run-approval-1","messages":[{"id":"m1","role":"user","content":"add resource web-1 with value 7"}],"tools":[],"context":[],"forwardedProps":{}}`
		tr.request("POST", "/agui", body)
		resp, stream := f.stream("/agui", body)
		tr.stream(resp, stream)
		checkFraming(t, stream, true)

		uuid := f.pendingApproval(thread)
		if !strings.Contains(stream, `"interrupts":[{"id":"`+uuid+`"`) {
			t.Errorf("stream has no interrupt for %s", uuid)
		}
		body = `{"threadId":"` + thread + `","runId":"run-approval-2","messages":[],"tools":[],"context":[],"forwardedProps":{},"resume":[{"interruptId":"` + uuid + `","status":"resolved","payload":{"approved":true}}]}`
		tr.request("POST", "/agui", body)
		resp, stream = f.stream("/agui", body)
		tr.stream(resp, stream)
		checkFraming(t, stream, true)
		if c := f.conversation(thread); c.Status != mesh.StatusActive || c.LastRun == nil || c.LastRun.Outcome != mesh.OutcomeSuccess {
			t.Errorf("after the resume: status %s, last run %+v", c.Status, c.LastRun)
		}
		tr.golden("agui_approval.sse")
	})
}

// With DottedOneMessage a turn is one message: message.start first, the
// thinking activity, the tool calls and text inside, then activity.end and
// message.end with the turn's metadata.
func TestGoldenDottedOneMessage(t *testing.T) {
	f := newFixture(t, offline.New(), func(c *Config) { c.DottedOneMessage = true })
	coretest.WaitForTools(f.t, f.core)
	tr := &transcript{t: t}
	body := `{"message":"list all resources","sessionId":"golden-dotted-one"}`
	tr.request("POST", "/api/conversation", body)
	resp, stream := f.stream("/api/conversation", body)
	tr.stream(resp, joinContent(t, stream))
	checkFraming(t, stream, false)
	checkDotted(t, stream)
	var types []string
	starts := 0
	for _, data := range sseEvents(t, stream) {
		ev := decode(t, data)
		typ, _ := ev["type"].(string)
		types = append(types, typ)
		if typ == "message.start" {
			starts++
		}
		if strings.HasPrefix(typ, "message.") && ev["messageId"] == "" {
			t.Errorf("%s without a messageId", data)
		}
	}
	n := len(types)
	if starts != 1 || n < 5 || types[0] != "message.start" || types[1] != "activity.start" || types[n-2] != "activity.end" || types[n-1] != "message.end" {
		t.Errorf("event order %v, want one message.start first, activity.start, …, activity.end, message.end", types)
	}
	if i := slices.Index(types, "tool_call.start"); i < 2 || i > n-3 {
		t.Errorf("tool_call.start at %d of %v: want it inside the message", i, types)
	}
	tr.golden("dotted_one_message.sse")
}
