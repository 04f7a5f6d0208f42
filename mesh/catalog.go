package mesh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ToolEntry is one tool of the catalog: what the tools bucket holds under
// <server>.<tool token>.
type ToolEntry struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema is the tool's declared structured output, if any.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations are the MCP hints as the server sent them.
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	// DestructiveHint is the effective hint: true when a call needs approval.
	DestructiveHint bool `json:"destructiveHint"`
	// ReadOnlyHint is the effective read-only hint.
	ReadOnlyHint bool `json:"readOnlyHint"`
	// Host is the node that last published the entry.
	Host      string    `json:"host,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ToolAnnotations are the MCP tool hints. Absent hints keep their MCP
// defaults: readOnly false, destructive true, idempotent false, openWorld true.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// ReadOnly is the effective readOnlyHint.
func (a *ToolAnnotations) ReadOnly() bool {
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint
}

// Destructive is the effective destructiveHint as MCP defines it: a tool that
// is not read-only is destructive unless it says destructiveHint: false.
func (a *ToolAnnotations) Destructive() bool {
	if a.ReadOnly() {
		return false
	}
	return a == nil || a.DestructiveHint == nil || *a.DestructiveHint
}

// ToolKey is the key of a tool in the tools bucket: <server>.<tool token>.
func ToolKey(server, tool string) (string, error) {
	if err := CheckToken(server); err != nil {
		return "", err
	}
	return server + "." + ToolToken(tool), nil
}

// Catalog reads the tools bucket.
type Catalog struct {
	kv jetstream.KeyValue
}

// NewCatalog returns a reader of the tools bucket.
func NewCatalog(kv jetstream.KeyValue) *Catalog { return &Catalog{kv: kv} }

// List returns every tool, ordered by server then name.
func (c *Catalog) List(ctx context.Context) ([]ToolEntry, error) {
	keys, err := c.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	var out []ToolEntry
	for key := range keys.Keys() {
		e, err := c.kv.Get(ctx, key)
		if err != nil {
			continue // deleted between the listing and the read
		}
		var t ToolEntry
		if err := json.Unmarshal(e.Value(), &t); err != nil {
			return nil, fmt.Errorf("decode tool %s: %w", key, err)
		}
		out = append(out, t)
	}
	SortTools(out)
	return out, nil
}

// SortTools orders tools by server, then name.
func SortTools(ts []ToolEntry) {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Server != ts[j].Server {
			return ts[i].Server < ts[j].Server
		}
		return ts[i].Name < ts[j].Name
	})
}

// Watch keeps fn informed of the catalog: it is called with the whole catalog
// once the bucket's current content is read, and again after every change,
// until ctx ends.
func (c *Catalog) Watch(ctx context.Context, fn func([]ToolEntry)) error {
	// Only the watch's goroutine touches tools and ready.
	tools := map[string]ToolEntry{}
	ready := false
	publish := func() {
		out := make([]ToolEntry, 0, len(tools))
		for _, t := range tools {
			out = append(out, t)
		}
		SortTools(out)
		fn(out)
	}
	err := WatchKV(ctx, c.kv, ">", func(e jetstream.KeyValueEntry) {
		if e.Operation() != jetstream.KeyValuePut {
			delete(tools, e.Key())
		} else {
			var t ToolEntry
			if json.Unmarshal(e.Value(), &t) == nil {
				tools[e.Key()] = t
			}
		}
		if ready {
			publish()
		}
	}, func() {
		ready = true
		publish()
	})
	if err != nil {
		return fmt.Errorf("watch tools: %w", err)
	}
	return nil
}

// MaxFunctionName is the longest function name every model API accepts:
// OpenAI, Anthropic and Gemini all refuse names over 64 characters.
const MaxFunctionName = 64

// FunctionNames gives each tool the name a model calls it by, deterministic
// whatever the order of tools:
//
//   - its own name, when no other tool's name reads the same;
//   - else <server>__<name>;
//   - characters other than letters, digits, '_' and '-' become '_', and a
//     name that does not start with a letter or '_' gets a leading '_'
//     (Gemini's rule), so every name matches ^[a-zA-Z_][a-zA-Z0-9_-]*$;
//   - a name still longer than [MaxFunctionName], or still shared by two
//     tools, keeps its first 55 characters followed by '_' and 8 hex digits
//     of a hash of the tool's server and name.
//
// A tool listed twice (same server and name) is named once.
func FunctionNames(tools []ToolEntry) map[string]ToolEntry {
	type id struct{ server, name string }
	uniq := make([]ToolEntry, 0, len(tools))
	seen := map[id]bool{}
	for _, t := range tools {
		if k := (id{t.Server, t.Name}); !seen[k] {
			seen[k] = true
			uniq = append(uniq, t)
		}
	}
	// Order by server and name so that collisions resolve the same way
	// whatever the caller's order.
	sorted := append([]ToolEntry(nil), uniq...)
	SortTools(sorted)

	plain := map[string]int{}
	for _, t := range sorted {
		plain[functionSafe(t.Name)]++
	}
	names := make([]string, len(sorted))
	count := map[string]int{}
	for i, t := range sorted {
		name := functionSafe(t.Name)
		if plain[name] > 1 {
			name = functionSafe(t.Server + "__" + t.Name)
		}
		names[i] = name
		count[name]++
	}
	out := make(map[string]ToolEntry, len(sorted))
	// Names that need no hash first, so that a hashed name never takes the
	// plain name of another tool.
	hashed := make([]bool, len(sorted))
	for i, t := range sorted {
		if len(names[i]) <= MaxFunctionName && count[names[i]] == 1 {
			out[names[i]] = t
		} else {
			hashed[i] = true
		}
	}
	for i, t := range sorted {
		if !hashed[i] {
			continue
		}
		for salt := 0; ; salt++ {
			name := hashedFunctionName(names[i], t.Server, t.Name, salt)
			if _, taken := out[name]; !taken {
				out[name] = t
				break
			}
		}
	}
	return out
}

// hashedFunctionName shortens name to MaxFunctionName characters, ending in
// '_' and 8 hex digits of a hash of the tool's identity (and salt, tried
// from 0 in the unlikely case of a clash).
func hashedFunctionName(name, server, tool string, salt int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", server, tool)
	if salt > 0 {
		fmt.Fprintf(h, "\x00%d", salt)
	}
	suffix := "_" + hex.EncodeToString(h.Sum(nil))[:8]
	if keep := MaxFunctionName - len(suffix); len(name) > keep {
		name = name[:keep]
	}
	return name + suffix
}

// functionSafe keeps letters, digits, '_' and '-' (others become '_') and
// makes the name start with a letter or '_'. The result is ASCII.
func functionSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z' || s[0] == '_') {
		s = "_" + s
	}
	return s
}
