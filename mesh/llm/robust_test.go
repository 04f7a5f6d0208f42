package llm

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
)

// Error paths, run against every provider: rate limits, server errors and
// the circuit breaker, malformed answers, timeouts, cut streams,
// cancellation, and the key kept out of every message.

var okReply = reply{Text: []string{"All ", "good."}, Usage: Usage{InputTokens: 10, OutputTokens: 3}}

func forEachWire(t *testing.T, test func(t *testing.T, w wire)) {
	for _, w := range wires() {
		t.Run(w.Name(), func(t *testing.T) {
			t.Parallel()
			test(t, w)
		})
	}
}

func ask() Request {
	return Request{System: "Be brief.", Messages: userTurn("status?"), Tools: contractTools()}
}

// wantCode checks err is an *Error with code.
func wantCode(t *testing.T, err error, code string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("Generate succeeded, want a %s error", code)
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	var coded interface{ RunErrorCode() string }
	if !errors.As(err, &coded) || coded.RunErrorCode() != code {
		t.Fatalf("RunErrorCode = %q, want %q (error: %v)", pe.Code, code, err)
	}
	return pe
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
				f := newFake(t, w, nil)
				// Anthropic sends the header in lower case; names are
				// case-insensitive either way.
				f.set(f.fail(http.StatusTooManyRequests, "Rate limit reached for requests per minute", map[string]string{"retry-after": "0"}), f.answer(okReply))
				p := f.provider(testOptions(func(o *Options) { o.RetryBaseDelay = time.Hour; o.RetryMaxDelay = time.Hour }))
				// A backoff of up to an hour: only Retry-After: 0 makes this fast.
				resp, _, err := generateWith(t.Context(), p, ask(), stream)
				if err != nil {
					t.Fatalf("Generate after a 429: %v", err)
				}
				if resp.Text != "All good." || f.count() != 2 {
					t.Errorf("text %q after %d requests, want %q after 2 (one retry)", resp.Text, f.count(), "All good.")
				}
			})
		}
	})
}

// The retry's log line is written by the caller's logger (the turn's, with
// its sid), so an operator finds it by conversation.
func TestRetryIsLoggedWithTheCallersFields(t *testing.T) {
	f := newFake(t, openAIWire{}, nil)
	f.set(f.fail(http.StatusServiceUnavailable, "overloaded", map[string]string{"retry-after": "0"}), f.answer(okReply))
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
				f := newFake(t, w, nil)
				f.set(f.fail(http.StatusTooManyRequests, "slow down", tt.header), f.answer(okReply))
				p := f.provider(testOptions(func(o *Options) { o.Timeout = 5 * time.Minute }))
				var s sleeps
				endpointOf(t, p).sleep = s.sleep
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
	f := newFake(t, geminiWire{}, nil)
	f.set(func(w http.ResponseWriter, r *http.Request, s seen) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[
			{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},
			{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`))
	}, f.answer(okReply))
	p := f.provider(testOptions(func(o *Options) { o.Timeout = 5 * time.Minute }))
	var s sleeps
	endpointOf(t, p).sleep = s.sleep
	if _, err := p.Generate(t.Context(), ask()); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := s.waits(); len(got) != 1 || got[0] != 37*time.Second {
		t.Errorf("waited %v, want [37s] from the RetryInfo detail", got)
	}
}

func TestBackoffBetweenRetries(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(f.fail(http.StatusServiceUnavailable, "The service is currently unavailable.", nil))
		p := f.provider(testOptions(func(o *Options) {
			o.MaxRetries = 3
			o.RetryBaseDelay = 100 * time.Millisecond
			o.RetryMaxDelay = 250 * time.Millisecond
		}))
		var s sleeps
		endpointOf(t, p).sleep = s.sleep
		e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), CodeError)
		if f.count() != 4 || e.Status != http.StatusServiceUnavailable {
			t.Errorf("%d requests, status %d; want 4 (3 retries) and 503", f.count(), e.Status)
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

func fmtErr(_ *Response, err error) error { return err }

func TestRateLimitExhausted(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(f.fail(http.StatusTooManyRequests, "Rate limit reached", map[string]string{"Retry-After": "0"}))
		p := f.provider(testOptions(func(o *Options) { o.MaxRetries = 1 }))
		e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), CodeRateLimit)
		if e.Status != http.StatusTooManyRequests || f.count() != 2 {
			t.Errorf("status %d after %d requests, want 429 after 2", e.Status, f.count())
		}
		if !strings.Contains(e.Message, "rate limited") || !strings.Contains(e.Message, "Rate limit reached") {
			t.Errorf("message %q should say it was rate limited, with the provider's words", e.Message)
		}
	})
}

func TestRetryAfterBeyondTimeout(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(f.fail(http.StatusTooManyRequests, "Rate limit reached", map[string]string{"Retry-After": "120"}))
		p := f.provider(testOptions(func(o *Options) { o.Timeout = 2 * time.Second }))
		start := time.Now()
		e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), CodeRateLimit)
		if time.Since(start) > time.Second || f.count() != 1 {
			t.Errorf("took %v and %d requests; want an immediate failure: waiting 120s cannot fit a 2s call", time.Since(start), f.count())
		}
		if e.RetryAfter != 120*time.Second || !strings.Contains(e.Message, "2m0s") {
			t.Errorf("RetryAfter %v, message %q; want 2m0s in both", e.RetryAfter, e.Message)
		}
	})
}

func TestCircuitBreaker(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(f.fail(http.StatusInternalServerError, "Internal error encountered.", nil))
		opts := testOptions(func(o *Options) {
			o.MaxRetries = -1
			o.BreakerFailures = 3
			o.BreakerCooldown = 300 * time.Millisecond // long enough that a stall cannot half-open it before the checks
		})
		p := f.provider(opts)
		for i := 1; i <= 3; i++ {
			e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), CodeError)
			if e.Status != http.StatusInternalServerError || errors.Is(e, ErrBreakerOpen) {
				t.Fatalf("call %d: %v; want the provider's 500", i, e)
			}
		}
		// Open: fails fast, for every provider of this endpoint.
		for _, q := range []Provider{p, f.provider(opts)} {
			e := wantCode(t, fmtErr(q.Generate(t.Context(), ask())), CodeError)
			if !errors.Is(e, ErrBreakerOpen) || !strings.Contains(e.Message, "circuit breaker open") {
				t.Fatalf("after 3 failures: %v; want the open breaker", e)
			}
			if f.count() != 3 {
				t.Errorf("open breaker reached the server (%d requests)", f.count())
			}
		}
		// After the cooldown one probe goes through; its success closes it.
		f.set(f.answer(okReply))
		waitFor(t, 5*time.Second, func() bool {
			_, err := p.Generate(t.Context(), ask())
			if err != nil && !errors.Is(err, ErrBreakerOpen) {
				t.Fatalf("probe: %v", err)
			}
			return err == nil
		})
		if f.count() != 1 {
			t.Errorf("%d requests reached the server while half-open, want 1 probe", f.count())
		}
		for i := 0; i < 3; i++ {
			if _, err := p.Generate(t.Context(), ask()); err != nil {
				t.Fatalf("closed breaker: %v", err)
			}
		}
		if f.count() != 4 {
			t.Errorf("%d requests, want 4: the breaker should be closed again", f.count())
		}
	})
}

func TestBreakerIgnoresClientErrors(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(f.fail(http.StatusBadRequest, "messages: text content blocks must be non-empty", nil))
		p := f.provider(testOptions(func(o *Options) { o.BreakerFailures = 2; o.BreakerCooldown = time.Hour }))
		for i := 0; i < 4; i++ {
			e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), CodeError)
			if errors.Is(e, ErrBreakerOpen) || e.Status != http.StatusBadRequest {
				t.Fatalf("call %d: %v; a 400 is the request's fault and must neither retry nor trip the breaker", i, e)
			}
		}
		if f.count() != 4 {
			t.Errorf("%d requests, want 4 (no retries of a 400)", f.count())
		}
	})
}

func TestMalformedAnswer(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		for _, tt := range []struct {
			name   string
			stream bool
			b      behavior
		}{
			{"json", false, raw("application/json", `{"candidates": [{"content": {"parts": [{"text": "Hel`)},
			{"html", false, raw("application/json", `<html><body>502 Bad Gateway</body></html>`)},
			{"event", true, raw("text/event-stream", "data: {\"choices\": [{\"delta\": \n\n")},
			{"tool-args", true, nil},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f := newFake(t, w, nil)
				b := tt.b
				switch {
				case b != nil:
				case w.Name() == "gemini":
					// Gemini sends whole args objects; here, not an object.
					b = raw("text/event-stream", `data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather", "args": "Paris"}}], "role": "model"}, "finishReason": "STOP"}]}`+"\r\n\r\n")
				default:
					// Arguments cut in the middle of the JSON.
					b = f.answer(reply{Calls: []fakeCall{{Name: "get_weather", Args: `{"location": "Par`}}})
				}
				f.set(b)
				p := f.provider(testOptions(nil))
				_, _, err := generateWith(t.Context(), p, ask(), tt.stream)
				e := wantCode(t, err, CodeError)
				if !errors.Is(e, ErrMalformedResponse) || !strings.Contains(e.Message, "malformed") {
					t.Errorf("error %v, want a malformed-response error", e)
				}
				if f.count() != 1 {
					t.Errorf("%d requests, want 1: a malformed answer is not retried", f.count())
				}
			})
		}
	})
}

func TestTimeout(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		for _, tt := range []struct {
			name   string
			stream bool
			marker string // hang after the event with it
		}{
			{"no-answer", false, ""},
			{"mid-stream", true, "All "},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f := newFake(t, w, nil)
				f.set(f.hangAfter(okReply, tt.marker))
				p := f.provider(testOptions(func(o *Options) { o.Timeout = 150 * time.Millisecond }))
				start := time.Now()
				resp, deltas, err := generateWith(t.Context(), p, ask(), tt.stream)
				e := wantCode(t, err, CodeTimeout)
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
		f := newFake(t, w, nil)
		f.set(f.cutAfter(okReply, "All "), f.answer(okReply))
		p := f.provider(testOptions(nil))
		_, deltas, err := generateWith(t.Context(), p, ask(), true)
		e := wantCode(t, err, CodeError)
		if !errors.Is(e, ErrStreamInterrupted) || !strings.Contains(e.Message, "cut off") {
			t.Errorf("error %v, want a stream interruption", e)
		}
		if f.count() != 1 {
			t.Errorf("%d requests: a stream that already showed text must not be retried", f.count())
		}
		if strings.Join(deltas, "") != "All " {
			t.Errorf("deltas %q, want only what arrived before the cut", deltas)
		}
	})
}

func TestStreamCutBeforeTextIsRetried(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(f.cutAfter(okReply, ""), f.answer(okReply))
		p := f.provider(testOptions(nil))
		resp, deltas, err := generateWith(t.Context(), p, ask(), true)
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if f.count() != 2 || resp.Text != "All good." || strings.Join(deltas, "") != "All good." {
			t.Errorf("%d requests, text %q, deltas %q; want a retry and the text once", f.count(), resp.Text, deltas)
		}
	})
}

func TestStreamEndsEarly(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		// A clean end of the body, but before the final event.
		f.set(func(rw http.ResponseWriter, r *http.Request, s seen) {
			ev := w.Events(s, okReply)
			writeEvents(rw, ev[:eventWith(t, ev, "All ")+1])
		})
		p := f.provider(testOptions(nil))
		_, _, err := generateWith(t.Context(), p, ask(), true)
		e := wantCode(t, err, CodeError)
		if !errors.Is(e, ErrStreamInterrupted) || f.count() != 1 {
			t.Errorf("error %v after %d requests; want an interrupted stream, not retried", e, f.count())
		}
	})
}

func TestConnectionReset(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(reset(), f.answer(okReply))
		p := f.provider(testOptions(nil))
		resp, err := p.Generate(t.Context(), ask())
		if err != nil {
			t.Fatalf("Generate after a reset connection: %v", err)
		}
		if f.count() != 2 || resp.Text != "All good." {
			t.Errorf("%d requests, text %q; want a retry", f.count(), resp.Text)
		}
	})
}

func TestCancellation(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		f := newFake(t, w, nil)
		f.set(f.hangAfter(okReply, "All "))
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
		if !errors.Is(err, context.Canceled) || f.count() != 1 {
			t.Errorf("error %v after %d requests, want context.Canceled and no new request", err, f.count())
		}
	})
}

func TestKeyNeverInErrors(t *testing.T) {
	forEachWire(t, func(t *testing.T, w wire) {
		key := testKey
		if w.Name() == "ollama" {
			key = "no-key-at-all" // ollama sends none, so none can leak
		}
		echo := fmt.Sprintf("API key not valid: %s (called https://generativelanguage.googleapis.com/v1beta/models?key=%s)", key, key)
		f := newFake(t, w, nil)
		f.set(f.fail(http.StatusUnauthorized, echo, nil))
		p := f.provider(testOptions(nil))
		err := fmtErr(p.Generate(t.Context(), ask()))
		e := wantCode(t, err, CodeError)
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), errors.Unwrap(err).Error()} {
			if strings.Contains(text, testKey) || strings.Contains(text, "key="+key) {
				t.Errorf("the API key leaks: %s", text)
			}
		}
		if !strings.Contains(e.Message, "API key not valid") || !strings.Contains(e.Message, "[redacted]") {
			t.Errorf("message %q should keep the provider's words, key redacted", e.Message)
		}
		if w.Name() != "ollama" && !strings.Contains(e.Message, "_API_KEY") {
			t.Errorf("message %q should name the key's environment variable", e.Message)
		}
	})
}

func TestKeyNotInTransportErrors(t *testing.T) {
	// A base URL that carries a key (some gateways want it there) and
	// points at nothing.
	p := newProvider(t, "gpt-4o-mini", Options{BaseURL: "http://127.0.0.1:1/v1?key=" + testKey, APIKey: testKey, MaxRetries: -1})
	err := fmtErr(p.Generate(t.Context(), ask()))
	wantCode(t, err, CodeError)
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
		f := newFake(t, w, nil)
		f.set(f.fail(http.StatusBadGateway, "upstream connect error", nil))
		p := f.provider(testOptions(func(o *Options) { o.MaxRetries = 5; o.BreakerFailures = 2; o.BreakerCooldown = time.Hour }))
		e := wantCode(t, fmtErr(p.Generate(t.Context(), ask())), CodeError)
		if n := f.count(); n != 2 {
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
