package schema

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// activeVM is an Active VM as the API server sends it, managedFields left out (the
// informer's cached form drops them anyway): what every reconcile and usage sample reads.
const activeVM = `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine",
"metadata":{"name":"vm-00042","namespace":"bench-1a2b3c","uid":"0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f",
 "resourceVersion":"123456","generation":1,"creationTimestamp":"2026-11-21T20:00:00Z",
 "finalizers":["cloudnative.czs/server-cleanup"]},
"spec":{"action":"active","resource":{"cpu":"10m","memory":"16Mi","rootDisk":"100Mi"}},
"status":{"phase":"Active","reason":"ServerReady","message":"Server vm-00042-server is running and ready",
 "server":{"name":"vm-00042-server","id":"7c433542-8907-45fe-887a-7813523dba9e","state":"Running",
  "usage":{"cpu":"10m","memory":"32Mi"}},
 "consecutiveFailures":0,"observedGeneration":1,"lastUpdateTime":"2026-11-21T20:00:03Z",
 "conditions":[{"type":"Ready","status":"True","observedGeneration":1,"lastTransitionTime":"2026-11-21T20:00:03Z",
  "reason":"ServerReady","message":"Server vm-00042-server is running and ready"},
  {"type":"UsageReported","status":"True","lastTransitionTime":"2026-11-21T20:01:03Z","reason":"UsageReported",
  "message":"Usage read from metrics.k8s.io"}]}}`

func cachedVM(b *testing.B) *unstructured.Unstructured {
	b.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(activeVM), &obj); err != nil {
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
