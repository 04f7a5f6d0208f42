package e2e

import (
	"sort"
	"strings"
	"testing"
)

// checkStrs checks string fields of a decoded JSON object: str(v, key)
// for each key of want, in key order, each mismatch reported on its own
// with what got and want were. what names the object in the messages. It
// tells whether every field matched, for callers that stop on a mismatch.
func checkStrs(t testing.TB, what string, v any, want map[string]string) bool {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ok := true
	for _, k := range keys {
		if got := str(v, k); got != want[k] {
			t.Errorf("%s: %s = %q, want %q", what, k, got, want[k])
			ok = false
		}
	}
	return ok
}

// checkHolds checks that s, an answer's body or a message, holds each of
// want and none of not, each miss reported on its own. what names s in the
// messages. It tells whether s held what it should.
func checkHolds(t testing.TB, what, s string, want []string, not ...string) bool {
	t.Helper()
	ok := true
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s: %s, want %s in it", what, s, w)
			ok = false
		}
	}
	for _, n := range not {
		if strings.Contains(s, n) {
			t.Errorf("%s: %s, want no %s in it", what, s, n)
			ok = false
		}
	}
	return ok
}
