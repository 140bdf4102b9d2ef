package decision_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReasonsDocumented holds reconcile/ to reasons.go's word: every reason is declared there
// (a constant named Reason... in any other file of reconcile/ or its packages fails, the
// loop's and the cache's included), and each one has a row of its own in
// docs/reference/phases-reasons-events.md, so that a user who meets it can look it up.
func TestReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", "phases-reasons-events.md"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string // relative to reconcile/
	err = fs.WalkDir(os.DirFS(".."), ".", func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{} // constant: value
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, filepath.Join("..", file), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			var values []ast.Expr // in a group, a spec without values repeats the last ones
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if len(vs.Values) > 0 {
					values = vs.Values
				}
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") {
						continue
					}
					if file != "decision/reasons.go" {
						t.Errorf("%s: reason %s is declared outside decision/reasons.go", fset.Position(name.Pos()), name.Name)
					}
					var lit *ast.BasicLit
					if i < len(values) {
						lit, _ = values[i].(*ast.BasicLit)
					}
					if lit == nil || lit.Kind != token.STRING {
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
	documented := docReasons(t, string(doc))
	for name, v := range reasons {
		if !documented[v] {
			t.Errorf("reason %s (%s) has no row in docs/reference/phases-reasons-events.md", v, name)
		}
	}
}

// docReasons is the set of words in the reason columns of a Markdown document's tables (a
// column whose header is "reason" or ends in " reason", like "Event reason"), so that a
// reason counts as documented only in a row of its own, not where the same word stands in
// another column (UsageReported is a condition type as well as a reason).
func docReasons(t *testing.T, doc string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	var cols []int // the reason columns of the table being read; nil outside one
	var header []string
	for line := range strings.Lines(doc) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			cols, header = nil, nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
			for i, h := range cells {
				if h == "reason" || strings.HasSuffix(h, " reason") {
					cols = append(cols, i)
				}
			}
		case strings.Trim(strings.Join(cells, ""), "-: ") == "":
			// the line under the header
		default:
			if len(cells) != len(header) {
				t.Errorf("table row has %d cells, its header %d: %s", len(cells), len(header), line)
			}
			for _, i := range cols {
				if i < len(cells) {
					out[cells[i]] = true
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no reason column found in docs/reference/phases-reasons-events.md")
	}
	return out
}
