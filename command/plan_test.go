package command

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/internal/golden"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"

	"github.com/urfave/cli/v2"
	"golang.org/x/tools/txtar"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

func TestPlanConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":            {},
		"a time":              {args: []string{"--now", "2026-06-01T12:00:00Z"}},
		"an api version":      {args: []string{"--api-version", "compute.example.org/v1"}},
		"now":                 {[]string{"--now", "yesterday"}, "--now", `--now "yesterday": want a time such as 2026-06-01T12:00:00Z`},
		"server image":        {[]string{"--server-image", ""}, "--server-image", "--server-image must not be empty"},
		"stalled after":       {[]string{"--stalled-after", "-1s"}, "--stalled-after", "--stalled-after must not be negative, got -1s"},
		"resize":              {[]string{"--resize", "in_place"}, "--resize", `--resize "in_place": want in-place, replace or manual`},
		"restart backoff":     {[]string{"--restart-backoff", "-1s"}, "--restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"max restart backoff": {[]string{"--max-restart-backoff", "1s"}, "--max-restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"backoff past a year": {[]string{"--max-restart-backoff", "2000000h"}, "--max-restart-backoff", "--max-restart-backoff must be at most 8760h0m0s, got 2000000h0m0s"},
		"api version":         {[]string{"--api-version", "v1"}, "--api-version", `--api-version "v1": want group/version, such as cloudnative.czs/v1alpha1`},
		"ephemeral":           {args: []string{"--root-disk", "ephemeral"}},
		"eviction strategy":   {[]string{"--eviction-strategy", "Migrate"}, "--eviction-strategy", `--eviction-strategy "Migrate": want None, Replace or Block`},
		"root disk":           {[]string{"--root-disk", "pvc"}, "--root-disk", `--root-disk "pvc": want claim or ephemeral`},
		"disk when ephemeral": {args: []string{"--root-disk", "ephemeral", "--disk", "d.yaml"}},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &planConfig{}
		parseFlags(t, planCommand(c), args...)
		return c.Validate()
	})
}

// TestPlanGolden runs `vm-controller plan` on each testdata/plan/<case>.txtar and compares
// what it prints with <case>.golden. A case holds the command's arguments (args, in which
// $DIR is where the case's other files are written and $ROOT the repository), optionally its
// stdin, and the files the arguments name. A file NAME.patch.yaml is written as NAME.yaml:
// testdata/plan/NAME.base.yaml with that JSON merge patch applied (caseFile), so that a case
// shows only what sets it apart; a case whose point is the raw input holds it whole. A failing
// command's golden file holds its exit code and its stderr, which must be one line.
func TestPlanGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "plan", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no plan cases found: %v", err)
	}
	root, err := filepath.Abs("..") // the repository's
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
					name, data := caseFile(t, file, f)
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
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
			golden.Check(t, strings.TrimSuffix(file, ".txtar")+".golden", []byte(got))
		})
	}
}

// caseFile is the name and content of the file a plan case's section f is written as: the
// section itself, or for NAME.patch.yaml the file NAME.yaml, which is testdata/plan/NAME.base.yaml
// with the section applied as a JSON merge patch (RFC 7386), written as JSON. A duplicate key
// in the base or the patch is an error, not a key silently lost.
func caseFile(tb testing.TB, file string, f txtar.File) (string, []byte) {
	tb.Helper()
	name, ok := strings.CutSuffix(f.Name, ".patch.yaml")
	if !ok {
		return f.Name, f.Data
	}
	baseFile := filepath.Join(filepath.Dir(file), name+".base.yaml")
	base, err := os.ReadFile(baseFile)
	if err != nil {
		tb.Fatalf("%s: %s needs a base: %v", file, f.Name, err)
	}
	baseJSON, err := mappingJSON(base)
	if err != nil {
		tb.Fatalf("%s: %v", baseFile, err)
	}
	patch, err := mappingJSON(f.Data)
	if err != nil {
		tb.Fatalf("%s: %s: %v", file, f.Name, err)
	}
	merged, err := jsonpatch.MergePatch(baseJSON, patch)
	if err != nil {
		tb.Fatalf("%s: %s: %v", file, f.Name, err)
	}
	return name + ".yaml", merged
}

// mappingJSON turns a YAML mapping into JSON, as the decide and schema tests read their cases:
// YAMLToJSONStrict refuses a key given twice, which the JSON would otherwise hold only once.
func mappingJSON(data []byte) ([]byte, error) {
	j, err := sigsyaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("want a YAML mapping: %s", oneLine(err))
	}
	if !bytes.HasPrefix(j, []byte("{")) {
		return nil, fmt.Errorf("want a YAML mapping, got %s", j)
	}
	return j, nil
}

// TestMappingJSON: a plan case's base or patch written with a key twice is refused, so that no
// case tests the last of two blocks while its author meant both; so is anything but a mapping.
func TestMappingJSON(t *testing.T) {
	for in, want := range map[string]string{
		"metadata:\n  name: a\nspec:\n  action: active\n": `{"metadata":{"name":"a"},"spec":{"action":"active"}}`,
		"metadata:\n  name: a\nmetadata:\n  uid: b\n":     `key "metadata" already set`,
		"spec:\n  action: active\n  action: inactive\n":   `key "action" already set`,
		"- a\n":  "want a YAML mapping",
		"":       "want a YAML mapping",
		"a: [\n": "want a YAML mapping",
	} {
		got, err := mappingJSON([]byte(in))
		switch {
		case err != nil && !strings.Contains(err.Error(), want):
			t.Errorf("%q: error %v, want %q", in, err, want)
		case err == nil && string(got) != want:
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

// runPlan runs the plan command in-process and renders what a user would see: stdout, and
// for a failure the exit code and stderr as main prints them.
func runPlan(t *testing.T, args []string, stdin []byte) string {
	t.Helper()
	var stdout bytes.Buffer
	a := App("")
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

// FuzzPlan: whatever the input, plan decodes it or refuses it with an error, and a VM it
// accepts gets a plan, with or without a server; nothing panics.
func FuzzPlan(f *testing.F) {
	for _, file := range []string{"../examples/test-vm.yaml", "../testdata/machines/machine.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion":"cloudnative.czs/v1beta1","metadata":{"name":"x","deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["cloudnative.czs/server-cleanup"]},"spec":{"image":7}}`))
	f.Add([]byte("apiVersion: cloudnative.czs/v1alpha1\nmetadata: {name: x}\nspec: {action: [], resource: {cpu: .5e-3, memory: 1Ei, rootDisk: -0}}\nstatus: {conditions: {a: 1}, server: 5}\n"))
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	srv := &backend.Server{Name: "x-server", ID: "1", State: backend.StateFailed, Since: now.Add(-time.Hour)}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, gv, err := decodeVM(data)
		if err != nil {
			return
		}
		fields, err := schema.ForVersion(gv)
		if err != nil {
			return
		}
		vm, err := schema.Parse(raw, fields)
		if err != nil {
			return
		}
		for _, s := range []*backend.Server{nil, srv} {
			if _, err := makePlan(decision.DefaultPolicy, vm, s, nil, nil, now); err != nil {
				t.Errorf("plan: %v", err)
			}
		}
	})
}

// planDoc is the guide whose plan examples TestPlanDoc runs.
var planDoc = filepath.Join("docs", "plan-and-check.md")

// TestPlanDoc runs the examples of docs/plan-and-check.md and fails when one shows another
// output than the command prints, so the guide cannot drift from the binary. An example is a
// ```console block of commands, each a line "$ COMMAND" followed by its output: `vm-controller
// plan ARGS`, run in-process from the repository's root, or `cat FILE`, a file of the
// repository. Every other block that names `vm-controller plan` is an error: it would not be
// checked. With -update the test rewrites the outputs in the guide.
func TestPlanDoc(t *testing.T) {
	var got string
	var n int
	// The guide's commands name files as a reader types them, from the repository's root.
	t.Run("from the root", func(t *testing.T) {
		t.Chdir("..")
		doc, err := os.ReadFile(planDoc)
		if err != nil {
			t.Fatal(err)
		}
		got, n = renderPlanDoc(t, string(doc))
	})
	if n == 0 {
		t.Fatalf("%s: no ```console block runs vm-controller plan", planDoc)
	}
	golden.Check(t, filepath.Join("..", planDoc), []byte(got))
}

// renderPlanDoc is the guide with each console block's outputs replaced by what its commands
// print, and the number of plan commands it ran.
func renderPlanDoc(t *testing.T, doc string) (string, int) {
	t.Helper()
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	plans := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		fence := strings.TrimRight(line, "\n")
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		// The block's body: up to the closing fence.
		end := i + 1
		for end < len(lines) && strings.TrimRight(lines[end], "\n") != "```" {
			end++
		}
		if end == len(lines) {
			t.Fatalf("%s:%d: the block is not closed", planDoc, i+1)
		}
		body := lines[i+1 : end]
		if fence != "```console" {
			if strings.Contains(strings.Join(body, ""), "vm-controller plan") {
				t.Errorf("%s:%d: a %s block runs vm-controller plan: make it a ```console block, which TestPlanDoc checks", planDoc, i+1, fence)
			}
			for _, l := range body {
				out.WriteString(l)
			}
		} else {
			for j, l := range body {
				cmd, ok := strings.CutPrefix(strings.TrimRight(l, "\n"), "$ ")
				if !ok {
					if j == 0 {
						t.Errorf("%s:%d: a console block starts with a command, \"$ ...\"", planDoc, i+2)
					}
					continue // the output, rendered anew
				}
				out.WriteString(l)
				text, isPlan := docCommand(t, fmt.Sprintf("%s:%d", planDoc, i+2+j), cmd)
				out.WriteString(text)
				if isPlan {
					plans++
				}
			}
		}
		out.WriteString(lines[end])
		i = end
	}
	return out.String(), plans
}

// docCommand runs one command of the guide and returns what it prints.
func docCommand(t *testing.T, where, cmd string) (output string, isPlan bool) {
	t.Helper()
	args := strings.Fields(cmd)
	for _, a := range args {
		if strings.Contains(a, "/") && !filepath.IsLocal(a) {
			t.Errorf("%s: %s is outside the repository: an example reads only the repository's files", where, a)
		}
	}
	switch {
	case len(args) >= 2 && args[0] == "vm-controller" && args[1] == "plan":
		return runPlan(t, args[2:], nil), true
	case len(args) == 2 && args[0] == "cat":
		data, err := os.ReadFile(args[1])
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return "", false
		}
		if !bytes.HasSuffix(data, []byte("\n")) {
			t.Errorf("%s: %s does not end in a newline", where, args[1])
		}
		return string(data), false
	}
	t.Errorf("%s: %q: a console block runs only vm-controller plan and cat FILE", where, cmd)
	return "", false
}

// TestPlanIgnoresRunAPIVersion: VMC_API_VERSION set for the controller (run's version, which
// the API server converts every VM to) does not make plan read a VM file as that version: the
// file's own apiVersion decides, as without it. plan's --api-version on the command line
// still says which version the file must be of.
func TestPlanIgnoresRunAPIVersion(t *testing.T) {
	args := []string{"--now", "2026-06-01T12:00:00Z", filepath.Join("..", "examples", "test-vm.yaml")} // a v1alpha1 VM
	t.Setenv("VMC_API_VERSION", "")
	os.Unsetenv("VMC_API_VERSION")
	want := runPlan(t, args, nil)
	if strings.Contains(want, "\nexit ") || strings.HasPrefix(want, "exit ") {
		t.Fatalf("plan of %s: %s", args[len(args)-1], want)
	}
	t.Setenv("VMC_API_VERSION", "cloudnative.czs/v1beta1")
	if got := runPlan(t, args, nil); got != want {
		t.Errorf("with VMC_API_VERSION=cloudnative.czs/v1beta1, plan printed\n%s\nwant, as without it,\n%s", got, want)
	}
	flagged := append([]string{"--api-version", "cloudnative.czs/v1beta1"}, args...)
	if got := runPlan(t, flagged, nil); !strings.Contains(got, "not --api-version cloudnative.czs/v1beta1") {
		t.Errorf("plan %q: %s, want the VM refused as of another version", flagged, got)
	}
}
