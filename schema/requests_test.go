package schema

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notRequests are the Annotation constants of this package that ask for nothing by
// themselves, each with why.
var notRequests = map[string]string{
	"AnnotationStopGracePeriod": "a parameter of the stop request, written with it",
}

// TestRequestAnnotations: every Annotation constant of the package is a request
// (RequestAnnotations) or named in notRequests, so that a new one cannot be left out of what
// the loop counts as new work without a word.
func TestRequestAnnotations(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	values := map[string]string{} // each Annotation constant's value, by name
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Annotation") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						values[n.Name] = v
					}
				}
			}
		}
	}
	if len(values) == 0 {
		t.Fatal("no Annotation constant found")
	}
	for name, v := range values {
		if _, ok := notRequests[name]; ok == slices.Contains(RequestAnnotations, v) {
			t.Errorf("%s (%s): add it to RequestAnnotations, or to notRequests with why it asks for nothing", name, v)
		}
	}
}

// TestSameRequests: two views differ in their requests when a request annotation differs,
// not when another annotation does.
func TestSameRequests(t *testing.T) {
	f := builtin(t, "v1alpha1")
	view := func(annotations string) VirtualMachine {
		vm, err := Parse([]byte(`{"metadata":{"name":"vm"`+annotations+`}}`), f)
		if err != nil {
			t.Fatal(err)
		}
		return vm
	}
	none := view(``)
	for _, a := range RequestAnnotations {
		if with := view(`,"annotations":{"` + a + `":"t1"}`); with.SameRequests(none) || none.SameRequests(with) {
			t.Errorf("%s set: the same requests as none", a)
		}
	}
	if other := view(`,"annotations":{"example.com/note":"x","` + AnnotationStopGracePeriod + `":"5"}`); !other.SameRequests(none) {
		t.Error("annotations that ask for nothing: not the same requests")
	}
}
