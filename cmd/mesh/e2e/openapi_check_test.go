package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	bridgehttp "github.com/agentmesh/agentmesh/bridge"
	"github.com/agentmesh/agentmesh/config"
)

// Every JSON answer a test gets through meshProc.try is checked against
// the bridge's OpenAPI document (the same document GET /openapi.json
// serves, built from the bridge package): a status or a body the document
// does not describe fails the test that got it.

var (
	specOnce      sync.Once
	specMu        sync.Mutex // the validator is not documented as safe for concurrent use
	specValidator validator.Validator
	specErr       error
)

func openAPIValidator() (validator.Validator, error) {
	specOnce.Do(func() {
		data, err := bridgehttp.OpenAPI(bridgehttp.Config{Agent: &config.Config{Definition: config.Definition{Name: "a"}}})
		if err != nil {
			specErr = err
			return
		}
		doc, err := libopenapi.NewDocument(data)
		if err != nil {
			specErr = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			specErr = errs[0]
			return
		}
		specValidator = v
	})
	return specValidator, specErr
}

// checkAnswer checks one JSON answer against the document.
func checkAnswer(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return // streams and pages: their schemas are text
	}
	v, err := openAPIValidator()
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	copied := *resp
	copied.Body = io.NopCloser(bytes.NewReader(body))
	specMu.Lock()
	ok, verrs := v.ValidateHttpResponse(req, &copied)
	specMu.Unlock()
	if ok {
		return
	}
	for _, e := range verrs {
		t.Errorf("%s %s → %d does not match the OpenAPI document: %s %s", req.Method, req.URL.Path, resp.StatusCode, e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			t.Errorf("    at %s: %s", se.FieldPath, se.Reason)
		}
	}
}
