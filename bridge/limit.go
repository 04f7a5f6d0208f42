package bridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/bridge/agui"
	"github.com/agentmesh/agentmesh/bridge/auth"
	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/config"
	wire "github.com/agentmesh/agentmesh/mesh/a2a"
	"github.com/agentmesh/agentmesh/mesh/limits"
	"github.com/agentmesh/agentmesh/mesh/telemetry"
)

// The limits (config limits:, ARCHITECTURE.md "Limits"). After the guard
// has authenticated a request, it spends one request of its principal's
// budget and one of its client IP's (mesh_limits, shared by every bridge);
// a request past either is refused with 429 before its handler runs. A
// message that would make its conversation active asks the core's Admit:
// the principal's set of active conversations, then the mesh's. A stream
// takes a slot of its principal on this bridge besides the bridge's own.
//
// Who a request counts against: an authenticated principal by its name;
// the anonymous principal (authentication off) by its client IP, as if
// each IP were a principal; a request with no principal (an open route
// without credentials) by its client IP only. A request the guard refuses
// counts too: by its client IP when its credentials are missing, bad or
// expired (401), by its principal and IP when its role may not (403).
// /health and /ready are never limited: probes must reach them, NATS or
// not.
//
// A check that cannot be made (NATS unreachable, a key contended) lets the
// request through, counted in mesh_limit_errors_total: the bridge can serve
// nothing without NATS anyway, and a limit must not turn a blip into an
// outage.

// limiter enforces the limits of one bridge.
type limiter struct {
	// The numbers of limits:, 0 for no limit.
	perPrincipal, perIP, conversations, active, streams int
	// window is the time the request budgets count over.
	window time.Duration

	proxies []*net.IPNet
	store   *limits.Store
	core    *core.Core
	log     zerolog.Logger
	// lastLog is when a failed check was logged last (unix nanoseconds).
	lastLog atomic.Int64

	mu   sync.Mutex
	open map[string]int // streams on this bridge, by who
}

// newLimiter returns the bridge's limiter, or nil when limits are off.
func newLimiter(cfg Config) (*limiter, error) {
	if !cfg.Agent.LimitsOn() {
		return nil, nil
	}
	if cfg.Resources == nil || cfg.Resources.Limits == nil {
		return nil, errors.New("limits are on but the mesh_limits bucket is not bound: provision the mesh again (mesh provision, or mesh up)")
	}
	lc := &cfg.Agent.Limits
	proxies, err := lc.ProxyNets()
	if err != nil {
		return nil, fmt.Errorf("limits.trusted_proxies: %w", err)
	}
	return &limiter{
		perPrincipal:  config.Limit(lc.RequestsPerMinute, config.DefaultRequestsPerMinute),
		perIP:         config.Limit(lc.IPRequestsPerMinute, config.DefaultIPRequestsPerMinute),
		conversations: config.Limit(lc.ConversationsPerPrincipal, config.DefaultConversationsPerPrincipal),
		active:        config.Limit(lc.MaxActiveSessions, config.DefaultMaxActiveSessions),
		streams:       config.Limit(lc.StreamsPerPrincipal, config.DefaultStreamsPerPrincipal),
		window:        cmp.Or(lc.Window.Std(), time.Minute),
		proxies:       proxies,
		store:         limits.New(cfg.JS, cfg.Resources.Limits),
		log:           cfg.Logger,
		open:          map[string]int{},
	}, nil
}

// capacity is limits.max_active_sessions, or 0 with limits off.
func (l *limiter) capacity() int {
	if l == nil {
		return 0
	}
	return l.active
}

// coreHooks are the core's Admit, StreamLimit and Take: nil with limits
// off.
func (l *limiter) coreHooks() (func(context.Context, string) error, func(context.Context) (func(), error), func(context.Context) error) {
	if l == nil {
		return nil, nil, nil
	}
	return l.admit, l.openStream, func(ctx context.Context) error {
		if le := l.take(ctx, core.LimitKeyOf(ctx), core.LimitIPOf(ctx)); le != nil {
			return le
		}
		return nil
	}
}

// handler spends each request's budgets before next serves it.
func (l *limiter) handler(mux *http.ServeMux, next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		if pattern == "GET /health" || pattern == "GET /ready" {
			next.ServeHTTP(w, r)
			return
		}
		ip := l.clientIP(r)
		who := limitKey(auth.FromContext(r.Context()), ip)
		ctx := core.WithLimitKey(r.Context(), who, ip)
		if le := l.take(ctx, who, ip); le != nil {
			writeRefusal(w, r, pattern, le)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// refused spends the budgets of a request the guard refuses: its client
// IP's for credentials missing, bad or expired (p nil), its principal's
// and IP's for a role that may not. Guessing tokens, or knocking on routes
// a role may not use, costs what any request costs; it returns the
// refusal of a spent budget, which is answered instead of the 401 or 403.
func (l *limiter) refused(r *http.Request, p *auth.Principal) *core.LimitError {
	if l == nil {
		return nil
	}
	ip := l.clientIP(r)
	return l.take(r.Context(), limitKey(p, ip), ip)
}

// limitKey is who a request counts against: "p:<name>" for a principal,
// "ip:<address>" for the anonymous one, "" for none.
func limitKey(p *auth.Principal, ip string) string {
	switch {
	case p == nil:
		return ""
	case p.IsAnonymous():
		return "ip:" + ip
	}
	return "p:" + p.Name
}

// take spends one request of who's budget and of ip's, the two at once;
// it returns the refusal of one that is spent.
func (l *limiter) take(ctx context.Context, who, ip string) *core.LimitError {
	var byWho *core.LimitError
	var wg sync.WaitGroup
	if who != "" {
		wg.Go(func() {
			byWho = l.spend(ctx, limits.Key(limits.RatePrincipal, who), l.perPrincipal, "requests of yours", telemetry.LimitRatePrincipal)
		})
	}
	byIP := l.spend(ctx, limits.Key(limits.RateIP, ip), l.perIP, "requests from your address", telemetry.LimitRateIP)
	wg.Wait()
	if byWho != nil {
		return byWho
	}
	return byIP
}

// spend takes one request from the budget key of n a window.
func (l *limiter) spend(ctx context.Context, key string, n int, what, metric string) *core.LimitError {
	d, err := l.store.Take(ctx, key, n, l.window)
	if err != nil {
		l.failed(err)
		return nil
	}
	if d.Allowed {
		return nil
	}
	telemetry.LimitRefused(metric)
	le := core.Refusal(core.ErrRateLimited, d.ResetAt, "")
	per := "a minute"
	if l.window != time.Minute {
		per = "in " + l.window.String()
	}
	le.Err = le.Err.With(fmt.Sprintf("rate limit: more than %d %s %s; try again at %s", n, what, per, le.ResetAt.Format(time.RFC3339)))
	return le
}

// recheckAfter is how long a full set waits before it is checked once
// more: a run's end reaches its client a moment before its conversation's
// head says it is idle, and a client that starts its next conversation at
// once would otherwise find the one it just left still active.
const recheckAfter = 250 * time.Millisecond

// admitTo adds id to the set key of at most n, checking a full set twice.
func (l *limiter) admitTo(ctx context.Context, key, id string, n int) (bool, error) {
	ok, err := l.store.Admit(ctx, key, id, n, l.core.Active)
	if ok || err != nil {
		return ok, err
	}
	select {
	case <-ctx.Done():
		return false, nil
	case <-time.After(recheckAfter):
	}
	return l.store.Admit(ctx, key, id, n, l.core.Active)
}

// admit is the core's Admit: conversation id may become active if its
// principal and the mesh have room for one more active conversation.
func (l *limiter) admit(ctx context.Context, id string) error {
	if who := core.LimitKeyOf(ctx); who != "" && l.conversations > 0 {
		ok, err := l.admitTo(ctx, limits.Key(limits.ActiveOwner, who), id, l.conversations)
		switch {
		case err != nil:
			l.failed(err)
		case !ok:
			telemetry.LimitRefused(telemetry.LimitConversations)
			return core.RefusalFor(core.ErrTooManyConversations, 30*time.Second, fmt.Sprintf(
				"%d conversations of yours already have a turn queued, running or waiting for an approval (limits.conversations_per_principal); send again when one of them is done", l.conversations))
		}
	}
	if l.active > 0 {
		ok, err := l.admitTo(ctx, limits.ActiveAll, id, l.active)
		switch {
		case err != nil:
			l.failed(err)
		case !ok:
			telemetry.LimitRefused(telemetry.LimitActiveSessions)
			l.log.Warn().Str("session", id).Int("max_active_sessions", l.active).Msg("conversation refused: the mesh is at limits.max_active_sessions")
			return core.RefusalFor(core.ErrOverCapacity, time.Minute, fmt.Sprintf(
				"the mesh already has %d active conversations (limits.max_active_sessions); try again in a minute", l.active))
		}
	}
	return nil
}

// openStream is the core's StreamLimit: a slot of ctx's caller among its
// limits.streams_per_principal on this bridge.
func (l *limiter) openStream(ctx context.Context) (func(), error) {
	who := core.LimitKeyOf(ctx)
	if who == "" || l.streams <= 0 {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[who] >= l.streams {
		telemetry.LimitRefused(telemetry.LimitStreamsPrincipal)
		le := core.RefusalFor(core.ErrTooManyStreams, time.Second, fmt.Sprintf(
			"you already have %d streams open on this bridge (limits.streams_per_principal); close one first", l.streams))
		le.Err = le.Err.WithStatus(http.StatusTooManyRequests)
		return nil, le
	}
	l.open[who]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[who]--; l.open[who] <= 0 {
				delete(l.open, who)
			}
		})
	}, nil
}

// failed counts a check that could not be made, and logs it at most
// every 10 s.
func (l *limiter) failed(err error) {
	telemetry.LimitFailed()
	now := time.Now().UnixNano()
	if last := l.lastLog.Load(); now-last > int64(10*time.Second) && l.lastLog.CompareAndSwap(last, now) {
		l.log.Warn().Err(err).Msg("a limit check failed: requests go through unchecked")
	}
}

// clientIP is the request's client address: the TCP peer, or, when the
// peer is a trusted proxy, the last address of X-Forwarded-For that is not
// one. An IPv6 address counts by its /64, which one client holds whole.
func (l *limiter) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip != nil && l.trusted(ip) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop := net.ParseIP(strings.TrimSpace(hops[i]))
			if hop == nil {
				break
			}
			ip = hop
			if !l.trusted(hop) {
				break
			}
		}
	}
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

func (l *limiter) trusted(ip net.IP) bool {
	return slices.ContainsFunc(l.proxies, func(n *net.IPNet) bool { return n.Contains(ip) })
}

// writeRefusal answers a refused request in its route's own form: the
// streaming dialects an event stream of their error event (status 200, so
// that their clients read it), A2A a JSON-RPC error, every other route the
// JSON error {error, code, resetAt}; all with Retry-After.
func writeRefusal(w http.ResponseWriter, r *http.Request, pattern string, le *core.LimitError) {
	reset := le.ResetAt.Format(time.RFC3339)
	code := "RATE_LIMIT"
	if le.Err.Status() == http.StatusServiceUnavailable {
		code = "UNAVAILABLE"
	}
	w.Header().Set("Retry-After", strconv.Itoa(le.Err.RetryAfter()))
	switch pattern {
	case "POST /agui":
		writeEvents(w, nil, map[string]any{"type": "RUN_ERROR", "message": le.Error(), "code": code, "resetAt": reset})
	case "POST " + agui.AISDKPath:
		writeEvents(w, map[string]string{"x-vercel-ai-ui-message-stream": "v1"}, map[string]any{"type": "error", "errorText": le.Error()}, "[DONE]")
	case "POST /api/chat":
		writeEvents(w, nil, map[string]any{"type": "error", "error": map[string]any{"code": code, "message": le.Error(), "resetAt": reset,
			"details": map[string]any{"meshCode": le.Err.Kind(), "retryAfter": le.Err.RetryAfter()}}})
	case "POST /api/conversation":
		writeEvents(w, nil, map[string]any{"type": "error", "timestamp": time.Now().UnixMilli(), "error": map[string]any{"code": code, "message": le.Error(),
			"details": map[string]any{"retryAfter": le.Err.RetryAfter(), "resetAt": reset, "meshCode": le.Err.Kind()}}})
	default:
		if !slices.Contains(rpcRoutes, pattern) {
			core.WriteError(w, le)
			return
		}
		e := wire.Error{Code: wire.CodeRateLimited, Message: le.Error(), Data: map[string]any{"code": le.Err.Kind(), "resetAt": reset, "retryAfter": le.Err.RetryAfter()}}
		if r.Header.Get("A2A-Version") == wire.Version10 {
			e.Data = []any{wire.ErrorInfo{Type: wire.ErrorInfoType, Reason: wire.ErrorReason(e.Code), Domain: wire.ErrorDomain,
				Metadata: map[string]string{"code": le.Err.Kind(), "resetAt": reset}}}
		}
		core.WriteJSON(w, le.Err.Status(), map[string]any{"jsonrpc": "2.0", "id": json.RawMessage("null"), "error": e})
	}
}

// writeEvents answers an event stream of events, each a "data:" line (a
// string as it is, anything else as JSON).
func writeEvents(w http.ResponseWriter, headers map[string]string, events ...any) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	for k, v := range headers {
		h.Set(k, v)
	}
	w.WriteHeader(http.StatusOK)
	for _, ev := range events {
		data, ok := ev.(string)
		if !ok {
			b, _ := json.Marshal(ev)
			data = string(b)
		}
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
	}
}
