package bridge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/bridge/a2a"
	"github.com/agentmesh/agentmesh/config"
)

// edgeOf is the edge of a bridge with http config hc in front of a mux
// whose routes answer 200.
func edgeOf(hc config.HTTP) http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
	mux.HandleFunc("POST /conversations", ok)
	mux.HandleFunc("GET /health", ok)
	mux.HandleFunc("POST "+a2a.Path, ok)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
	b := &Role{cfg: Config{Agent: &config.Config{Definition: config.Definition{Name: "a"}, Process: config.Process{HTTP: hc}}}}
	return b.edge(mux, mux)
}

func serve(h http.Handler, method, host, path, body string, hdr ...string) *httptest.ResponseRecorder {
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, path, nil)
	} else {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
	}
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestEdgeContentType(t *testing.T) {
	h := edgeOf(config.HTTP{})
	tests := []struct {
		name, path, body, contentType string
		want                          int
	}{
		{"json", "/conversations", `{}`, "application/json", 200},
		{"json with charset", "/conversations", `{}`, "application/json; charset=utf-8", 200},
		{"a +json type", "/conversations", `{}`, "application/merge-patch+json", 200},
		{"no body", "/conversations", "", "", 200},
		{"text/plain (a cross-site form)", "/conversations", `{}`, "text/plain", 415},
		{"form", "/conversations", `message=hi`, "application/x-www-form-urlencoded", 415},
		{"multipart", "/conversations", `x`, "multipart/form-data; boundary=x", 415},
		{"none", "/conversations", `{}`, "", 415},
		{"garbage", "/conversations", `{}`, "json", 415},
		{"A2A text/plain", a2a.Path, `{}`, "text/plain", 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.contentType != "" {
				hdr = []string{"Content-Type", tt.contentType}
			}
			rec := serve(h, "POST", "127.0.0.1:8080", tt.path, tt.body, hdr...)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if tt.want == 415 && !strings.Contains(rec.Body.String(), "application/json") {
				t.Errorf("the refusal does not say what to send: %s", rec.Body)
			}
			if tt.want == 415 && tt.path == a2a.Path && !strings.Contains(rec.Body.String(), `"jsonrpc":"2.0"`) {
				t.Errorf("the A2A refusal is not a JSON-RPC error: %s", rec.Body)
			}
		})
	}
}

// A state-changing request without a body is held to the rule of one
// with a body: what a page of another site can send without a preflight
// (a form with no field, text/plain, fetch with no body) is refused,
// whatever the method; a client that is not a browser (no Origin) needs
// no type, and the bridge's own pages and the origins of
// http.cors.origins send none either.
func TestEdgeEmptyBodies(t *testing.T) {
	h := edgeOf(config.HTTP{PublicURL: "https://mesh.example/", CORS: config.CORS{Origins: []string{"https://app.example"}}})
	tests := []struct {
		name, method, path, contentType, origin string
		want                                    int
		wantCode                                string
	}{
		{"curl: no type, no origin", "POST", "/conversations", "", "", 200, ""},
		{"JSON type", "POST", "/conversations", "application/json", "", 200, ""},
		{"JSON type from another site (it needs a preflight)", "POST", "/conversations", "application/json", "https://evil.example", 200, ""},
		{"the bridge's own page", "POST", "/conversations", "", "http://127.0.0.1:8080", 200, ""},
		{"the page of the public URL", "POST", "/conversations", "", "https://mesh.example", 200, ""},
		{"an origin of http.cors.origins", "POST", "/conversations", "", "https://app.example", 200, ""},
		{"an empty form", "POST", "/conversations", "application/x-www-form-urlencoded", "https://evil.example", 415, "unsupported_media_type"},
		{"an empty form, no origin", "POST", "/conversations", "application/x-www-form-urlencoded", "", 415, "unsupported_media_type"},
		{"an empty multipart form", "POST", "/conversations", "multipart/form-data; boundary=x", "https://evil.example", 415, "unsupported_media_type"},
		{"empty text/plain", "POST", "/conversations", "text/plain", "https://evil.example", 415, "unsupported_media_type"},
		{"empty text/plain from the own page", "POST", "/conversations", "text/plain", "http://127.0.0.1:8080", 415, "unsupported_media_type"},
		{"fetch with no body from another site", "POST", "/conversations", "", "https://evil.example", 403, "origin_not_allowed"},
		{"a sandboxed frame (Origin null)", "POST", "/conversations", "", "null", 403, "origin_not_allowed"},
		{"DELETE from another site", "DELETE", "/conversations/x", "", "https://evil.example", 403, "origin_not_allowed"},
		{"PUT empty form", "PUT", "/conversations/x", "application/x-www-form-urlencoded", "", 415, "unsupported_media_type"},
		{"A2A empty form", "POST", a2a.Path, "text/plain", "https://evil.example", 415, ""},
		{"A2A from another site", "POST", a2a.Path, "", "https://evil.example", 403, ""},
		{"a GET from another site reads", "GET", "/health", "", "https://evil.example", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.contentType != "" {
				hdr = append(hdr, "Content-Type", tt.contentType)
			}
			if tt.origin != "" {
				hdr = append(hdr, "Origin", tt.origin)
			}
			rec := serve(h, tt.method, "127.0.0.1:8080", tt.path, "", hdr...)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if tt.wantCode != "" && !strings.Contains(rec.Body.String(), `"code":"`+tt.wantCode+`"`) {
				t.Errorf("the refusal is not %s: %s", tt.wantCode, rec.Body)
			}
			if tt.want != 200 && tt.path == a2a.Path && !strings.Contains(rec.Body.String(), `"jsonrpc":"2.0"`) {
				t.Errorf("the A2A refusal is not a JSON-RPC error: %s", rec.Body)
			}
		})
	}
}

func TestEdgeHost(t *testing.T) {
	tests := []struct {
		name  string
		hc    config.HTTP
		host  string
		allow bool
	}{
		{"loopback IP", config.HTTP{}, "127.0.0.1:8080", true},
		{"IPv6 loopback", config.HTTP{}, "[::1]:8080", true},
		{"localhost", config.HTTP{}, "localhost:8080", true},
		{"a LAN address", config.HTTP{}, "192.168.1.5:8080", true},
		{"a foreign name (DNS rebinding)", config.HTTP{}, "evil.example:8080", false},
		{"no Host", config.HTTP{}, "", false},
		{"configured name", config.HTTP{Hosts: []string{"agents.example.com"}}, "agents.example.com:8080", true},
		{"configured name, case", config.HTTP{Hosts: []string{"agents.example.com"}}, "Agents.Example.COM", true},
		{"configured name and port", config.HTTP{Hosts: []string{"agents.example.com:8443"}}, "agents.example.com:8443", true},
		{"configured name, other port", config.HTTP{Hosts: []string{"agents.example.com:8443"}}, "agents.example.com:9999", false},
		{"public_url's host", config.HTTP{PublicURL: "https://agents.example.com"}, "agents.example.com", true},
		{"another name", config.HTTP{Hosts: []string{"agents.example.com"}}, "evil.example", false},
		{"a suffix is not the name", config.HTTP{Hosts: []string{"example.com"}}, "evil-example.com", false},
		{"any", config.HTTP{Hosts: []string{"*"}}, "whatever.example", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(edgeOf(tt.hc), "GET", tt.host, "/health", "")
			want := http.StatusOK
			if !tt.allow {
				want = http.StatusMisdirectedRequest
			}
			if rec.Code != want {
				t.Fatalf("Host %q: status %d, want %d: %s", tt.host, rec.Code, want, rec.Body)
			}
			if !tt.allow && !strings.Contains(rec.Body.String(), "http.hosts") {
				t.Errorf("the refusal does not say how to allow the name: %s", rec.Body)
			}
		})
	}
}

func TestEdgeCORS(t *testing.T) {
	preflight := []string{"Origin", "https://app.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type"}
	t.Run("off by default", func(t *testing.T) {
		h := edgeOf(config.HTTP{})
		rec := serve(h, "OPTIONS", "127.0.0.1:8080", "/conversations", "", preflight...)
		if rec.Code == http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight answered with no origin configured: %d %v", rec.Code, rec.Header())
		}
		rec = serve(h, "GET", "127.0.0.1:8080", "/health", "", "Origin", "https://app.example")
		if v := rec.Header().Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("Access-Control-Allow-Origin %q with no origin configured", v)
		}
	})
	hc := config.HTTP{CORS: config.CORS{Origins: []string{"https://app.example"}, MaxAge: config.Duration(600e9)}}
	t.Run("configured origin", func(t *testing.T) {
		h := edgeOf(hc)
		rec := serve(h, "OPTIONS", "127.0.0.1:8080", "/conversations", "", preflight...)
		if rec.Code != http.StatusNoContent {
			t.Errorf("preflight: status %d, want %d", rec.Code, http.StatusNoContent)
		}
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "https://app.example" {
			t.Errorf("preflight: Access-Control-Allow-Origin %q, want https://app.example", got)
		}
		if got := rec.Header().Get("Access-Control-Allow-Headers"); !strings.Contains(got, "Authorization") {
			t.Errorf("preflight: Access-Control-Allow-Headers %q, want Authorization among them", got)
		}
		if got := rec.Header().Get("Access-Control-Max-Age"); got != "600" {
			t.Errorf("preflight: Access-Control-Max-Age %q, want 600", got)
		}
		if rec.Header().Get("Access-Control-Allow-Credentials") != "" {
			t.Error("credentials allowed: the bridge takes bearer tokens, not cookies")
		}
		rec = serve(h, "POST", "127.0.0.1:8080", "/conversations", `{}`, "Origin", "https://app.example", "Content-Type", "application/json")
		if rec.Code != 200 || rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" || rec.Header().Get("Vary") != "Origin" {
			t.Errorf("request: %d %v", rec.Code, rec.Header())
		}
	})
	t.Run("another origin", func(t *testing.T) {
		h := edgeOf(hc)
		pf := append([]string{}, preflight...)
		pf[1] = "https://evil.example"
		rec := serve(h, "OPTIONS", "127.0.0.1:8080", "/conversations", "", pf...)
		if rec.Code == http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of another origin: %d %v", rec.Code, rec.Header())
		}
	})
}

// The AG-UI socket admits the same foreign origins as the edge's
// cross-site rule: http.cors.origins, and the host of http.public_url.
func TestOriginAdmitted(t *testing.T) {
	hc := &config.HTTP{PublicURL: "https://mesh.example/", CORS: config.CORS{Origins: []string{"https://app.example"}}}
	for origin, want := range map[string]bool{
		"https://mesh.example":  true,
		"https://app.example":   true,
		"https://evil.example":  false,
		"null":                  false,
		"https://mesh.example.": false,
	} {
		if got := originAdmitted(origin, hc); got != want {
			t.Errorf("originAdmitted(%q) = %v, want %v", origin, got, want)
		}
	}
	if originAdmitted("https://mesh.example", &config.HTTP{}) {
		t.Error("an origin is admitted without http.public_url nor http.cors")
	}
}
