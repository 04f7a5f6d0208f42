package llm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmesh/agentmesh/mesh/llm"
	"github.com/agentmesh/agentmesh/mesh/llm/llmtest"
)

// Error paths, run against every provider: rate limits, server errors and
// the circuit breaker, malformed answers, timeouts, cut streams,
// cancellation, and the key kept out of every message.

func forEachWire(t *testing.T, test func(t *testing.T, w wire)) {
	for _, w := range wires() {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			test(t, w)
		})
	}
}

// sleeps records the waits between attempts instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func TestRateLimitRetryAfter(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
				f := newFake(t, w)
				// Anthropic sends the header in lower case; names are
				// case-insensitive either way.
				f.Fail(llmtest.Fault{Status: http.StatusTooManyRequests, Message: "Rate limit reached for requests per minute", Header: map[string]string{"retry-after": "0"}})
				p := f.provider(testOptions(func(o *llm.Options) { o.RetryBaseDelay = time.Hour; o.RetryMaxDelay = time.Hour }))
				// A backoff of up to an hour: only Retry-After: 0 makes this fast.
				resp, _, err := generateWith(t.Context(), p, ask(), stream)
				if err != nil {
					t.Fatalf("Generate after a 429: %v", err)
				}
				if resp.Text != "All good." || f.Count() != 2 {
					t.Errorf("text %q after %d requests, want %q after 2 (one retry)", resp.Text, f.Count(), "All good.")
				}
			})
		}
	})
}

// The retry's log line is written by the caller's logger (the turn's, with
// its sid), so an operator finds it by conversation.
func TestRetryIsLoggedWithTheCallersFields(t *testing.T) {
	f := newFake(t, openAIWire)
	f.Fail(llmtest.Fault{Status: http.StatusServiceUnavailable, Message: "overloaded", Header: map[string]string{"retry-after": "0"}})
	p := f.provider(testOptions(nil))
	var buf bytes.Buffer
	log := zerolog.New(&buf).With().Str("sid", "0badcafe").Logger()
	if _, err := p.Generate(log.WithContext(t.Context()), ask()); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	line := buf.String()
	if !strings.Contains(line, `"sid":"0badcafe"`) || !strings.Contains(line, "retrying") {
		t.Errorf("log = %q, want the retry logged with sid 0badcafe", line)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		min    time.Duration // for HTTP dates, which lose sub-second precision
	}{
		{name: "seconds", header: map[string]string{"Retry-After": "7"}, want: 7 * time.Second},
		{name: "lower-case", header: map[string]string{"retry-after": "2"}, want: 2 * time.Second},
		{name: "milliseconds", header: map[string]string{"retry-after-ms": "1500", "retry-after": "2"}, want: 1500 * time.Millisecond},
		{name: "http-date", header: map[string]string{"Retry-After": future}, min: 88 * time.Second, want: 91 * time.Second},
	}
	forEachWire(t, func(t *testing.T, w wire) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFake(t, w)
				f.Fail(llmtest.Fault{Status: http.StatusTooManyRequests, Message: "slow down", Header: tt.header})
				p := f.provider(testOptions(func(o *llm.Options) { o.Timeout = 5 * time.Minute }))
				var s sleeps
				llm.SetSleep(t, p, s.sleep)
				if _, err := p.Generate(t.Context(), ask()); err != nil {
					t.Fatalf("Generate: %v", err)
				}
				got := s.waits()
				if len(got) != 1 {
					t.Fatalf("waited %v, want one wait", got)
				}
				if tt.min == 0 && got[0] != tt.want || tt.min != 0 && (got[0] < tt.min || got[0] > tt.want) {
					t.Errorf("waited %v before retrying, want %v (the provider's Retry-After)", got[0], tt.want)
				}
			})
		}
	})
}

func TestGeminiRetryInfo(t *testing.T) {
	f := newFake(t, geminiWire)
	f.Fail(llmtest.Fault{Status: http.StatusTooManyRequests, Body: `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[
			{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},
			{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`})
	p := f.provider(testOptions(func(o *llm.Options) { o.Timeout = 5 * time.Minute }))
	var s sleeps
	llm.SetSleep(t, p, s.sleep)
	if _, err := p.Generate(t.Context(), ask()); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := s.waits(); len(got) != 1 || got[0] != 37*time.Second {
		t.Errorf("waited %v, want [37s] from the RetryInfo detail", got)
	}
}

func TestBackoffBetweenRetries(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Status: http.StatusServiceUnavailable, Message: "The service is currently unavailable.", Times: -1})
		p := f.provider(testOptions(func(o *llm.Options) {
			o.MaxRetries = 3
			o.RetryBaseDelay = 100 * time.Millisecond
			o.RetryMaxDelay = 250 * time.Millisecond
		}))
		var s sleeps
		llm.SetSleep(t, p, s.sleep)
		e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), llm.CodeError)
		if f.Count() != 4 || e.Status != http.StatusServiceUnavailable {
			t.Errorf("%d requests, status %d; want 4 (3 retries) and 503", f.Count(), e.Status)
		}
		ceilings := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond}
		got := s.waits()
		if len(got) != len(ceilings) {
			t.Fatalf("waits %v, want %d", got, len(ceilings))
		}
		for i, d := range got {
			if d < 0 || d > ceilings[i] {
				t.Errorf("wait %d = %v, want within [0, %v] (full jitter, capped)", i, d, ceilings[i])
			}
		}
		if !strings.Contains(e.Message, "after 4 attempts") {
			t.Errorf("message %q does not say how many attempts were made", e.Message)
		}
	})
}

// A rate limit is waited for, not counted as a failed attempt: the call
// is sent again as often as the provider answers 429, with the pauses it
// asks for, until its waits reach MaxQueueWait.
func TestRateLimitExhausted(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Status: http.StatusTooManyRequests, Message: "Rate limit reached", Header: map[string]string{"Retry-After": "1"}, Times: -1})
		p := f.provider(testOptions(func(o *llm.Options) { o.MaxRetries = 1; o.MaxQueueWait = 5 * time.Second }))
		var s sleeps
		llm.SetSleep(t, p, s.sleep)
		e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), llm.CodeRateLimit)
		// Sent at 0 s and after each of four 1 s waits; a fifth would pass
		// the 5 s bound. One retry allowed, five sends: 429s spend none.
		if e.Status != http.StatusTooManyRequests || f.Count() != 5 {
			t.Errorf("status %d after %d requests, want 429 after 5", e.Status, f.Count())
		}
		if got := s.waits(); len(got) != 4 || got[0] != time.Second {
			t.Errorf("waits %v, want four of 1s (the provider's Retry-After)", got)
		}
		for _, want := range []string{"rate limited", "Rate limit reached", "max_queue_wait", "after 5 rate-limit answers"} {
			if !strings.Contains(e.Message, want) {
				t.Errorf("message %q should say %q", e.Message, want)
			}
		}
	})
}

// With retries off, a rate limit fails the call at once.
func TestRateLimitWithoutRetries(t *testing.T) {
	f := newFake(t, openAIWire)
	f.Fail(llmtest.Fault{Status: http.StatusTooManyRequests, Message: "Rate limit reached", Header: map[string]string{"Retry-After": "0"}, Times: -1})
	p := f.provider(testOptions(func(o *llm.Options) { o.MaxRetries = -1 }))
	wantCode(t, fmtErr(p.Generate(t.Context(), ask())), llm.CodeRateLimit)
	if f.Count() != 1 {
		t.Errorf("%d requests, want 1", f.Count())
	}
}

func TestRetryAfterBeyondTimeout(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Status: http.StatusTooManyRequests, Message: "Rate limit reached", Header: map[string]string{"Retry-After": "120"}, Times: -1})
		p := f.provider(testOptions(func(o *llm.Options) { o.MaxQueueWait = 2 * time.Second }))
		start := time.Now()
		e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), llm.CodeRateLimit)
		if time.Since(start) > time.Second || f.Count() != 1 {
			t.Errorf("took %v and %d requests; want an immediate failure: waiting 120s cannot fit a wait of at most 2s", time.Since(start), f.Count())
		}
		if e.RetryAfter != 120*time.Second || !strings.Contains(e.Message, "2m0s") {
			t.Errorf("RetryAfter %v, message %q; want 2m0s in both", e.RetryAfter, e.Message)
		}
	})
}

func TestCircuitBreaker(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Status: http.StatusInternalServerError, Message: "Internal error encountered.", Times: -1})
		opts := testOptions(func(o *llm.Options) {
			o.MaxRetries = -1
			o.BreakerFailures = 3
			o.BreakerCooldown = 300 * time.Millisecond // long enough that a stall cannot half-open it before the checks
		})
		p := f.provider(opts)
		for i := 1; i <= 3; i++ {
			e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), llm.CodeError)
			if e.Status != http.StatusInternalServerError || errors.Is(e, llm.ErrBreakerOpen) {
				t.Fatalf("call %d: %v; want the provider's 500", i, e)
			}
		}
		// Open: fails fast, for every provider of this endpoint.
		for _, q := range []llm.Provider{p, f.provider(opts)} {
			e := wantCode(t, fmtErr(q.Generate(t.Context(), ask())), llm.CodeError)
			if !errors.Is(e, llm.ErrBreakerOpen) || !strings.Contains(e.Message, "circuit breaker open") {
				t.Fatalf("after 3 failures: %v; want the open breaker", e)
			}
			if f.Count() != 3 {
				t.Errorf("open breaker reached the server (%d requests)", f.Count())
			}
		}
		// After the cooldown one probe goes through; its success closes it.
		f.Recover()
		failed := f.Count()
		waitFor(t, 5*time.Second, func() bool {
			_, err := p.Generate(t.Context(), ask())
			if err != nil && !errors.Is(err, llm.ErrBreakerOpen) {
				t.Fatalf("probe: %v", err)
			}
			return err == nil
		})
		if n := f.Count() - failed; n != 1 {
			t.Errorf("%d requests reached the server while half-open, want 1 probe", n)
		}
		for i := 0; i < 3; i++ {
			if _, err := p.Generate(t.Context(), ask()); err != nil {
				t.Fatalf("closed breaker: %v", err)
			}
		}
		if n := f.Count() - failed; n != 4 {
			t.Errorf("%d requests, want 4: the breaker should be closed again", n)
		}
	})
}

func TestBreakerIgnoresClientErrors(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Status: http.StatusBadRequest, Message: "messages: text content blocks must be non-empty", Times: -1})
		p := f.provider(testOptions(func(o *llm.Options) { o.BreakerFailures = 2; o.BreakerCooldown = time.Hour }))
		for i := 0; i < 4; i++ {
			e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), llm.CodeError)
			if errors.Is(e, llm.ErrBreakerOpen) || e.Status != http.StatusBadRequest {
				t.Fatalf("call %d: %v; a 400 is the request's fault and must neither retry nor trip the breaker", i, e)
			}
		}
		if f.Count() != 4 {
			t.Errorf("%d requests, want 4 (no retries of a 400)", f.Count())
		}
	})
}

func TestMalformedAnswer(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		for _, tt := range []struct {
			name   string
			stream bool
			fault  llmtest.Fault
		}{
			{"json", false, llmtest.Fault{Body: `{"candidates": [{"content": {"parts": [{"text": "Hel`}},
			{"html", false, llmtest.Fault{Body: `<html><body>502 Bad Gateway</body></html>`}},
			{"event", true, llmtest.Fault{Body: "data: {\"choices\": [{\"delta\": \n\n", ContentType: "text/event-stream"}},
			{"tool-args", true, llmtest.Fault{Body: cutToolArgs[w.api], ContentType: "text/event-stream"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f := newFake(t, w)
				f.Fail(tt.fault)
				p := f.provider(testOptions(nil))
				_, _, err := generateWith(t.Context(), p, ask(), tt.stream)
				e := wantCode(t, err, llm.CodeError)
				if !errors.Is(e, llm.ErrMalformedResponse) || !strings.Contains(e.Message, "malformed") {
					t.Errorf("error %v, want a malformed-response error", e)
				}
				if f.Count() != 1 {
					t.Errorf("%d requests, want 1: a malformed answer is not retried", f.Count())
				}
			})
		}
	})
}

// cutToolArgs are streams of a get_weather call whose arguments end in the
// middle of the JSON; Gemini, which sends whole args objects, sends one
// that is not an object.
var cutToolArgs = map[llmtest.API]string{
	llmtest.OpenAI: openAIChunk(`{"role":"assistant","content":""}`, "null") +
		openAIChunk(`{"tool_calls":[{"index":0,"id":"call_abc0","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null") +
		openAIChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\": \"Par"}}]}`, "null") +
		openAIChunk(`{}`, `"tool_calls"`) +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}` + "\n\n" +
		"data: [DONE]\n\n",
	llmtest.Anthropic: anthropicStart +
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01A0","name":"get_weather","input":{}}}` + "\n\n" +
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Par"}}` + "\n\n" +
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}` + "\n\n" +
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}` + "\n\n",
	llmtest.Gemini: `data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather", "args": "Paris"}}], "role": "model"}, "finishReason": "STOP"}]}` + "\r\n\r\n",
}

// openAIChunk is one event of a Chat Completions stream.
func openAIChunk(delta, finish string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
}

func TestTimeout(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		for _, tt := range []struct {
			name   string
			stream bool
			until  string // hang after the event with it
		}{
			{"no-answer", false, ""},
			{"mid-stream", true, "All "},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f := newFake(t, w)
				f.Fail(llmtest.Fault{Hang: true, Until: tt.until})
				p := f.provider(testOptions(func(o *llm.Options) { o.Timeout = 150 * time.Millisecond }))
				start := time.Now()
				resp, deltas, err := generateWith(t.Context(), p, ask(), tt.stream)
				e := wantCode(t, err, llm.CodeTimeout)
				if resp != nil || !errors.Is(e, context.DeadlineExceeded) || !strings.Contains(e.Message, "150ms") {
					t.Errorf("error %v: want LLM_TIMEOUT wrapping context.DeadlineExceeded, naming the timeout", e)
				}
				if took := time.Since(start); took > 2*time.Second {
					t.Errorf("took %v with a 150ms timeout", took)
				}
				if tt.stream && strings.Join(deltas, "") != "All " {
					t.Errorf("deltas %q, want the part streamed before the stall", deltas)
				}
			})
		}
	})
}

func TestStreamCut(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Cut: true, Until: "All "})
		p := f.provider(testOptions(nil))
		_, deltas, err := generateWith(t.Context(), p, ask(), true)
		e := wantCode(t, err, llm.CodeError)
		if !errors.Is(e, llm.ErrStreamInterrupted) || !strings.Contains(e.Message, "cut off") {
			t.Errorf("error %v, want a stream interruption", e)
		}
		if f.Count() != 1 {
			t.Errorf("%d requests: a stream that already showed text must not be retried", f.Count())
		}
		if strings.Join(deltas, "") != "All " {
			t.Errorf("deltas %q, want only what arrived before the cut", deltas)
		}
	})
}

func TestStreamCutBeforeTextIsRetried(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Cut: true, Early: true})
		p := f.provider(testOptions(nil))
		resp, deltas, err := generateWith(t.Context(), p, ask(), true)
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if f.Count() != 2 || resp.Text != "All good." || strings.Join(deltas, "") != "All good." {
			t.Errorf("%d requests, text %q, deltas %q; want a retry and the text once", f.Count(), resp.Text, deltas)
		}
	})
}

func TestStreamEndsEarly(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		// A clean end of the body, but before the final event.
		f.Fail(llmtest.Fault{End: true, Until: "All "})
		p := f.provider(testOptions(nil))
		_, _, err := generateWith(t.Context(), p, ask(), true)
		e := wantCode(t, err, llm.CodeError)
		if !errors.Is(e, llm.ErrStreamInterrupted) || f.Count() != 1 {
			t.Errorf("error %v after %d requests; want an interrupted stream, not retried", e, f.Count())
		}
	})
}

func TestConnectionReset(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Reset: true})
		p := f.provider(testOptions(nil))
		resp, err := p.Generate(t.Context(), ask())
		if err != nil {
			t.Fatalf("Generate after a reset connection: %v", err)
		}
		if f.Count() != 2 || resp.Text != "All good." {
			t.Errorf("%d requests, text %q; want a retry", f.Count(), resp.Text)
		}
	})
}

func TestCancellation(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Hang: true, Until: "All "})
		p := f.provider(testOptions(nil))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req := ask()
		req.OnText = func(string) { cancel() }
		start := time.Now()
		_, err := p.Generate(ctx, req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("cancellation took %v", took)
		}
		// Cancelled before the call: no request at all.
		_, err = p.Generate(ctx, ask())
		if !errors.Is(err, context.Canceled) || f.Count() != 1 {
			t.Errorf("error %v after %d requests, want context.Canceled and no new request", err, f.Count())
		}
	})
}

func TestKeyNeverInErrors(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		key := testKey
		if w.name == "ollama" {
			key = "no-key-at-all" // ollama sends none, so none can leak
		}
		echo := fmt.Sprintf("API key not valid: %s (called https://generativelanguage.googleapis.com/v1beta/models?key=%s)", key, key)
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Status: http.StatusUnauthorized, Message: echo})
		p := f.provider(testOptions(nil))
		err := fmtErr(p.Generate(t.Context(), ask()))
		e := wantCode(t, err, llm.CodeError)
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), errors.Unwrap(err).Error()} {
			if strings.Contains(text, testKey) || strings.Contains(text, "key="+key) {
				t.Errorf("the API key leaks: %s", text)
			}
		}
		if !strings.Contains(e.Message, "API key not valid") || !strings.Contains(e.Message, "[redacted]") {
			t.Errorf("message %q should keep the provider's words, key redacted", e.Message)
		}
		if w.name != "ollama" && !strings.Contains(e.Message, "_API_KEY") {
			t.Errorf("message %q should name the key's environment variable", e.Message)
		}
	})
}

func TestKeyNotInTransportErrors(t *testing.T) {
	// A base URL that carries a key (some gateways want it there) and
	// points at nothing.
	p := newProvider(t, "gpt-4o-mini", llm.Options{BaseURL: "http://127.0.0.1:1/v1?key=" + testKey, APIKey: testKey, MaxRetries: -1})
	err := fmtErr(p.Generate(t.Context(), ask()))
	wantCode(t, err, llm.CodeError)
	if strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v", errors.Unwrap(err)), testKey) {
		t.Errorf("the API key leaks: %v", err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		<-tick.C
	}
}

func TestBreakerOpensDuringRetries(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		f.Fail(llmtest.Fault{Status: http.StatusBadGateway, Message: "upstream connect error", Times: -1})
		p := f.provider(testOptions(func(o *llm.Options) { o.MaxRetries = 5; o.BreakerFailures = 2; o.BreakerCooldown = time.Hour }))
		e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), llm.CodeError)
		if n := f.Count(); n != 2 {
			t.Errorf("%d requests, want 2: the breaker opens after the second failure", n)
		}
		if e.Status != http.StatusBadGateway {
			t.Errorf("status %d, want the provider's 502", e.Status)
		}
		if !strings.Contains(e.Message, "upstream connect error") {
			t.Errorf("error %q, want the provider's words, upstream connect error", e.Message)
		}
		if !strings.Contains(e.Message, "circuit breaker is now open") {
			t.Errorf("error %q, want it to say the circuit breaker is now open", e.Message)
		}
	})
}

// A model call carries the caller's trace to the provider (traceparent),
// on every API.
func TestModelCallCarriesTheTrace(t *testing.T) {
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w)
		if _, err := f.provider(testOptions(func(*llm.Options) {})).Generate(ctx, ask()); err != nil {
			t.Fatal(err)
		}
		reqs := f.Requests()
		if len(reqs) == 0 || !strings.Contains(reqs[0].Header.Get("traceparent"), traceID.String()) {
			t.Errorf("the request's traceparent is %q, want one of trace %s", reqs[0].Header.Get("traceparent"), traceID)
		}
	})
}
