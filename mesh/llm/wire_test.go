package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// The providers under test talk to mesh/llm/llmtest's servers, which speak
// each API's wire format and refuse what the API refuses (a refused request
// fails the test). A test scripts the model's answers (answers) and the
// server's failures (Fail); on top of what the APIs require, checkRequest
// holds every request to what the providers promise to send.

var update = flag.Bool("update", false, "rewrite the golden request bodies in testdata/requests")

// testKey is the API key every server expects; it must never show in errors.
const testKey = "sk-test-Zq8yX3pL0sWv5"

// wire is one API a provider speaks, and the model the provider is for.
type wire struct {
	name  string // gemini, anthropic, openai, ollama (OpenAI's API, no key) or cohere (OpenAI's API)
	api   llmtest.API
	model string // as configured, provider prefix and all
}

// hasIDs tells whether the wire carries tool call ids.
func (w wire) hasIDs() bool { return w.api != llmtest.Gemini }

var (
	geminiWire    = wire{"gemini", llmtest.Gemini, "google:gemini-2.5-flash"}
	anthropicWire = wire{"anthropic", llmtest.Anthropic, "anthropic:claude-sonnet-4-5"}
	openAIWire    = wire{"openai", llmtest.OpenAI, "gpt-4o-mini"}
	ollamaWire    = wire{"ollama", llmtest.OpenAI, "ollama:llama3.2"}
	cohereWire    = wire{"cohere", llmtest.OpenAI, "command-a-03-2025"}
)

// wires are the APIs under contract.
func wires() []wire {
	return []wire{geminiWire, anthropicWire, openAIWire, ollamaWire, cohereWire}
}

// reply is what the model answers, whatever the wire.
type reply struct {
	Text  []string // text deltas, streamed in this order
	Calls []fakeCall
	Usage llm.Usage
}

type fakeCall struct {
	Name string
	Args string // JSON object text; "" for no arguments
}

// answers is a backend that answers its n-th call with rps[n] (the last
// again once they are used up), passing each text delta to OnText as it
// is, so that a stream carries exactly those deltas.
func answers(rps ...reply) llmtest.Func {
	if len(rps) == 0 {
		rps = []reply{okReply}
	}
	var mu sync.Mutex
	n := 0
	return func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		mu.Lock()
		rp := rps[min(n, len(rps)-1)]
		n++
		mu.Unlock()
		if req.OnText != nil {
			for _, d := range rp.Text {
				req.OnText(d)
			}
		}
		resp := &llm.Response{Text: strings.Join(rp.Text, ""), Usage: rp.Usage}
		for _, c := range rp.Calls {
			resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{Name: c.Name, Arguments: json.RawMessage(c.Args)})
		}
		return resp, nil
	}
}

// fake is an llmtest server of one wire, for one test.
type fake struct {
	*llmtest.Server
	t *testing.T
	w wire
}

// newFake starts a server of w answering with rps (okReply if none); every
// request it gets is checked when the test ends.
func newFake(t *testing.T, w wire, rps ...reply) *fake {
	t.Helper()
	key := testKey
	if w.name == "ollama" {
		key = "" // any key or none; checkRequest wants none
	}
	srv := llmtest.Start(t, llmtest.Config{API: w.api, APIKey: key, Backend: answers(rps...)})
	llm.ForgetBreakers(srv.URL)
	t.Cleanup(func() { llm.ForgetBreakers(srv.URL) })
	f := &fake{Server: srv, t: t, w: w}
	t.Cleanup(func() {
		for _, rec := range srv.Requests() {
			if err := checkRequest(w, rec); err != nil {
				t.Errorf("%s server: the request does not follow the API: %v\n%s %s?%s\n%s", w.name, err, rec.Method, rec.Path, rec.RawQuery, rec.Body)
			}
		}
	})
	return f
}

// provider is the provider under test, talking to f with opts.
func (f *fake) provider(opts llm.Options) llm.Provider {
	f.t.Helper()
	opts.BaseURL = f.BaseURL()
	if f.w.name == "ollama" {
		opts.APIKey = ""
	}
	return newProvider(f.t, f.w.model, opts)
}

// last is the last request the server got.
func (f *fake) last() llmtest.Record {
	f.t.Helper()
	recs := f.Requests()
	if len(recs) == 0 {
		f.t.Fatalf("%s server: no request", f.w.name)
	}
	return recs[len(recs)-1]
}

// sent is the history rec carried as the server decoded it, in a form the
// same for every wire: arguments canonical, empty lists nil, OpenAI's
// "Error: " results marked as errors (its wire has no flag), and on Gemini
// no call ids (its wire has none; the server makes them up).
func (f *fake) sent(rec llmtest.Record) []llm.Message {
	f.t.Helper()
	if rec.Request == nil {
		f.t.Fatalf("%s server refused the request: %d %s", f.w.name, rec.Status, rec.Error)
	}
	out := neutral(f.w, rec.Request.Messages)
	if f.w.api == llmtest.OpenAI {
		for i, m := range out {
			if rest, ok := strings.CutPrefix(m.Content, "Error: "); ok && m.Role == llm.RoleTool {
				out[i].Content, out[i].IsError = rest, true
			}
		}
	}
	return out
}

// neutral is msgs with canonical arguments, empty lists nil, and on
// wires without call ids none.
func neutral(w wire, msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		m.ToolCalls = append([]llm.ToolCall(nil), m.ToolCalls...)
		for j, c := range m.ToolCalls {
			args := c.Arguments
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			c.Arguments = json.RawMessage(canonical(args))
			if !w.hasIDs() {
				c.ID = ""
			}
			m.ToolCalls[j] = c
		}
		if len(m.ToolCalls) == 0 {
			m.ToolCalls = nil
		}
		if len(m.Files) == 0 {
			m.Files = nil
		}
		if !w.hasIDs() {
			m.ToolCallID = ""
		}
		out[i] = m
	}
	return out
}

// checkRequest holds rec to what a provider of w sends beyond what the API
// requires: the exact path and headers, no key but in its header, usage
// asked for in OpenAI streams, one token limit, the system prompt first,
// turns that alternate and end with the user's, files before text.
func checkRequest(w wire, rec llmtest.Record) error {
	if rec.Request == nil {
		return errors.New(rec.Error)
	}
	h := rec.Header
	header := func(name, want string) error {
		if got := h.Get(name); got != want {
			return fmt.Errorf("header %s = %q, want %q", name, got, want)
		}
		return nil
	}
	var errs []error
	switch w.api {
	case llmtest.OpenAI:
		if rec.Path != "/v1/chat/completions" || rec.RawQuery != "" {
			errs = append(errs, errors.New("want POST /v1/chat/completions"))
		}
		auth := "Bearer " + testKey
		if w.name == "ollama" {
			auth = ""
		}
		errs = append(errs, header("Authorization", auth), header("Content-Type", "application/json"), openAIBody(rec.Body))
	case llmtest.Anthropic:
		if rec.Path != "/v1/messages" || rec.RawQuery != "" {
			errs = append(errs, errors.New("want POST /v1/messages"))
		}
		errs = append(errs, header("x-api-key", testKey), header("anthropic-version", "2023-06-01"), header("content-type", "application/json"),
			header("Authorization", ""), anthropicBody(rec.Body))
	case llmtest.Gemini:
		prefix := "/v1beta/models/" + rec.Model
		whole := rec.Path == prefix+":generateContent" && rec.RawQuery == ""
		stream := rec.Path == prefix+":streamGenerateContent" && rec.RawQuery == "alt=sse"
		if !whole && !stream {
			errs = append(errs, errors.New("want POST "+prefix+":generateContent or :streamGenerateContent?alt=sse"))
		}
		errs = append(errs, header("x-goog-api-key", testKey), geminiBody(rec.Body))
	}
	return errors.Join(errs...)
}

func openAIBody(body []byte) error {
	var req struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		MaxTokens           *int `json:"max_tokens"`
		MaxCompletionTokens *int `json:"max_completion_tokens"`
		Messages            []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	var errs []error
	if req.Stream && (req.StreamOptions == nil || !req.StreamOptions.IncludeUsage) {
		errs = append(errs, errors.New("a stream without stream_options.include_usage reports no usage"))
	}
	if req.MaxTokens != nil && req.MaxCompletionTokens != nil {
		errs = append(errs, errors.New("max_tokens and max_completion_tokens both sent"))
	}
	for i, m := range req.Messages {
		if m.Role == "system" && i != 0 {
			errs = append(errs, errors.New("a system message after the start"))
		}
	}
	return errors.Join(errs...)
}

func anthropicBody(body []byte) error {
	var req struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("content: want blocks, not a string (%v)", err)
	}
	var roles []string
	for i, m := range req.Messages {
		roles = append(roles, m.Role)
		sawText := false
		for j, raw := range m.Content {
			var b struct {
				Type    string          `json:"type"`
				Content json.RawMessage `json:"content"`
			}
			_ = json.Unmarshal(raw, &b)
			switch b.Type {
			case "text":
				sawText = true
			case "image", "document":
				if sawText {
					return fmt.Errorf("messages[%d]: files after text (the API advises them first)", i)
				}
			case "tool_result":
				var s string
				if json.Unmarshal(b.Content, &s) != nil {
					return fmt.Errorf("messages[%d].content[%d]: tool_result content %s, want a string", i, j, b.Content)
				}
			}
		}
	}
	return alternate(roles, "user", "assistant")
}

func geminiBody(body []byte) error {
	type part struct {
		FunctionCall *struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			Name string `json:"name"`
		} `json:"functionResponse"`
	}
	var req struct {
		SystemInstruction *struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []part `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	if si := req.SystemInstruction; si != nil && (len(si.Parts) != 1 || si.Parts[0].Text == "") {
		return errors.New("systemInstruction: want one text part")
	}
	var roles, calls []string // calls: the names the last model content called, in order
	for i, c := range req.Contents {
		roles = append(roles, c.Role)
		var responses []string
		for j, p := range c.Parts {
			switch {
			case p.FunctionCall != nil && !strings.HasPrefix(strings.TrimSpace(string(p.FunctionCall.Args)), "{"):
				return fmt.Errorf("contents[%d].parts[%d]: functionCall without an args object", i, j)
			case p.FunctionResponse != nil:
				responses = append(responses, p.FunctionResponse.Name)
			}
		}
		if c.Role == "model" {
			calls = nil
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					calls = append(calls, p.FunctionCall.Name)
				}
			}
			continue
		}
		if len(responses) > 0 && strings.Join(responses, ",") != strings.Join(calls, ",") {
			return fmt.Errorf("contents[%d]: function responses %v, want one for each call, in the calls' order %v", i, responses, calls)
		}
	}
	return alternate(roles, "user", "model")
}

// alternate checks that roles alternate between user and other, starting
// and ending with user.
func alternate(roles []string, user, other string) error {
	for i, r := range roles {
		want := user
		if i%2 == 1 {
			want = other
		}
		if r != want {
			return fmt.Errorf("turn %d by %q, want %q (turns alternate, starting with the user's)", i, r, want)
		}
	}
	if len(roles) == 0 || roles[len(roles)-1] != user {
		return errors.New("the last turn must be the user's")
	}
	return nil
}

// testOptions are fast defaults: tiny backoff, short timeout.
func testOptions(mod func(*llm.Options)) llm.Options {
	o := llm.Options{APIKey: testKey, Timeout: 5 * time.Second, MaxRetries: 2, RetryBaseDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	return o
}

func newProvider(t *testing.T, name string, opts llm.Options) llm.Provider {
	t.Helper()
	m, err := modelspec.ParseModel(name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := llm.NewCloud(m, opts)
	if err != nil {
		t.Fatalf("NewCloud(%s): %v", name, err)
	}
	return p
}

var okReply = reply{Text: []string{"All ", "good."}, Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}}

func ask() llm.Request {
	return llm.Request{System: "Be brief.", Messages: userTurn("status?"), Tools: contractTools()}
}

func userTurn(text string) []llm.Message { return []llm.Message{{Role: llm.RoleUser, Content: text}} }

// generateWith runs one call, collecting the streamed deltas.
func generateWith(ctx context.Context, p llm.Provider, req llm.Request, stream bool) (*llm.Response, []string, error) {
	var deltas []string
	if stream {
		req.OnText = func(d string) { deltas = append(deltas, d) }
	}
	resp, err := p.Generate(ctx, req)
	return resp, deltas, err
}

func fmtErr(_ *llm.Response, err error) error { return err }

// wantCode checks err is an *llm.Error with code.
func wantCode(t *testing.T, err error, code string) *llm.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("Generate succeeded, want a %s error", code)
	}
	var pe *llm.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	var coded interface{ RunErrorCode() string }
	if !errors.As(err, &coded) || coded.RunErrorCode() != code {
		t.Fatalf("RunErrorCode = %q, want %q (error: %v)", pe.Code, code, err)
	}
	return pe
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// canonical re-encodes JSON with sorted keys, for comparisons.
func canonical(raw []byte) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "INVALID JSON: " + string(raw)
	}
	return string(mustJSON(v))
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
