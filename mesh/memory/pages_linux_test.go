package memory_test

import (
	"os"
	"testing"

	"github.com/agentmesh/agentmesh/mesh/memory"
	"github.com/agentmesh/agentmesh/mesh/meshtest"
)

// rssFile is the part of this process's resident set that maps files.
func rssFile(t *testing.T) int64 {
	t.Helper()
	u, ok := meshtest.Proc(os.Getpid())
	if !ok || u.RSSFile == 0 {
		t.Fatal("/proc does not say this process's RssFile")
	}
	return u.RSSFile
}

// TestDropFilePages drops the test binary's own pages: the process goes
// on running (it faults back what it touches) and maps less of its program.
func TestDropFilePages(t *testing.T) {
	before := rssFile(t)
	n := memory.DropFilePages()
	after := rssFile(t)
	if n == 0 {
		t.Fatal("dropped nothing: no mapping of the program found")
	}
	if after >= before {
		t.Errorf("RssFile %d kB before, %d kB after dropping %d bytes of mappings", before>>10, after>>10, n)
	}
	// Code and read-only data come back as they are used: a release (the
	// collector, then the drop again) and the test's own reporting run on.
	memory.Release()
	t.Logf("RssFile %d kB → %d kB (%d MB of mappings)", before>>10, after>>10, n>>20)
}
