// Package docs serves GET /docs: an HTML page that renders the bridge's
// OpenAPI document (GET /openapi.json) with a "Try it" per route, so that
// the API can be tried from a browser without a client.
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
