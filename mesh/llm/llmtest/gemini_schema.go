package llmtest

import (
	"fmt"
	"sort"
	"strings"
)

// Gemini's JSON: proto field names in either case, and Schema, its OpenAPI
// 3.0 subset for function parameters.

// geminiSchemaKeys are the fields of Gemini's Schema.
var geminiSchemaKeys = fieldSet("type", "format", "title", "description", "nullable", "enum", "maxItems",
	"minItems", "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
	"pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum")

// geminiTypes are the values of Schema.type, matched without case.
var geminiTypes = fieldSet("TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL")

// lowerCamel turns a proto field name (system_instruction) into its JSON
// name (systemInstruction).
func lowerCamel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// protoKeys renames every field to its lowerCamelCase JSON name, leaving
// free-form values alone: call arguments, responses, JSON Schemas, and the
// property names of a Schema.
func protoKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			ck := lowerCamel(k)
			switch ck {
			case "args", "response", "parametersJsonSchema", "responseJsonSchema", "default", "example":
				out[ck] = val
			case "properties":
				props, ok := val.(map[string]any)
				if !ok {
					out[ck] = val
					continue
				}
				np := make(map[string]any, len(props))
				for name, p := range props {
					np[name] = protoKeys(p)
				}
				out[ck] = np
			default:
				out[ck] = protoKeys(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = protoKeys(e)
		}
		return out
	}
	return v
}

// checkGeminiSchema refuses what the API refuses in a Schema.
func checkGeminiSchema(at string, v any) *apiError {
	m, ok := v.(map[string]any)
	if !ok {
		return geminiBad("Invalid JSON payload received. Invalid value at '%s' (type.googleapis.com/google.ai.generativelanguage.v1beta.Schema): not an object", at)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !geminiSchemaKeys[k] {
			return geminiBad("Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", k, at)
		}
	}
	if t, ok := m["type"]; ok {
		ts, isString := t.(string)
		if !isString || !geminiTypes[strings.ToUpper(ts)] {
			return geminiBad("Invalid JSON payload received. Invalid value at '%s.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), %s", at, mustJSON(t))
		}
	}
	if enum, ok := m["enum"]; ok {
		list, _ := enum.([]any)
		for _, e := range list {
			if _, ok := e.(string); !ok {
				return geminiBad("Invalid JSON payload received. Invalid value at '%s.enum' (TYPE_STRING), %s", at, mustJSON(e))
			}
		}
	}
	if req, ok := m["required"]; ok {
		list, _ := req.([]any)
		for _, e := range list {
			if _, ok := e.(string); !ok {
				return geminiBad("Invalid JSON payload received. Invalid value at '%s.required' (TYPE_STRING), %s", at, mustJSON(e))
			}
		}
	}
	typ, _ := m["type"].(string)
	typ = strings.ToUpper(typ)
	props, _ := m["properties"].(map[string]any)
	if typ == "OBJECT" && len(props) == 0 {
		return geminiBad("* GenerateContentRequest.%s.properties: should be non-empty for OBJECT type", at)
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if e := checkGeminiSchema(fmt.Sprintf("%s.properties[%s].value", at, n), props[n]); e != nil {
			return e
		}
	}
	if typ == "ARRAY" {
		items, ok := m["items"]
		if !ok {
			return geminiBad("* GenerateContentRequest.%s.items: missing field.", at)
		}
		if e := checkGeminiSchema(at+".items", items); e != nil {
			return e
		}
	}
	if anyOf, ok := m["anyOf"].([]any); ok {
		for k, s := range anyOf {
			if e := checkGeminiSchema(fmt.Sprintf("%s.any_of[%d]", at, k), s); e != nil {
				return e
			}
		}
	}
	return nil
}

// jsonSchemaOf turns a Gemini Schema into JSON Schema for the backend:
// types in lower case.
func jsonSchemaOf(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			switch k {
			case "type":
				if s, ok := val.(string); ok {
					out[k] = strings.ToLower(s)
					continue
				}
				out[k] = val
			case "properties":
				props, _ := val.(map[string]any)
				np := make(map[string]any, len(props))
				for name, p := range props {
					np[name] = jsonSchemaOf(p)
				}
				out[k] = np
			case "items":
				out[k] = jsonSchemaOf(val)
			case "anyOf":
				list, _ := val.([]any)
				nl := make([]any, len(list))
				for i, s := range list {
					nl[i] = jsonSchemaOf(s)
				}
				out[k] = nl
			default:
				out[k] = val
			}
		}
		return out
	}
	return v
}
