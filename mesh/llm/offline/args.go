package offline

import (
	"regexp"
	"strings"
)

// This file holds the offline planner's argument extraction: filling a
// tool's properties from the user's words.

// extraction is the arguments filled for one tool, and what is missing.
type extraction struct {
	args map[string]any
	// missing are required properties no word filled.
	missing []string
	// oneOf, for a delete or update with nothing filled, are the
	// properties of which at least one is needed.
	oneOf []string
}

func (e extraction) complete() bool { return len(e.missing) == 0 && len(e.oneOf) == 0 }

// extractor fills properties from the words of one message. Each word
// fills at most one property.
type extractor struct {
	ws   []word
	from int // first word a free value may come from: the one after the verb
	used []bool
	in   intent
	// notValues are stems that name the kind of thing, never its name:
	// the tool's nouns and genericNouns.
	notValues map[string]bool
	// keywords are the words that name any property of the tool.
	keywords map[string]bool
	// text is the whole message, for message properties.
	text string
	// delegate is set for tools that name no action of their own (agents
	// reached over A2A): their message property takes the whole text.
	delegate bool
}

// newExtractor reads ws for p; the verb phrase is ws[verbAt:verbEnd+1]
// (verbAt -1 when there is none) and in is the intent it names.
func newExtractor(ws []word, verbAt, verbEnd int, in intent, p *toolProfile, text string) *extractor {
	x := &extractor{
		ws: ws, from: verbEnd + 1, used: make([]bool, len(ws)), in: in,
		notValues: map[string]bool{}, keywords: map[string]bool{},
		text: strings.TrimSpace(text), delegate: p.intents.empty(),
	}
	for n := range p.nouns {
		x.notValues[n] = true
	}
	for n := range genericNouns {
		x.notValues[n] = true
	}
	x.collectKeywords(p.schema)
	for i := max(verbAt, 0); verbAt >= 0 && i <= verbEnd; i++ {
		x.used[i] = true
	}
	return x
}

func (x *extractor) collectKeywords(s *argSchema) {
	for _, p := range s.props {
		for k := range p.keywords() {
			x.keywords[k] = true
		}
		x.collectKeywords(p.s)
		if p.s.items != nil {
			x.collectKeywords(p.s.items)
		}
	}
}

// extract fills the properties of the object schema s; top is false for
// nested objects.
func (x *extractor) extract(s *argSchema, top bool) extraction {
	e := extraction{args: map[string]any{}}
	// 1. Values after a keyword: "value 42", "named foo", "matching ^t".
	for _, p := range s.props {
		if v, ok := x.afterKeyword(p); ok {
			e.args[p.name] = v
		}
	}
	// 2. The only number left fills the only number property left.
	x.onlyNumber(s, e.args)
	// 3. Words shaped like ids and paths fill id and path properties.
	for _, p := range s.props {
		if _, done := e.args[p.name]; done {
			continue
		}
		if v, ok := x.byShape(p); ok {
			e.args[p.name] = v
		}
	}
	// 4. Free words, in order, fill the properties that name the target.
	// Objects and lists of objects are filled the same way, one level down.
	for _, p := range x.freeTargets(s, e.args) {
		if p.kind == kindObject || p.kind == kindArray && p.itemKind == kindObject {
			x.nested(p, &e)
			continue
		}
		if v, ok := x.fromFreeWords(p); ok {
			e.args[p.name] = v
		}
	}
	// 5. Defaults for what may be empty; the rest is missing.
	for _, p := range s.props {
		if _, done := e.args[p.name]; done || !p.required {
			continue
		}
		switch {
		case p.kind == kindArray && p.itemKind != kindObject && p.itemKind != kindName &&
			p.itemKind != kindID && p.s.minItems == 0:
			e.args[p.name] = []any{}
		case p.kind == kindBool:
			e.args[p.name] = false
		default:
			e.missing = append(e.missing, p.name)
		}
	}
	if top && (x.in == intentDelete || x.in == intentUpdate) {
		if len(e.args) == 0 && len(s.props) > 0 && len(e.missing) == 0 {
			for _, p := range s.props {
				e.oneOf = append(e.oneOf, p.name)
			}
		}
	}
	return e
}

// afterKeyword finds a keyword of p followed (after at most two
// connectors) by a value p accepts.
func (x *extractor) afterKeyword(p *argProp) (any, bool) {
	switch p.kind {
	case kindEnum:
		return x.enumValue(p)
	case kindBool:
		return x.boolValue(p)
	case kindArray, kindObject, kindMessage:
		return nil, false
	}
	kw := p.keywords()
	for i, w := range x.ws {
		if x.used[i] || w.quoted || !kw[w.low] {
			continue
		}
		j := i + 1
		for n := 0; n < 2 && j < len(x.ws) && !x.used[j] && !x.ws[j].quoted && connectors[x.ws[j].low]; n++ {
			j++
		}
		if j >= len(x.ws) || x.used[j] {
			continue
		}
		v, ok := x.accept(p, j, w.low)
		if !ok {
			continue
		}
		x.used[i], x.used[j] = true, true
		if p.kind == kindQuery {
			v = x.extendQuery(v.(string), j)
		}
		return v, true
	}
	return nil, false
}

// accept converts word j into a value of p; cue is the keyword before it.
func (x *extractor) accept(p *argProp, j int, cue string) (any, bool) {
	w := x.ws[j]
	switch p.kind {
	case kindInteger:
		return w.integer()
	case kindNumber:
		return w.number()
	}
	if !w.quoted && (fillers[w.low] || x.keywords[w.low]) {
		return nil, false
	}
	if _, isNum := w.number(); isNum && (p.kind == kindPattern || p.kind == kindQuery) && !w.quoted && cueQuery[cue] {
		return nil, false // "search for 3 …" is rarely a term
	}
	if p.kind == kindPattern {
		switch {
		case cueQuoted[cue]:
			return regexp.QuoteMeta(w.raw), true
		case cueExact[cue] || cue == "name":
			return anchored(w.raw), true
		}
	}
	return w.raw, true
}

// anchored is a regular expression matching exactly name.
func anchored(name string) string { return "^" + regexp.QuoteMeta(name) + "$" }

// extendQuery adds the words that follow a search term up to the next
// filler or keyword: "search nodes for alice smith" → "alice smith".
func (x *extractor) extendQuery(v string, j int) string {
	if x.ws[j].quoted {
		return v
	}
	for k := j + 1; k < len(x.ws); k++ {
		w := x.ws[k]
		if x.used[k] || w.quoted || fillers[w.low] || connectors[w.low] || x.keywords[w.low] {
			break
		}
		if _, strong := verbOf(w.low); strong {
			break
		}
		v += " " + w.raw
		x.used[k] = true
	}
	return v
}

func (x *extractor) enumValue(p *argProp) (any, bool) {
	for i, w := range x.ws {
		if x.used[i] {
			continue
		}
		for _, e := range p.s.enum {
			if strings.EqualFold(e, w.raw) {
				x.used[i] = true
				return e, true
			}
		}
	}
	return nil, false
}

// boolValue is true when the property's name is in the message, false
// when "no", "not", "without" or "don't" stands before it.
func (x *extractor) boolValue(p *argProp) (any, bool) {
	for i, w := range x.ws {
		if x.used[i] || w.quoted || (w.low != strings.ToLower(p.name) && w.low != p.head) {
			continue
		}
		x.used[i] = true
		if i > 0 {
			switch x.ws[i-1].low {
			case "no", "not", "without", "don't", "dont", "never":
				return false, true
			}
		}
		return true, true
	}
	return nil, false
}

// onlyNumber fills the only unfilled number property with the only
// unused number of the message.
func (x *extractor) onlyNumber(s *argSchema, args map[string]any) {
	var target *argProp
	for _, p := range s.props {
		if _, done := args[p.name]; done || (p.kind != kindInteger && p.kind != kindNumber) {
			continue
		}
		if target != nil {
			return
		}
		target = p
	}
	if target == nil {
		return
	}
	at := -1
	for i, w := range x.ws {
		if _, ok := w.number(); ok && !x.used[i] {
			if at >= 0 {
				return
			}
			at = i
		}
	}
	if at < 0 {
		return
	}
	if v, ok := x.accept(target, at, ""); ok {
		args[target.name] = v
		x.used[at] = true
	}
}

// byShape fills id properties with words shaped like ids, and path
// properties with words shaped like paths, wherever they stand.
func (x *extractor) byShape(p *argProp) (any, bool) {
	var fits func(string) bool
	switch {
	case p.kind == kindID || (p.kind == kindArray && p.itemKind == kindID):
		fits = looksLikeID
	case p.kind == kindPath || (p.kind == kindArray && p.itemKind == kindPath):
		fits = looksLikePath
	default:
		return nil, false
	}
	var found []any
	for i, w := range x.ws {
		if x.used[i] || !fits(w.raw) {
			continue
		}
		x.used[i] = true
		found = append(found, w.raw)
		if p.kind != kindArray {
			return w.raw, true
		}
	}
	if len(found) == 0 {
		return nil, false
	}
	return found, true
}

// freeTargets are the unfilled properties of s that free words may fill,
// most wanted first: names, lists of names, patterns (for a change), a
// required query, an id, a path, other required strings, and lists of
// objects (whose items are filled the same way).
func (x *extractor) freeTargets(s *argSchema, args map[string]any) []*argProp {
	want := x.in.mutating()
	hasTarget := false
	for _, p := range s.props {
		if p.kind == kindName || p.kind == kindPattern || (p.kind == kindArray && p.itemKind == kindName) {
			hasTarget = true
		}
	}
	rank := func(p *argProp) int {
		switch {
		case p.kind == kindName && (p.required || want):
			return 1
		case p.kind == kindArray && (p.itemKind == kindName || p.itemKind == kindID) && (p.required || want):
			return 2
		case p.kind == kindPattern && (p.required || want):
			return 3
		case p.kind == kindQuery && p.required:
			return 4
		case p.kind == kindID && (p.required || (want && !hasTarget)):
			return 5
		case p.kind == kindPath && p.required:
			return 6
		case p.kind == kindString && p.required:
			return 7
		case p.kind == kindMessage && (p.required || x.delegate):
			return 8
		case (p.kind == kindArray && p.itemKind == kindObject || p.kind == kindObject) && (p.required || want):
			return 9
		}
		return 0
	}
	var out []*argProp
	for r := 1; r <= 9; r++ {
		for _, p := range s.props {
			if _, done := args[p.name]; !done && rank(p) == r {
				out = append(out, p)
			}
		}
	}
	return out
}

// nested fills an object property, or a list of objects with one item,
// from the words left. Its missing properties are reported as
// "parent.child". Nothing filled leaves the property unset.
func (x *extractor) nested(p *argProp, e *extraction) {
	s := p.s
	if p.kind == kindArray {
		s = p.s.items
	}
	sub := x.extract(s, false)
	if len(sub.args) == 0 {
		return
	}
	if p.kind == kindArray {
		e.args[p.name] = []any{sub.args}
	} else {
		e.args[p.name] = sub.args
	}
	for _, m := range sub.missing {
		e.missing = append(e.missing, p.name+"."+m)
	}
}

// fromFreeWords fills p from the next free words.
func (x *extractor) fromFreeWords(p *argProp) (any, bool) {
	switch {
	case p.kind == kindMessage:
		if x.text == "" {
			return nil, false
		}
		return x.text, true
	case p.kind == kindArray:
		var all []any
		for i := x.nextFree(); i >= 0; i = x.nextFree() {
			x.used[i] = true
			all = append(all, x.ws[i].raw)
		}
		return all, len(all) > 0
	}
	i := x.nextFree()
	if i < 0 {
		return nil, false
	}
	x.used[i] = true
	v := x.ws[i].raw
	switch p.kind {
	case kindPattern:
		return anchored(v), true
	case kindQuery:
		return x.extendQuery(v, i), true
	}
	return v, true
}

// nextFree is the index of the first free word at or after x.from, or -1.
// A free word is unused and is not a filler, a connector, a noun for the
// kind of thing, a keyword or a verb, unless it is quoted.
func (x *extractor) nextFree() int {
	for i := max(x.from, 0); i < len(x.ws); i++ {
		if x.used[i] {
			continue
		}
		w := x.ws[i]
		if w.quoted {
			return i
		}
		if fillers[w.low] || connectors[w.low] || x.notValues[w.stem] || x.keywords[w.low] ||
			nameHeads[w.low] || idHeads[w.low] || patternHeads[w.low] || w.low == "value" ||
			cueRaw[w.low] || cueQuoted[w.low] || cueExact[w.low] {
			continue
		}
		if _, strong := verbOf(w.low); strong {
			continue
		}
		return i
	}
	return -1
}
