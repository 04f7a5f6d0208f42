package bridge

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// schemas reflects Go types into the JSON Schemas (2020-12, OpenAPI 3.1's
// dialect) of the document's components: what a handler encodes is what
// the document says, since both come from the same type. A field without
// omitempty is required; one that can encode as null (a pointer, a slice, a
// map, an interface) says so; a named struct is a component, referenced.
type schemas struct {
	defs  map[string]any
	names map[reflect.Type]string
}

func newSchemas() *schemas {
	return &schemas{defs: map[string]any{}, names: map[reflect.Type]string{}}
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
)

// ref is the schema of v's type: a reference to its component when it is a
// named struct.
func (s *schemas) ref(v any) map[string]any { return s.of(reflect.TypeOf(v)) }

func (s *schemas) of(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{}
	case t.Kind() == reflect.Pointer:
		return nullable(s.of(t.Elem()))
	case t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType):
		return map[string]any{} // its own encoding: anything
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return nullable(map[string]any{"type": "array", "items": s.of(t.Elem())})
	case reflect.Map:
		return nullable(map[string]any{"type": "object", "additionalProperties": s.of(t.Elem())})
	case reflect.Struct:
		if t.Name() == "" {
			return s.object(t)
		}
		name := s.name(t)
		if _, done := s.defs[name]; !done {
			s.defs[name] = map[string]any{} // a placeholder: the type may refer to itself
			s.defs[name] = s.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{} // interfaces: anything
}

// name is the component name of a named struct: its type name, or
// "<package>.<type>" when another package has a type of that name.
func (s *schemas) name(t reflect.Type) string {
	if n, ok := s.names[t]; ok {
		return n
	}
	n := t.Name()
	for other, taken := range s.names {
		if taken == n && other != t {
			pkg := t.PkgPath()
			n = pkg[strings.LastIndex(pkg, "/")+1:] + "." + n
			break
		}
	}
	s.names[t] = n
	return n
}

// object is a struct's schema: its JSON fields, embedded structs' fields
// inline.
func (s *schemas) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	s.fields(t, props, &required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func (s *schemas) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				s.fields(ft, props, required)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		props[name] = s.of(f.Type)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}

// nullable lets a schema also be null: a nil pointer, slice or map.
func nullable(s map[string]any) map[string]any {
	if ref, ok := s["$ref"]; ok {
		return map[string]any{"anyOf": []any{map[string]any{"$ref": ref}, map[string]any{"type": "null"}}}
	}
	if typ, ok := s["type"].(string); ok {
		s["type"] = []any{typ, "null"}
		return s
	}
	return s // anything already admits null
}
