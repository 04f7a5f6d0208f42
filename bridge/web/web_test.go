package web

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func newMux() *http.ServeMux {
	mux := http.NewServeMux()
	Register(mux)
	// The bridge's catch-all, as in bridge.New.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	return mux
}

func get(t *testing.T, mux http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec
}

func TestRoutes(t *testing.T) {
	mux := newMux()
	tests := []struct {
		name, method, path string
		wantStatus         int
		wantType           string
		wantBody           string
	}{
		{"page", "GET", "/", http.StatusOK, "text/html; charset=utf-8", `<textarea id="message-input"`},
		{"page head", "HEAD", "/", http.StatusOK, "text/html; charset=utf-8", ""},
		{"script", "GET", "/web/app.js", http.StatusOK, "text/javascript; charset=utf-8", "new EventSource("},
		{"style", "GET", "/web/style.css", http.StatusOK, "text/css; charset=utf-8", ".tool-call"},
		{"icon", "GET", "/web/icon.svg", http.StatusOK, "image/svg+xml", "<svg"},
		{"unknown file", "GET", "/web/nope.js", http.StatusNotFound, "application/json", `"route_not_found"`},
		{"index under /web", "GET", "/web/index.html", http.StatusNotFound, "application/json", `"route_not_found"`},
		{"other method on /", "POST", "/", http.StatusTeapot, "", ""},
		{"other path", "GET", "/nope", http.StatusTeapot, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := get(t, mux, tt.method, tt.path)
			if rec.Code != tt.wantStatus {
				t.Fatalf("%s %s: status %d, want %d", tt.method, tt.path, rec.Code, tt.wantStatus)
			}
			if got := rec.Header().Get("Content-Type"); tt.wantType != "" && got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("body does not contain %q:\n%.300s", tt.wantBody, rec.Body.String())
			}
		})
	}
}

func TestPageHeaders(t *testing.T) {
	rec := get(t, newMux(), "GET", "/")
	for k, want := range map[string]string{
		"Content-Security-Policy": contentSecurityPolicy,
		"Cache-Control":           "no-cache",
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestETagRevalidation(t *testing.T) {
	mux := newMux()
	first := get(t, mux, "GET", "/web/app.js")
	etag := first.Header().Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) {
		t.Fatalf("ETag = %q, want a quoted content hash", etag)
	}
	if again := get(t, mux, "GET", "/web/app.js", "If-None-Match", etag); again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Errorf("revalidation: status %d, %d bytes; want 304 and no body", again.Code, again.Body.Len())
	}
	if other := get(t, mux, "GET", "/web/style.css"); other.Header().Get("ETag") == etag {
		t.Errorf("style.css and app.js share the ETag %s", etag)
	}
}

// TestSelfContained checks that the page loads nothing from elsewhere (no
// CDN, no external font) and that every /web/ file it names exists.
func TestSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(\s*['"]?https?:`)
	for name, f := range files {
		if strings.HasSuffix(name, ".svg") {
			continue // its xmlns is a name, not a request
		}
		// So is the SVG namespace the charts create their elements in.
		data := strings.ReplaceAll(string(f.data), "'http://www.w3.org/2000/svg'", "")
		if m := external.FindString(data); m != "" {
			t.Errorf("%s refers to something outside the binary: %q", name, m)
		}
	}
	var refs []string
	for name, f := range files {
		for _, m := range regexp.MustCompile(`(?:/web/|from '\./)([A-Za-z0-9._-]+)`).FindAllStringSubmatch(string(f.data), -1) {
			refs = append(refs, name+" → "+m[1])
			if files[m[1]] == nil {
				t.Errorf("%s refers to %s, which is not embedded", name, m[1])
			}
		}
	}
	for _, want := range []string{"index.html → app.js", "app.js → api.js", "app.js → patch.js", "app.js → ops.js", "ops.js → charts.js", "ops.js → hash.js"} {
		if !slices.Contains(refs, want) {
			t.Errorf("references %q: %s missing", refs, want)
		}
	}
}

// TestPageHasScriptElements checks that every element app.js and ops.js
// look up by id is in index.html: a missing one breaks the page when it
// loads.
func TestPageHasScriptElements(t *testing.T) {
	page := string(files["index.html"].data)
	for _, script := range []string{"app.js", "ops.js"} {
		ids := regexp.MustCompile(`\$\('#([A-Za-z0-9_-]+)`).FindAllStringSubmatch(string(files[script].data), -1)
		if len(ids) < 10 {
			t.Fatalf("%s looks up %d elements by id; the pattern no longer matches its code", script, len(ids))
		}
		for _, m := range ids {
			if !strings.Contains(page, `id="`+m[1]+`"`) {
				t.Errorf("%s uses #%s, which index.html lacks", script, m[1])
			}
		}
	}
}
