package reconcile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReasonsDocumented holds the package to reasons.go's word: every reason is declared
// there (a constant named Reason... in any other file fails), and each one has a row of its
// own in docs/reference/phases-reasons-events.md, so that a user who meets it can look it up.
func TestReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "reference", "phases-reasons-events.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{} // constant: value
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") {
						continue
					}
					if file != "reasons.go" {
						t.Errorf("%s: reason %s is declared outside reasons.go", fset.Position(name.Pos()), name.Name)
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: reason %s is not a string literal", fset.Position(name.Pos()), name.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					reasons[name.Name] = v
				}
			}
		}
	}
	if len(reasons) == 0 {
		t.Fatal("no reasons found in reasons.go")
	}
	for name, v := range reasons {
		// A table cell of its own: "| ServerReady |".
		if !strings.Contains(string(doc), "| "+v+" |") {
			t.Errorf("reason %s (%s) has no row in docs/reference/phases-reasons-events.md", v, name)
		}
	}
}
