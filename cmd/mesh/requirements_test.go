package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// requirementsDoc is the manual's table of the requirements the mesh was
// built from: each row is done (the tests that show it) or replaced (why).
const requirementsDoc = "../../docs/requirements.md"

// TestRequirementsTableNamesRealTests keeps the requirements table honest:
// every row is done or replaced, a done row names a test or benchmark that
// shows it, and every test or benchmark the table names exists.
func TestRequirementsTableNamesRealTests(t *testing.T) {
	t.Parallel()
	defined := testFuncs(t, "../..")
	f, err := os.Open(requirementsDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	named := regexp.MustCompile(`\b(Test|Benchmark)[A-Z0-9][A-Za-z0-9_]*`)
	rows := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		cells := strings.Split(strings.Trim(sc.Text(), "| "), " | ")
		if !strings.HasPrefix(sc.Text(), "| ") || len(cells) != 4 || cells[0] == "ID" || strings.Trim(cells[0], "-:") == "" {
			continue
		}
		rows++
		status, evidence := cells[2], cells[3]
		names := named.FindAllString(evidence, -1)
		switch status {
		case "done":
			if len(names) == 0 {
				t.Errorf("line %d: %s is done but names no test or benchmark that shows it", line, cells[0])
			}
		case "replaced":
			if strings.TrimSpace(evidence) == "" {
				t.Errorf("line %d: %s is replaced without a reason", line, cells[0])
			}
		default:
			t.Errorf("line %d: %s is %q: a row is done or replaced", line, cells[0], status)
		}
		for _, n := range names {
			// A subtest is named after its parent: TestX/case.
			if !defined[n] {
				t.Errorf("line %d: %s names %s, which no test file defines", line, cells[0], n)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows < 300 {
		t.Errorf("the table has %d rows; the five specifications have over 300 requirements", rows)
	}
}

// testFuncs is the set of Test and Benchmark functions of the module's test
// files under root.
func testFuncs(t *testing.T, root string) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((Test|Benchmark)[A-Za-z0-9_]*)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(data, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
