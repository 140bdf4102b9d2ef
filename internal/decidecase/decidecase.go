// Package decidecase reads the golden cases of the decision, testdata/decide/<case>.txtar:
// the case's VM and the server the backend observed, written against one clock (Now) in one
// layout (Fields).
//
// Why a package: the decision's golden and fuzz tests, the VM cache's tests and the loop's
// tests all start from these cases, in three packages; reading them in one place keeps the
// format of a case one, and its checks (a key written twice fails the case) in every test.
package decidecase

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/tools/txtar"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Now is the clock of every case; times in the cases are written relative to it.
var Now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// Files are the cases in dir (testdata/decide, as a path from the test's package), in
// lexical order; none fails the test.
func Files(tb testing.TB, dir string) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden cases in %s: %v", dir, err)
	}
	return files
}

// Fields is the layout the cases are written in: v1alpha1.
func Fields(tb testing.TB) schema.Fields {
	tb.Helper()
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// Read is a case as a decision takes it: a view of its VM, in Fields, and the server the
// backend observed (read as the plan command reads --server), nil when the case has none.
func Read(tb testing.TB, file string) (schema.VirtualMachine, *backend.Server) {
	tb.Helper()
	raw, server := Input(tb, file)
	vm, err := schema.Parse(raw, Fields(tb))
	if err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
	if server == nil {
		return vm, nil
	}
	srv, err := memory.ParseServer(server, Now)
	if err != nil {
		tb.Fatalf("%s: server.yaml: %v", file, err)
	}
	return vm, srv
}

// Disk is the disk the backend observed in a case (its disk.yaml, read as the plan command
// reads --disk), nil when the case has none.
func Disk(tb testing.TB, file string) *backend.Disk {
	tb.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range ar.Files {
		if f.Name != "disk.yaml" {
			continue
		}
		d, err := memory.ParseDisk(f.Data)
		if err != nil {
			tb.Fatalf("%s: disk.yaml: %v", file, err)
		}
		return d
	}
	return nil
}

// Budget is the disruption budget the backend observed in a case (its budget.yaml, read as
// the plan command reads --budget), nil when the case has none.
func Budget(tb testing.TB, file string) *backend.Budget {
	tb.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range ar.Files {
		if f.Name != "budget.yaml" {
			continue
		}
		b, err := memory.ParseBudget(f.Data)
		if err != nil {
			tb.Fatalf("%s: budget.yaml: %v", file, err)
		}
		return b
	}
	return nil
}

// Hosts are the hosts the backend knows in a case (its nodes.yaml: each node's allocatable
// cpu and memory, and its name, labels, taints and cordon where the case needs them, read by
// memory.ParseHosts), nil when the case has none: the backend does not know its hosts.
func Hosts(tb testing.TB, file string) *backend.Hosts {
	tb.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range ar.Files {
		if f.Name != "nodes.yaml" {
			continue
		}
		r, err := memory.ParseHosts(f.Data)
		if err != nil {
			tb.Fatalf("%s: nodes.yaml: %v", file, err)
		}
		return r
	}
	return nil
}

// Gone is the server the backend remembers going while disrupted in a case (its gone.yaml,
// backend.Departures), nil when the case has none.
func Gone(tb testing.TB, file string) *backend.Gone {
	tb.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range ar.Files {
		if f.Name != "gone.yaml" {
			continue
		}
		g, err := memory.ParseGone(f.Data)
		if err != nil {
			tb.Fatalf("%s: gone.yaml: %v", file, err)
		}
		return g
	}
	return nil
}

// Input reads a case: its VM as JSON, which is base.yaml (beside the case) with the case's
// vm.patch.yaml (a JSON merge patch, RFC 7386) applied, or the case's whole vm.yaml where a
// merge patch cannot say it (an explicit null); and its server.yaml, nil when the case has no
// server. A key written twice in one mapping fails the case: converted to JSON the YAML would
// keep only the last, and the case would silently test something else. A policy.yaml section
// is the decision tests' to read, a disk.yaml section Disk's, a budget.yaml Budget's, a
// gone.yaml Gone's, and a nodes.yaml Hosts'.
func Input(tb testing.TB, file string) (vm, server []byte) {
	tb.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range ar.Files {
		switch f.Name {
		case "vm.yaml":
			if vm, err = sigsyaml.YAMLToJSONStrict(f.Data); err != nil {
				tb.Fatalf("%s: vm.yaml: %v", file, err)
			}
		case "vm.patch.yaml":
			base, err := os.ReadFile(filepath.Join(filepath.Dir(file), "base.yaml"))
			if err != nil {
				tb.Fatal(err)
			}
			if vm, err = sigsyaml.YAMLToJSONStrict(base); err != nil {
				tb.Fatalf("base.yaml: %v", err)
			}
			patch, err := sigsyaml.YAMLToJSONStrict(f.Data)
			if err != nil {
				tb.Fatalf("%s: vm.patch.yaml: %v", file, err)
			}
			if vm, err = jsonpatch.MergePatch(vm, patch); err != nil {
				tb.Fatalf("%s: vm.patch.yaml: %v", file, err)
			}
		case "server.yaml":
			server = f.Data
		case "policy.yaml", "disk.yaml", "budget.yaml", "gone.yaml", "nodes.yaml":
		default:
			tb.Fatalf("%s: unknown section %q", file, f.Name)
		}
	}
	if vm == nil {
		tb.Fatalf("%s: no vm.yaml or vm.patch.yaml", file)
	}
	return vm, server
}
