package reconcile

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/txtar"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// BenchmarkDecide measures Policy.Decide alone, on views of VMs as the informer caches them.
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

// BenchmarkViewDecide is the CPU side of a reconcile that finds nothing to do: a view of the
// cached VM, its spec and status read, the decision.
func BenchmarkViewDecide(b *testing.B) {
	o, srv, fields := benchCached(b, "active-steady")
	b.ReportAllocs()
	for b.Loop() {
		if p := DefaultPolicy.Decide(o.View(fields), srv, now); !p.Empty() {
			b.Fatal("active-steady asks for something")
		}
	}
}

// benchCase is a golden case's VM as a reconcile sees it, and its server.
func benchCase(b *testing.B, name string) (schema.VirtualMachine, *backend.Server) {
	o, srv, fields := benchCached(b, name)
	return o.View(fields), srv
}

// benchCached reads testdata/decide/<name>.txtar as TestDecideGolden does, and compacts the
// VM as the informer does.
func benchCached(b *testing.B, name string) (*schema.Object, *backend.Server, schema.Fields) {
	b.Helper()
	ar, err := txtar.ParseFile(filepath.Join("..", "testdata", "decide", name+".txtar"))
	if err != nil {
		b.Fatal(err)
	}
	fields, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		b.Fatal(err)
	}
	var o *schema.Object
	var srv *backend.Server
	for _, f := range ar.Files {
		switch f.Name {
		case "vm.yaml":
			raw, err := sigsyaml.YAMLToJSON(f.Data)
			if err != nil {
				b.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				b.Fatal(err)
			}
			if o, err = schema.Compact(u); err != nil {
				b.Fatal(err)
			}
		case "server.yaml":
			if srv, err = memory.ParseServer(f.Data, now); err != nil {
				b.Fatal(err)
			}
		}
	}
	return o, srv, fields
}
