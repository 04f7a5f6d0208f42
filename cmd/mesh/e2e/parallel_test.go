package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// runAlone are the tests that do not run in parallel with the others: they
// kill processes under load, or measure memory, and other tests' processes
// beside them would change what they find (see doc.go).
var runAlone = map[string]bool{
	"TestChaos":                          true,
	"TestClusterChaos":                   true,
	"TestClusterPlainNATS":               true,
	"TestClusterRollingRestart":          true,
	"TestClusterRollingUpgrade":          true,
	"TestHugeConversationKeepsAnswering": true,
}

// TestEveryTestRunsInParallel keeps the package's time on two cores: a
// test that forgets t.Parallel runs on its own, while the package's other
// tests wait.
func TestEveryTestRunsInParallel(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			seen[fn.Name.Name] = true
			if got := callsParallelFirst(fn); got == runAlone[fn.Name.Name] {
				if got {
					t.Errorf("%s (%s) calls t.Parallel but is listed in runAlone", fn.Name.Name, fset.Position(fn.Pos()))
				} else {
					t.Errorf("%s (%s) does not call t.Parallel first; add it, or list the test in runAlone and say why", fn.Name.Name, fset.Position(fn.Pos()))
				}
			}
		}
	}
	for name := range runAlone {
		if !seen[name] {
			t.Errorf("runAlone lists %s, which no longer exists", name)
		}
	}
}

// callsParallelFirst says whether fn's first statement is t.Parallel().
func callsParallelFirst(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return false
	}
	stmt, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Parallel" && len(call.Args) == 0
}
