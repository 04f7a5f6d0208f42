package meshtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// NumberUUIDs replaces every UUID in s by <uuid-N>, numbered in the order
// they first appear, so that the same id keeps its name across a transcript.
func NumberUUIDs(s string) string {
	ids := map[string]string{}
	return uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = "<uuid-" + strconv.Itoa(len(ids)+1) + ">"
		}
		return ids[id]
	})
}

// Golden compares got with the golden file path, or, with update, writes it
// there (creating its folder).
func Golden(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the lines that differ, with their numbers.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "%d:\n-%s\n+%s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
