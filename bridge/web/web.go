// Package web serves the mesh's chat page: plain HTML, CSS and JavaScript
// embedded in the binary (no build step, no CDN, no external fonts).
//
//	GET /          the page (index.html)
//	GET /web/...   its script, style sheet and icon, and agui-socket.js,
//	               a client of GET /agui/ws for other pages (connection
//	               states, reconnect with backoff, reattach by cursor)
//
// The page is a client of the bridge's own routes and nothing else: it lists
// and creates conversations (with the agent, or chats of a group GET /groups
// lists; ?group=<name> picks one) and sends messages through the REST API,
// decides approvals with POST /approvals/{uuid}, and follows a
// conversation's AG-UI events with an EventSource on GET
// /conversations/{id}/events, followed again after the last event it got
// when the stream drops (?after=, waits of 1, 2, 4 … up to 30 s). In a group chat it labels each
// message with its member and shows who speaks now and why, members skipped
// and why a round ended (the CUSTOM events speaker_selected, speaker_skipped
// and group_ended). It renders every text with textContent, never as HTML.
//
// The same page has two views for the people who run the mesh (ops.js),
// clients of the read-only API of package bridge/ops: #/approvals, the
// approvals inbox (approvers and admins: every pending approval of the mesh,
// live, decided one by one or several at once with POST /approvals/{uuid}),
// and #/mesh, the processes by role, breakers, work queues, degradation and
// charts of the rates (charts.js, SVG drawn in the page), live over SSE.
//
// Files are served with a content-hash ETag and "Cache-Control: no-cache",
// so a browser revalidates them cheaply and never runs a stale script after
// an upgrade. Register holds no state and starts no goroutine.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows the page only its own origin: scripts and
// styles from /web/, requests to the bridge.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// contentTypes of the embedded files, by extension: fixed here rather than
// read from the system's MIME tables, which differ between machines.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// file is one embedded file, ready to serve.
type file struct {
	name        string
	data        []byte
	etag        string
	contentType string
}

// files are the embedded files by their name under static/.
var files = func() map[string]*file {
	out := map[string]*file{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		ct := contentTypes[path.Ext(p)]
		if ct == "" {
			return fmt.Errorf("%s: no content type for its extension", p)
		}
		name := strings.TrimPrefix(p, "static/")
		out[name] = &file{name: name, data: data, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		return nil
	})
	if err != nil {
		panic("web: embedded files: " + err.Error())
	}
	return out
}()

// Register mounts GET / (the page) and GET /web/{file} on mux. Other paths,
// and other methods on /, are left to mux's other routes.
func Register(mux core.Mux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, files["index.html"])
	})
	mux.HandleFunc("GET /web/{name}", func(w http.ResponseWriter, r *http.Request) {
		f := files[r.PathValue("name")]
		if f == nil || f.name == "index.html" {
			core.WriteError(w, mesh.NewError("route_not_found", http.StatusNotFound, "no file "+r.URL.Path))
			return
		}
		serve(w, r, f)
	})
}

// serve writes f; http.ServeContent answers If-None-Match with 304.
func serve(w http.ResponseWriter, r *http.Request, f *file) {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("ETag", f.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if f.name == "index.html" {
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
	}
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.data))
}
