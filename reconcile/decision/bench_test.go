package decision_test

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
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

// benchPolicy decides the bench cases as their golden tests do: they are cases of servers
// with root disks of their own (--root-disk ephemeral).
var benchPolicy = func() decision.Policy {
	p := decision.DefaultPolicy
	p.RootDisk = decision.RootDiskEphemeral
	return p
}()

// BenchmarkDecide measures Policy.Decide alone, on views of VMs as the informer caches them.
func BenchmarkDecide(b *testing.B) {
	for _, name := range benchCases {
		o, srv, fields := benchCached(b, name)
		vm := view(b, o, fields)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
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
		if p := benchPolicy.Decide(decision.Input{VM: view(b, o, fields), Server: srv, Now: now}); !p.Empty() {
			b.Fatal("active-steady asks for something")
		}
	}
}

// benchCached reads testdata/decide/<name>.txtar as TestDecideGolden does, and compacts the
// VM as the informer does.
func benchCached(b *testing.B, name string) (*vmcache.Object, *backend.Server, schema.Fields) {
	b.Helper()
	raw, server := decidecase.Input(b, filepath.Join(cases, name+".txtar"))
	fields := decidecase.Fields(b)
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		b.Fatal(err)
	}
	o, err := vmcache.Compact(u, fields)
	if err != nil {
		b.Fatal(err)
	}
	var srv *backend.Server
	if server != nil {
		if srv, err = memory.ParseServer(server, now); err != nil {
			b.Fatal(err)
		}
	}
	return o, srv, fields
}

// view is o's view in layout f; the benchmark fails when o does not unpack.
func view(b *testing.B, o *vmcache.Object, f schema.Fields) schema.VirtualMachine {
	b.Helper()
	vm, err := o.View(f)
	if err != nil {
		b.Fatal(err)
	}
	return vm
}
