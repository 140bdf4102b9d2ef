package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// recorder is a testing.TB that keeps its failures instead of failing the test that uses it.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper()                   {}
func (r *recorder) Name() string              { return "TestCase/sub" }
func (r *recorder) Errorf(f string, a ...any) { r.errors = append(r.errors, sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) {
	r.errors = append(r.errors, sprintf(f, a...))
	r.fatal = true
}
func (r *recorder) Fatal(a ...any) { r.Fatalf("%v", a...) }

func setUpdate(t *testing.T, v bool) {
	old := *update
	*update = v
	t.Cleanup(func() { *update = old })
}

func TestCheck(t *testing.T) {
	setUpdate(t, false) // as compared, whatever the run's -update: go test ./... -update reaches this package too
	path := filepath.Join(t.TempDir(), "sub", "case.golden")

	// Missing: fails with the command that creates it.
	r := &recorder{TB: t}
	Check(r, path, []byte("a\n"))
	if !r.fatal || !strings.Contains(r.errors[0], "go test ./internal/golden -run '^TestCase$' -update") {
		t.Fatalf("missing golden file: %q", r.errors)
	}

	// -update writes it (and its directory); then the same output passes.
	setUpdate(t, true)
	Check(t, path, []byte("a\nb\nc\n"))
	setUpdate(t, false)
	if data, err := os.ReadFile(path); err != nil || string(data) != "a\nb\nc\n" {
		t.Fatalf("after -update: %q, %v", data, err)
	}
	r = &recorder{TB: t}
	Check(r, path, []byte("a\nb\nc\n"))
	if len(r.errors) != 0 {
		t.Fatalf("same output failed: %q", r.errors)
	}

	// Another output fails with a diff of the lines that differ.
	Check(r, path, []byte("a\nB\nc\n"))
	if len(r.errors) != 1 || r.fatal {
		t.Fatalf("want one error, got %q", r.errors)
	}
	for _, want := range []string{path, "-    2 b\n", "+    2 B\n", "-update"} {
		if !strings.Contains(r.errors[0], want) {
			t.Errorf("error lacks %q:\n%s", want, r.errors[0])
		}
	}
}

func TestCheckSection(t *testing.T) {
	setUpdate(t, false) // as TestCheck
	path := filepath.Join(t.TempDir(), "case.txtar")
	ar := &txtar.Archive{Comment: []byte("a case\n"), Files: []txtar.File{{Name: "input", Data: []byte("in\n")}}}
	if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	CheckSection(r, path, "output", []byte("out\n"))
	if !r.fatal {
		t.Fatalf("a missing section passed: %q", r.errors)
	}

	setUpdate(t, true)
	CheckSection(t, path, "output", []byte("out\n"))
	CheckSection(t, path, "output", []byte("out 2\n")) // rewritten in place, not added twice
	setUpdate(t, false)
	got, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Comment) != "a case\n" || len(got.Files) != 2 || got.Files[0].Name != "input" ||
		got.Files[1].Name != "output" || string(got.Files[1].Data) != "out 2\n" {
		t.Fatalf("archive after -update:\n%s", txtar.Format(got))
	}
	r = &recorder{TB: t}
	CheckSection(r, path, "output", []byte("out 2\n"))
	CheckSection(r, path, "output", []byte("other\n"))
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], `section "output"`) {
		t.Fatalf("want one error about the section, got %q", r.errors)
	}
}

func TestDiff(t *testing.T) {
	for name, tc := range map[string]struct {
		want, got string
		diff      string
	}{
		"same":       {"a\n", "a\n", ""},
		"middle":     {"a\nb\nc\n", "a\nx\nc\n", "--- want (lines 2-2)\n-    2 b\n+++ got (lines 2-2)\n+    2 x\n"},
		"added":      {"a\n", "a\nb\n", "--- want (lines 2-1)\n+++ got (lines 2-2)\n+    2 b\n"},
		"no newline": {"a", "b", "--- want (lines 1-1)\n-    1 a\n+++ got (lines 1-1)\n+    1 b\n"},
	} {
		t.Run(name, func(t *testing.T) {
			if d := Diff(tc.want, tc.got); d != tc.diff {
				t.Errorf("Diff:\n%s\nwant:\n%s", d, tc.diff)
			}
		})
	}
}

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }
