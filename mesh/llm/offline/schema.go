package offline

import (
	"bytes"
	"encoding/json"
	"strings"
)

// This file holds the part of JSON Schema the offline planner reads, and
// how it judges what a property holds.

// argSchema is the part of a JSON Schema the planner reads.
type argSchema struct {
	typ      string
	desc     string
	props    []*argProp // in the order the schema lists them
	items    *argSchema
	enum     []string
	minItems int
}

// argProp is one property of an object schema.
type argProp struct {
	name     string
	s        *argSchema
	kind     propKind
	itemKind propKind // for kindArray: the kind of one item
	head     string   // last word of the name: "entityNames" → "names"
	required bool
}

// propKind is what a property holds, judged from its type and name.
type propKind uint8

// Property kinds.
const (
	kindString  propKind = iota // any other string
	kindName                    // name, title, key, label …
	kindID                      // id, uuid, identifier
	kindPattern                 // a regular expression: pattern, regex
	kindQuery                   // a search term: query, filter, search …
	kindMessage                 // free text for another agent: message, task, prompt …
	kindPath                    // a file path or URL
	kindEnum                    // a string with an enum
	kindInteger
	kindNumber
	kindBool
	kindArray
	kindObject
)

// maxArgSchemaDepth bounds how deep nested schemas are read.
const maxArgSchemaDepth = 4

type rawArgSchema struct {
	Type        json.RawMessage `json:"type"`
	Description string          `json:"description"`
	Properties  json.RawMessage `json:"properties"`
	Required    []string        `json:"required"`
	Items       json.RawMessage `json:"items"`
	Enum        []any           `json:"enum"`
	MinItems    int             `json:"minItems"`
}

// parseArgSchema reads raw. A schema it cannot read is an empty object
// schema: the tool then takes no arguments as far as the planner knows.
func parseArgSchema(raw json.RawMessage) *argSchema {
	return parseArgSchemaDepth(raw, 0)
}

func parseArgSchemaDepth(raw json.RawMessage, depth int) *argSchema {
	s := &argSchema{}
	var r rawArgSchema
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil {
		return s
	}
	s.typ = argSchemaType(r.Type)
	s.desc = r.Description
	s.minItems = r.MinItems
	for _, e := range r.Enum {
		if str, ok := e.(string); ok {
			s.enum = append(s.enum, str)
		}
	}
	if depth >= maxArgSchemaDepth {
		return s
	}
	if len(r.Items) > 0 {
		s.items = parseArgSchemaDepth(r.Items, depth+1)
	}
	required := map[string]bool{}
	for _, n := range r.Required {
		required[n] = true
	}
	for _, kv := range orderedObject(r.Properties) {
		ps := parseArgSchemaDepth(kv.value, depth+1)
		p := &argProp{name: kv.key, s: ps, required: required[kv.key]}
		words := splitName(kv.key)
		p.head = strings.ToLower(kv.key)
		if len(words) > 0 {
			p.head = words[len(words)-1]
		}
		p.kind = classifyProp(p.head, ps)
		if p.kind == kindArray && ps.items != nil {
			p.itemKind = classifyProp(p.head, ps.items)
		}
		s.props = append(s.props, p)
	}
	return s
}

// argSchemaType is the first type that is not "null" ("type": ["string", "null"]).
func argSchemaType(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
	}
	return ""
}

type jsonMember struct {
	key   string
	value json.RawMessage
}

// orderedObject is the members of a JSON object in document order.
func orderedObject(raw json.RawMessage) []jsonMember {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []jsonMember
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := t.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return out
		}
		out = append(out, jsonMember{key, v})
	}
	return out
}

// classifyProp judges what a property holds from the last word of its name
// and its schema.
func classifyProp(head string, s *argSchema) propKind {
	switch s.typ {
	case "integer":
		return kindInteger
	case "number":
		return kindNumber
	case "boolean":
		return kindBool
	case "array":
		return kindArray
	case "object":
		return kindObject
	}
	desc := strings.ToLower(s.desc)
	switch {
	case len(s.enum) > 0:
		return kindEnum
	case idHeads[head]:
		return kindID
	case patternHeads[head]:
		return kindPattern
	case !nameHeads[head] && (strings.Contains(desc, "regular expression") || strings.Contains(desc, "regex")):
		return kindPattern
	case queryHeads[head]:
		return kindQuery
	case nameHeads[head]:
		return kindName
	case pathHeads[head]:
		return kindPath
	case messageHeads[head]:
		return kindMessage
	}
	return kindString
}

// keywords are the words that may name p in a message, before its value:
// its name, the last word of its name, and cue words for its kind.
func (p *argProp) keywords() map[string]bool {
	k := map[string]bool{strings.ToLower(p.name): true, p.head: true}
	add := func(m map[string]bool) {
		for w := range m {
			k[w] = true
		}
	}
	switch p.kind {
	case kindName:
		add(cueExact)
	case kindPattern:
		add(cueRaw)
		add(cueQuoted)
		add(cueExact)
		k["name"] = true
	case kindQuery:
		add(cueRaw)
		add(cueQuoted)
		add(cueExact)
		add(cueQuery)
	}
	return k
}
