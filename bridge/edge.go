package bridge

import (
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// The HTTP edge: what every request goes through before its route's
// access rule (guard) and handler, in this order: the Host it names
// (DNS rebinding), CORS (http.cors.origins; off by default), the
// deadline of its body (http.read_timeout) and the cross-site rule of a
// state-changing request (POST, PUT, PATCH, DELETE).
//
// The cross-site rule keeps out what a page of another site can send
// without a CORS preflight (a "simple" request: a form, or fetch with
// text/plain or no body), which CORS would not stop: a state-changing
// request sends JSON or nothing. With a body, its Content-Type must be
// application/json (or application/…+json). Without one, a Content-Type,
// if sent, must be JSON too (a form with no field posts
// application/x-www-form-urlencoded and no byte); and one that sends none
// must not come from a page of another origin: its Origin, if any, is the
// bridge's own (the Host it was sent to, or http.public_url's), or one of
// http.cors.origins. A client that is not a browser (curl, the CLI) sends
// no Origin and needs no type on an empty POST.

// ErrHostNotAllowed refuses a request whose Host header names no name of
// this bridge (http.hosts).
var ErrHostNotAllowed = mesh.NewError("host_not_allowed", http.StatusMisdirectedRequest, "host not allowed")

// ErrUnsupportedMediaType refuses a state-changing request whose body, or
// whose Content-Type without a body, is not JSON.
var ErrUnsupportedMediaType = mesh.NewError("unsupported_media_type", http.StatusUnsupportedMediaType, "unsupported media type")

// ErrCrossSite refuses a state-changing request without a body or a type
// from a page of another origin (a cross-site request a browser sends
// without asking first).
var ErrCrossSite = mesh.NewError("origin_not_allowed", http.StatusForbidden, "origin not allowed")

// CORS headers: what a browser may send and read.
const (
	corsMethods = "GET, POST, DELETE, OPTIONS"
	corsHeaders = "Authorization, Content-Type, Idempotency-Key, X-Session-ID, Last-Event-ID, A2A-Version, Accept"
	corsExpose  = "X-Conversation-Id, Retry-After, WWW-Authenticate"
)

// edge wraps next (the guard) with the edge's checks; mux finds the
// pattern of a request, to answer refusals on the A2A endpoints as
// JSON-RPC errors.
func (b *Role) edge(mux *http.ServeMux, next http.Handler) http.Handler {
	hc := &b.cfg.Agent.HTTP
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rpc := false
		if _, pattern := mux.Handler(r); slices.Contains(rpcRoutes, pattern) {
			rpc = true
		}
		if !hc.HostAllowed(r.Host) {
			refuse(w, http.StatusMisdirectedRequest, ErrHostNotAllowed.Kind(),
				"host "+mesh.Clip(r.Host)+" is not a name of this bridge: add it to http.hosts", rpc)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			if allow, ok := hc.CORS.OriginAllowed(origin); ok {
				h := w.Header()
				h.Set("Access-Control-Allow-Origin", allow)
				h.Add("Vary", "Origin")
				if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
					h.Set("Access-Control-Allow-Methods", corsMethods)
					h.Set("Access-Control-Allow-Headers", corsHeaders)
					h.Set("Access-Control-Max-Age", strconv.Itoa(int(hc.CORS.MaxAge.Std().Seconds())))
					w.WriteHeader(http.StatusNoContent)
					return
				}
				h.Set("Access-Control-Expose-Headers", corsExpose)
			}
		}
		if stateChanging(r.Method) {
			ct, body := r.Header.Get("Content-Type"), hasBody(r)
			switch {
			case body && !isJSON(ct):
				refuse(w, http.StatusUnsupportedMediaType, ErrUnsupportedMediaType.Kind(),
					"a "+r.Method+" body must be JSON: send Content-Type: application/json (got "+mesh.Clip(ct)+")", rpc)
				return
			case !body && ct != "" && !isJSON(ct):
				refuse(w, http.StatusUnsupportedMediaType, ErrUnsupportedMediaType.Kind(),
					"a "+r.Method+" without a body sends no Content-Type, or application/json (got "+mesh.Clip(ct)+")", rpc)
				return
			case !body && ct == "" && !ownOrigin(r, hc):
				refuse(w, http.StatusForbidden, ErrCrossSite.Kind(),
					"a "+r.Method+" from a page of origin "+mesh.Clip(r.Header.Get("Origin"))+" is refused (a cross-site request): "+
						"send Content-Type: application/json, or add the origin to http.cors.origins", rpc)
				return
			}
		}
		if hasBody(r) {
			bodyDeadline(w, r, hc.ReadTimeout.Std())
		}
		next.ServeHTTP(w, r)
	})
}

// ownOrigin admits a request without Origin (not a browser), one from a
// page of the bridge itself (the Host the request names, or the host of
// http.public_url) and one from an origin of http.cors.origins.
func ownOrigin(r *http.Request, hc *config.HTTP) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return originAdmitted(origin, hc)
}

// originAdmitted admits a browser's Origin that is not the Host a request
// names: one of http.cors.origins, or the host of http.public_url (a page
// of the bridge behind a proxy that rewrites Host).
func originAdmitted(origin string, hc *config.HTTP) bool {
	if _, ok := hc.CORS.OriginAllowed(origin); ok {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // "null": a sandboxed frame, a file, a redirect
	}
	pub, err := url.Parse(hc.PublicURL)
	return hc.PublicURL != "" && err == nil && strings.EqualFold(u.Host, pub.Host)
}

// hasBody reports whether a request has a body: a length, or chunks.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

func stateChanging(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// isJSON accepts application/json and application/<something>+json, with
// any parameters (charset).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// bodyDeadline gives the request's body until d from now, and lifts the
// deadline once the body is read. The server's own ReadTimeout would
// stay on the connection after the body, and the server's background read
// that watches for a client gone would then cancel a handler still
// waiting for its turn, or streaming.
func bodyDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, w: w, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
}

// deadlineBody lifts its read deadline at the end of the body. After any
// other error (the deadline passed, the body is too large) the deadline
// stays, and the answer closes the connection: the rest of a slow body is
// not read as a next request.
type deadlineBody struct {
	io.ReadCloser
	w      http.ResponseWriter
	lift   func()
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case b.lifted || err == nil:
	case err == io.EOF:
		b.lifted = true
		b.lift()
	default:
		b.lifted = true
		b.w.Header().Set("Connection", "close")
	}
	return n, err
}

// serverTimeouts are the bridge server's timeouts from http config. The
// body's deadline is the edge's (bodyDeadline), not ReadTimeout's.
func serverTimeouts(srv *http.Server, hc *config.HTTP) {
	srv.ReadHeaderTimeout = hc.ReadHeaderTimeout.Std()
	srv.WriteTimeout = hc.WriteTimeout.Std()
	srv.IdleTimeout = hc.IdleTimeout.Std()
}
