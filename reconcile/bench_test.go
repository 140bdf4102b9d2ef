package reconcile

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/txtar"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// benchCases are golden cases of the decisions a controller makes most: a new VM, the
// no-op on an Active VM (every resync-free reconcile at scale), a server turning ready, a
// spec change, a failed server in backoff, an invalid spec and a deletion.
var benchCases = []string{
	"create-new",
	"active-steady",
	"ready",
	"cpu-changed",
	"failed-backoff-wait",
	"invalid-cpu-malformed",
	"delete-with-server",
}

// BenchmarkDecide measures Policy.Decide alone, on views already decoded.
func BenchmarkDecide(b *testing.B) {
	for _, name := range benchCases {
		vm, srv := benchCase(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				DefaultPolicy.Decide(vm, srv, now)
			}
		})
	}
}

// BenchmarkDecodeDecide is the CPU side of a reconcile that finds nothing to do: decode the
// cached VM, read spec and status, decide.
func BenchmarkDecodeDecide(b *testing.B) {
	vm, srv := benchCase(b, "active-steady")
	raw, fields := vm.JSON(), vm.Fields()
	b.ReportAllocs()
	for b.Loop() {
		v, err := schema.Parse(raw, fields)
		if err != nil {
			b.Fatal(err)
		}
		if p := DefaultPolicy.Decide(v, srv, now); !p.Empty() {
			b.Fatal("active-steady asks for something")
		}
	}
}

// benchCase reads testdata/decide/<name>.txtar as TestDecideGolden does.
func benchCase(b *testing.B, name string) (schema.VirtualMachine, *backend.Server) {
	b.Helper()
	ar, err := txtar.ParseFile(filepath.Join("..", "testdata", "decide", name+".txtar"))
	if err != nil {
		b.Fatal(err)
	}
	fields, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		b.Fatal(err)
	}
	var vm schema.VirtualMachine
	var srv *backend.Server
	for _, f := range ar.Files {
		switch f.Name {
		case "vm.yaml":
			raw, err := sigsyaml.YAMLToJSON(f.Data)
			if err != nil {
				b.Fatal(err)
			}
			if vm, err = schema.Parse(raw, fields); err != nil {
				b.Fatal(err)
			}
		case "server.yaml":
			if srv, err = memory.ParseServer(f.Data, now); err != nil {
				b.Fatal(err)
			}
		}
	}
	return vm, srv
}
