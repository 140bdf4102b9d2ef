package vmcache

import (
	"encoding/json"
	"io"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache/vmcachetest"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// activeVM is an Active VM as the API server sends it, managedFields left out (Compact drops
// them anyway): what the informer compacts, and every reconcile and usage sample reads. The
// schema package's benchmarks read the same file.
var activeVM = func() []byte {
	b, err := os.ReadFile("../../testdata/bench/active-vm.json")
	if err != nil {
		panic(err)
	}
	return b
}()

// wireVM is activeVM as the API server sends it in a watch event: with the managedFields of
// its three writers, which the cached form drops.
var wireVM = func() []byte {
	b, err := vmcachetest.WithManagedFields(activeVM)
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

// BenchmarkCompact is what the informer's transform costs per stored object: one
// json.Marshal of the decoded object, cut down to what a view reads.
func BenchmarkCompact(b *testing.B) {
	u := activeUnstructured(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compact(u, decidecase.Fields(b)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkViewSpecStatus is what a reconcile reads of a cached VM before it decides: the
// view, the validated spec and the current status.
func BenchmarkViewSpecStatus(b *testing.B) {
	o, err := Compact(activeUnstructured(b), decidecase.Fields(b))
	if err != nil {
		b.Fatal(err)
	}
	f := decidecase.Fields(b)
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
	o, err := Compact(activeUnstructured(b), decidecase.Fields(b))
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
			if _, err := Compact(u, decidecase.Fields(b)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wire", func(b *testing.B) {
		d := newWatchDecoder(io.NopCloser(&repeat{b: event}), decidecase.Fields(b))
		b.ReportAllocs()
		b.SetBytes(int64(len(event)))
		for b.Loop() {
			if _, _, err := d.Decode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
