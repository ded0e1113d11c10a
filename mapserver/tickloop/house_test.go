package tickloop_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestHouse_NoTypeAssertions: the loop asks a game for nothing beyond gameapi.Game,
// and nothing it holds is told apart at run time: no type assertion and no type switch
// in its code (its tests aside), so what the loop does never depends on a capability
// a value happens to have.
func TestHouse_NoTypeAssertions(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n.(type) {
			case *ast.TypeAssertExpr, *ast.TypeSwitchStmt:
				t.Errorf("%s: a type assertion in the loop", fset.Position(n.Pos()))
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files: the rule checks nothing", checked)
	}
}
