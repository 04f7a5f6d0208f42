package bridge

import (
	"io"
	"mime"
	"net/http"
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
// deadline of its body (http.read_timeout) and the type of the body of a
// state-changing request (application/json: a cross-site form posts
// text/plain or a form encoding, which no route takes).

// ErrHostNotAllowed refuses a request whose Host header names no name of
// this bridge (http.hosts).
var ErrHostNotAllowed = &mesh.Error{Kind: "host_not_allowed", Status: http.StatusMisdirectedRequest, Message: "host not allowed"}

// ErrUnsupportedMediaType refuses a state-changing request whose body is
// not JSON.
var ErrUnsupportedMediaType = &mesh.Error{Kind: "unsupported_media_type", Status: http.StatusUnsupportedMediaType, Message: "unsupported media type"}

// CORS headers: what a browser may send and read.
const (
	corsMethods = "GET, POST, DELETE, OPTIONS"
	corsHeaders = "Authorization, Content-Type, Idempotency-Key, X-Session-ID, Last-Event-ID, A2A-Version, Accept"
	corsExpose  = "X-Conversation-Id, Retry-After, WWW-Authenticate"
)

// edge wraps next (the guard) with the edge's checks; mux finds the
// pattern of a request, to answer refusals on the A2A endpoints as
// JSON-RPC errors.
func (b *Bridge) edge(mux *http.ServeMux, next http.Handler) http.Handler {
	hc := &b.cfg.Agent.HTTP
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rpc := false
		if _, pattern := mux.Handler(r); slices.Contains(rpcRoutes, pattern) {
			rpc = true
		}
		if !hc.HostAllowed(r.Host) {
			refuse(w, http.StatusMisdirectedRequest, ErrHostNotAllowed.Kind,
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
		if hasBody(r) {
			if stateChanging(r.Method) && !isJSON(r.Header.Get("Content-Type")) {
				refuse(w, http.StatusUnsupportedMediaType, ErrUnsupportedMediaType.Kind,
					"a "+r.Method+" body must be JSON: send Content-Type: application/json (got "+mesh.Clip(r.Header.Get("Content-Type"))+")", rpc)
				return
			}
			bodyDeadline(w, r, hc.ReadTimeout.Std())
		}
		next.ServeHTTP(w, r)
	})
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
