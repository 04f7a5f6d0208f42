package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// TestOpenAPIDescribesWhatTheBridgeAnswers: the real binary's
// GET /openapi.json, loaded by libopenapi-validator, accepts every answer a
// tour of the REST, identity, catalog, operations and A2A card routes gets
// from the same binary — successes, the 202 of a queued turn aside, and
// the errors (400, 404, 409 with the approval, 415) — status, content type
// and body against the operation's schema.
func TestOpenAPIDescribesWhatTheBridgeAnswers(t *testing.T) {
	t.Parallel()
	m := startMesh(t, meshOpts{})
	resp, err := http.Get(m.url("/openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("the served document is invalid: %v", verrs[0].Message)
	}

	checked := 0
	call := func(method, path, contentType, body string, want int) string {
		t.Helper()
		req, _ := http.NewRequest(method, m.url(path), strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
		}
		resp.Body = io.NopCloser(bytes.NewReader(data))
		req.Body = io.NopCloser(strings.NewReader(body))
		if ok, verrs := v.ValidateHttpResponse(req, resp); !ok {
			for _, e := range verrs {
				t.Errorf("%s %s → %d: %s: %s", method, path, want, e.Message, e.Reason)
				for _, se := range e.SchemaValidationErrors {
					t.Errorf("    at %s: %s", se.FieldPath, se.Reason)
				}
			}
		}
		checked++
		return string(data)
	}
	const js = "application/json"
	for _, path := range []string{"/health", "/ready", "/tools", "/groups", "/agents", "/agents/resource-manager", "/auth/me",
		"/ops/mesh", "/ops/approvals", "/ops/stats", "/.well-known/agent-card.json", "/agents/resource-manager/.well-known/agent-card.json"} {
		call("GET", path, "", "", http.StatusOK)
	}
	call("POST", "/conversations", js, `{}`, http.StatusCreated)
	first := call("POST", "/conversations", js, `{"message": "list all resources"}`, http.StatusCreated)
	conv := str(decode(t, first), "conversation", "id")
	call("GET", "/conversations", "", "", http.StatusOK)
	call("GET", "/conversations/"+conv, "", "", http.StatusOK)
	paused := decode(t, call("POST", "/conversations/"+conv+"/messages", js, `{"message": "add resource web-1 with value 7"}`, http.StatusOK))
	approval := str(paused, "result", "approval", "uuid")
	if approval == "" {
		t.Fatalf("no pending approval in %v", paused)
	}
	call("GET", "/approvals", "", "", http.StatusOK)
	call("GET", "/approvals/"+approval, "", "", http.StatusOK)
	call("POST", "/conversations/"+conv+"/messages", js, `{"message": "list all resources"}`, http.StatusConflict)
	call("POST", "/approvals/"+approval, js, `{"approved": true}`, http.StatusOK)
	call("POST", "/approvals/"+approval, js, `{"approved": true}`, http.StatusConflict)
	call("POST", "/conversations/"+conv+"/cancel", js, `{}`, http.StatusAccepted)
	call("GET", "/conversations/00000000-0000-0000-0000-000000000000", "", "", http.StatusNotFound)
	call("POST", "/conversations/"+conv+"/messages", js, `{"message": `, http.StatusBadRequest)
	call("POST", "/conversations/"+conv+"/messages", "text/plain", `hello`, http.StatusUnsupportedMediaType)
	call("POST", "/conversations", js, `{"agent": "nobody"}`, http.StatusNotFound)
	t.Logf("%d answers checked against the document", checked)

	// /docs is the document rendered: one section per operation, in
	// Chromium, and its "Try it" works.
	var operationIDs []string
	var parsed struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	_ = json.Unmarshal(spec, &parsed)
	for _, item := range parsed.Paths {
		for _, op := range item {
			operationIDs = append(operationIDs, op.OperationID)
		}
	}
	var page struct {
		Error         string   `json:"error"`
		Sections      int      `json:"sections"`
		OperationIDs  []string `json:"operationIds"`
		Tags          []string `json:"tags"`
		TryHealth     string   `json:"tryHealth"`
		ConsoleErrors []string `json:"consoleErrors"`
	}
	runPeer(t, nodeWith(t, "playwright-core"), "web-docs.mjs", 2*time.Minute, []string{
		"BASE_URL=" + m.url(""), "CHROMIUM=" + chromiumPath(t), "ARTIFACTS=" + artifactDir(t), "TIMEOUT_MS=20000",
	}, &page, nil)
	slices.Sort(operationIDs)
	slices.Sort(page.OperationIDs)
	if page.Error != "" {
		t.Errorf("/docs: error %s", page.Error)
	}
	if !slices.Equal(page.OperationIDs, operationIDs) {
		t.Errorf("/docs rendered %d sections, operation ids %v; want the %d operations %v", page.Sections, page.OperationIDs, len(operationIDs), operationIDs)
	}
	if !slices.Contains(page.Tags, "Conversations") {
		t.Errorf("/docs tags %v, want Conversations among them", page.Tags)
	}
	if !strings.Contains(page.TryHealth, `"status"`) {
		t.Errorf("/docs Try it GET /health showed %q, want the health's status", page.TryHealth)
	}
	if len(page.ConsoleErrors) > 0 {
		t.Errorf("/docs console errors %v", page.ConsoleErrors)
	}

	// The check is not blind: a document whose Health requires a field the
	// bridge does not send refuses the answer of GET /health.
	var tampered map[string]any
	_ = json.Unmarshal(spec, &tampered)
	health := tampered["components"].(map[string]any)["schemas"].(map[string]any)["Health"].(map[string]any)
	health["required"] = append(health["required"].([]any), "not_sent")
	data, _ := json.Marshal(tampered)
	tdoc, _ := libopenapi.NewDocument(data)
	tv, _ := validator.NewValidator(tdoc)
	req, _ := http.NewRequest("GET", m.url("/health"), nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ok, _ := tv.ValidateHttpResponse(req, resp); ok {
		t.Error("GET /health passed a schema that requires a field it does not send")
	}
}

// decode reads a JSON object answer.
func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return out
}
