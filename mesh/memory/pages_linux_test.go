package memory

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile is the RssFile line of /proc/self/status, in kB.
func rssFile(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestDropFilePages drops the test binary's own pages: the process goes
// on running (it faults back what it touches) and maps less of its program.
func TestDropFilePages(t *testing.T) {
	before := rssFile(t)
	n := DropFilePages()
	after := rssFile(t)
	if n == 0 {
		t.Fatal("dropped nothing: no mapping of the program found")
	}
	if after >= before {
		t.Errorf("RssFile %d kB before, %d kB after dropping %d bytes of mappings", before, after, n)
	}
	// Code and read-only data come back as they are used: a release (the
	// collector, then the drop again) and the test's own reporting run on.
	Release()
	t.Logf("RssFile %d kB → %d kB (%d MB of mappings)", before, after, n>>20)
}
