package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// architectureDoc is the map of the house.
const architectureDoc = "docs/architecture.md"

// TestArchitectureMap holds docs/architecture.md to the repository: every directory that
// holds Go code (of any module of the repository, test-only packages included) has a row in
// the map's package table, and every row names a directory that exists. A package added
// without a line in the map, or moved without changing it, fails here, so the map a newcomer
// reads is the house as it is.
func TestArchitectureMap(t *testing.T) {
	doc, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	mapped := mappedPackages(t, string(doc))
	if len(mapped) == 0 {
		t.Fatalf("%s: no package table found under \"## The map\"", architectureDoc)
	}
	have := goDirs(t)
	for dir := range have {
		if !mapped[dir] {
			t.Errorf("%s: the package in %s/ has no row in the map; add one that says what it owns", architectureDoc, dir)
		}
	}
	for dir := range mapped {
		if !have[dir] {
			t.Errorf("%s: the map names %s/, which holds no Go code", architectureDoc, dir)
		}
	}
}

// mappedPackages reads the first table under "## The map": the directories its first column
// names in backquotes with a trailing slash, and "." for the row of main.go.
func mappedPackages(t *testing.T, doc string) map[string]bool {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## The map\n")
	if !ok {
		t.Fatalf("%s has no section \"## The map\"", architectureDoc)
	}
	dirRef := regexp.MustCompile("`([a-z0-9_./-]+)/`")
	out := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the end of the first table
			}
			continue
		}
		inTable = true
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		first := cells[1]
		if strings.Contains(first, "`main.go`") {
			out["."] = true
		}
		for _, m := range dirRef.FindAllStringSubmatch(first, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// goDirs lists, relative to the repository's root, every directory with a .go file, skipping
// testdata (which Go ignores), hidden directories (.cache holds the local cluster's state) and
// the image build's output under bin/.
func goDirs(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || path == "bin" || path == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			out[filepath.ToSlash(filepath.Dir(path))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEveryTestPackageTakesUpdate: `go test ./... -update` rewrites the golden files, and
// passes -update to every test binary of the module; a binary that does not define the flag
// refuses the whole run. So every package of this module with tests imports internal/golden
// in one of them (the packages without golden files, blank), which registers it.
func TestEveryTestPackageTakesUpdate(t *testing.T) {
	const golden = `"github.com/cloudnative-czs/vm-controller/internal/golden"`
	for dir := range goDirs(t) {
		if ownModule(dir) || dir == "internal/golden" {
			continue
		}
		tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		tagged, imports := true, false
		for _, f := range tests {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// A package whose tests all need the e2e tag is not built by go test ./...
			tagged = tagged && strings.HasPrefix(string(src), "//go:build e2e\n")
			imports = imports || strings.Contains(string(src), golden)
		}
		if len(tests) > 0 && !tagged && !imports {
			t.Errorf("%s: no test file imports %s; go test ./... -update would fail there (import it blank)", dir, golden)
		}
	}
}

// ownModule reports whether dir is in a module of its own (a go.mod in it or above it, below
// the root), which go test ./... at the root does not enter.
func ownModule(dir string) bool {
	for d := dir; d != "." && d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return true
		}
	}
	return false
}
