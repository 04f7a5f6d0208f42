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
	b := &Bridge{cfg: Config{Agent: &config.Config{Name: "a", HTTP: hc}}}
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
		if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "Authorization") || rec.Header().Get("Access-Control-Max-Age") != "600" {
			t.Errorf("preflight: %d %v", rec.Code, rec.Header())
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
