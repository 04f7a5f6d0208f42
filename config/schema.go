package config

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// ResolveOutputSchema reads an llm node's output_schema: a JSON Schema of an
// object, resolved for validation.
func ResolveOutputSchema(v map[string]any) (*jsonschema.Resolved, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("is not JSON: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("is not a JSON Schema: %w", err)
	}
	if s.Type != "object" {
		return nil, errors.New(`must be the schema of an object (type: object)`)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %w", err)
	}
	return r, nil
}
