package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// A handler that panics gets its client a plain 500 JSON error: the panic's
// value and stack go to the log, never into the answer.
func TestHandlerPanicAnswersCleanly(t *testing.T) {
	const secret = "db password hunter2 at /srv/app/store.go:42"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic(errors.New(secret)) })
	mux.HandleFunc("GET /half", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {}\n\n"))
		panic(secret)
	})
	var logs bytes.Buffer
	b := &Role{cfg: Config{Agent: &config.Config{Definition: config.Definition{Name: "a"}}}, mux: mux, log: zerolog.New(&logs)}
	h := b.middleware(mux)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusInternalServerError || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("status %d (%s), want a 500 JSON error: %s", rec.Code, rec.Header().Get("Content-Type"), body)
	}
	var e struct{ Error, Code string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != mesh.ErrInternal.Kind() || e.Error != "internal error: the bridge hit an unexpected error; its log has the details" {
		t.Errorf("body %s, want code %s and a plain internal error", body, mesh.ErrInternal.Kind())
	}
	for _, leak := range []string{"hunter2", "goroutine ", ".go:", "panic"} {
		if strings.Contains(body, leak) {
			t.Errorf("the answer shows %q: %s", leak, body)
		}
	}
	if !strings.Contains(logs.String(), `"message":"handler panic"`) || !strings.Contains(logs.String(), "hunter2") || !strings.Contains(logs.String(), "goroutine ") {
		t.Errorf("the log does not keep the panic and its stack:\n%s", logs.String())
	}

	// A stream already under way is not followed by an error body.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/half", nil))
	if got := rec.Body.String(); got != "data: {}\n\n" {
		t.Errorf("a panic after the stream began wrote %q", got)
	}
}
