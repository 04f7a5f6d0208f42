package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// This file names the tools a model is offered: every model API takes a
// function name of at most 64 characters from a small alphabet, while MCP
// tool names are free text and two servers may offer the same name.

// maxFunctionName is the longest function name every model API accepts:
// OpenAI, Anthropic and Gemini all refuse names over 64 characters.
const maxFunctionName = 64

// functionNames gives each tool the name a model calls it by, deterministic
// whatever the order of tools:
//
//   - its own name, when no other tool's name reads the same;
//   - else <server>__<name>;
//   - characters other than letters, digits, '_' and '-' become '_', and a
//     name that does not start with a letter or '_' gets a leading '_'
//     (Gemini's rule), so every name matches ^[a-zA-Z_][a-zA-Z0-9_-]*$;
//   - a name still longer than [maxFunctionName], or still shared by two
//     tools, keeps its first 55 characters followed by '_' and 8 hex digits
//     of a hash of the tool's server and name.
//
// A tool listed twice (same server and name) is named once.
func functionNames(tools []mesh.ToolEntry) map[string]mesh.ToolEntry {
	type id struct{ server, name string }
	uniq := make([]mesh.ToolEntry, 0, len(tools))
	seen := map[id]bool{}
	for _, t := range tools {
		if k := (id{t.Server, t.Name}); !seen[k] {
			seen[k] = true
			uniq = append(uniq, t)
		}
	}
	// Order by server and name so that collisions resolve the same way
	// whatever the caller's order.
	sorted := append([]mesh.ToolEntry(nil), uniq...)
	store.SortTools(sorted)

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
	out := make(map[string]mesh.ToolEntry, len(sorted))
	// Names that need no hash first, so that a hashed name never takes the
	// plain name of another tool.
	hashed := make([]bool, len(sorted))
	for i, t := range sorted {
		if len(names[i]) <= maxFunctionName && count[names[i]] == 1 {
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

// functionName keeps s within the characters and length every model API
// takes for a function name.
func functionName(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			out[i] = '_'
		}
	}
	if len(out) == 0 || out[0] >= '0' && out[0] <= '9' || out[0] == '-' {
		out = append([]byte{'_'}, out...)
	}
	if len(out) > maxFunctionName {
		sum := sha256.Sum256([]byte(s))
		out = append(out[:55:55], "_"+hex.EncodeToString(sum[:4])...)
	}
	return string(out)
}

// hashedFunctionName shortens name to maxFunctionName characters, ending in
// '_' and 8 hex digits of a hash of the tool's identity (and salt, tried
// from 0 in the unlikely case of a clash).
func hashedFunctionName(name, server, tool string, salt int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", server, tool)
	if salt > 0 {
		fmt.Fprintf(h, "\x00%d", salt)
	}
	suffix := "_" + hex.EncodeToString(h.Sum(nil))[:8]
	if keep := maxFunctionName - len(suffix); len(name) > keep {
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
