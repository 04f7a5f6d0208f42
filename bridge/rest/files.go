package rest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/bridge/core"
)

// fileBody is a file of a REST message: its bytes in base64 ("data") or
// an https URL ("url"), with its media type.
type fileBody struct {
	Name      string `json:"name,omitempty"`
	MediaType string `json:"media_type"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

func uploads(files []fileBody) []core.Upload {
	out := make([]core.Upload, 0, len(files))
	for _, f := range files {
		out = append(out, core.Upload{Name: f.Name, MediaType: f.MediaType, Base64: f.Data, URL: f.URL})
	}
	return out
}

// getFile answers a file of a conversation, for the conversation's owner
// (or an admin): its bytes with their media type, never rendered by the
// browser as a page of the bridge's origin.
func (a *api) getFile(w http.ResponseWriter, r *http.Request) {
	data, f, err := a.core.File(r.Context(), r.PathValue("id"), r.PathValue("file"), core.CallerOf(r))
	if err != nil {
		core.WriteError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.MediaType)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("ETag", `"`+f.SHA256+`"`)
	disp := "inline"
	if !strings.HasPrefix(f.MediaType, "image/") {
		disp = "attachment"
	}
	h.Set("Content-Disposition", disp+`; filename="`+f.ID+`"`)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
