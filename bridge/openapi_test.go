package bridge

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/agentmesh/agentmesh/config"
)

func routesConfig() Config {
	return Config{Agent: &config.Config{Definition: config.Definition{Name: "a"}}, Version: "1.2.3"}
}

// TestOpenAPIDocumentIsValid: the document passes libopenapi-validator's
// validation against the OpenAPI 3.1 schema.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	data, err := json.Marshal(openAPIDoc(routesConfig()))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(data)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s (%s)", e.ValidationType, e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  at %s (%s): %s", se.FieldPath, se.KeywordLocation, se.Reason)
			}
		}
	}
	// The validator does refuse a broken document: a response without its
	// required description.
	broken := openAPIDoc(routesConfig())
	get := broken["paths"].(map[string]any)["/health"].(map[string]any)["get"].(map[string]any)
	delete(get["responses"].(map[string]any)["200"].(map[string]any), "description")
	data2, _ := json.Marshal(broken)
	doc2, _ := libopenapi.NewDocument(data2)
	if v2, errs := validator.NewValidator(doc2); len(errs) == 0 {
		if ok, _ := v2.ValidateDocument(); ok {
			t.Error("a response without a description passed validation: the check is blind")
		}
	}
	var parsed struct {
		OpenAPI string `json:"openapi"`
	}
	_ = json.Unmarshal(data, &parsed)
	if parsed.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", parsed.OpenAPI)
	}
}

// TestOpenAPICoversEveryRoute walks the router: every pattern it serves is
// an operation of the document, and the document names no other.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	documented := documentedPatterns()
	var served []string
	for _, r := range Routes(routesConfig()) {
		if r.Pattern == "/" {
			continue // the catch-all: 404
		}
		served = append(served, r.Pattern)
		if !slices.Contains(documented, r.Pattern) {
			t.Errorf("route %q is served but not in the OpenAPI document (bridge/openapi.go)", r.Pattern)
		}
	}
	for _, p := range documented {
		if !slices.Contains(served, p) {
			t.Errorf("the OpenAPI document describes %q, which the router does not serve", p)
		}
	}
	for p := range routeNotes {
		if !slices.Contains(documented, p) {
			t.Errorf("routeNotes describes %q, which the document does not", p)
		}
	}
	doc := openAPIDoc(routesConfig())
	n := 0
	for _, item := range doc["paths"].(map[string]any) {
		n += len(item.(map[string]any))
	}
	if n != len(served) {
		t.Errorf("%d operations in the document for %d routes", n, len(served))
	}
	// Path parameters are declared.
	item := doc["paths"].(map[string]any)["/conversations/{id}/messages"].(map[string]any)["post"].(map[string]any)
	if raw, _ := json.Marshal(item["parameters"]); !strings.Contains(string(raw), `"name":"id","required":true`) {
		t.Errorf("POST /conversations/{id}/messages parameters = %s", raw)
	}
}
