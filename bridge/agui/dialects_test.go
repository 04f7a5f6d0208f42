package agui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/core/coretest"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// checkChunks checks chunks of one message against size (simpleChunks for
// the simple dialect, dottedChunks for the dotted one).
func checkChunks(t *testing.T, size chunkSize, chunks []string, want string) {
	t.Helper()
	if got := strings.Join(chunks, ""); got != want {
		t.Fatalf("chunks join to\n%q\nwant\n%q", got, want)
	}
	for i, c := range chunks {
		n := utf8.RuneCountInString(c)
		last := i == len(chunks)-1
		switch {
		case !utf8.ValidString(c):
			t.Errorf("chunk %d %q splits a rune", i, c)
		case n > size.max, n < size.min && !last, n == 0:
			t.Errorf("chunk %d has %d characters: %q", i, n, c)
		}
		if r, _ := utf8.DecodeLastRuneInString(c); !last && !unicode.IsSpace(r) {
			// A hard cut: only when no space lay between min and max.
			runes := []rune(c)
			if n != size.max || strings.IndexFunc(string(runes[size.min-1:]), unicode.IsSpace) >= 0 {
				t.Errorf("chunk %d %q is cut at %d characters though it has a space from %d on", i, c, n, size.min)
			}
		}
	}
}

func TestChunker(t *testing.T) {
	tests := []struct {
		name   string
		deltas []string
	}{
		{name: "short", deltas: []string{"Hi", " there"}},
		{name: "words", deltas: []string{"Based on your criteria, I recommend ", "**Zustand** for its simplicity and ", "its tiny API; it also works with React 18 and 19 without trouble."}},
		{name: "no spaces", deltas: []string{strings.Repeat("x", 137)}},
		{name: "runes", deltas: []string{strings.Repeat("日本語", 30), " ", strings.Repeat("🚀é", 40)}},
		{name: "one rune at a time", deltas: strings.Split("Grüße aus Köln — 東京 🚀 and a longer tail of words to cut.", "")},
		{name: "newlines", deltas: []string{"line one\nline two\nline three\n\n- item\n- item\n- a last item that is long"}},
	}
	for _, size := range []chunkSize{simpleChunks, dottedChunks} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%d-%d", tt.name, size.min, size.max), func(t *testing.T) {
				c := chunker{size: size}
				var chunks []string
				for _, d := range tt.deltas {
					chunks = append(chunks, c.add(d)...)
				}
				if rest := c.flush(); rest != "" {
					chunks = append(chunks, rest)
				}
				checkChunks(t, size, chunks, strings.Join(tt.deltas, ""))
			})
		}
	}
}

func TestChunkerRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abc de fghij k l mnop 日本 é 🚀\n")
	for range 500 {
		text := make([]rune, rng.IntN(300))
		for i := range text {
			text[i] = alphabet[rng.IntN(len(alphabet))]
		}
		for _, size := range []chunkSize{simpleChunks, dottedChunks} {
			c := chunker{size: size}
			var chunks []string
			for rest := text; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(60))
				chunks = append(chunks, c.add(string(rest[:n]))...)
				rest = rest[n:]
			}
			if rest := c.flush(); rest != "" {
				chunks = append(chunks, rest)
			}
			checkChunks(t, size, chunks, string(text))
		}
	}
}

// reply is a model's answer with runes of every width, a word longer than
// a chunk and runs of short words.
const reply = "Voilà: a résumé of 日本語のテキスト, with emoji 🚀🚀 and a very long word " +
	"Supercalifragilisticexpialidocious-and-then-some-more-characters-to-exceed-fifty, " +
	"then short words a b c d e f g h i j k l m n o p. Ende."

// streaming answers with reply, streamed in deltas of 1 to 7 runes.
func streaming(_ context.Context, req llm.Request) (*llm.Response, error) {
	runes := []rune(reply)
	for i, n := 0, 1; i < len(runes); n = n%7 + 1 {
		j := min(len(runes), i+n)
		req.OnText(string(runes[i:j]))
		i = j
	}
	return &llm.Response{Text: reply, Usage: llm.Usage{InputTokens: 10, OutputTokens: 20}}, nil
}

func TestSimpleTextChunks(t *testing.T) {
	logs := &logBuffer{}
	f := newFixture(t, script(streaming), func(c *Config) { c.Logger = zerolog.New(logs) })
	// AI SDK 5's useChat: parts, and the chat id as the conversation.
	resp, stream := f.stream("/api/chat", `{"id":"chat-abc","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"tell me"}]}]}`)
	if got := resp.Header.Get(headerConversationID); got != "chat-abc" {
		t.Errorf("X-Conversation-Id = %q, want the useChat id chat-abc", got)
	}
	var chunks []string
	var last map[string]any
	for _, data := range sseEvents(t, stream) {
		ev := decode(t, data)
		if ev["type"] == "text" {
			chunks = append(chunks, ev["delta"].(string))
		}
		last = ev
	}
	checkChunks(t, simpleChunks, chunks, reply)
	if last["type"] != "done" {
		t.Fatalf("last event %v, want done", last)
	}
	stats := last["stats"].(map[string]any)
	if stats["totalTokens"] != 30.0 || stats["agentInvocations"] != 0.0 {
		t.Errorf("stats = %v, want totalTokens 30 and no invocations", stats)
	}
	if c := f.conversation("chat-abc"); c.LastRun == nil || c.LastRun.Response != reply {
		t.Errorf("conversation's last run = %+v", c.LastRun)
	}
	// The stream's end is logged with its duration and why it ended.
	var closed map[string]any
	meshtest.Eventually(t, 5*time.Second, func() bool {
		lines := logs.lines(t, "stream closed")
		if len(lines) > 0 {
			closed = lines[0]
		}
		return closed != nil
	}, "no stream closed line")
	if closed["dialect"] != "simple" || closed["session"] != "chat-abc" || closed["reason"] != "ended" || closed["outcome"] != "success" || closed["events"] != float64(len(sseEvents(t, stream))) {
		t.Errorf("stream closed line %v", closed)
	}
	if d, ok := closed["duration"].(float64); !ok || d <= 0 {
		t.Errorf("duration %v", closed["duration"])
	}
}

// The dotted dialect re-cuts the model's 1 to 7 character deltas into
// chunks of 5 to 20, in order, before the message's end.
func TestDottedTextChunks(t *testing.T) {
	f := newFixture(t, script(streaming), nil)
	_, stream := f.stream("/api/conversation", `{"message":"tell me"}`)
	var chunks, order []string
	for _, data := range sseEvents(t, stream) {
		ev := decode(t, data)
		typ, _ := ev["type"].(string)
		if typ == "message.content" {
			chunks = append(chunks, ev["content"].(string))
		}
		if strings.HasPrefix(typ, "message.") && (len(order) == 0 || order[len(order)-1] != typ) {
			order = append(order, typ)
		}
	}
	checkChunks(t, dottedChunks, chunks, reply)
	if got := strings.Join(order, " "); got != "message.start message.content message.end" {
		t.Errorf("message events in the order %s", got)
	}
}

// blocking is a model that answers only when its turn is cancelled; it
// says on entered that it was called.
func blocking(entered chan<- struct{}) script {
	return func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

// waitFor waits for ch with a deadline.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// wantError checks a JSON error answer.
func wantError(t *testing.T, resp *http.Response, status int, code string) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d (%s): %s; want %d JSON", resp.StatusCode, resp.Header.Get("Content-Type"), data, status)
	}
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("body %s: %v", data, err)
	}
	if body["code"] != code || body["error"] == "" {
		t.Errorf("body %s, want code %s and an error text", data, code)
	}
	return body
}

func TestDisconnectCancelsTurn(t *testing.T) {
	entered := make(chan struct{}, 1)
	f := newFixture(t, blocking(entered), nil)
	for _, tt := range []struct {
		name, path, body, conv string
	}{
		{name: "simple", path: "/api/chat", body: `{"message":"take your time","conversationId":"leave-chat"}`, conv: "leave-chat"},
		{name: "dotted", path: "/api/conversation", body: `{"message":"take your time","sessionId":"leave-dotted"}`, conv: "leave-dotted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp := f.post(ctx, tt.path, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if _, ok := newLineReader(resp.Body).next(); !ok {
				t.Fatal("stream ended before its first event")
			}
			waitFor(t, entered, "the model call")

			// The turn holds the conversation: another message is refused.
			wantError(t, f.post(t.Context(), "/api/conversation", `{"message":"me too","sessionId":"`+tt.conv+`"}`), http.StatusConflict, mesh.ErrTurnInProgress.Kind())

			_ = resp.Body.Close()
			cancel()
			meshtest.Eventually(t, 5*time.Second, func() bool {
				c, err := f.store.Get(t.Context(), tt.conv)
				return err == nil && c.LastRun != nil && c.LastRun.Outcome == mesh.OutcomeCancelled
			}, "the turn of %s was not cancelled after the client left", tt.conv)
		})
	}
}

func TestSimplePings(t *testing.T) {
	const pingAfter, pingEvery = 200 * time.Millisecond, 50 * time.Millisecond
	entered, release := make(chan struct{}, 1), make(chan struct{})
	f := newFixture(t, script(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		req.OnText("finally done")
		return &llm.Response{Text: "finally done"}, nil
	}), func(c *Config) { c.PingAfter, c.PingEvery = pingAfter, pingEvery })

	begun := time.Now()
	resp := f.post(t.Context(), "/api/chat", `{"message":"slow please"}`)
	defer resp.Body.Close()
	lr := newLineReader(resp.Body)
	var pings []time.Duration
	var events []string
	for {
		data, ok := lr.next()
		if !ok {
			break
		}
		events = append(events, data)
		if strings.Contains(data, `"ping"`) {
			if data != `{"type":"ping"}` {
				t.Errorf("ping %s, want {\"type\":\"ping\"}", data)
			}
			pings = append(pings, time.Since(begun))
			if len(pings) == 3 {
				waitFor(t, entered, "the model call")
				close(release)
			}
		}
	}
	if len(pings) < 3 {
		t.Fatalf("%d pings; events %v", len(pings), events)
	}
	// Read times only bound send times from above (a late read can bring two
	// pings close together), so check each against its earliest due time:
	// ping i goes no sooner than PingAfter + i×PingEvery after the request,
	// less the pinger's slack for its ticker's jitter (a quarter tick).
	slack := min(pingAfter, pingEvery) / 4
	for i, at := range pings {
		if due := pingAfter + time.Duration(i)*pingEvery - slack; at < due {
			t.Errorf("ping %d read %v after the request, before it was due (%v)", i, at, due)
		}
	}
	if last := decode(t, events[len(events)-1]); last["type"] != "done" {
		t.Errorf("last event %v, want done", last)
	}
}

func TestDialectsRefuseBadInput(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	tests := []struct {
		name, path, body string
	}{
		{name: "dotted malformed", path: "/api/conversation", body: `{"message":`},
		{name: "dotted empty body", path: "/api/conversation", body: ``},
		{name: "dotted not an object", path: "/api/conversation", body: `["hi"]`},
		{name: "dotted missing message", path: "/api/conversation", body: `{"sessionId":"abc"}`},
		{name: "dotted empty message", path: "/api/conversation", body: `{"message":"   "}`},
		{name: "dotted message not a string", path: "/api/conversation", body: `{"message":5}`},
		{name: "dotted sessionId not a string", path: "/api/conversation", body: `{"message":"hi","sessionId":7}`},
		{name: "dotted bad sessionId", path: "/api/conversation", body: `{"message":"hi","sessionId":"a.b"}`},
		{name: "simple malformed", path: "/api/chat", body: `{"messages":[`},
		{name: "simple missing message", path: "/api/chat", body: `{}`},
		{name: "simple message not a string", path: "/api/chat", body: `{"message":{"text":"hi"}}`},
		{name: "simple messages not a list", path: "/api/chat", body: `{"messages":"hi"}`},
		{name: "simple no user message", path: "/api/chat", body: `{"messages":[{"role":"assistant","content":"hello"}]}`},
		{name: "simple content not text", path: "/api/chat", body: `{"messages":[{"role":"user","content":42}]}`},
		{name: "simple empty user message", path: "/api/chat", body: `{"messages":[{"role":"user","content":""}]}`},
		{name: "simple conversationId not a string", path: "/api/chat", body: `{"message":"hi","conversationId":true}`},
		{name: "simple bad conversationId", path: "/api/chat", body: `{"message":"hi","conversationId":"has space"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, f.post(t.Context(), tt.path, tt.body), http.StatusBadRequest, mesh.ErrBadRequest.Kind())
		})
	}
	if convs, err := f.store.List(t.Context()); err != nil || len(convs) != 0 {
		t.Errorf("refused requests created conversations: %d (%v)", len(convs), err)
	}

	t.Run("waiting for approval", func(t *testing.T) {
		coretest.WaitForTools(f.t, f.core)
		f.stream("/api/conversation", `{"message":"add resource web-1 with value 7","sessionId":"waits"}`)
		uuid := f.pendingApproval("waits")
		for _, req := range []struct{ path, body string }{
			{"/api/conversation", `{"message":"list all resources","sessionId":"waits"}`},
			{"/api/chat", `{"message":"list all resources","conversationId":"waits"}`},
		} {
			body := wantError(t, f.post(t.Context(), req.path, req.body), http.StatusConflict, mesh.ErrWaitingApproval.Kind())
			if ap, _ := body["approval"].(map[string]any); ap["uuid"] != uuid {
				t.Errorf("%s: approval %v, want %s", req.path, body["approval"], uuid)
			}
		}
	})
}

// Every streaming endpoint draws on the bridge's one pool of stream slots:
// once it is empty, each answers 503 with Retry-After, and nothing runs.
func TestStreamsPastMaxStreamsGet503(t *testing.T) {
	f := newFixture(t, offline.New(), nil)
	taken := 0
	for f.core.AcquireStream() {
		taken++
	}
	for _, req := range []struct{ path, body string }{
		{"/agui", `{"threadId":"t-full","runId":"r-full","messages":[{"id":"m1","role":"user","content":"list all resources"}]}`},
		{"/api/conversation", `{"message":"list all resources","sessionId":"full"}`},
		{"/api/chat", `{"message":"list all resources"}`},
	} {
		resp := f.post(t.Context(), req.path, req.body)
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", req.path)
		}
		wantError(t, resp, http.StatusServiceUnavailable, ErrTooManyStreams.Kind())
	}
	if convs, err := f.store.List(t.Context()); err != nil || len(convs) != 0 {
		t.Errorf("refused streams created conversations: %d (%v)", len(convs), err)
	}
	for range taken {
		f.core.ReleaseStream()
	}
	f.stream("/api/conversation", `{"message":"list all resources","sessionId":"after"}`)
}

// logBuffer collects log lines written from the handlers' goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the JSON log lines whose message is msg.
func (l *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	text := l.b.String()
	l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A stream that waits on a silent model gets a keep-alive comment every
// KeepAlive, so proxies and clients do not take it for dead.
func TestKeepAliveWhileTheModelThinks(t *testing.T) {
	entered := make(chan struct{}, 1)
	f := newFixture(t, blocking(entered), func(c *Config) { c.KeepAlive = 50 * time.Millisecond })
	for _, tt := range []struct{ name, method, path, body string }{
		{name: "dotted", method: http.MethodPost, path: "/api/conversation", body: `{"message":"take your time","sessionId":"keepalive-dotted"}`},
		{name: "events", method: http.MethodGet, path: "/conversations/keepalive-dotted/events"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Without keep-alives the silent stream would end only here.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, tt.method, f.srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := f.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			for comments := 0; comments < 2; {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("stream ended after %d keep-alives: %v", comments, err)
				}
				if line == ": keep-alive\n" {
					comments++
				}
			}
		})
	}
}

// A dialect stream logs its end: duration, events and reason; a client that
// leaves mid-run is a warning, since its run is cancelled.
func TestDialectStreamEndIsLogged(t *testing.T) {
	logs := &logBuffer{}
	entered := make(chan struct{}, 1)
	f := newFixture(t, blocking(entered), func(c *Config) { c.Logger = zerolog.New(logs) })
	for _, dialect := range []string{"simple", "dotted"} {
		t.Run(dialect, func(t *testing.T) {
			path, body := "/api/chat", `{"message":"take your time","conversationId":"log-simple"}`
			if dialect == "dotted" {
				path, body = "/api/conversation", `{"message":"take your time","sessionId":"log-dotted"}`
			}
			ctx, cancel := context.WithCancel(t.Context())
			resp := f.post(ctx, path, body)
			if _, ok := newLineReader(resp.Body).next(); !ok {
				t.Fatal("stream ended before its first event")
			}
			waitFor(t, entered, "the model call")
			_ = resp.Body.Close()
			cancel()
			var line map[string]any
			meshtest.Eventually(t, 5*time.Second, func() bool {
				for _, l := range logs.lines(t, "client left early; run cancelled") {
					if l["dialect"] == dialect {
						line = l
						return true
					}
				}
				return false
			}, "no early-termination line for the %s stream", dialect)
			if line["level"] != "warn" || line["reason"] != "client_left" || line["session"] == "" || line["run"] == "" {
				t.Errorf("early-termination line %v", line)
			}
			if d, ok := line["duration"].(float64); !ok || d <= 0 {
				t.Errorf("duration %v", line["duration"])
			}
			if n, _ := line["events"].(float64); n < 1 {
				t.Errorf("events %v, want the events sent before the client left", line["events"])
			}
		})
	}
}
