package decidecase

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// TestCases: every case of testdata/decide reads as a VM in the cases' layout, and a case with
// a server.yaml as that server.
func TestCases(t *testing.T) {
	files := Files(t, filepath.Join("..", "..", "testdata", "decide"))
	files = append(files, Files(t, filepath.Join("..", "..", "testdata", "decide", "claim"))...)
	for _, file := range files {
		raw, server := Input(t, file)
		if !json.Valid(raw) {
			t.Fatalf("%s: not JSON: %s", file, raw)
		}
		vm, srv := Read(t, file)
		if vm.Name() != "test-vm" || (srv == nil) != (server == nil) {
			t.Errorf("%s: VM %q, server %+v", file, vm.Name(), srv)
		}
		Disk(t, file)
		Gone(t, file)
		Hosts(t, file)
	}
}

// fatalTB records the first Fatal of a helper run under it and ends the goroutine there, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestInputDuplicateKey: a case whose VM writes a key twice is refused, so that no case
// tests the last of two blocks while its author meant both.
func TestInputDuplicateKey(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile(filepath.Join("..", "..", "testdata", "decide", "base.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), base, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		section, body, want string
	}{
		"patch, duplicate": {"vm.patch.yaml", "metadata:\n  generation: 2\nmetadata:\n  labels: {a: b}\n", `key "metadata" already set`},
		"whole, duplicate": {"vm.yaml", string(base) + "spec:\n  action: inactive\n", `key "spec" already set`},
		"patch, one block": {"vm.patch.yaml", "metadata:\n  generation: 2\n  labels: {a: b}\n", ""},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, ", ", "-")+".txtar")
			ar := &txtar.Archive{Files: []txtar.File{{Name: tc.section, Data: []byte(tc.body)}}}
			if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
				t.Fatal(err)
			}
			tb := &fatalTB{TB: t}
			var vm []byte
			done := make(chan struct{})
			go func() {
				defer close(done)
				vm, _ = Input(tb, file)
			}()
			<-done
			switch {
			case tc.want == "" && tb.msg != "":
				t.Fatalf("Input failed: %s", tb.msg)
			case tc.want == "" && !strings.Contains(string(vm), `"generation":2`):
				t.Fatalf("the patch was not applied: %s", vm)
			case tc.want != "" && !strings.Contains(tb.msg, tc.want):
				t.Fatalf("Input failed with %q, want it to name %q (vm: %s)", tb.msg, tc.want, vm)
			}
		})
	}
}
