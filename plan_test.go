package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestPlanGolden runs `vm-controller plan` on each testdata/plan/<case>.txtar and compares
// what it prints with <case>.golden. A case holds the command's arguments (args, in which
// $DIR is where the case's other files are written and $ROOT the repository), optionally its
// stdin, and the files the arguments name. A failing command's golden file holds its exit
// code and its stderr, which must be one line.
func TestPlanGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "plan", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no plan cases found: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			var args []string
			var stdin []byte
			for _, f := range ar.Files {
				switch f.Name {
				case "args":
					line := strings.NewReplacer("$DIR", dir, "$ROOT", root).Replace(string(f.Data))
					args = strings.Fields(line)
				case "stdin":
					stdin = f.Data
				default:
					if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := runPlan(t, args, stdin)
			// Paths in messages differ per run; the golden file holds them as $DIR and $ROOT.
			got = strings.NewReplacer(dir, "$DIR", root, "$ROOT").Replace(got)
			if again := strings.NewReplacer(dir, "$DIR", root, "$ROOT").Replace(runPlan(t, args, stdin)); again != got {
				t.Fatalf("plan is not deterministic:\n%s\nthen\n%s", got, again)
			}
			golden := strings.TrimSuffix(file, ".txtar") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden file (run go test . -run TestPlanGolden -update to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run go test . -run TestPlanGolden -update if the change is intended)\n--- want\n%s\n--- got\n%s", golden, want, got)
			}
		})
	}
}

// runPlan runs the plan command in-process and renders what a user would see: stdout, and
// for a failure the exit code and stderr as main prints them.
func runPlan(t *testing.T, args []string, stdin []byte) string {
	t.Helper()
	var stdout bytes.Buffer
	a := app()
	a.Writer, a.ErrWriter, a.Reader = &stdout, &stdout, bytes.NewReader(stdin)
	err := a.Run(append([]string{"vm-controller", "plan"}, args...))
	if err == nil {
		return stdout.String()
	}
	// As main: the error on stderr, the exit code of a cli.ExitCoder, else 1.
	code := 1
	var ee cli.ExitCoder
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	stderr := fmt.Sprintf("vm-controller: %v\n", err)
	if strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr is not one line: %q", stderr)
	}
	if code == 0 {
		t.Errorf("error %v with exit code 0", err)
	}
	return fmt.Sprintf("%sexit %d\n%s", stdout.String(), code, stderr)
}
