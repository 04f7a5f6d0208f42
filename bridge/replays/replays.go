// Package replays serves the reports `mesh replay` stores, to admins:
//
//	GET /replays       the stored reports, newest first: JSON, or an HTML list for a browser
//	GET /replays/{id}  one report: JSON, or its HTML page when the request accepts text/html
//
// The reports are in the KV bucket mesh_replays, written once by each
// replay; this package only reads them, on each request (no watch, no
// cache, no goroutine). Replays start from the command line: the bridge
// runs no agent.
package replays

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/core"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/replay"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// Config configures the replays API.
type Config struct {
	// Store reads the reports. Nil answers 503 (the bridge bound no
	// mesh_replays bucket).
	Store *store.ReplayStore
}

// Paths of the API.
const (
	ListPath   = "/replays"
	ReportPath = "/replays/{id}"
)

// Register mounts the routes on mux.
func Register(mux core.Mux, cfg Config) {
	s := &service{cfg: cfg}
	mux.HandleFunc("GET "+ListPath, s.list)
	mux.HandleFunc("GET "+ReportPath, s.get)
}

type service struct{ cfg Config }

// errNoBucket answers when the bridge has no reports bucket.
var errNoBucket = mesh.ErrUnavailable.With("the reports of replays are not available: the bucket mesh_replays is not provisioned")

// wantsHTML says the request prefers a page: a browser's Accept names
// text/html.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

func (s *service) list(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Store == nil {
		core.WriteError(w, errNoBucket)
		return
	}
	all, err := s.cfg.Store.List(r.Context())
	if err != nil {
		core.WriteError(w, err)
		return
	}
	list := make([]replay.Summary, 0, len(all))
	for _, data := range all {
		var rep replay.Report
		if json.Unmarshal(data, &rep) != nil {
			continue // not a report this release reads
		}
		list = append(list, rep.Summary())
	}
	sort.Slice(list, func(i, j int) bool { return list[i].StartedAt.After(list[j].StartedAt) })
	if wantsHTML(r) {
		page(w, func(w http.ResponseWriter) error { return replay.WriteListHTML(w, list, ListPath+"/") })
		return
	}
	core.WriteJSON(w, http.StatusOK, map[string]any{"replays": list})
}

func (s *service) get(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Store == nil {
		core.WriteError(w, errNoBucket)
		return
	}
	data, err := s.cfg.Store.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	if !wantsHTML(r) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
		return
	}
	var rep replay.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		core.WriteError(w, errors.New("replay report "+r.PathValue("id")+": "+err.Error()))
		return
	}
	page(w, func(w http.ResponseWriter) error { return replay.WriteHTML(w, &rep) })
}

// page writes an HTML page that write renders; the page's scripts are
// none, so it may say so.
func page(w http.ResponseWriter, write func(http.ResponseWriter) error) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_ = write(w)
}
