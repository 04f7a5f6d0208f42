package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/sony/gobreaker/v2"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// The transport every cloud provider shares: one HTTP exchange per attempt,
// under a per-call timeout, retried with backoff, behind the endpoint's
// circuit breaker. Providers only build request bodies and decode answers.

// Defaults of Options.
const (
	defaultTimeout         = 60 * time.Second
	defaultMaxRetries      = 3
	defaultMaxTokens       = 4096
	defaultRetryBaseDelay  = 500 * time.Millisecond
	defaultRetryMaxDelay   = 20 * time.Second
	defaultBreakerFailures = 5
	defaultBreakerCooldown = 30 * time.Second
	defaultMaxQueueWait    = 10 * time.Minute
)

const (
	userAgent = "agentmesh-llm"
	// maxBody bounds a whole (non-streamed) answer; maxErrorBody an error's.
	maxBody      = 32 << 20
	maxErrorBody = 64 << 10
)

// defaultClient sends the requests of endpoints given no client: one pool
// of connections for every endpoint of the process, keeping as many idle
// connections per host as an agent's workers use at once. The default
// transport keeps 2, so that at 10 concurrent calls most of them opened a
// new connection (and left one in TIME_WAIT).
var defaultClient = &http.Client{Transport: pooledTransport()}

func pooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 512, 256
	return t
}

// errCallTimeout is the cause of the per-call deadline.
var errCallTimeout = errors.New("llm call timeout")

// endpoint is one provider endpoint and the robustness of its calls.
type endpoint struct {
	provider string // modelspec.Provider…, names the provider in messages
	base     string // base URL, no trailing slash
	key      modelspec.Key
	keyEnv   string
	client   *http.Client
	timeout  time.Duration
	retries  int
	backoff  backoff
	gate     breakerGate
	limit    *limiter
	// queueWait bounds a call's waits for capacity (MaxQueueWait).
	queueWait time.Duration
	failures  int
	cooldown  time.Duration
	log       zerolog.Logger
	red       redactor
	// sleep waits between attempts; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

func newEndpoint(provider, base string, opts Options) *endpoint {
	e := &endpoint{
		provider:  provider,
		base:      strings.TrimRight(base, "/"),
		key:       opts.APIKey,
		keyEnv:    modelspec.KeyEnv(provider),
		client:    opts.HTTPClient,
		timeout:   opts.Timeout,
		retries:   opts.MaxRetries,
		backoff:   backoff{base: opts.RetryBaseDelay, max: opts.RetryMaxDelay},
		failures:  opts.BreakerFailures,
		cooldown:  opts.BreakerCooldown,
		log:       opts.Log,
		red:       redactor{key: opts.APIKey.Reveal()},
		sleep:     sleepCtx,
		limit:     endpointLimiter(limiterKey{provider: provider, base: strings.TrimRight(base, "/"), max: max(opts.MaxConcurrency, 0), perMinute: max(opts.RequestsPerMinute, 0)}),
		queueWait: opts.MaxQueueWait,
	}
	if e.queueWait <= 0 {
		e.queueWait = defaultMaxQueueWait
	}
	if e.client == nil {
		e.client = defaultClient
	}
	if e.timeout <= 0 {
		e.timeout = defaultTimeout
	}
	switch {
	case e.retries == 0:
		e.retries = defaultMaxRetries
	case e.retries < 0:
		e.retries = 0
	}
	if e.backoff.base <= 0 {
		e.backoff.base = defaultRetryBaseDelay
	}
	if e.backoff.max <= 0 {
		e.backoff.max = defaultRetryMaxDelay
	}
	if e.cooldown <= 0 {
		e.cooldown = defaultBreakerCooldown
	}
	switch {
	case e.failures < 0:
		e.gate = noGate{}
	default:
		if e.failures == 0 {
			e.failures = defaultBreakerFailures
		}
		e.gate = gobreakerGate{endpointBreaker(breakerKey{provider: provider, base: e.base, failures: e.failures, cooldown: e.cooldown})}
	}
	return e
}

// exchange is one request to a provider and how to read its answer.
type exchange struct {
	url    string
	body   []byte
	stream bool
	// header sets the provider's headers (authentication, version).
	header func(h http.Header)
	// decodeJSON reads a whole answer.
	decodeJSON func(body []byte) (*Response, error)
	// decodeStream reads a streamed answer, passing text to emit and
	// reasoning to reason as they arrive.
	decodeStream func(r *sseReader, emit, reason func(string)) (*Response, error)
	// reason receives the answer's reasoning (set by run).
	reason func(string)
	// errorDetail reads the provider's error body: its error type and
	// message, "" when the body is not its error format.
	errorDetail func(body []byte) (kind, message string)
}

// apiError is an error answer of the provider: an HTTP status, or an error
// event in a stream (status is then the HTTP status it stands for).
type apiError struct {
	status        int
	kind, message string
	inStream      bool
	retryAfter    time.Duration
	hasRetryAfter bool
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.status, e.kind, e.message)
}

// sendError is a failure to send the request or read the answer's headers.
type sendError struct{ err error }

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// errIncomplete: a stream ended cleanly but without its final event.
var errIncomplete = fmt.Errorf("%w: the answer ended before it was complete", ErrStreamInterrupted)

// malformed wraps a decoding failure.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedResponse, fmt.Sprintf(format, args...))
}

// run performs x with timeout, retries and circuit breaker, within the
// endpoint's capacity (limiter.go). onText and onReasoning may be nil; they
// are never called again once run returns.
//
// The timeout runs only while the call is under way: its deadline moves
// on by every wait for capacity, which MaxQueueWait bounds instead. A 429
// is such a wait (the provider said when to come back), so it is sent
// again without spending one of the retries.
func (e *endpoint) run(ctx context.Context, x *exchange, onText, onReasoning func(string)) (*Response, error) {
	parent := ctx
	start := time.Now()
	var queued time.Duration // waited for capacity
	throttled := 0
	emitted := false
	emit := func(s string) {
		if s == "" {
			return
		}
		emitted = true
		if onText != nil {
			onText(s)
		}
	}
	// Reasoning a person saw is output too: an attempt after it would
	// show it twice.
	reason := func(s string) {
		if s == "" {
			return
		}
		emitted = true
		if onReasoning != nil {
			onReasoning(s)
		}
	}
	x.reason = reason
	var last *failure
	for attempt := 1; ; {
		qctx, qcancel := context.WithTimeoutCause(parent, max(e.queueWait-queued, 0), errQueueWait)
		if last != nil && last.throttle {
			// The provider said when to come back: wait that long, then
			// go first (the limiter holds the other calls as long).
			t0 := time.Now()
			err := e.sleep(qctx, last.wait)
			queued += max(time.Since(t0), last.wait)
			if err != nil || queued >= e.queueWait {
				qcancel()
				if parent.Err() != nil {
					return nil, e.contextError(parent, parent)
				}
				return nil, e.queueError(last, throttled)
			}
		}
		release, waited, err := e.limit.acquire(qctx, last != nil && last.throttle)
		qcancel()
		queued += waited
		if err != nil {
			if parent.Err() != nil {
				return nil, e.contextError(parent, parent)
			}
			return nil, e.queueError(last, throttled)
		}
		ctx, cancel := context.WithDeadlineCause(parent, start.Add(e.timeout+queued), errCallTimeout)
		resp, f, err := e.try(parent, ctx, x, emit, &emitted, attempt, last)
		switch {
		case err == nil && f == nil:
			release(callResult{ok: true})
			cancel()
			return resp, nil
		case err != nil:
			release(callResult{})
			cancel()
			return nil, err
		case f.throttle && e.retries > 0:
			f.wait = f.err.RetryAfter
			if !f.hasRetryAfter {
				f.wait = e.backoff.delay(min(throttled, 10))
			}
			release(callResult{throttled: true, wait: f.wait})
			cancel()
			throttled++
			last = f
			if queued+f.wait >= e.queueWait {
				// Waiting as long as the provider asks would pass the
				// bound: fail now, saying how long it asked for.
				return nil, e.queueError(f, throttled)
			}
			telemetry.ModelThrottled(e.provider)
			e.logger(parent).Debug().Str("provider", e.provider).Int("throttled", throttled).Dur("wait", f.wait).Msg("llm call rate limited; waiting for the provider's capacity")
			continue
		}
		release(callResult{})
		if !f.retry || attempt > e.retries {
			cancel()
			return nil, e.final(*f, attempt)
		}
		last = f
		wait := e.backoff.delay(attempt - 1)
		if f.hasRetryAfter {
			wait = f.err.RetryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			// Waiting would outlive the call: fail now, saying how long the
			// provider asked for.
			cancel()
			return nil, e.final(*f, attempt)
		}
		e.logger(parent).Warn().Str("provider", e.provider).Int("llm_attempt", attempt).Dur("wait", wait).
			Str("err", f.err.Message).Msg("llm call failed; retrying")
		telemetry.ModelRetry(e.provider)
		err = e.sleep(ctx, wait)
		if err != nil {
			err := e.contextError(parent, ctx)
			cancel()
			return nil, err
		}
		cancel()
		attempt++
	}
}

// errQueueWait is the cause of a wait for capacity cut at MaxQueueWait.
var errQueueWait = errors.New("llm queue wait")

// try sends x once through the breaker. It returns the answer, or the
// classified failure of an attempt that may be tried again, or the error
// that ends the call.
func (e *endpoint) try(parent, ctx context.Context, x *exchange, emit func(string), emitted *bool, attempt int, last *failure) (*Response, *failure, error) {
	done, err := e.gate.allow()
	if err != nil {
		if last != nil && !last.throttle {
			// The breaker opened during this call's retries: report
			// what failed.
			out := e.final(*last, attempt-1)
			out.Message += "; the circuit breaker is now open"
			return nil, nil, out
		}
		return nil, nil, e.breakerError(err)
	}
	resp, err := e.attempt(ctx, x, emit)
	done(e.outcome(parent, err))
	if err == nil {
		return resp, nil, nil
	}
	if ctx.Err() != nil {
		return nil, nil, e.contextError(parent, ctx)
	}
	f := e.classify(err, *emitted)
	return nil, &f, nil
}

// queueError is the error of a call whose waits for capacity reached
// MaxQueueWait (or whose next wait would pass it); last is the rate limit
// that made it wait, if one did.
func (e *endpoint) queueError(last *failure, throttled int) *Error {
	note := fmt.Sprintf("no capacity at the provider within %s (llm max_queue_wait)", e.queueWait)
	if last == nil {
		return &Error{Code: CodeRateLimit, Status: http.StatusTooManyRequests, Message: fmt.Sprintf("%s: %s", e.provider, note), Err: errQueueWait}
	}
	if throttled > 1 {
		note += fmt.Sprintf(" after %d rate-limit answers", throttled)
	}
	out := *last.err
	out.Message = fmt.Sprintf("%s; %s", out.Message, note)
	if out.RetryAfter > 0 {
		out.Message = fmt.Sprintf("%s; the provider asks to retry after %s", out.Message, out.RetryAfter.Round(time.Millisecond))
	}
	return &out
}

// logger is the caller's logger when ctx carries one (the turn's, with its
// conversation and sid), else the endpoint's.
func (e *endpoint) logger(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l != zerolog.DefaultContextLogger && l.GetLevel() != zerolog.Disabled {
		return l
	}
	return &e.log
}

// attempt sends x once and decodes the answer.
func (e *endpoint) attempt(ctx context.Context, x *exchange, emit func(string)) (*Response, error) {
	if x.reason == nil {
		x.reason = func(string) {}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.url, bytes.NewReader(x.body))
	if err != nil {
		return nil, &Error{Code: CodeError, Message: fmt.Sprintf("%s: bad base URL %q: %v", e.provider, e.red.scrub(e.base), e.red.scrub(err.Error())), Err: e.red.wrap(err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if x.stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	x.header(req.Header)
	// The model call's span goes on at the provider, when it traces.
	telemetry.HTTPInject(ctx, req.Header)
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, &sendError{err}
	}
	defer resp.Body.Close()
	e.limit.observe(resp.Header)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		ae := &apiError{status: resp.StatusCode}
		if x.errorDetail != nil {
			ae.kind, ae.message = x.errorDetail(body)
		}
		if ae.message == "" {
			ae.message = clip(string(body), 300)
		}
		if ae.message == "" {
			ae.message = http.StatusText(resp.StatusCode)
		}
		ae.retryAfter, ae.hasRetryAfter = retryAfter(resp.Header, time.Now())
		if !ae.hasRetryAfter {
			ae.retryAfter, ae.hasRetryAfter = googleRetryDelay(body)
		}
		return nil, ae
	}
	if x.stream && !isJSONType(resp.Header.Get("Content-Type")) {
		sr := newSSEReader(resp.Body)
		out, err := x.decodeStream(sr, emit, x.reason)
		sr.release()
		if err == nil {
			// The stream's end after its last event ([DONE], a closing
			// chunk) is read before Close, which would otherwise close the
			// connection instead of keeping it for the next call. Only a
			// complete answer, and not for long: a server may hold the
			// stream open after its end.
			stop := time.AfterFunc(100*time.Millisecond, func() { _ = resp.Body.Close() })
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			stop.Stop()
		}
		return out, err
	}
	// A whole answer, asked for or given instead of a stream.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &readError{err}
	}
	out, err := x.decodeJSON(body)
	if err != nil {
		return nil, err
	}
	x.reason(out.Reasoning)
	emit(out.Text)
	return out, nil
}

func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// outcome is what an attempt's error means to the breaker.
func (e *endpoint) outcome(parent context.Context, err error) error {
	if err == nil {
		return nil
	}
	if parent.Err() != nil {
		return errBreakerExcluded
	}
	var ae *apiError
	if errors.As(err, &ae) {
		switch {
		case ae.status == http.StatusTooManyRequests:
			return errBreakerExcluded
		case ae.status >= 500 || ae.status == http.StatusRequestTimeout:
			return errBreakerFailure
		}
		return nil // the endpoint answered; the request was wrong
	}
	var pe *Error
	if errors.As(err, &pe) && !errors.Is(err, ErrMalformedResponse) {
		return nil // a well-formed answer we cannot use (blocked content)
	}
	return errBreakerFailure
}

// failure is a classified attempt error.
type failure struct {
	err           *Error
	retry         bool
	hasRetryAfter bool
	// throttle: a rate limit (429) to wait for and send again, not a
	// failure of the call. An exhausted quota is a 429 too, but no wait
	// ends it. wait is how long it waits before it is sent again.
	throttle bool
	wait     time.Duration
}

func (e *endpoint) classify(err error, emitted bool) failure {
	var ae *apiError
	var re *readError
	var se *sendError
	var pe *Error
	switch {
	case errors.As(err, &ae):
		f := failure{err: e.apiFailure(ae), hasRetryAfter: ae.hasRetryAfter}
		f.retry = retryableStatus(ae.status) && !emitted
		f.throttle = f.retry && ae.status == http.StatusTooManyRequests && !quotaExhausted(ae)
		return f
	case errors.Is(err, ErrMalformedResponse):
		return failure{err: &Error{Code: CodeError, Message: fmt.Sprintf("%s: %s", e.provider, e.red.scrub(err.Error())), Err: e.red.wrap(err)}}
	case errors.As(err, &re), errors.Is(err, ErrStreamInterrupted):
		msg := fmt.Sprintf("%s: the answer was cut off before it was complete (%s)", e.provider, e.red.scrub(err.Error()))
		if emitted {
			msg = fmt.Sprintf("%s: the answer was cut off after part of it was streamed (%s)", e.provider, e.red.scrub(err.Error()))
		}
		cause := error(ErrStreamInterrupted)
		if re != nil {
			cause = fmt.Errorf("%w: %w", ErrStreamInterrupted, e.red.wrap(re.err))
		}
		return failure{err: &Error{Code: CodeError, Message: msg, Err: cause}, retry: !emitted}
	case errors.As(err, &se):
		return failure{err: &Error{Code: CodeError, Message: fmt.Sprintf("%s: cannot reach %s: %s", e.provider, e.red.scrub(e.base), e.red.scrub(rootCause(se.err))), Err: e.red.wrap(se.err)}, retry: !emitted}
	case errors.As(err, &pe):
		return failure{err: pe}
	}
	return failure{err: &Error{Code: CodeError, Message: fmt.Sprintf("%s: %s", e.provider, e.red.scrub(err.Error())), Err: e.red.wrap(err)}}
}

// quotaExhausted says a 429 is an exhausted quota or billing limit
// (OpenAI's insufficient_quota), which waiting does not end.
func quotaExhausted(ae *apiError) bool {
	return strings.Contains(ae.kind, "insufficient_quota") || strings.Contains(ae.message, "exceeded your current quota")
}

// rootCause is the innermost message of a transport error, without the
// method and URL that *url.Error repeats.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// apiFailure turns a provider's error answer into an Error.
func (e *endpoint) apiFailure(ae *apiError) *Error {
	code := CodeError
	if ae.status == http.StatusTooManyRequests {
		code = CodeRateLimit
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", e.provider)
	switch {
	case ae.inStream:
		b.WriteString("error in stream")
	case ae.status == http.StatusTooManyRequests:
		b.WriteString("rate limited")
	case ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden:
		b.WriteString("authentication failed")
	case ae.status == http.StatusNotFound:
		b.WriteString("not found")
	case ae.status == 529:
		b.WriteString("overloaded")
	case ae.status >= 500:
		b.WriteString("server error")
	default:
		b.WriteString("request rejected")
	}
	if !ae.inStream || ae.status != 0 {
		fmt.Fprintf(&b, " (HTTP %d", ae.status)
		if ae.kind != "" {
			fmt.Fprintf(&b, " %s", ae.kind)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %s", clip(e.red.scrub(ae.message), 500))
	keyProblem := ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden ||
		ae.status == http.StatusBadRequest && strings.Contains(strings.ToLower(ae.message), "api key")
	switch {
	case keyProblem:
		if e.keyEnv != "" {
			fmt.Fprintf(&b, "; check %s", e.keyEnv)
		}
	case ae.status == http.StatusNotFound:
		fmt.Fprintf(&b, "; check the model name and the base URL %s", e.red.scrub(e.base))
	}
	out := &Error{Code: code, Status: ae.status, Message: b.String(), Err: e.red.wrap(ae)}
	if ae.hasRetryAfter {
		out.RetryAfter = ae.retryAfter
	}
	return out
}

// final is the error of a call that will not be retried.
func (e *endpoint) final(f failure, attempts int) *Error {
	out := *f.err
	if attempts > 1 {
		out.Message = fmt.Sprintf("%s (after %d attempts)", out.Message, attempts)
	}
	if out.Code == CodeRateLimit && out.RetryAfter > 0 {
		out.Message = fmt.Sprintf("%s; the provider asks to retry after %s", out.Message, out.RetryAfter.Round(time.Millisecond))
	}
	return &out
}

// contextError is the error of a call whose context ended: the caller's
// cancellation or deadline, or the call's own timeout.
func (e *endpoint) contextError(parent, ctx context.Context) *Error {
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		return &Error{Code: CodeError, Message: fmt.Sprintf("%s: call cancelled", e.provider), Err: parent.Err()}
	case parent.Err() != nil:
		return &Error{Code: CodeTimeout, Message: fmt.Sprintf("%s: the caller's deadline passed before the answer was complete", e.provider), Err: context.DeadlineExceeded}
	case errors.Is(context.Cause(ctx), errCallTimeout):
		return &Error{Code: CodeTimeout, Message: fmt.Sprintf("%s: no complete answer within %s (llm timeout)", e.provider, e.timeout), Err: context.DeadlineExceeded}
	}
	return &Error{Code: CodeError, Message: fmt.Sprintf("%s: %v", e.provider, ctx.Err()), Err: ctx.Err()}
}

// breakerError is the error of a call the open breaker refused.
func (e *endpoint) breakerError(err error) *Error {
	state := "open"
	if errors.Is(err, gobreaker.ErrTooManyRequests) {
		state = "half-open (a probe call is under way)"
	}
	return &Error{
		Code: CodeError,
		Message: fmt.Sprintf("%s: circuit breaker %s for %s after %d consecutive failures; failing fast without calling the provider (it lets a call through again %s after opening)",
			e.provider, state, e.red.scrub(e.base), e.failures, e.cooldown),
		Err: ErrBreakerOpen,
	}
}
