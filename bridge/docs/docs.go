// Package docs serves GET /docs: an HTML page documenting every route of the
// bridge with request and response examples (seed 002 FR-017).
package docs

import (
	_ "embed"
	"net/http"

	"github.com/agentmesh/agentmesh/bridge/core"
)

//go:embed docs.html
var page []byte

// Register mounts GET /docs on mux.
func Register(mux core.Mux) {
	mux.HandleFunc("GET /docs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
}
