package llmtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/offline"
)

// API is the wire format a server speaks.
type API string

// APIs.
const (
	// OpenAI is Chat Completions: POST /v1/chat/completions.
	OpenAI API = "openai"
	// Anthropic is the Messages API: POST /v1/messages.
	Anthropic API = "anthropic"
	// Gemini is the Gemini API: POST /v1beta/models/{model}:generateContent
	// and :streamGenerateContent (also under /v1).
	Gemini API = "gemini"
)

// ErrUnknownAPI: [New] was given an API it does not speak.
var ErrUnknownAPI = errors.New("llmtest: unknown API")

// maxBody bounds a request body.
const maxBody = 32 << 20

// Config configures a [Server].
type Config struct {
	// API is the wire format to speak. Required.
	API API
	// Backend answers the requests. Nil means offline.New(), which picks
	// tools from the request as a planner would.
	Backend llm.Provider
	// APIKey is the key clients must send (OpenAI: Authorization: Bearer;
	// Anthropic: x-api-key; Gemini: x-goog-api-key or ?key=). Empty means
	// any key or none, as an OpenAI-compatible local server takes it.
	APIKey string
	// Model is the model clients must name; others get the API's 404.
	// Empty means any model.
	Model string
	// NoRecords keeps no [Record]: for benchmarks, which send tens of
	// thousands of requests and read none. Each record holds the request's
	// body, headers and decoded history, which over such a run adds up to
	// more memory than the benchmark measures. Requests and Answered then
	// return nothing; Count still counts.
	NoRecords bool
	// Latency is how long the model takes: each answered call waits this
	// long before its first byte, as a real model's time to answer. A
	// client that goes away meanwhile ends the wait.
	Latency time.Duration
	// RateLimit, when positive, is how many requests a second the server
	// takes, as a provider's per-minute limit scaled down: past it, a
	// request is answered 429 with the API's rate-limit error and a
	// Retry-After for the start of the next second. OpenAI's answers then
	// carry its x-ratelimit-*-requests headers, Anthropic's its
	// anthropic-ratelimit-requests-* headers.
	RateLimit int
	// CachedTokens, when positive, is how many of each answer's prompt
	// tokens it reports read from the prompt cache (at most the prompt's
	// count): OpenAI's usage.prompt_tokens_details.cached_tokens,
	// Anthropic's cache_read_input_tokens, Gemini's
	// cachedContentTokenCount. Zero reports the backend's own
	// Usage.CachedTokens.
	CachedTokens int
	// CacheWriteTokens is the same for prompt tokens written to the cache,
	// which only Anthropic reports (cache_creation_input_tokens).
	CacheWriteTokens int
	// Reasoning is the model's reasoning, sent before every answer when
	// the request asks for it, in the API's form: Anthropic's thinking
	// block with a signature of the server's own (when thinking is
	// enabled), Gemini's thought parts (when includeThoughts is set), and
	// OpenAI-compatible reasoning_content (always, as DeepSeek and vLLM send
	// it). Empty means none.
	Reasoning string
}

// Record is one request as the server received it and how it answered.
type Record struct {
	Time     time.Time
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
	// Model and Stream are what the request asked for.
	Model  string
	Stream bool
	// Request is the request as the backend gets it, nil when it was
	// refused before decoding. Only the API's system field (OpenAI system
	// and developer messages, Anthropic system, Gemini systemInstruction)
	// fills System; only native tool results (OpenAI role tool, Anthropic
	// tool_result blocks, Gemini functionResponse parts) become RoleTool
	// messages, and only native tool calls fill ToolCalls.
	Request *llm.Request
	// Status is the HTTP status answered; 0 when the connection was dropped
	// or the request is still being served.
	Status int
	// Error is the error message answered, if any.
	Error string
	// Fault is the scripted fault served, if any.
	Fault *Fault
	// Response is the backend's answer, when one was served.
	Response *llm.Response
}

// Server is a local server speaking one API. See the package doc.
type Server struct {
	// URL is the server's root, http://127.0.0.1:port, with no path.
	URL string

	cfg     Config
	wire    wire
	backend llm.Provider
	srv     *httptest.Server
	ctx     context.Context // ends when the server closes
	cancel  context.CancelFunc
	once    sync.Once

	mu      sync.Mutex
	records []Record
	count   int // requests received, recorded or not
	faults  []Fault
	// sigs are the Gemini thought signatures handed out.
	sigs map[string]bool
	// window and inWindow count the requests of the current second, for
	// RateLimit; limited counts those refused for it.
	window   time.Time
	inWindow int
	limited  int
}

// New starts a server on 127.0.0.1 at a random port.
func New(cfg Config) (*Server, error) {
	var w wire
	switch cfg.API {
	case OpenAI:
		w = openAIWire{}
	case Anthropic:
		w = anthropicWire{}
	case Gemini:
		w = geminiWire{}
	default:
		return nil, fmt.Errorf("%w %q: use openai, anthropic or gemini", ErrUnknownAPI, cfg.API)
	}
	s := &Server{cfg: cfg, wire: w, backend: cfg.Backend, sigs: map[string]bool{}}
	if s.backend == nil {
		s.backend = offline.New()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s, nil
}

// Start is [New] for a test: it fails the test when the server cannot
// start and closes it when the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// BaseURL is the base URL a client of the API is configured with: URL+"/v1"
// for OpenAI (OpenAI-compatible clients name the version path), URL for
// Anthropic and Gemini.
func (s *Server) BaseURL() string {
	if s.cfg.API == OpenAI {
		return s.URL + "/v1"
	}
	return s.URL
}

// API is the wire format the server speaks.
func (s *Server) API() API { return s.cfg.API }

// Close stops the server: held requests and backend calls end, and it waits
// for every handler to return. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		s.cancel()
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, len(s.records))
	copy(out, s.records)
	return out
}

// Count is the number of requests received so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Answered returns the requests that got an answer from the backend
// (status 200, no fault), in order.
func (s *Server) Answered() []Record {
	var out []Record
	for _, r := range s.Requests() {
		if r.Status == http.StatusOK && r.Fault == nil && r.Response != nil {
			out = append(out, r)
		}
	}
	return out
}

// Fail queues faults: the next valid requests get them, in order, instead
// of the backend's answer. Requests the server refuses (4xx) do not use
// them up.
func (s *Server) Fail(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, faults...)
}

// Recover drops every queued fault, the repeating ones too.
func (s *Server) Recover() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// nextFault takes the fault the next request gets, if any.
func (s *Server) nextFault() (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return Fault{}, false
	}
	f := s.faults[0]
	switch {
	case f.Times < 0:
	case f.Times <= 1:
		s.faults = s.faults[1:]
	default:
		s.faults[0].Times--
	}
	return f, true
}

// Limited is the number of requests answered 429 for RateLimit.
func (s *Server) Limited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

// overLimit counts a request against RateLimit, sets the rate-limit
// headers of the API on w, and returns the 429 it gets when the current
// second's budget is spent. The window is a fixed second, as a provider's
// bucket refills: a burst at a second's start passes, and the rest is told
// when the next second starts.
func (s *Server) overLimit(w http.ResponseWriter) (Fault, bool) {
	if s.cfg.RateLimit <= 0 {
		return Fault{}, false
	}
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.window) >= time.Second {
		s.window, s.inWindow = now, 0
	}
	s.inWindow++
	over := s.inWindow > s.cfg.RateLimit
	if over {
		s.limited++
	}
	remaining, reset := max(s.cfg.RateLimit-s.inWindow, 0), s.window.Add(time.Second)
	s.mu.Unlock()
	h := w.Header()
	switch s.cfg.API {
	case OpenAI:
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(s.cfg.RateLimit))
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(remaining))
		h.Set("x-ratelimit-reset-requests", reset.Sub(now).Round(time.Millisecond).String())
	case Anthropic:
		h.Set("anthropic-ratelimit-requests-limit", strconv.Itoa(s.cfg.RateLimit))
		h.Set("anthropic-ratelimit-requests-remaining", strconv.Itoa(remaining))
		h.Set("anthropic-ratelimit-requests-reset", reset.UTC().Format(time.RFC3339Nano))
	}
	if !over {
		return Fault{}, false
	}
	return Fault{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("rate limit reached: %d requests per second", s.cfg.RateLimit), RetryAfter: reset.Sub(now)}, true
}

// addRecord records request r with its body and returns the record's
// index, or -1 with NoRecords.
func (s *Server) addRecord(r *http.Request, body []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	if s.cfg.NoRecords {
		return -1
	}
	s.records = append(s.records, Record{Time: time.Now(), Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	return len(s.records) - 1
}

// update changes record i; none (-1) is left alone.
func (s *Server) update(i int, fn func(r *Record)) {
	if i < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.records[i])
}

// call is one decoded request, whatever the API.
type call struct {
	model  string
	stream bool
	// sseless: a Gemini stream asked for without alt=sse, answered as a
	// JSON array.
	sseless bool
	// includeUsage: OpenAI's stream_options.include_usage.
	includeUsage bool
	// thinking: the request asks for the model's reasoning.
	thinking bool
	// forced is the tool Anthropic's tool_choice forces, if any.
	forced string
	req    llm.Request
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	i := s.addRecord(r, body)
	c := &call{}
	if e := s.wire.route(r, c); e != nil {
		s.refuse(w, i, e)
		return
	}
	if e := s.wire.auth(r, s.cfg.APIKey); e != nil {
		s.refuse(w, i, e)
		return
	}
	if readErr != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(readErr, &tooLarge) {
			s.refuse(w, i, &apiError{status: http.StatusRequestEntityTooLarge, message: "request body too large"})
			return
		}
		s.refuse(w, i, &apiError{status: http.StatusBadRequest, message: "cannot read the request body: " + readErr.Error()})
		return
	}
	if e := s.wire.decode(s, r, body, c); e != nil {
		s.refuse(w, i, e)
		return
	}
	if s.cfg.Model != "" && c.model != s.cfg.Model {
		s.refuse(w, i, s.wire.unknownModel(c.model))
		return
	}
	req := c.req
	s.update(i, func(rec *Record) { rec.Model, rec.Stream, rec.Request = c.model, c.stream, &req })
	if f, ok := s.overLimit(w); ok {
		s.update(i, func(rec *Record) { rec.Fault = &f })
		s.serveFault(w, r, c, i, f)
		return
	}
	if f, ok := s.nextFault(); ok {
		s.update(i, func(rec *Record) { rec.Fault = &f })
		s.serveFault(w, r, c, i, f)
		return
	}
	s.answer(w, r, c, i, nil)
}

// requestContext ends when the client goes away or the server closes.
func (s *Server) requestContext(r *http.Request) (context.Context, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// withCache is resp with the prompt cache's counts of Config.CachedTokens
// and CacheWriteTokens, when set, within its prompt tokens.
func (s *Server) withCache(resp *llm.Response) *llm.Response {
	if s.cfg.CachedTokens <= 0 && s.cfg.CacheWriteTokens <= 0 {
		return resp
	}
	out := *resp
	out.Usage = s.cacheCounts(out.Usage)
	return &out
}

// cacheCounts is u with Config.CachedTokens and CacheWriteTokens, when
// set, the cache reads first, within u.InputTokens.
func (s *Server) cacheCounts(u llm.Usage) llm.Usage {
	if s.cfg.CachedTokens > 0 {
		u.CachedTokens = min(s.cfg.CachedTokens, u.InputTokens)
	}
	if s.cfg.CacheWriteTokens > 0 {
		u.CacheWriteTokens = min(s.cfg.CacheWriteTokens, u.InputTokens-u.CachedTokens)
	}
	return u
}

// answer serves the backend's answer, or with f (a Cut, End or Hang) the
// part of it that f lets through.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, c *call, i int, f *Fault) {
	ctx, done := s.requestContext(r)
	defer done()
	if s.cfg.Latency > 0 {
		t := time.NewTimer(s.cfg.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	// partial: the answer will not reach its end, so the record keeps no
	// status.
	partial := f != nil && (f.Cut || f.Hang)
	req := c.req
	reasoning := ""
	if c.thinking {
		reasoning = s.cfg.Reasoning
		// Anthropic answers every request with thinking enabled with a
		// thinking block, and refuses a tool loop sent back without it.
		if reasoning == "" && s.cfg.API == Anthropic {
			reasoning = "Thinking about the request."
		}
	}
	if !c.stream {
		resp, err := s.backend.Generate(ctx, req)
		if err != nil {
			s.refuse(w, i, backendError(err))
			return
		}
		resp = c.shape(resp, reasoning)
		resp = s.withCache(resp)
		body := s.wire.whole(s, c, resp)
		w.Header().Set("Content-Type", "application/json")
		if f != nil {
			s.update(i, func(rec *Record) {
				if !partial {
					rec.Status = http.StatusOK
				}
				rec.Response = resp
			})
			if partial {
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			}
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(body[:len(body)/2])
			_ = http.NewResponseController(w).Flush()
			if partial {
				panic(http.ErrAbortHandler)
			}
			return
		}
		// Records are complete before the client can read the answer.
		s.update(i, func(rec *Record) { rec.Status, rec.Response = http.StatusOK, resp })
		_, _ = w.Write(body)
		return
	}
	out := &eventOut{w: w, collect: f != nil || c.sseless}
	st := s.wire.stream(s, c, out)
	if reasoning != "" {
		for _, p := range pieces(reasoning, 12) {
			st.reasoning(p)
		}
	}
	var emitted strings.Builder
	req.OnText = func(delta string) {
		if delta == "" || c.forced != "" {
			return // a forced tool's answer is its call
		}
		emitted.WriteString(delta)
		st.text(delta)
	}
	resp, err := s.backend.Generate(ctx, req)
	if err == nil {
		resp = s.withCache(resp)
	}
	if err != nil {
		e := backendError(err)
		if !out.started && len(out.events) == 0 {
			s.refuse(w, i, e)
			return
		}
		s.update(i, func(rec *Record) {
			if !partial {
				rec.Status = http.StatusOK
			}
			rec.Error = e.message
		})
		st.fail(e)
	} else {
		resp = c.shape(resp, reasoning)
		if rest, ok := strings.CutPrefix(resp.Text, emitted.String()); ok && rest != "" {
			st.text(rest)
		}
		s.update(i, func(rec *Record) {
			if !partial {
				rec.Status = http.StatusOK
			}
			rec.Response = resp
		})
		st.finish(resp)
	}
	switch {
	case f != nil:
		out.collect = false
		events := out.events
		out.events = nil
		if f.Cut && f.Early {
			out.writeRaw(events[0][:len(events[0])/2])
			panic(http.ErrAbortHandler)
		}
		for _, e := range events[:stopAt(events, f)] {
			out.write(e)
		}
		switch {
		case f.Hang:
			<-ctx.Done()
		case f.Cut:
			if len(events) == 1 && f.Until == "" {
				out.writeRaw(events[0][:len(events[0])/2])
			}
			panic(http.ErrAbortHandler)
		default: // End
			if !out.started {
				out.writeRaw("")
			}
		}
	case c.sseless:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "["+strings.Join(out.data, ",\r\n")+"]")
	}
}

// shape is the backend's answer as the API gives it: with the reasoning
// sent, and, when a tool is forced, that tool's call holding the answer
// (the text, when it is a JSON object).
func (c *call) shape(resp *llm.Response, reasoning string) *llm.Response {
	out := *resp
	if reasoning != "" {
		out.Reasoning = reasoning
	}
	if c.forced != "" {
		for _, tc := range out.ToolCalls {
			if tc.Name == c.forced {
				return &out
			}
		}
		out.ToolCalls = []llm.ToolCall{{Name: c.forced, Arguments: objectArgs([]byte(out.Text))}}
		out.Text = ""
	}
	return &out
}

// refuse answers an error in the API's format.
func (s *Server) refuse(w http.ResponseWriter, i int, e *apiError) {
	s.update(i, func(rec *Record) { rec.Status, rec.Error = e.status, e.message })
	h := w.Header()
	h.Set("Content-Type", "application/json")
	s.wire.retryHeaders(h, e)
	w.WriteHeader(e.status)
	_, _ = w.Write(s.wire.errorBody(e))
}

// backendError is the API error that stands for the backend's failure.
func backendError(err error) *apiError {
	e := &apiError{status: http.StatusInternalServerError, message: "the backend failed: " + err.Error()}
	var pe *llm.Error
	if errors.As(err, &pe) {
		switch {
		case pe.Code == llm.CodeRateLimit:
			e.status, e.retryAfter = http.StatusTooManyRequests, pe.RetryAfter
		case pe.Code == llm.CodeTimeout:
			e.status = http.StatusGatewayTimeout
		case pe.Status >= 400:
			e.status = pe.Status
		}
	}
	return e
}
