// Package golden compares a test's output with a golden file and rewrites the file when the
// test runs with -update, so that every golden test of the project has the same flag, the same
// failure message (a diff and the command that updates) and the same rules.
//
// Why a package: the update-or-compare loop was written once per package that had golden files,
// each with its own wording of the hint and its own way of showing a difference. A test imports
// this package and calls Check (a whole file) or CheckSection (one section of a txtar archive);
// the -update flag is registered once, here, for every test binary that imports it.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them")

// Update reports whether the test binary runs with -update: golden files are rewritten
// rather than compared. Tests that keep a golden output in a file of their own making (a
// guide's examples, say) write it themselves when it is true.
func Update() bool { return *update }

// Check compares got with the file at path. With -update it writes got to path first
// (creating its directory), so the comparison passes and the file holds the new output for
// review in the diff. A missing file fails with the command that creates it.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file %s (%s creates it): %v", path, Command(t), err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file %s (%s rewrites it if the change is intended)\n%s",
			t.Name(), path, Command(t), Diff(string(want), string(got)))
	}
}

// CheckSection compares got with the section named section of the txtar archive at path.
// With -update it rewrites that section (adding it at the end when missing) and keeps the
// archive's other sections and comment as they are.
func CheckSection(t testing.TB, path, section string, got []byte) {
	t.Helper()
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := -1
	for j, f := range ar.Files {
		if f.Name == section {
			i = j
		}
	}
	if *update {
		if i < 0 {
			ar.Files = append(ar.Files, txtar.File{Name: section})
			i = len(ar.Files) - 1
		}
		ar.Files[i].Data = got
		if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if i < 0 {
		t.Fatalf("%s has no section %q (%s adds it)", path, section, Command(t))
		return
	}
	if want := ar.Files[i].Data; !bytes.Equal(got, want) {
		t.Errorf("%s differs from section %q of %s (%s rewrites it if the change is intended)\n%s",
			t.Name(), section, path, Command(t), Diff(string(want), string(got)))
	}
}

// Command is the go test command that reruns the calling test with -update, from the
// module's root: go test ./PKG -run '^TOP$' -update.
func Command(t testing.TB) string {
	top, _, _ := strings.Cut(t.Name(), "/")
	return fmt.Sprintf("go test %s -run '^%s$' -update", packageDir(), top)
}

// packageDir is the test's package as a path from the module's root ("./reconcile"; "." for
// the root), found from the working directory go test runs the test in.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			rel, err := filepath.Rel(d, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(d) == d {
			return "."
		}
	}
}

// Diff shows how got differs from want, line by line: the lines of each side between the
// first and the last line that differ, with their line numbers. It is meant for a reader of a
// failed test, not for a patch tool.
func Diff(want, got string) string {
	if want == got {
		return ""
	}
	w, g := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	first := 0
	for first < len(w) && first < len(g) && w[first] == g[first] {
		first++
	}
	lastW, lastG := len(w), len(g)
	for lastW > first && lastG > first && w[lastW-1] == g[lastG-1] {
		lastW--
		lastG--
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- want (lines %d-%d)\n", first+1, lastW)
	for i := first; i < lastW; i++ {
		fmt.Fprintf(&b, "-%5d %s", i+1, withNewline(w[i]))
	}
	fmt.Fprintf(&b, "+++ got (lines %d-%d)\n", first+1, lastG)
	for i := first; i < lastG; i++ {
		fmt.Fprintf(&b, "+%5d %s", i+1, withNewline(g[i]))
	}
	return b.String()
}

func withNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
