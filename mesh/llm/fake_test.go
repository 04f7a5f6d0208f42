package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// Local servers that speak each provider's API the way its reference
// describes it: they decode requests strictly (unknown fields, wrong paths,
// missing headers, broken call/result pairing are test failures) and answer
// with realistic bodies and streams in the real framing.

var update = flag.Bool("update", false, "rewrite the golden request bodies in testdata/requests")

// testKey is the API key every fake expects; it must never show in errors.
const testKey = "sk-test-Zq8yX3pL0sWv5"

// reply is what a fake model answers, whatever the wire.
type reply struct {
	Text  []string // text deltas, in order
	Calls []fakeCall
	Usage Usage
}

type fakeCall struct {
	Name string
	Args string // JSON object text; "" for no arguments
}

// seen is a request as a fake understood it, whatever the wire.
type seen struct {
	Model     string
	System    string
	Stream    bool
	MaxTokens int
	Tools     []seenTool
	Messages  []seenMsg
	Body      []byte
}

type seenTool struct {
	Name, Description string
	Params            json.RawMessage // nil when the declaration has none
}

type seenMsg struct {
	Role   string // user, assistant, tool
	Text   string
	Calls  []seenCall
	Result *seenResult
	Files  []seenFile
}

// seenFile is a file of a user message as a fake decoded it: Kind image,
// document or text (a text part beside the message's own), its bytes
// decoded from base64, or its URL.
type seenFile struct {
	Kind, MediaType, Name, Data, URL string
}

// addUserFile puts f on the user message that msgs[from:] started, or on
// a new one.
func addUserFile(msgs []seenMsg, from int, f seenFile) []seenMsg {
	if n := len(msgs); n > from && msgs[n-1].Role == "user" {
		msgs[n-1].Files = append(msgs[n-1].Files, f)
		return msgs
	}
	return append(msgs, seenMsg{Role: "user", Files: []seenFile{f}})
}

// addUserText is the text of the user message that msgs[from:] started
// with files only, or a new user message.
func addUserText(msgs []seenMsg, from int, text string) []seenMsg {
	if n := len(msgs); n > from && msgs[n-1].Role == "user" && msgs[n-1].Text == "" {
		msgs[n-1].Text = text
		return msgs
	}
	return append(msgs, seenMsg{Role: "user", Text: text})
}

// imageTypes are the image media types every API takes.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// decodeDataURL splits data:<media type>;base64,<data>.
func decodeDataURL(u string) (mediaType string, data []byte, err error) {
	rest, ok := strings.CutPrefix(u, "data:")
	mt, b64, ok2 := strings.Cut(rest, ";base64,")
	if !ok || !ok2 || mt == "" {
		return "", nil, fmt.Errorf("%.40q is not a base64 data URL", u)
	}
	data, err = base64.StdEncoding.DecodeString(b64)
	return mt, data, err
}

type seenCall struct {
	ID        string // "" on wires without call ids
	Name      string
	Args      string // canonical JSON
	Signature string // Gemini's thoughtSignature
}

type seenResult struct {
	CallID  string // "" on wires without call ids
	Name    string
	Content string
	IsError bool
}

// wire is one provider's API, as a fake server speaks it.
type wire interface {
	Name() string
	// New returns the provider under test, talking to the fake at srvURL.
	New(t *testing.T, srvURL string, opts Options) Provider
	// HasIDs tells whether the wire carries tool call ids.
	HasIDs() bool
	// Parse checks and decodes a request.
	Parse(r *http.Request, body []byte) (seen, error)
	// Whole is a non-streamed answer.
	Whole(s seen, rp reply) []byte
	// Events is a streamed answer, one complete event per element.
	Events(s seen, rp reply) []string
	// ErrorBody is the API's error body.
	ErrorBody(status int, message string) []byte
}

// behavior is how a fake answers one request.
type behavior func(w http.ResponseWriter, r *http.Request, s seen)

// fakeServer serves a wire, answering request n with behaviors[n] (the last
// one repeats).
type fakeServer struct {
	t    *testing.T
	wire wire
	srv  *httptest.Server

	mu        sync.Mutex
	hits      int
	requests  []seen
	behaviors []behavior
}

func newFake(t *testing.T, w wire, bs ...behavior) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, wire: w, behaviors: bs}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	forgetBreakers(f.srv.URL)
	t.Cleanup(func() { forgetBreakers(f.srv.URL) })
	return f
}

// forgetBreakers drops the circuit breakers of endpoints under base: a new
// test server may get the port of an earlier one, whose breaker the
// process still holds.
func forgetBreakers(base string) {
	breakers.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(breakerKey).base, base) {
			breakers.Delete(k)
		}
		return true
	})
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("%s fake: read request: %v", f.wire.Name(), err)
		return
	}
	s, err := f.wire.Parse(r, body)
	if err != nil {
		f.t.Errorf("%s fake: request does not follow the API: %v\n%s %s\n%s", f.wire.Name(), err, r.Method, r.URL, body)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(f.wire.ErrorBody(http.StatusBadRequest, err.Error()))
		return
	}
	s.Body = body
	f.mu.Lock()
	n := f.hits
	f.hits++
	f.requests = append(f.requests, s)
	b := f.behaviors[min(n, len(f.behaviors)-1)]
	f.mu.Unlock()
	b(w, r, s)
}

// set replaces the behaviors; the next request gets the first.
func (f *fakeServer) set(bs ...behavior) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.behaviors = bs
	f.hits = 0
	f.requests = nil
}

func (f *fakeServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

func (f *fakeServer) last() seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		f.t.Fatalf("%s fake: no request", f.wire.Name())
	}
	return f.requests[len(f.requests)-1]
}

// provider returns the provider under test with fast test defaults.
func (f *fakeServer) provider(opts Options) Provider {
	return f.wire.New(f.t, f.srv.URL, opts)
}

// testOptions are fast defaults: tiny backoff, short timeout.
func testOptions(mod func(*Options)) Options {
	o := Options{APIKey: testKey, Timeout: 5 * time.Second, MaxRetries: 2, RetryBaseDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	return o
}

// Behaviors.

// answer replies with rp, streamed when the request asked for a stream.
func (f *fakeServer) answer(rp reply) behavior {
	return func(w http.ResponseWriter, r *http.Request, s seen) {
		if !s.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(f.wire.Whole(s, rp))
			return
		}
		writeEvents(w, f.wire.Events(s, rp))
	}
}

// fail answers with status, the API's error body and headers.
func (f *fakeServer) fail(status int, message string, header map[string]string) behavior {
	return func(w http.ResponseWriter, r *http.Request, s seen) {
		for k, v := range header {
			w.Header()[k] = []string{v} // as sent, not canonicalised
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(f.wire.ErrorBody(status, message))
	}
}

// raw answers 200 with body as it is.
func raw(contentType, body string) behavior {
	return func(w http.ResponseWriter, r *http.Request, s seen) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(body))
	}
}

// cutAfter streams rp's events up to the first one containing marker, then
// drops the connection mid-stream. With marker "", it sends half of the
// first event.
func (f *fakeServer) cutAfter(rp reply, marker string) behavior {
	return func(w http.ResponseWriter, r *http.Request, s seen) {
		events := f.wire.Events(s, rp)
		if marker == "" {
			writeEvents(w, []string{events[0][:len(events[0])/2]})
		} else {
			writeEvents(w, events[:eventWith(f.t, events, marker)+1])
		}
		panic(http.ErrAbortHandler)
	}
}

// hangAfter streams the events of rp up to the first one containing marker
// (none with ""), then waits until the client goes away.
func (f *fakeServer) hangAfter(rp reply, marker string) behavior {
	return func(w http.ResponseWriter, r *http.Request, s seen) {
		if marker != "" {
			events := f.wire.Events(s, rp)
			writeEvents(w, events[:eventWith(f.t, events, marker)+1])
		}
		<-r.Context().Done()
	}
}

// reset drops the connection before any answer.
func reset() behavior {
	return func(w http.ResponseWriter, r *http.Request, s seen) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
}

func eventWith(t *testing.T, events []string, marker string) int {
	for i, e := range events {
		if strings.Contains(e, marker) {
			return i
		}
	}
	t.Fatalf("no event contains %q", marker)
	return -1
}

func writeEvents(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, e := range events {
		_, _ = io.WriteString(w, e)
		_ = rc.Flush()
	}
}

// Wire helpers.

// sse formats one event, with an event line when name is set.
func sse(name string, v any) string {
	var b strings.Builder
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	fmt.Fprintf(&b, "data: %s\n\n", mustJSON(v))
	return b.String()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// argsObject is a call's arguments as the API sends them.
func argsObject(args string) map[string]any {
	m := map[string]any{}
	if args != "" {
		if err := json.Unmarshal([]byte(args), &m); err != nil {
			panic(err)
		}
	}
	return m
}

// pieces splits s into fragments of n bytes, as streams send arguments.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// canonical re-encodes JSON with sorted keys, for comparisons.
func canonical(raw []byte) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "INVALID JSON: " + string(raw)
	}
	return string(mustJSON(v))
}

// strict decodes JSON refusing unknown fields.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

func checkHeader(r *http.Request, name, want string) error {
	if got := r.Header.Get(name); got != want {
		return fmt.Errorf("header %s = %q, want %q", name, got, want)
	}
	return nil
}

// golden compares a request body with testdata/requests/name.json.
func golden(t *testing.T, name string, body []byte) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, body, "", "  "); err != nil {
		t.Fatalf("request body is not JSON: %v", err)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", "requests", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run go test -update to write it)", path, err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("request body differs from %s (run go test -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, pretty.Bytes(), want)
	}
}

// model is a parsed model name.
func model(t testing.TB, name string) modelspec.Model {
	t.Helper()
	m, err := modelspec.ParseModel(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newProvider(t *testing.T, name string, opts Options) Provider {
	t.Helper()
	p, err := NewCloud(model(t, name), opts)
	if err != nil {
		t.Fatalf("NewCloud(%s): %v", name, err)
	}
	return p
}

// endpointOf exposes a provider's transport, for tests that replace its
// clock.
func endpointOf(t *testing.T, p Provider) *endpoint {
	t.Helper()
	switch p := p.(type) {
	case *geminiProvider:
		return p.ep
	case *anthropicProvider:
		return p.ep
	case *openAIProvider:
		return p.ep
	}
	t.Fatalf("%T has no endpoint", p)
	return nil
}
