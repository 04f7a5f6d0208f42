package offline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file holds the offline planner's reports: tool results put in
// plain words.

// maxListed is how many items of a list a report names.
const maxListed = 50

// isRejection reports whether a tool message says the approver rejected
// the call or it was cancelled.
func isRejection(content string) bool {
	low := strings.ToLower(strings.TrimSpace(content))
	return strings.HasPrefix(low, "rejected") || strings.HasPrefix(low, "cancelled") ||
		strings.HasPrefix(low, "canceled")
}

// reportResults puts the tool results of a turn in plain words, one paragraph
// each.
func reportResults(results []llm.Message, tools map[string]*toolProfile) string {
	parts := make([]string, 0, len(results))
	for _, m := range results {
		parts = append(parts, reportOne(m, tools[m.ToolName]))
	}
	return strings.Join(parts, "\n\n")
}

func reportOne(m llm.Message, p *toolProfile) string {
	name := m.ToolName
	if name == "" {
		name = "the tool"
	}
	text := strings.TrimSpace(m.Content)
	switch {
	case isRejection(text):
		return fmt.Sprintf("The operation was cancelled: %s was not approved.", name)
	case m.IsError && text == "":
		return fmt.Sprintf("The tool %s failed without saying why.", name)
	case m.IsError:
		return fmt.Sprintf("The tool %s failed: %s", name, text)
	case text == "":
		return fmt.Sprintf("%s returned nothing.", name)
	}
	if p == nil {
		p = profileTool(llm.Tool{Name: name}, -1)
	}
	v, ok := decodeResult(text)
	if !ok {
		return fmt.Sprintf("%s returned: %s", name, text)
	}
	// The words alone: the tool's JSON is in its TOOL_CALL_RESULT, for a
	// client that shows it, and a person reads the summary.
	return describeResult(name, p.mainIntent(), p.noun, v)
}

// mainIntent is the one intent of a tool, or intentNone when it has none
// or several.
func (p *toolProfile) mainIntent() intent {
	found := intentNone
	for _, in := range []intent{intentRead, intentCreate, intentUpdate, intentDelete} {
		if p.intents.has(in) {
			if found != intentNone {
				return intentNone
			}
			found = in
		}
	}
	return found
}

// decodeResult parses a JSON result. An MCP CallToolResult
// ({"content": [{"type": "text", "text": …}], "structuredContent": …})
// is unwrapped to its structured content, else to its text.
func decodeResult(text string) (any, bool) {
	if text == "" || !strings.ContainsAny(text[:1], "{[") {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v, true
	}
	if sc, ok := m["structuredContent"]; ok && sc != nil {
		return sc, true
	}
	if parts, ok := m["content"].([]any); ok && len(m) <= 3 {
		var texts []string
		for _, part := range parts {
			if pm, ok := part.(map[string]any); ok && pm["type"] == "text" {
				if s, ok := pm["text"].(string); ok {
					texts = append(texts, s)
				}
			}
		}
		if len(texts) > 0 {
			inner := strings.TrimSpace(strings.Join(texts, "\n"))
			if iv, ok := decodeResult(inner); ok {
				return iv, true
			}
			return inner, true
		}
	}
	return v, true
}

// describeResult says what a decoded result holds.
func describeResult(name string, in intent, noun string, v any) string {
	switch t := v.(type) {
	case []any:
		return listing(in, noun, t, len(t))
	case map[string]any:
		return describeObject(name, in, noun, t)
	case nil:
		return name + " returned nothing."
	case string:
		return fmt.Sprintf("%s returned: %s", name, t)
	}
	return fmt.Sprintf("%s returned %s.", name, scalarText(v))
}

// countKeys name the total of a list result; removedKeys the number of
// things a removal removed.
var (
	countKeys   = []string{"count", "total", "total_count", "totalCount", "size", "length"}
	removedKeys = []string{"removed", "deleted", "removed_count", "deleted_count", "removedCount", "deletedCount", "affected", "rows_affected"}
)

func describeObject(name string, in intent, noun string, m map[string]any) string {
	// A removal: a number of things removed, or the list of them.
	for _, k := range removedKeys {
		switch t := m[k].(type) {
		case json.Number:
			n, _ := t.Int64()
			if n == 0 {
				return fmt.Sprintf("Nothing was removed: no %s matched.", noun)
			}
			return fmt.Sprintf("Removed %d %s.", n, plural(noun, int(n)))
		case []any:
			return listing(intentDelete, noun, t, len(t))
		}
	}
	if in == intentDelete {
		if n, ok := intField(m, "count"); ok {
			return fmt.Sprintf("Removed %d %s.", n, plural(noun, n))
		}
	}
	// A list, or several.
	keys := arrayKeys(m, noun)
	switch {
	case len(keys) == 1:
		items := m[keys[0]].([]any)
		n := len(items)
		if c, ok := countOf(m); ok {
			n = c
		}
		return listing(in, itemNoun(keys[0], noun), items, n)
	case len(keys) > 1:
		return sections(in, m, keys)
	}
	// One object wrapped in another: {"resource": {…}}.
	if inner, ok := wrapped(m, noun); ok {
		return describeObject(name, in, noun, inner)
	}
	// One thing.
	if label := itemLabel(m); label != "" {
		item := describeItem(m)
		switch in {
		case intentCreate:
			return fmt.Sprintf("Created %s %s.", noun, item)
		case intentUpdate:
			return fmt.Sprintf("Updated %s %s.", noun, item)
		case intentDelete:
			return fmt.Sprintf("Removed %s %s.", noun, item)
		}
		return fmt.Sprintf("%s %s.", capitalize(noun), item)
	}
	return fmt.Sprintf("%s returned %s.", name, scalarFields(m))
}

// arrayKeys are the keys of m holding lists, a list named after noun
// first, then in name order.
func arrayKeys(m map[string]any, noun string) []string {
	var keys []string
	for k, v := range m {
		if _, ok := v.([]any); ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		am, bm := stem(strings.ToLower(a)) == noun, stem(strings.ToLower(b)) == noun
		switch {
		case am && !bm:
			return -1
		case bm && !am:
			return 1
		}
		return strings.Compare(a, b)
	})
	if len(keys) > 1 && stem(strings.ToLower(keys[0])) == noun {
		return keys[:1]
	}
	return keys
}

// itemNoun is the noun for the items of the list under key: the key's
// own noun unless it is a generic container name.
func itemNoun(key, noun string) string {
	switch strings.ToLower(key) {
	case "items", "results", "data", "records", "entries", "rows", "list", "values", "matches":
		return noun
	}
	words := splitName(key)
	if len(words) == 0 {
		return noun
	}
	return stem(words[len(words)-1])
}

func countOf(m map[string]any) (int, bool) {
	for _, k := range countKeys {
		if n, ok := intField(m, k); ok {
			return n, true
		}
	}
	return 0, false
}

func intField(m map[string]any, k string) (int, bool) {
	num, ok := m[k].(json.Number)
	if !ok {
		return 0, false
	}
	n, err := num.Int64()
	return int(n), err == nil
}

// wrapped unwraps {"resource": {…}} (optionally next to scalars such as
// a message): the only object field, or the one named after noun.
func wrapped(m map[string]any, noun string) (map[string]any, bool) {
	var only map[string]any
	count := 0
	for k, v := range m {
		inner, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if stem(strings.ToLower(k)) == noun {
			return inner, true
		}
		only = inner
		count++
	}
	return only, count == 1 && itemLabel(m) == ""
}

// listing reports a list of n items (items may be a first page).
func listing(in intent, noun string, items []any, n int) string {
	nouns := plural(noun, n)
	if n == 0 {
		switch in {
		case intentCreate:
			return "Nothing was created."
		case intentDelete:
			return fmt.Sprintf("Nothing was removed: no %s matched.", noun)
		}
		return fmt.Sprintf("There are no %s.", plural(noun, 2))
	}
	var b strings.Builder
	switch in {
	case intentCreate:
		fmt.Fprintf(&b, "Created %d %s:", n, nouns)
	case intentUpdate:
		fmt.Fprintf(&b, "Updated %d %s:", n, nouns)
	case intentDelete:
		fmt.Fprintf(&b, "Removed %d %s:", n, nouns)
	default:
		fmt.Fprintf(&b, "Found %d %s:", n, nouns)
	}
	writeItems(&b, items)
	if n > len(items) {
		fmt.Fprintf(&b, "\n(%d shown)", len(items))
	}
	return b.String()
}

// sections reports an object holding several lists, such as a graph of
// entities and relations.
func sections(in intent, m map[string]any, keys []string) string {
	var counts []string
	for _, k := range keys {
		n := len(m[k].([]any))
		counts = append(counts, fmt.Sprintf("%d %s", n, plural(itemNoun(k, "item"), n)))
	}
	var b strings.Builder
	verb := "Found"
	switch in {
	case intentCreate:
		verb = "Created"
	case intentDelete:
		verb = "Removed"
	case intentUpdate:
		verb = "Updated"
	}
	fmt.Fprintf(&b, "%s %s.", verb, joinAnd(counts))
	for _, k := range keys {
		items := m[k].([]any)
		if len(items) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:", capitalize(k))
		writeItems(&b, items)
	}
	return b.String()
}

func writeItems(b *strings.Builder, items []any) {
	for i, it := range items {
		if i == maxListed {
			fmt.Fprintf(b, "\n- … and %d more", len(items)-maxListed)
			break
		}
		b.WriteString("\n- ")
		b.WriteString(describeItem(it))
	}
}

// labelKeys name an item, best first.
var labelKeys = []string{"name", "title", "key", "label", "entityName", "id", "path", "uri", "url"}

// detailKeys are shown after an item's label when present.
var detailKeys = []string{"value", "type", "entityType", "status", "state"}

func itemLabel(m map[string]any) string {
	for _, k := range labelKeys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
		if n, ok := m[k].(json.Number); ok {
			return n.String()
		}
	}
	return ""
}

// describeItem names one item of a result: "test-1 (value 10, id
// res_0a1b2c3d4e5f)".
func describeItem(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return scalarText(v)
	}
	label := itemLabel(m)
	if label == "" {
		if from, ok := m["from"].(string); ok {
			if to, ok := m["to"].(string); ok {
				rel, _ := m["relationType"].(string)
				return strings.Join(strings.Fields(from+" "+rel+" "+to), " ")
			}
		}
		return shorten(compactJSON(m), 200)
	}
	var details []string
	for _, k := range detailKeys {
		if d, ok := m[k]; ok && isScalar(d) {
			details = append(details, k+" "+scalarText(d))
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if list, ok := m[k].([]any); ok {
			details = append(details, fmt.Sprintf("%s %d", k, len(list)))
		}
	}
	if id, ok := m["id"]; ok && isScalar(id) && scalarText(id) != label {
		details = append(details, "id "+scalarText(id))
	}
	if len(details) == 0 {
		return label
	}
	return label + " (" + strings.Join(details, ", ") + ")"
}

func isScalar(v any) bool {
	switch v.(type) {
	case string, json.Number, bool, float64:
		return true
	}
	return false
}

func scalarText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return t.String()
	case bool:
		return strconv.FormatBool(t)
	case nil:
		return "null"
	}
	return compactJSON(v)
}

// scalarFields lists the scalar fields of m: "ok true, message done".
func scalarFields(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if isScalar(v) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return shorten(compactJSON(m), 200)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" "+scalarText(m[k]))
	}
	return strings.Join(parts, ", ")
}

func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(b.String())
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// countPhrase finds "3 resources" or "count: 3" in a text result.
var countPhrase = regexp.MustCompile(`(?i)\b(?:count|total)\s*[:=]?\s*(\d+)\b|\b(\d+)\s+([a-z][\w-]*)`)

// listCount reads how many things a list result holds and their names
// (labels). noun, when not empty, is the thing counted.
func listCount(content, noun string) (n int, names map[string]bool, ok bool) {
	names = map[string]bool{}
	v, isJSON := decodeResult(strings.TrimSpace(content))
	if !isJSON {
		for _, m := range countPhrase.FindAllStringSubmatch(content, -1) {
			if m[1] != "" {
				n, _ = strconv.Atoi(m[1])
				return n, names, true
			}
			if noun == "" || stem(strings.ToLower(m[3])) == noun {
				n, _ = strconv.Atoi(m[2])
				return n, names, true
			}
		}
		return 0, names, false
	}
	var items []any
	counted := false
	switch t := v.(type) {
	case []any:
		items = t
	case map[string]any:
		if keys := arrayKeys(t, noun); len(keys) > 0 {
			items = t[keys[0]].([]any)
		}
		n, counted = countOf(t)
		if !counted && items == nil {
			return 0, names, false
		}
	default:
		return 0, names, false
	}
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if l := itemLabel(m); l != "" {
				names[l] = true
			}
		}
	}
	if !counted {
		n = len(items)
	}
	return n, names, true
}
