package reconcile

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

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
		if p := DefaultPolicy.Decide(mustView(b, o, fields), srv, now); !p.Empty() {
			b.Fatal("active-steady asks for something")
		}
	}
}

// benchCase is a golden case's VM as a reconcile sees it, and its server.
func benchCase(b *testing.B, name string) (schema.VirtualMachine, *backend.Server) {
	o, srv, fields := benchCached(b, name)
	return mustView(b, o, fields), srv
}

// benchCached reads testdata/decide/<name>.txtar as TestDecideGolden does, and compacts the
// VM as the informer does.
func benchCached(b *testing.B, name string) (*Object, *backend.Server, schema.Fields) {
	b.Helper()
	raw, server := caseInput(b, filepath.Join("..", "testdata", "decide", name+".txtar"))
	fields, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		b.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		b.Fatal(err)
	}
	o, err := Compact(u, v1alpha1(b))
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

// activeVM is an Active VM as the API server sends it, managedFields left out (Compact drops
// them anyway): what the informer compacts, and every reconcile and usage sample reads. The
// schema package's benchmarks read the same file.
var activeVM = func() []byte {
	b, err := os.ReadFile("../testdata/bench/active-vm.json")
	if err != nil {
		panic(err)
	}
	return b
}()

func activeUnstructured(b *testing.B) *unstructured.Unstructured {
	b.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(activeVM); err != nil {
		b.Fatal(err)
	}
	return u
}

func v1alpha1(tb testing.TB) schema.Fields {
	tb.Helper()
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// BenchmarkCompact is what the informer's transform costs per stored object: one
// json.Marshal of the decoded object, cut down to what a view reads.
func BenchmarkCompact(b *testing.B) {
	u := activeUnstructured(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compact(u, v1alpha1(b)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkViewSpecStatus is what a reconcile reads of a cached VM before it decides: the
// view, the validated spec and the current status.
func BenchmarkViewSpecStatus(b *testing.B) {
	o, err := Compact(activeUnstructured(b), v1alpha1(b))
	if err != nil {
		b.Fatal(err)
	}
	f := v1alpha1(b)
	b.ReportAllocs()
	for b.Loop() {
		vm := mustView(b, o, f)
		if _, errs := vm.Spec(); len(errs) > 0 {
			b.Fatal(errs)
		}
		if vm.Status().Phase != schema.PhaseActive {
			b.Fatal("not Active")
		}
	}
}

// BenchmarkPhase is the per-VM cost of the vmcontroller_vms gauge at each scrape.
func BenchmarkPhase(b *testing.B) {
	o, err := Compact(activeUnstructured(b), v1alpha1(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if o.Phase() != schema.PhaseActive {
			b.Fatal("not Active")
		}
	}
}

// wireVM is activeVM as the API server sends it in a watch event: with the managedFields of
// its three writers, which the cached form drops.
var wireVM = func() []byte {
	var m map[string]any
	if err := json.Unmarshal(activeVM, &m); err != nil {
		panic(err)
	}
	md := m["metadata"].(map[string]any)
	md["managedFields"] = []any{
		map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "cloudnative.czs/v1alpha1",
			"time": "2026-11-21T20:00:00Z", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:spec": map[string]any{".": map[string]any{}, "f:action": map[string]any{},
				"f:resource": map[string]any{".": map[string]any{}, "f:cpu": map[string]any{}, "f:memory": map[string]any{}, "f:rootDisk": map[string]any{}}}}},
		map[string]any{"manager": "vm-controller", "operation": "Update", "apiVersion": "cloudnative.czs/v1alpha1",
			"time": "2026-11-21T20:00:01Z", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:finalizers": map[string]any{".": map[string]any{}, "v:\"cloudnative.czs/server-cleanup\"": map[string]any{}}}}},
		map[string]any{"manager": "vm-controller", "operation": "Update", "apiVersion": "cloudnative.czs/v1alpha1",
			"time": "2026-11-21T20:00:03Z", "fieldsType": "FieldsV1", "subresource": "status",
			"fieldsV1": map[string]any{"f:status": map[string]any{".": map[string]any{}, "f:phase": map[string]any{}, "f:reason": map[string]any{},
				"f:message": map[string]any{}, "f:server": map[string]any{}, "f:conditions": map[string]any{}}}},
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}()

// repeat reads the same bytes again and again: a watch stream that never ends.
type repeat struct {
	b   []byte
	off int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.off:])
	r.off = (r.off + n) % len(r.b)
	return n, nil
}

// BenchmarkDecodeVM is what one VM costs from the bytes of a watch event to its cached form.
// unstructured is the path before: client-go's decode of the event and of the object into
// maps, then Compact. wire is the VM ListerWatcher's decoder, which reads the bytes in place.
func BenchmarkDecodeVM(b *testing.B) {
	event := []byte(`{"type":"MODIFIED","object":` + string(wireVM) + "}\n")
	b.Run("unstructured", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(event)))
		for b.Loop() {
			var ev metav1.WatchEvent
			if err := json.Unmarshal(event, &ev); err != nil {
				b.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(ev.Object.Raw); err != nil {
				b.Fatal(err)
			}
			if _, err := Compact(u, v1alpha1(b)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wire", func(b *testing.B) {
		d := newWatchDecoder(io.NopCloser(&repeat{b: event}), v1alpha1(b))
		b.ReportAllocs()
		b.SetBytes(int64(len(event)))
		for b.Loop() {
			if _, _, err := d.Decode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReconcileNoop is one pass through the queue of a VM with nothing to do: take the
// key, read the cache and the server, decide, log and observe. It is what every resync and
// every echo of a write cost before echoes were dropped.
func BenchmarkReconcileNoop(b *testing.B) {
	w := newWorld(b, "inactive-steady")
	c, r := newController(b, w, UsagePolicy{})
	ctx := start(b, c)
	c.processNextItem(ctx) // the informer's first add
	b.ReportAllocs()
	for b.Loop() {
		c.queue.Add(testVM)
		c.processNextItem(ctx)
	}
	if got := r.last(); got != "success" {
		b.Fatalf("reconcile: %s", got)
	}
}
