package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Tool schemas as each API takes them. MCP tools describe their arguments
// with JSON Schema; Anthropic and OpenAI take it as it is (an object
// schema), Gemini takes a subset of OpenAPI 3.0 and refuses the rest.

// objectSchema returns a tool's parameters as an object schema: the schema
// itself when it is a JSON object with a type, with "type": "object" added
// when it has none, an empty object schema when it is missing or not an
// object.
// A tool's schema is the same on every call until its catalog changes, so
// the result is kept by schema text (schemaCacheMax of them at most).
func objectSchema(raw json.RawMessage) json.RawMessage {
	schemaCache.Lock()
	out, ok := schemaCache.m[string(raw)]
	schemaCache.Unlock()
	if ok {
		return out
	}
	out = buildObjectSchema(raw)
	schemaCache.Lock()
	if len(schemaCache.m) >= schemaCacheMax {
		clear(schemaCache.m)
	}
	schemaCache.m[string(raw)] = out
	schemaCache.Unlock()
	return out
}

// schemaCacheMax bounds the schemas objectSchema keeps.
const schemaCacheMax = 1024

var schemaCache = struct {
	sync.Mutex
	m map[string]json.RawMessage
}{m: map[string]json.RawMessage{}}

func buildObjectSchema(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if _, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
		b, err := json.Marshal(m)
		if err != nil {
			return json.RawMessage(`{"type":"object","properties":{}}`)
		}
		return b
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return buf.Bytes()
}

// Gemini's Schema: the keys it knows, and the formats it accepts by type.
var (
	geminiCopiedKeys = []string{
		"description", "title", "pattern",
		"minimum", "maximum", "minLength", "maxLength",
		"minItems", "maxItems", "minProperties", "maxProperties",
	}
	geminiFormats = map[string][]string{
		"string":  {"enum", "date-time"},
		"integer": {"int32", "int64"},
		"number":  {"float", "double"},
	}
)

const (
	// maxGeminiSchemaDepth bounds nesting (and so $ref expansion).
	maxGeminiSchemaDepth = 24
	// maxGeminiRefs bounds the $refs expanded along one path; a recursive
	// definition stops there as a plain object.
	maxGeminiRefs = 6
)

// geminiParameters converts a tool's JSON Schema to Gemini's subset:
//
//   - keys Gemini does not know ($schema, $id, $defs, additionalProperties,
//     default, examples, const, exclusiveMinimum, …) are dropped;
//   - local $refs (#/$defs/…, #/definitions/…) are expanded in place;
//   - "type": [t, "null"] and anyOf/oneOf with a null branch become
//     "nullable": true; oneOf becomes anyOf; allOf is merged;
//   - enum and const keep string values (other values move to the
//     description); formats Gemini refuses are dropped;
//   - a missing type is inferred (properties: object, items: array, enum:
//     string); an array without items gets string items;
//   - required only names existing properties.
//
// It returns nil when the tool takes no arguments: Gemini refuses an object
// schema without properties, so the declaration then has no parameters.
func geminiParameters(raw json.RawMessage) map[string]any {
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil
	}
	rm, ok := root.(map[string]any)
	if !ok {
		return nil
	}
	c := geminiSchemaConv{root: rm}
	s := c.convert(rm, 0, nil)
	if props, _ := s["properties"].(map[string]any); len(props) == 0 {
		return nil
	}
	s["type"] = "object"
	return s
}

type geminiSchemaConv struct {
	root map[string]any
}

// convert converts one schema, construct by construct: $ref, allOf, the
// copied keys, type, anyOf/oneOf, enum/const, properties, required,
// items, then the inferred type, format and nullable.
func (c geminiSchemaConv) convert(v any, depth int, refs []string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok || depth > maxGeminiSchemaDepth {
		return map[string]any{}
	}
	if ref, ok := m["$ref"].(string); ok {
		return c.ref(m, ref, depth, refs)
	}
	out := map[string]any{}
	// allOf: every subschema holds, merged into one.
	if all, ok := m["allOf"].([]any); ok {
		for _, sub := range all {
			mergeGeminiSchema(out, c.convert(sub, depth+1, refs))
		}
	}
	for _, k := range geminiCopiedKeys {
		if x, ok := m[k]; ok {
			out[k] = x
		}
	}
	nullable := false
	if n, ok := m["nullable"].(bool); ok && n {
		nullable = true
	}
	if geminiType(m, out) {
		nullable = true
	}
	if c.alternatives(m, out, depth, refs) {
		nullable = true
	}
	c.enum(m, out)
	c.properties(m, out, depth, refs)
	geminiRequired(m, out)
	c.items(m, out, depth, refs)
	inferGeminiType(out)
	geminiFormat(m, out)
	if nullable {
		out["nullable"] = true
	}
	if out["type"] == "null" {
		delete(out, "type")
		out["nullable"] = true
	}
	return out
}

// geminiType sets out's type from m's: a string as it is, a list without
// "null" as that type or, with several, as anyOf branches of one type
// each. It reports whether the list holds "null".
func geminiType(m, out map[string]any) (nullable bool) {
	t, ok := m["type"].([]any)
	if !ok {
		if s, ok := m["type"].(string); ok {
			out["type"] = s
		}
		return false
	}
	var types []string
	for _, x := range t {
		if s, ok := x.(string); ok && s != "null" {
			types = append(types, s)
		} else if s == "null" {
			nullable = true
		}
	}
	switch len(types) {
	case 0:
	case 1:
		out["type"] = types[0]
	default:
		var branches []any
		for _, s := range types {
			branches = append(branches, map[string]any{"type": s})
		}
		out["anyOf"] = branches
	}
	return nullable
}

// alternatives converts anyOf and oneOf into anyOf, or merges their one
// branch into out when out has no type. It reports whether a branch is
// {"type": "null"}, which is dropped.
func (c geminiSchemaConv) alternatives(m, out map[string]any, depth int, refs []string) (nullable bool) {
	var branches []map[string]any
	for _, k := range []string{"anyOf", "oneOf"} {
		subs, _ := m[k].([]any)
		for _, sub := range subs {
			if sm, ok := sub.(map[string]any); ok && sm["type"] == "null" {
				nullable = true
				continue
			}
			branches = append(branches, c.convert(sub, depth+1, refs))
		}
	}
	switch {
	case len(branches) == 1 && out["type"] == nil:
		mergeGeminiSchema(out, branches[0])
	case len(branches) > 0:
		list := make([]any, len(branches))
		for i, b := range branches {
			list[i] = b
		}
		out["anyOf"] = list
	}
	return nullable
}

// properties converts m's properties into out's, joining those allOf
// merged in.
func (c geminiSchemaConv) properties(m, out map[string]any, depth int, refs []string) {
	props, ok := m["properties"].(map[string]any)
	if !ok {
		return
	}
	conv, _ := out["properties"].(map[string]any)
	if conv == nil {
		conv = make(map[string]any, len(props))
	}
	for name, p := range props {
		conv[name] = c.convert(p, depth+1, refs)
	}
	out["properties"] = conv
}

// geminiRequired sets out's required to the names, from allOf and from m,
// of out's properties, each once; none means no required key.
func geminiRequired(m, out map[string]any) {
	required, _ := out["required"].([]any)
	if req, ok := m["required"].([]any); ok {
		required = append(required, req...)
	}
	delete(out, "required")
	if len(required) == 0 {
		return
	}
	props, _ := out["properties"].(map[string]any)
	var names []any
	seen := map[string]bool{}
	for _, r := range required {
		if s, ok := r.(string); ok && !seen[s] {
			if _, known := props[s]; known {
				names = append(names, s)
				seen[s] = true
			}
		}
	}
	if len(names) > 0 {
		out["required"] = names
	}
}

// items converts m's items: a schema, or of the tuple form the first
// item's schema.
func (c geminiSchemaConv) items(m, out map[string]any, depth int, refs []string) {
	switch items := m["items"].(type) {
	case map[string]any:
		out["items"] = c.convert(items, depth+1, refs)
	case []any:
		if len(items) > 0 {
			out["items"] = c.convert(items[0], depth+1, refs)
		}
	}
}

// inferGeminiType gives a schema without type or anyOf the type its keys
// imply (properties: object, items: array, enum: string), and an array
// without items string items.
func inferGeminiType(out map[string]any) {
	if out["type"] == nil && out["anyOf"] == nil {
		switch {
		case out["properties"] != nil:
			out["type"] = "object"
		case out["items"] != nil:
			out["type"] = "array"
		case out["enum"] != nil:
			out["type"] = "string"
		}
	}
	if out["type"] == "array" && out["items"] == nil {
		out["items"] = map[string]any{"type": "string"}
	}
}

// geminiFormat keeps m's format when Gemini accepts it for out's type.
func geminiFormat(m, out map[string]any) {
	f, ok := m["format"].(string)
	if !ok {
		return
	}
	t, _ := out["type"].(string)
	for _, allowed := range geminiFormats[t] {
		if f == allowed {
			out["format"] = f
		}
	}
}

// ref expands a local $ref; the referring schema's description wins.
func (c geminiSchemaConv) ref(m map[string]any, ref string, depth int, refs []string) map[string]any {
	var out map[string]any
	seen := false
	for _, r := range refs {
		seen = seen || r == ref
	}
	target := resolveJSONPointer(c.root, ref)
	if seen || len(refs) >= maxGeminiRefs || target == nil {
		out = map[string]any{"type": "object"}
	} else {
		out = c.convert(target, depth+1, append(refs[:len(refs):len(refs)], ref))
	}
	if d, ok := m["description"].(string); ok {
		out["description"] = d
	}
	return out
}

// enum keeps enum (or const) when its values are strings; other values
// are listed in the description instead.
func (c geminiSchemaConv) enum(m, out map[string]any) {
	values, ok := m["enum"].([]any)
	if cv, has := m["const"]; has && !ok {
		values, ok = []any{cv}, true
	}
	if !ok || len(values) == 0 {
		return
	}
	var strs []any
	var all []string
	allStrings := true
	for _, v := range values {
		if s, ok := v.(string); ok {
			strs = append(strs, s)
			all = append(all, strconv.Quote(s))
			continue
		}
		allStrings = false
		b, _ := json.Marshal(v)
		all = append(all, string(b))
	}
	t, _ := out["type"].(string)
	if allStrings && (t == "" || t == "string") {
		out["enum"] = strs
		return
	}
	note := fmt.Sprintf("Allowed values: %s.", strings.Join(all, ", "))
	if d, _ := out["description"].(string); d != "" {
		note = d + " " + note
	}
	out["description"] = note
}

// mergeGeminiSchema merges src into dst: properties and required are
// joined, other keys keep dst's value.
func mergeGeminiSchema(dst, src map[string]any) {
	for k, v := range src {
		switch k {
		case "properties":
			dp, _ := dst[k].(map[string]any)
			if dp == nil {
				dp = map[string]any{}
			}
			for name, p := range v.(map[string]any) {
				dp[name] = p
			}
			dst[k] = dp
		case "required":
			dr, _ := dst[k].([]any)
			dst[k] = append(dr, v.([]any)...)
		default:
			if _, ok := dst[k]; !ok {
				dst[k] = v
			}
		}
	}
}

// resolveJSONPointer resolves a local reference ("#", "#/$defs/x") in root.
func resolveJSONPointer(root map[string]any, ref string) any {
	if !strings.HasPrefix(ref, "#") {
		return nil
	}
	p := strings.TrimPrefix(ref, "#")
	var cur any = root
	if p == "" {
		return cur
	}
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := cur.(type) {
		case map[string]any:
			cur = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			cur = n[i]
		default:
			return nil
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}
