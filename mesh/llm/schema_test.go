package llm

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestGeminiParameters(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // canonical JSON; "null" for no parameters
	}{
		{
			name: "drops unknown keys",
			in: `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","type":"object","additionalProperties":false,
				"properties":{"q":{"type":"string","description":"query","examples":["a"],"default":"b","$comment":"c"}},"required":["q"]}`,
			want: `{"properties":{"q":{"description":"query","type":"string"}},"required":["q"],"type":"object"}`,
		},
		{
			name: "no properties: no parameters",
			in:   `{"type":"object","properties":{}}`,
			want: `null`,
		},
		{
			name: "not an object",
			in:   `"nope"`,
			want: `null`,
		},
		{
			name: "nullable type list",
			in:   `{"type":"object","properties":{"n":{"type":["integer","null"],"minimum":1,"exclusiveMaximum":9}}}`,
			want: `{"properties":{"n":{"minimum":1,"nullable":true,"type":"integer"}},"type":"object"}`,
		},
		{
			name: "several types",
			in:   `{"type":"object","properties":{"v":{"type":["string","number"]}}}`,
			want: `{"properties":{"v":{"anyOf":[{"type":"string"},{"type":"number"}]}},"type":"object"}`,
		},
		{
			name: "anyOf with null",
			in:   `{"type":"object","properties":{"d":{"anyOf":[{"type":"string","format":"date-time"},{"type":"null"}],"description":"when"}}}`,
			want: `{"properties":{"d":{"description":"when","format":"date-time","nullable":true,"type":"string"}},"type":"object"}`,
		},
		{
			name: "oneOf becomes anyOf",
			in:   `{"type":"object","properties":{"id":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
			want: `{"properties":{"id":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"type":"object"}`,
		},
		{
			name: "allOf merged",
			in: `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
				{"properties":{"b":{"type":"boolean"}},"required":["b","ghost"]}]}`,
			want: `{"properties":{"a":{"type":"string"},"b":{"type":"boolean"}},"required":["a","b"],"type":"object"}`,
		},
		{
			name: "refs expanded",
			in: `{"type":"object","$defs":{"Point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},
				"properties":{"from":{"$ref":"#/$defs/Point","description":"start"},"to":{"$ref":"#/definitions/Missing"}}}`,
			want: `{"properties":{"from":{"description":"start","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"type":"object"},"to":{"type":"object"}},"type":"object"}`,
		},
		{
			name: "recursive ref stops",
			in:   `{"$defs":{"Node":{"type":"object","properties":{"child":{"$ref":"#/$defs/Node"}}}},"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}}}`,
			want: `{"properties":{"root":{"properties":{"child":{"type":"object"}},"type":"object"}},"type":"object"}`,
		},
		{
			name: "enums and const",
			in: `{"type":"object","properties":{"unit":{"enum":["c","f"]},"mode":{"const":"fast"},
				"level":{"type":"integer","enum":[1,2,3],"description":"Level."}}}`,
			want: `{"properties":{"level":{"description":"Level. Allowed values: 1, 2, 3.","type":"integer"},"mode":{"enum":["fast"],"type":"string"},"unit":{"enum":["c","f"],"type":"string"}},"type":"object"}`,
		},
		{
			name: "formats Gemini refuses",
			in:   `{"type":"object","properties":{"u":{"type":"string","format":"uri"},"i":{"type":"integer","format":"int64"},"f":{"type":"number","format":"float"}}}`,
			want: `{"properties":{"f":{"format":"float","type":"number"},"i":{"format":"int64","type":"integer"},"u":{"type":"string"}},"type":"object"}`,
		},
		{
			name: "arrays",
			in:   `{"type":"object","properties":{"any":{"type":"array"},"tuple":{"type":"array","items":[{"type":"string"},{"type":"integer"}]},"inferred":{"items":{"type":"integer"},"maxItems":3}}}`,
			want: `{"properties":{"any":{"items":{"type":"string"},"type":"array"},"inferred":{"items":{"type":"integer"},"maxItems":3,"type":"array"},"tuple":{"items":{"type":"string"},"type":"array"}},"type":"object"}`,
		},
		{
			name: "missing type inferred",
			in:   `{"properties":{"o":{"properties":{"k":{"type":"string"}}},"free":{}}}`,
			want: `{"properties":{"free":{},"o":{"properties":{"k":{"type":"string"}},"type":"object"}},"type":"object"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := geminiParameters(json.RawMessage(tt.in))
			b, _ := json.Marshal(got)
			if got == nil {
				b = []byte("null")
			}
			if canonical(b) != canonical([]byte(tt.want)) {
				t.Errorf("geminiParameters:\n got %s\nwant %s", canonical(b), canonical([]byte(tt.want)))
			}
			if got != nil {
				if err := checkGeminiSchema("parameters", got); err != nil {
					t.Errorf("the API would refuse it: %v", err)
				}
			}
		})
	}
}

func TestObjectSchema(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{`{"properties":{"a":{"type":"string"}}}`, `{"properties":{"a":{"type":"string"}},"type":"object"}`},
		{``, `{"type":"object","properties":{}}`},
		{`null`, `{"type":"object","properties":{}}`},
		{`[1]`, `{"type":"object","properties":{}}`},
	}
	for _, tt := range tests {
		if got := objectSchema(json.RawMessage(tt.in)); canonical(got) != canonical([]byte(tt.want)) {
			t.Errorf("objectSchema(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// canonical re-encodes JSON with sorted keys, for comparisons.
func canonical(raw []byte) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "INVALID JSON: " + string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// geminiSchemaKeys are the keys of Gemini's Schema (an OpenAPI subset).
var geminiSchemaKeys = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"maxItems": true, "minItems": true, "properties": true, "required": true, "minProperties": true,
	"maxProperties": true, "minLength": true, "maxLength": true, "pattern": true, "example": true,
	"anyOf": true, "propertyOrdering": true, "default": true, "items": true, "minimum": true, "maximum": true,
}

// checkGeminiSchema refuses what the Gemini API refuses in a function's
// parameters: unknown keys, non-string enums, lists of types, arrays
// without items. (mesh/llm/llmtest checks requests as the API does, but an
// internal test cannot import it: llmtest imports llm.)
func checkGeminiSchema(path string, v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: schema is not an object", path)
	}
	for k, x := range m {
		if !geminiSchemaKeys[k] {
			return fmt.Errorf("%s: unknown schema field %q", path, k)
		}
		switch k {
		case "properties":
			for name, p := range x.(map[string]any) {
				if err := checkGeminiSchema(path+".properties."+name, p); err != nil {
					return err
				}
			}
		case "items":
			if err := checkGeminiSchema(path+".items", x); err != nil {
				return err
			}
		case "anyOf":
			for i, s := range x.([]any) {
				if err := checkGeminiSchema(fmt.Sprintf("%s.anyOf[%d]", path, i), s); err != nil {
					return err
				}
			}
		case "enum":
			for _, e := range x.([]any) {
				if _, ok := e.(string); !ok {
					return fmt.Errorf("%s: enum values must be strings", path)
				}
			}
		case "type":
			if _, ok := x.(string); !ok {
				return fmt.Errorf("%s: type must be one string", path)
			}
		}
	}
	if m["type"] == "array" && m["items"] == nil {
		return fmt.Errorf("%s: array without items", path)
	}
	return nil
}
