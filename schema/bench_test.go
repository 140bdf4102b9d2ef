package schema

import (
	"encoding/json"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// activeVM is an Active VM as the API server sends it, managedFields left out (the
// informer's cached form drops them anyway): what every reconcile and usage sample reads.
// The reconcile package's benchmarks read the same file.
var activeVM = func() []byte {
	b, err := os.ReadFile("../testdata/bench/active-vm.json")
	if err != nil {
		panic(err)
	}
	return b
}()

func cachedVM(b *testing.B) *unstructured.Unstructured {
	b.Helper()
	var obj map[string]any
	if err := json.Unmarshal(activeVM, &obj); err != nil {
		b.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// BenchmarkSpec and BenchmarkStatus split the reads of an existing view.
func BenchmarkSpec(b *testing.B) {
	vm, err := decode(cachedVM(b), builtin(b, "v1alpha1"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := vm.Spec(); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkStatus(b *testing.B) {
	vm, err := decode(cachedVM(b), builtin(b, "v1alpha1"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if vm.Status().Phase != PhaseActive {
			b.Fatal("not Active")
		}
	}
}
